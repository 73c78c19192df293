//! `nightshift pause` / `unpause`.

use serde_json::json;

use super::{Ctx, Exit, out, out_json, reason_given};
use crate::cli::{PauseArgs, UnpauseArgs};
use crate::model::Pause;
use crate::store::{StoreError, Unpaused};
use crate::util::identity::actor;
use crate::util::sanitize;
use crate::util::time::{now_ms, rfc3339};

/// The reason of a pause given none.
const NO_REASON: &str = "paused from the command line";

pub fn pause(ctx: &Ctx, args: &PauseArgs) -> anyhow::Result<Exit> {
    // Leaving --reason out gives the default one.
    if let Some(reason) = &args.reason {
        reason_given(reason, "why the batch is paused (or leave --reason out)")?;
    }
    let mut store = ctx.open_write()?;
    // A configured batch can be paused before it ever ran; an unknown name
    // is a typo, not a new batch.
    if ctx.config.batch(&args.batch).is_none() {
        store.check_batch(&args.batch)?;
    }
    // Pausing again with no reason of its own keeps the one given (a
    // colleague's "障害対応中 #123" is not replaced by the default).
    if args.reason.is_none()
        && let Some(kept) = store.pause(&args.batch).ok().flatten()
    {
        return already_paused(args, &kept);
    }
    let pause = Pause {
        reason: args.reason.clone().unwrap_or_else(|| NO_REASON.into()),
        by: actor(),
        at: now_ms(),
    };
    let was = store.pause_batch(&args.batch, &pause)?;
    if args.json {
        out_json(&json!({
            "batch": args.batch,
            "paused": true,
            "was_paused": was,
            // Paused, or its reason replaced (`already_paused` changes nothing).
            "changed": true,
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
            sanitize::line(&pause.reason)
        ))?;
    } else {
        out(format!(
            "{name}: paused ({}): runs and schedule fires do nothing until `nightshift unpause {}`",
            sanitize::line(&pause.reason),
            sanitize::shell_word(&args.batch)
        ))?;
    }
    Ok(Exit::Ok)
}

/// A batch paused already, asked again with no reason: nothing changes,
/// and the pause kept is said whole.
fn already_paused(args: &PauseArgs, kept: &Pause) -> anyhow::Result<Exit> {
    if args.json {
        out_json(&json!({
            "batch": args.batch,
            "paused": true,
            "was_paused": true,
            "changed": false,
            "reason": kept.reason,
            "by": kept.by,
            "at": rfc3339(kept.at),
        }))?;
    } else {
        out(format!(
            "{}: already paused by {} at {} ({}); nothing changed (--reason replaces the reason)",
            sanitize::line(&args.batch),
            sanitize::line(&kept.by),
            rfc3339(kept.at),
            sanitize::line(&kept.reason)
        ))?;
    }
    Ok(Exit::Ok)
}

/// Clears the pause flag and lifts the batch's own retry-after hold still
/// on: both are "let it run again". A hold on the batch's limit pool stays
/// (`runner::pool::hold_stays` says why), and the answer says so.
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
    let pool_hold = match ctx.config.batch(&args.batch).and_then(|b| b.pool.as_ref()) {
        Some(p) => store.pool_hold(&p.name, at)?.map(|h| (p.name.clone(), h)),
        None => None,
    };
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
            "pool_hold": pool_hold.as_ref().map(|(pool, h)| json!({
                "pool": pool,
                "until": rfc3339(h.until),
                "by_batch": h.batch,
                "lifted": false,
            })),
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
    let said = match (done.was_paused, lifted) {
        (true, None) => format!("{name}: unpaused"),
        (true, Some(l)) => format!("{name}: unpaused, and {l}"),
        (false, Some(l)) => format!("{name}: {l}; it was not paused"),
        (false, None) if pool_hold.is_some() => format!("{name}: was not paused"),
        (false, None) => format!("{name}: was not paused and not held"),
    };
    match &pool_hold {
        Some((pool, h)) => out(format!(
            "{said}; {}",
            crate::runner::pool::hold_stays(pool, h, at)
        ))?,
        None => out(said)?,
    }
    Ok(Exit::Ok)
}
