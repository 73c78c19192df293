//! `nightshift prune`: removes old history, never failures silently, and
//! never the key of a done item unless asked (`--forget-keys`).

use serde_json::json;

use super::table::Table;
use super::{Ctx, Exit, out, out_json};
use crate::cli::PruneArgs;
use crate::model::state_word;
use crate::util::identity::actor;
use crate::util::sanitize;
use crate::util::time::{now_ms, rfc3339};

pub fn run(ctx: &Ctx, args: &PruneArgs) -> anyhow::Result<Exit> {
    let mut store = if args.dry_run {
        ctx.open_read()?
    } else {
        ctx.open_write()?
    };
    let now = now_ms();
    let cutoff = now - args.older_than.as_millis() as i64;
    let r = store.prune(
        cutoff,
        args.include_failed,
        args.forget_keys,
        args.dry_run,
        &actor(),
        now,
    )?;
    // A dry run names the items it would delete.
    let items = if args.dry_run {
        store.prunable_items(cutoff, args.include_failed)?
    } else {
        Vec::new()
    };
    if args.json {
        // The counts' key says whether they happened.
        let counts = if args.dry_run {
            "would_remove"
        } else {
            "removed"
        };
        out_json(&json!({
            "dry_run": args.dry_run,
            "older_than": rfc3339(cutoff),
            "include_failed": args.include_failed,
            "forget_keys": args.forget_keys,
            counts: {
                "done_items": r.done_items,
                "events": r.events,
                "attempt_logs": r.attempt_logs,
                "runs": r.runs,
                "failed_items": r.failed_items,
                "dead_letters": r.dead_letters,
            },
            "kept": {
                "failed_items": r.failed_items_kept,
                "dead_letters": r.dead_letters_kept,
            },
            "forgotten_keys": args.forget_keys.then(|| r.forgotten_keys.iter().map(|(batch, n)| json!({"batch": batch, "keys": n})).collect::<Vec<_>>()),
            "items": args.dry_run.then(|| items.iter().map(|i| json!({
                "batch": i.batch,
                "key": i.key,
                "label": i.label,
                "state": state_word(i.status, i.tier, i.outcome),
                "updated_at": rfc3339(i.updated_at),
            })).collect::<Vec<_>>()),
        }))?;
        return Ok(Exit::Ok);
    }
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    out(format!(
        "{verb}: {} done items, {} events, {} attempts' stderr, {} runs, {} failed items, {} dead letters",
        r.done_items, r.events, r.attempt_logs, r.runs, r.failed_items, r.dead_letters
    ))?;
    if r.failed_items_kept > 0 || r.dead_letters_kept > 0 {
        out(format!(
            "kept: {} failed items and {} dead letters older than that (add --include-failed to remove them too)",
            r.failed_items_kept, r.dead_letters_kept
        ))?;
    }
    if args.forget_keys {
        let verb = if args.dry_run {
            "would forget"
        } else {
            "forgot"
        };
        out(format!(
            "{verb} the keys of {} items done before {}: adding them again runs them again",
            r.forgotten_total(),
            rfc3339(cutoff)
        ))?;
        for (batch, n) in &r.forgotten_keys {
            out(format!("  {}: {n}", sanitize::line(batch)))?;
        }
    } else if r.done_items > 0 {
        out(format!(
            "{} the keys of the done items: adding them again does not run them again",
            if args.dry_run { "would keep" } else { "kept" }
        ))?;
    }
    if args.dry_run && !items.is_empty() {
        out(format!("the items it would remove ({}):", items.len()))?;
        let mut table = Table::new(&["BATCH", "KEY", "LABEL", "STATE", "UPDATED"]);
        for i in &items {
            table.row(vec![
                i.batch.clone(),
                i.key.clone(),
                crate::key::label_column(&i.key, &i.label).to_string(),
                state_word(i.status, i.tier, i.outcome),
                rfc3339(i.updated_at),
            ]);
        }
        out(table.render())?;
    }
    Ok(Exit::Ok)
}
