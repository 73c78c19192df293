//! Statements on batches.

use super::sql::{self, Arg, Sql};
use crate::model::{Counts, Fire, FireRule, Hold, Millis, Owed, Pause};
use crate::store::Result;

const BATCH_PAUSED: &str = "SELECT paused FROM batches WHERE id = ?1";
/// The hold as stored: until when, the key that asked, and its label
/// (while the item is kept).
pub(crate) const HOLD: &str = "SELECT b.hold_until, b.hold_key, i.label
  FROM batches b LEFT JOIN item_keys k ON k.batch_id = b.id AND k.key = b.hold_key
       LEFT JOIN items i ON i.id = k.item_id
 WHERE b.id = ?1 AND b.hold_until IS NOT NULL";
const BATCH_SET_PAUSE: &str = "UPDATE batches
    SET paused = TRUE, paused_reason = ?2, paused_by = ?3, paused_at = ?4 WHERE id = ?1";
const BATCH_CLEAR_PAUSE: &str = "UPDATE batches
    SET paused = FALSE, paused_reason = NULL, paused_by = NULL, paused_at = NULL,
        hold_until = NULL, hold_key = NULL
  WHERE id = ?1";
const BATCH_EXTEND_HOLD: &str = "UPDATE batches SET hold_until = ?2, hold_key = ?3
  WHERE name = ?1 AND (hold_until IS NULL OR hold_until < ?2)";
const BATCH_SET_NEXT_FIRE: &str = "UPDATE batches SET next_fire = ?2 WHERE id = ?1";
/// The rule the daemon that plans `next_fire` fires by (`model::FireRule`).
const BATCH_FIRE_RULE: &str = "SELECT fire_schedule, fire_timezone FROM batches WHERE id = ?1";
const BATCH_SET_FIRE_RULE: &str =
    "UPDATE batches SET fire_schedule = ?2, fire_timezone = ?3 WHERE id = ?1";
/// How the batch's items were keyed (`key::KeySpec::stored`), if recorded.
const BATCH_KEY_SPEC: &str = "SELECT key_spec FROM batches WHERE id = ?1";
/// A batch no daemon schedules any more: no fire planned, by no rule, and
/// nothing owed (`model::Owed`).
const BATCH_UNSCHEDULE: &str = "UPDATE batches
    SET next_fire = NULL, fire_schedule = NULL, fire_timezone = NULL,
        cycle_fire_at = NULL, cycle_crashed = FALSE, queued_fire_at = NULL
  WHERE id = ?1";
const BATCH_RECORD_FIRE: &str = "UPDATE batches
    SET last_fire_at = ?2, last_fire_outcome = ?3, last_fire_reason = ?4, last_fire_run = ?5
  WHERE id = ?1 AND (last_fire_at IS NULL OR last_fire_at <= ?2)";
/// What the batch's fires still owe (`model::Owed`).
const BATCH_OWED: &str =
    "SELECT cycle_fire_at, cycle_crashed, queued_fire_at FROM batches WHERE id = ?1";
const BATCH_SET_OWED: &str = "UPDATE batches
    SET cycle_fire_at = ?2, cycle_crashed = ?3, queued_fire_at = ?4 WHERE id = ?1";
/// The open cycle of a daemon that died mid-cycle, when run `?1`, just
/// recorded crashed, is that cycle's run: a scheduled run started at or
/// after its fire time. Marked here, in the one statement (not read, then
/// written through `Owed::after`), so that two runs finding it dead
/// record it once.
const BATCH_CYCLE_CRASHED: &str = "UPDATE batches SET cycle_crashed = TRUE
  WHERE cycle_fire_at IS NOT NULL AND NOT cycle_crashed
    AND EXISTS (SELECT 1 FROM runs r
                 WHERE r.id = ?1 AND r.batch_id = batches.id AND r.state = 'crashed'
                   AND r.trigger = 'schedule' AND r.started_at >= batches.cycle_fire_at)
 RETURNING id, name, cycle_fire_at";
