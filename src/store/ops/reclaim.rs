//! Taking back the claims of runs that died (River's rescuer): the claims
//! of runs that hold no seat, each released to pending or, with its
//! attempts used up, quarantined.

use crate::model::{EventKind, Millis, NewEvent, Tier};
use crate::store::api::Failure;
use crate::store::dialect::items::Orphaned;
use crate::store::{Result, Store};

impl Store {
    /// Takes back every claim of `batch` whose run holds no seat of the
    /// batch lock (`current_run` must hold one): claims need a seat, so such
    /// a claim was left by a run that died or was cut off — whatever its
    /// lease says and whether or not that run was already marked crashed.
    /// Callers free stale seats first (`free_stale_locks`).
    /// Items that already used `max_attempts` are quarantined instead of
    /// being run again (a poison item that kills its runner every time):
    /// a failure of `current_run`, which decided it (its summary counts it
    /// and its alert tells of it; the dead run never could).
    /// Returns (released to pending, quarantined).
    pub fn reclaim(
        &mut self,
        batch: &str,
        current_run: i64,
        max_attempts: u32,
        now: Millis,
    ) -> Result<(usize, usize)> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            let (mut released, mut quarantined) = (0, 0);
            for o in tx.claims_orphaned_locked(b, current_run)? {
                // A cancel its dead runner never honoured goes with the claim.
                tx.item_drop_cancel(o.item)?;
                match orphan(batch, &o, max_attempts, now) {
                    Orphan::Quarantine { message, event } => {
                        let event = event.run(current_run);
                        let failure = interrupted(o.item, o.token, current_run, &message, now);
                        super::items::fail_in(tx, &failure, &event)?;
                        quarantined += 1;
                    }
                    Orphan::Release(event) => {
                        tx.item_release_orphan(o.item, now)?;
                        tx.event_insert(&event)?;
                        released += 1;
                    }
                }
            }
            Ok((released, quarantined))
        })
    }
}

/// What becomes of an item claimed by a run that died.
enum Orphan {
    /// Its attempts are used up (a poison item that kills its runner every
    /// time): quarantined with this message and event.
    Quarantine { message: String, event: NewEvent },
    /// Back to pending, with this event.
    Release(NewEvent),
}

fn orphan(batch: &str, o: &Orphaned, max_attempts: u32, now: Millis) -> Orphan {
    // A claim whose call never started (it waited for its pool) used no
    // attempt: however often its runner dies, it is never quarantined.
    let (key, lease_run, attempts) = (o.key.as_str(), o.lease_run, o.attempts);
    if crate::model::attempts_used_up(attempts, max_attempts) {
        let message = format!(
            "its runner (run {lease_run}) stopped while the item was in flight, \
             its attempts used (attempt {attempts}, max_attempts {max_attempts})"
        );
        let event = NewEvent::new(
            now,
            batch,
            EventKind::Quarantined,
            format!("quarantined: {message}"),
        )
        .key(key)
        .fields(serde_json::json!({"error_class": "Interrupted", "attempt": attempts}));
        Orphan::Quarantine { message, event }
    } else {
        let mut fields = serde_json::json!({"from_run": lease_run});
        let why = if o.never_started {
            fields["never_started"] = true.into();
            "; its call never started (it waited for a place in its pool), \
             so the attempt does not count"
        } else {
            ""
        };
        Orphan::Release(
            NewEvent::new(
                now,
                batch,
                EventKind::Reclaimed,
                format!("reclaimed from run {lease_run}{why}"),
            )
            .key(key)
            .fields(fields),
        )
    }
}

/// The failure that quarantines a dead run's claim (`Orphan::Quarantine`),
/// counted in `run`, the one that took the claim back.
fn interrupted(item_id: i64, token: i64, run: i64, message: &str, now: Millis) -> Failure<'_> {
    Failure {
        item_id,
        token,
        run_id: run,
        tier: Tier::Manual,
        error_class: "Interrupted",
        message,
        next_attempt_at: None,
        cost: None,
        now,
    }
}
