//! Batches: names, counts, the pause flag and schedule state.

use super::liveness;
use crate::key::KeySpec;
use crate::model::{
    BatchInfo, Counts, EventKind, Fire, FireRule, Hold, Millis, NewEvent, Pause, Runners,
};
use crate::store::api::Unpaused;
use crate::store::dialect::Read;
use crate::store::{Result, Store};

impl Store {
    /// Names of all batches in the store.
    pub fn batch_names(&self) -> Result<Vec<String>> {
        self.read_tx(|tx| tx.batch_names())
    }

    /// Creates a batch if it does not exist yet.
    pub fn ensure_batch(&mut self, name: &str, now: Millis) -> Result<()> {
        self.write_tx(|tx| tx.batch_ensure(name, now).map(drop))
    }

    /// Fails with `UnknownBatch` unless the batch exists.
    pub fn check_batch(&self, name: &str) -> Result<()> {
        self.read_tx(|tx| tx.batch_id(name).map(drop))
    }

    /// How the batch's items were keyed, as its first add recorded it
    /// (`ops::add::keyed_alike`): `None` for a batch not seen, or with
    /// nothing recorded yet.
    pub fn keyed_by(&self, batch: &str) -> Result<Option<KeySpec>> {
        self.read_tx(|tx| match tx.batch_seen(batch)? {
            Some(b) => key_spec(tx, b, batch),
            None => Ok(None),
        })
    }

    /// Refuses (`Refusal::KeyedOtherwise`) an add keying `batch`'s items
    /// by `spec` where they were keyed otherwise, writing nothing: the add
    /// checks it again as it writes; this says it before an input is read
    /// (and for a dry run).
    pub fn check_keyed(&self, batch: &str, spec: &KeySpec) -> Result<()> {
        self.read_tx(|tx| {
            let Some(b) = tx.batch_seen(batch)? else {
                return Ok(());
            };
            let recorded = tx.batch_key_spec(b)?;
            super::add::keyed_alike(batch, recorded.as_deref(), spec, || tx.batch_key_sample(b))
                .map(drop)
        })
    }

    pub fn counts(&self, batch: &str) -> Result<Counts> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.batch_counts(b)
        })
    }

    /// Everything the status line and dashboard header need, for every
    /// batch (or the one named), in one read transaction.
    pub fn batch_infos(&self, only: Option<&str>) -> Result<Vec<BatchInfo>> {
        let now = crate::util::time::now_ms();
        self.read_tx(|tx| {
            let wanted = match only {
                Some(name) => {
                    tx.batch_id(name)?;
                    vec![name.to_string()]
                }
                None => tx.batch_names()?,
            };
            let mut out = Vec::with_capacity(wanted.len());
            for name in wanted {
                let b = tx.batch_id(&name)?;
                out.push(info(tx, b, name, now)?);
            }
            Ok(out)
        })
    }

    /// Pauses a batch, recording who and why. Returns whether it was
    /// already paused (the reason is updated either way).
    pub fn pause_batch(&mut self, batch: &str, p: &Pause) -> Result<bool> {
        self.write_tx(|tx| {
            let b = tx.batch_ensure(batch, p.at)?;
            let was = tx.batch_paused(b)?;
            tx.batch_set_pause(b, p)?;
            let message = format!("paused by {}: {}", p.by, p.reason);
            tx.event_insert(
                &NewEvent::new(p.at, batch, EventKind::Paused, message)
                    .actor(&p.by)
                    .fields(serde_json::json!({"reason": p.reason})),
            )?;
            Ok(was)
        })
    }

    /// Clears the pause flag and lifts a retry-after hold still on at
    /// `now`, each recorded as an operator action of `actor`.
    pub fn unpause_batch(&mut self, batch: &str, actor: &str, now: Millis) -> Result<Unpaused> {
        self.write_tx(|tx| {
            let b = tx.batch_id(batch)?;
            // The row locked first: a concurrent unpause waits, then finds
            // nothing left to lift.
            tx.batch_row_locked(b)?;
            let was_paused = tx.batch_paused(b)?;
            let lifted = tx.batch_hold(b)?.filter(|h| h.active(now));
            tx.batch_clear_pause(b)?;
            if was_paused {
                let message = format!("unpaused by {actor}");
                tx.event_insert(
                    &NewEvent::new(now, batch, EventKind::Unpaused, message).actor(actor),
                )?;
            }
            if let Some(h) = &lifted {
                tx.event_insert(&hold_lifted(batch, h, actor, now))?;
            }
            Ok(Unpaused { was_paused, lifted })
        })
    }

    /// The pause flag, read fresh (the runner checks it while running).
    pub fn pause(&self, batch: &str) -> Result<Option<Pause>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            Ok(tx.batch_state(b)?.0)
        })
    }

    /// The batch's last retry-after hold (over once its time has passed).
    pub fn hold(&self, batch: &str) -> Result<Option<Hold>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.batch_hold(b)
        })
    }

    /// Holds every call of the batch until `until`, for the answer of
    /// `key`. Never shortens a hold: a shorter one changes nothing.
    pub fn set_hold(&mut self, batch: &str, until: Millis, key: Option<&str>) -> Result<()> {
        self.write_tx(|tx| tx.batch_extend_hold(batch, until, key))
    }

    /// Records the rule a daemon starting (or reloaded) fires the batch
    /// by, and the next fire it plans, together.
    pub fn set_fire_plan(
        &mut self,
        batch: &str,
        rule: &FireRule,
        next: Option<Millis>,
        now: Millis,
    ) -> Result<()> {
        self.write_tx(|tx| {
            let b = tx.batch_ensure(batch, now)?;
            tx.batch_set_fire_rule(b, rule)?;
            tx.batch_set_next_fire(b, next)
        })
    }

    /// Forgets the fire a daemon planned for the batch, its rule and what
    /// its fires owed (a cycle cut short, a queued fire): no daemon
    /// schedules it any more, so nothing is owed, for the time until one
    /// does again either (see `schedule::Plan::resume`). Its fire records
    /// stay.
    pub fn unschedule(&mut self, batch: &str) -> Result<()> {
        self.write_tx(|tx| match tx.batch_seen(batch)? {
            Some(b) => tx.batch_unschedule(b),
            None => Ok(()),
        })
    }

    /// Records the next fire time computed by the scheduler.
    pub fn set_next_fire(&mut self, batch: &str, next: Option<Millis>, now: Millis) -> Result<()> {
        self.write_tx(|tx| {
            let b = tx.batch_ensure(batch, now)?;
            tx.batch_set_next_fire(b, next)
        })
    }

    /// Records what happened at a fire time, and logs it as an event at
    /// `now` (which is returned, for the log file). `last_fire_*` keeps the latest fire
    /// time: a cycle that ends after later fires were skipped while it ran
    /// still logs its outcome, but does not become the "last fire"; what
    /// the fires still owe follows every record (`Owed::after`).
    pub fn record_fire(&mut self, batch: &str, fire: &Fire, now: Millis) -> Result<NewEvent> {
        self.write_tx(|tx| {
            let b = tx.batch_ensure(batch, fire.at)?;
            tx.batch_row_locked(b)?;
            tx.batch_record_fire(b, fire)?;
            let owed = tx.batch_owed(b)?;
            let after = owed.after(fire);
            if after != owed {
                tx.batch_set_owed(b, &after)?;
            }
            let event = fire_event(batch, fire, now);
            tx.event_insert(&event)?;
            Ok(event)
        })
    }

    /// Done and failed worker completions per minute, oldest first, for the
    /// last `minutes` minutes ending at `now` (zeros included).
    pub fn minute_stats(&self, batch: &str, now: Millis, minutes: i64) -> Result<Vec<(i64, i64)>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.minute_counts(b, now, minutes)
        })
    }
}

