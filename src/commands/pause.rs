//! `nightshift pause` / `unpause`.

use serde_json::json;

use super::{Ctx, Exit, out, out_json};
use crate::cli::{PauseArgs, UnpauseArgs};
use crate::model::Pause;
use crate::store::{StoreError, Unpaused};
use crate::util::identity::actor;
use crate::util::sanitize;
use crate::util::time::{now_ms, rfc3339};

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
    if args.json {
        out_json(&json!({
            "batch": args.batch,
            "paused": true,
            "was_paused": was,
            "reason": pause.reason,
            "by": pause.by,
            "at": rfc3339(pause.at),
        }))?;
        return Ok(Exit::Ok);
    }
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

/// Clears the pause flag and lifts a retry-after hold still on: both are
/// "let it run again".
pub fn unpause(ctx: &Ctx, args: &UnpauseArgs) -> anyhow::Result<Exit> {
    let mut store = ctx.open_write()?;
    let (by, at) = (actor(), now_ms());
    let done = match store.unpause_batch(&args.batch, &by, at) {
        Err(StoreError::UnknownBatch { .. }) if ctx.config.batch(&args.batch).is_some() => {
            Unpaused {
                was_paused: false,
                lifted: None,
            }
        }
        other => other?,
    };
    let acted = done.was_paused || done.lifted.is_some();
    if args.json {
        // `by` and `at` only when something was done: nothing is recorded otherwise.
        out_json(&json!({
            "batch": args.batch,
            "paused": false,
            "was_paused": done.was_paused,
            "hold_lifted": done.lifted.is_some(),
            "lifted_hold": done.lifted.as_ref().map(|h| json!({
                "until": rfc3339(h.until),
                "by": h.key,
                "label": h.label,
            })),
            "by": acted.then_some(by),
            "at": acted.then(|| rfc3339(at)),
        }))?;
        return Ok(Exit::Ok);
    }
    let name = sanitize::line(&args.batch);
    let lifted = done.lifted.as_ref().map(|h| {
        format!(
            "lifted the retry-after hold (it was {})",
            sanitize::line(&h.describe(at))
        )
    });
    out(match (done.was_paused, lifted) {
        (true, None) => format!("{name}: unpaused"),
        (true, Some(l)) => format!("{name}: unpaused, and {l}"),
        (false, Some(l)) => format!("{name}: {l}; it was not paused"),
        (false, None) => format!("{name}: was not paused and not held"),
    })?;
    Ok(Exit::Ok)
}
