//! `nightshift cancel` / `stop`: steering a live batch through the store,
//! heard by the runners holding it on any host within a heartbeat.

use serde_json::json;

use super::{Ctx, Exit, out, out_json, reason_given};
use crate::cli::{CancelArgs, CancelToArg, StopArgs};
use crate::config::WorkerMode;
use crate::model::LockInfo;
use crate::model::waiting::claim_wait_said;
use crate::store::{CancelOutcome, CancelTo};
use crate::util::identity::actor;
use crate::util::sanitize;
use crate::util::time::{now_ms, rfc3339};

pub fn cancel(ctx: &Ctx, args: &CancelArgs) -> anyhow::Result<Exit> {
    reason_given(
        &args.reason,
        "why the item is cancelled (or leave --reason out)",
    )?;
    let mut store = ctx.open_write()?;
    let to = match args.to {
        CancelToArg::Pending => CancelTo::Pending,
        CancelToArg::Manual => CancelTo::Manual,
    };
    let (by, at) = (actor(), now_ms());
    // The key as the batch holds it (`named::keyed`).
    let key = super::named::keyed(&store, &args.batch, &args.key)?;
    let done = store.cancel_item(&args.batch, &key, to, &by, &args.reason, at)?;
    if args.json {
        let (state, run_id, from) = match &done {
            CancelOutcome::Asked { run_id, .. } => ("asked", *run_id, None),
            CancelOutcome::Moved { from } => ("moved", None, Some(from.as_str())),
            CancelOutcome::Already { at } => ("unchanged", None, Some(at.as_str())),
            CancelOutcome::Orphaned { run_id } => ("moved", *run_id, Some("claimed")),
        };
        out_json(&json!({
            "batch": args.batch,
            "key": key,
            "to": to.as_str(),
            "state": state,
            "run_id": run_id,
            "was": from,
            // Not started: what the claim waited for (`pool-place`, `backoff`).
            "waiting": match &done {
                CancelOutcome::Asked { waiting, .. } => waiting.map(|w| w.as_str()),
                _ => None,
            },
            "reason": args.reason,
            "by": by,
            "at": rfc3339(at),
        }))?;
        return Ok(Exit::Ok);
    }
    let key = sanitize::line(&key);
    let to = to.as_str();
    // A persistent worker's claims are mostly requests queued for it: the
    // store cannot tell which one it is on.
    let persistent = ctx
        .config
        .batch(&args.batch)
        .is_some_and(|b| b.mode == WorkerMode::Persistent);
    out(match done {
        CancelOutcome::Asked { run_id, waiting } => {
            let run = run_id.map_or_else(String::new, |r| format!(" (run {r})"));
            match waiting {
                None if persistent => format!(
                    "{key}: in flight in a persistent worker's slot, on it or queued for it; asked the runner holding it{run} to cancel it: it moves to {to} (never done from this attempt), its worker stopped only if it is on it (a request already written behind another item is left to the worker, its answer not kept)"
                ),
                None => format!(
                    "{key}: running; asked the runner holding it{run} to stop its worker: it moves to {to} within a second (never done from this attempt)"
                ),
                Some(wait) => format!(
                    "{key}: claimed, not started ({}); asked the runner holding it{run} to drop it: it moves to {to} within a second",
                    claim_wait_said(wait)
                ),
            }
        }
        CancelOutcome::Moved { from } => {
            format!("{key}: cancelled; it was {from}, not running; now {to}")
        }
        CancelOutcome::Already { at } => {
            format!("{key}: not running and already {at}; nothing changed")
        }
        CancelOutcome::Orphaned { run_id } => {
            let run = run_id.map_or_else(String::new, |r| format!(" by run {r}"));
            format!("{key}: cancelled at once; it was claimed{run}, whose runner is gone; now {to}")
        }
    })?;
    Ok(Exit::Ok)
}

/// `pid@host` of a seat's holder.
/// A runner named as every other view names it (`vm:28119`, the
/// holder's own words); `28119@vm` here read as a user at a host.
fn runner(seat: &LockInfo) -> String {
    seat.holder.to_string()
}

pub fn stop(ctx: &Ctx, args: &StopArgs) -> anyhow::Result<Exit> {
    let mut store = ctx.open_write()?;
    if ctx.config.batch(&args.batch).is_none() {
        store.check_batch(&args.batch)?;
    }
    let (by, at) = (actor(), now_ms());
    // A configured batch that never ran has no runner to ask (none).
    let asked = store.ask_stop(&args.batch, args.now, &by, at)?;
    if args.json {
        out_json(&json!({
            "batch": args.batch,
            "now": args.now,
            "runners": asked.iter().map(|a| json!({
                "runner": runner(&a.seat),
                "host": a.seat.holder.host,
                "pid": a.seat.holder.pid,
                "run_id": a.seat.run_id,
                "silent_since": a.silent_since.map(rfc3339),
            })).collect::<Vec<_>>(),
            "by": (!asked.is_empty()).then_some(&by),
            "at": (!asked.is_empty()).then(|| rfc3339(at)),
        }))?;
        return Ok(Exit::Ok);
    }
    let name = sanitize::line(&args.batch);
    if asked.is_empty() {
        out(format!("{name}: no runner holds it; nothing to stop"))?;
        return Ok(Exit::Ok);
    }
    let how = if args.now {
        "to stop now: in-flight workers are stopped and their items go back to pending"
    } else {
        "to stop: no new items; in-flight ones get the grace period (`nightshift stop --now` stops them)"
    };
    let (silent, live): (Vec<_>, Vec<_>) = asked.iter().partition(|a| a.silent_since.is_some());
    let said = |of: &[&crate::store::StopAsked]| {
        let names: Vec<String> = of.iter().map(|a| a.said(at)).collect();
        sanitize::line(&names.join(", ")).into_owned()
    };
    if !live.is_empty() {
        out(format!(
            "{name}: asked {} {how}; heard within a second",
            said(&live)
        ))?;
    }
    if !silent.is_empty() {
        out(format!(
            "{name}: asked {} {how}, should it come back (a run that takes its seat over first is not asked)",
            said(&silent)
        ))?;
    }
    Ok(Exit::Ok)
}
