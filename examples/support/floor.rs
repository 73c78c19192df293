//! What the store floors share: a fresh store's batch seated for a run,
//! a worker's success as a runner records it, and which variants run.

use std::path::Path;

use nightshift::model::{Claim, EventKind, Holder, Millis, NewEvent, NewItem, Outcome, Trigger};
use nightshift::store::{Completion, Result, Store};
use nightshift::util::time::now_ms;

/// Removes the SQLite store `db` with its log and shared index, if any.
pub fn remove_db(db: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
}

/// Adds `items` to batch `b` of `s` and starts a run holding its lock, as
/// `run` would. The run's id.
pub fn seat(s: &mut Store, items: &[NewItem]) -> Result<i64> {
    let now = now_ms();
    s.add_items("b", items, now, |_| {})?;
    let holder = Holder {
        host: "floor".into(),
        pid: std::process::id(),
        pid_start: None,
    };
    let run = s.start_run("b", Trigger::Manual, None, &holder, now, None)?;
    s.acquire_lock("b", "t", &holder, Some(run), now + 3_600_000, now, &[], 1)?;
    Ok(run)
}

/// A plain success of `claim` in `run`, `ms` long, as a runner records
/// it: its done mark (no result, cost, version or usage) and its done
/// event with the runner's fields.
pub fn plain_done(
    claim: &Claim,
    run: i64,
    ms: u64,
    now: Millis,
) -> (Completion<'static>, NewEvent) {
    let mark = Completion {
        item_id: claim.item_id,
        token: claim.token,
        run_id: run,
        outcome: Outcome::Done,
        result: None,
        cost: None,
        version: None,
        usage: None,
        now,
    };
    let event = NewEvent::new(now, "b", EventKind::Done, "done")
        .run(run)
        .key(&claim.key)
        .fields(
            serde_json::json!({"attempt": claim.attempt, "ms": ms, "cost": null, "usage": null}),
        );
    (mark, event)
}

/// `FLOOR_VARIANTS="store|narrow"`: only the variants whose names hold
/// one of those words.
pub fn chosen(variant: &str) -> bool {
    match std::env::var("FLOOR_VARIANTS") {
        Ok(only) => only.split('|').any(|w| variant.contains(w.trim())),
        Err(_) => true,
    }
}