/// The `fire` event of a fire record: stamped `now`, when it is written,
/// as every event is (a cycle's outcome is written when it ends, after
/// later events); the fire time is its own field (`fire_at`) and in the
/// text: `fire at 2026-01-01T02:00:00Z ran`.
pub(super) fn fire_event(batch: &str, fire: &Fire, now: Millis) -> NewEvent {
    let at = crate::util::time::rfc3339(fire.at);
    let message = match &fire.reason {
        Some(reason) => format!("fire at {at} {}: {reason}", fire.outcome),
        None => format!("fire at {at} {}", fire.outcome),
    };
    let mut event = NewEvent::new(now, batch, EventKind::Fire, message).fields(serde_json::json!({
        "fire_at": at,
        "outcome": fire.outcome,
        "reason": fire.reason,
    }));
    event.run_id = fire.run_id;
    event
}

/// Counts, pause flag, schedule state, seats and last run of one batch,
/// and who of its runners is alive at `now`.
pub(super) fn info(tx: &mut dyn Read, b: i64, name: String, now: Millis) -> Result<BatchInfo> {
    let (pause, next_fire, last_fire) = tx.batch_state(b)?;
    let (last_run, stepped_down) = tx.runs_last(b)?;
    let mut info = BatchInfo {
        counts: tx.batch_counts(b)?,
        pause,
        next_fire,
        last_fire,
        fire_rule: tx.batch_fire_rule(b)?,
        owed: tx.batch_owed(b)?,
        locks: tx.seats(b, &name)?,
        last_run,
        stepped_down,
        hold: tx.batch_hold(b)?,
        keyed_by: key_spec(tx, b, &name)?,
        runners: Runners::default(),
        name,
    };
    info.runners = liveness::runners(&info, now, |runs| tx.claimed_attempts(b, runs))?;
    Ok(info)
}

/// The batch's recorded key spec, read as `KeySpec::stored` wrote it.
fn key_spec(tx: &mut dyn Read, b: i64, name: &str) -> Result<Option<KeySpec>> {
    tx.batch_key_spec(b)?
        .map(|text| super::add::recorded_spec(name, &text))
        .transpose()
}

/// The `hold-lifted` event: `actor` lifted a retry-after hold still on
/// (`unpause`).
pub(crate) fn hold_lifted(batch: &str, hold: &Hold, actor: &str, now: Millis) -> NewEvent {
    let until = crate::util::time::rfc3339(hold.until);
    let mut event = NewEvent::new(
        now,
        batch,
        EventKind::HoldLifted,
        format!(
            "retry-after hold lifted by {actor} (it was {})",
            hold.describe(now)
        ),
    )
    .actor(actor)
    .fields(serde_json::json!({"until": until, "key": hold.key}));
    if let Some(key) = &hold.key {
        event = event.key(key);
    }
    event
}