/// That fire, if it is still the last and said `running`, becomes
/// `crashed` in run `?3`, keeping the reason it started with.
const BATCH_LAST_FIRE_CRASHED: &str =
    "UPDATE batches SET last_fire_outcome = 'crashed', last_fire_run = ?3
  WHERE id = ?1 AND last_fire_at = ?2 AND last_fire_outcome = 'running'";

/// A batch's pause flag, next fire time and last fire, as stored.
pub(crate) type BatchState = (Option<Pause>, Option<Millis>, Option<Fire>);

pub(crate) trait BatchesRead: Sql {
    /// The batch's id; `StoreError::UnknownBatch` (naming the known
    /// batches) when there is none.
    fn batch_id(&mut self, name: &str) -> Result<i64>;
    /// The batch's id; `None` when the store has not seen it (a batch the
    /// config names, nothing added, never run), which reads as empty.
    fn batch_seen(&mut self, name: &str) -> Result<Option<i64>> {
        match self.batch_id(name) {
            Ok(b) => Ok(Some(b)),
            Err(crate::store::StoreError::UnknownBatch { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
    /// Every batch's name, in order.
    fn batch_names(&mut self) -> Result<Vec<String>>;
    /// The batch's counters (PostgreSQL sums their shards).
    fn batch_counts(&mut self, batch: i64) -> Result<Counts>;
    fn batch_paused(&mut self, batch: i64) -> Result<bool> {
        sql::one(self, BATCH_PAUSED, &[Arg::Int(batch)], |r| r.bool(0))
    }

    fn batch_state(&mut self, batch: i64) -> Result<BatchState>;

    fn batch_owed(&mut self, batch: i64) -> Result<Owed> {
        sql::one(self, BATCH_OWED, &[Arg::Int(batch)], |r| {
            Ok(Owed {
                cycle: r.opt_time(0)?,
                crashed: r.bool(1)?,
                queued: r.opt_time(2)?,
            })
        })
    }

    fn batch_fire_rule(&mut self, batch: i64) -> Result<Option<FireRule>> {
        sql::one(self, BATCH_FIRE_RULE, &[Arg::Int(batch)], |r| {
            Ok(match (r.opt_text(0)?, r.opt_text(1)?) {
                (Some(schedule), Some(timezone)) => Some(FireRule { schedule, timezone }),
                _ => None,
            })
        })
    }

    /// How the batch's items were keyed, as recorded (see
    /// `ops::add::keyed_alike`): `None` before its first add that knew it.
    fn batch_key_spec(&mut self, batch: i64) -> Result<Option<String>> {
        sql::one(self, BATCH_KEY_SPEC, &[Arg::Int(batch)], |r| r.opt_text(0))
    }

    /// The batch's first items' keys and payloads (`ops::add::KEY_SAMPLE`).
    fn batch_key_sample(&mut self, batch: i64) -> Result<Vec<(String, String)>> {
        sql::all(
            self,
            crate::store::ops::add::KEY_SAMPLE,
            &[Arg::Int(batch)],
            |r| Ok((r.text(0)?, r.text(1)?)),
        )
    }

    /// The last retry-after hold: until when, the key that asked, and its
    /// label (while the item is kept).
    fn batch_hold(&mut self, batch: i64) -> Result<Option<Hold>> {
        sql::opt(self, HOLD, &[Arg::Int(batch)], |r| {
            Ok(Hold {
                until: r.time(0)?,
                key: r.opt_text(1)?,
                label: r.opt_text(2)?,
            })
        })
    }

    /// Done and failed completions per minute, oldest first, for the last
    /// `minutes` minutes ending at `now` (zeros included), none from
    /// before the batch was created. The minutes are the database's, so
    /// they are counted inside the dialect, after its clock offset.
    fn minute_counts(&mut self, batch: i64, now: Millis, minutes: i64) -> Result<Vec<(i64, i64)>>;
}

pub(crate) trait BatchesWrite: Sql {
    /// The batch's id, its row (and zeroed counters) made if missing.
    fn batch_ensure(&mut self, name: &str, now: Millis) -> Result<i64>;
    /// Locks the batch's row until commit (PostgreSQL `FOR UPDATE`):
    /// a concurrent writer of its flags waits, then sees this one's.
    fn batch_row_locked(&mut self, batch: i64) -> Result<()>;

    fn batch_set_pause(&mut self, batch: i64, p: &Pause) -> Result<()> {
        let args = [
            Arg::Int(batch),
            Arg::Text(&p.reason),
            Arg::Text(&p.by),
            Arg::Time(p.at),
        ];
        self.exec(BATCH_SET_PAUSE, &args)?;
        Ok(())
    }

    /// Clears the pause flag and the hold.
    fn batch_clear_pause(&mut self, batch: i64) -> Result<()> {
        self.exec(BATCH_CLEAR_PAUSE, &[Arg::Int(batch)])?;
        Ok(())
    }

    /// Never shortens a hold: a shorter one changes nothing.
    fn batch_extend_hold(&mut self, name: &str, until: Millis, key: Option<&str>) -> Result<()> {
        let args = [Arg::Text(name), Arg::Time(until), Arg::OptText(key)];
        self.exec(BATCH_EXTEND_HOLD, &args)?;
        Ok(())
    }

    fn batch_set_next_fire(&mut self, batch: i64, next: Option<Millis>) -> Result<()> {
        self.exec(BATCH_SET_NEXT_FIRE, &[Arg::Int(batch), Arg::OptTime(next)])?;
        Ok(())
    }

    /// Keeps the latest fire time: an earlier fire changes nothing.
    fn batch_record_fire(&mut self, batch: i64, fire: &Fire) -> Result<()> {
        let args = [
            Arg::Int(batch),
            Arg::Time(fire.at),
            Arg::Text(&fire.outcome),
            Arg::OptText(fire.reason.as_deref()),
            Arg::OptInt(fire.run_id),
        ];
        self.exec(BATCH_RECORD_FIRE, &args)?;
        Ok(())
    }

    fn batch_unschedule(&mut self, batch: i64) -> Result<()> {
        self.exec(BATCH_UNSCHEDULE, &[Arg::Int(batch)])?;
        Ok(())
    }

    fn batch_set_fire_rule(&mut self, batch: i64, rule: &FireRule) -> Result<()> {
        let args = [
            Arg::Int(batch),
            Arg::Text(&rule.schedule),
            Arg::Text(&rule.timezone),
        ];
        self.exec(BATCH_SET_FIRE_RULE, &args)?;
        Ok(())
    }

    fn batch_set_owed(&mut self, batch: i64, owed: &Owed) -> Result<()> {
        let args = [
            Arg::Int(batch),
            Arg::OptTime(owed.cycle),
            Arg::Bool(owed.crashed),
            Arg::OptTime(owed.queued),
        ];
        self.exec(BATCH_SET_OWED, &args)?;
        Ok(())
    }

    /// The open cycle whose run `run` is (just recorded crashed), marked
    /// crashed: its batch (id, name) and fire time, if it was one not
    /// marked yet.
    fn batch_cycle_crashed(&mut self, run: i64) -> Result<Option<(i64, String, Millis)>> {
        let rows = super::sql::all(self, BATCH_CYCLE_CRASHED, &[Arg::Int(run)], |r| {
            Ok((r.int(0)?, r.text(1)?, r.time(2)?))
        })?;
        Ok(rows.into_iter().next())
    }

    fn batch_last_fire_crashed(&mut self, batch: i64, at: Millis, run: i64) -> Result<()> {
        let args = [Arg::Int(batch), Arg::Time(at), Arg::Int(run)];
        self.exec(BATCH_LAST_FIRE_CRASHED, &args)?;
        Ok(())
    }
}
