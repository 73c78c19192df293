//! `nightshift pause` / `unpause`.

use super::{Ctx, Exit, out};
use crate::cli::PauseArgs;
use crate::model::Pause;
use crate::store::StoreError;
use crate::util::identity::actor;
use crate::util::sanitize;
use crate::util::time::now_ms;

pub fn pause(ctx: &Ctx, args: &PauseArgs) -> anyhow::Result<Exit> {
    let mut store = ctx.open_write()?;
    // A configured batch can be paused before it ever ran; an unknown name
    // is a typo, not a new batch.
    if ctx.config.batch(&args.batch).is_none() {
        store.check_batch(&args.batch)?;
    }
    let pause = Pause {
        reason: args.reason.clone(),
        by: actor(),
        at: now_ms(),
    };
    let was = store.pause_batch(&args.batch, &pause)?;
    let name = sanitize::line(&args.batch);
    if was {
        out(format!(
            "{name}: already paused; reason updated to: {}",
            sanitize::line(&args.reason)
        ))?;
    } else {
        out(format!(
            "{name}: paused ({}): runs and schedule fires do nothing until `nightshift unpause {name}`",
            sanitize::line(&args.reason)
        ))?;
    }
    Ok(Exit::Ok)
}

pub fn unpause(ctx: &Ctx, batch: &str) -> anyhow::Result<Exit> {
    let mut store = ctx.open_write()?;
    let was = match store.unpause_batch(batch, &actor(), now_ms()) {
        Err(StoreError::UnknownBatch { .. }) if ctx.config.batch(batch).is_some() => false,
        other => other?,
    };
    let name = sanitize::line(batch);
    out(if was {
        format!("{name}: unpaused")
    } else {
        format!("{name}: was not paused")
    })?;
    Ok(Exit::Ok)
}
