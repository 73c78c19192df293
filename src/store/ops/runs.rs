//! Runs: one execution of a batch, with its summary counts.

use crate::model::{Fire, Holder, Millis, NewEvent, Run, Trigger};
use crate::store::api::{OpenRun, RunEnd};
use crate::store::{Result, Store};

impl Store {
    /// Records the start of a run, and who started it (`user@host`); with
    /// `seat`, in the same transaction names it as the run of the lock seat
    /// held under that token, so no other runner ever sees it open without
    /// a seat (and takes it for dead).
    pub fn start_run(
        &mut self,
        batch: &str,
        trigger: Trigger,
        actor: Option<&str>,
        holder: &Holder,
        now: Millis,
        seat: Option<&str>,
    ) -> Result<i64> {
        self.write_tx(|tx| {
            let b = tx.batch_ensure(batch, now)?;
            let run = tx.run_insert(b, trigger, actor, holder, now)?;
            if let Some(token) = seat {
                tx.seat_set_run(b, token, run)?;
            }
            Ok(run)
        })
    }

    /// Ends a run with its state, why it stopped early, its summary line
    /// and resume figure, and frees its seat of the lock in the same
    /// transaction: an ended run holds none. (Freed after, a runner killed
    /// in between left a finished run's seat behind, and every view called
    /// the batch's runner crashed.) The seat first, as a takeover takes
    /// them (seat, then run), so the two never wait on each other.
    pub fn finish_run(&mut self, run_id: i64, end: &RunEnd<'_>, now: Millis) -> Result<()> {
        self.write_tx(|tx| {
            tx.seat_delete_of_run(run_id)?;
            tx.run_finish(run_id, end, now)
        })
    }

    /// Adds to a live run's retried count (shown while it runs).
    pub fn add_retried(&mut self, run_id: i64, n: i64) -> Result<()> {
        self.write_tx(|tx| tx.run_add_retried(run_id, n))
    }

    pub fn run(&self, run_id: i64) -> Result<Option<Run>> {
        self.read_tx(|tx| tx.run_by_id(run_id))
    }

    /// The newest `limit` runs of a batch, newest first.
    pub fn runs(&self, batch: &str, limit: usize) -> Result<Vec<Run>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.runs_recent(b, limit)
        })
    }

    /// Runs of a batch still marked running.
    pub fn open_runs(&self, batch: &str) -> Result<Vec<OpenRun>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.runs_open(b)
        })
    }

    /// Runs of a batch still marked running that hold no seat of its lock,
    /// but `run_id`: the ones a cycle takes over. Read in one statement: a
    /// run and its seat are recorded in one transaction (`start_run`), and
    /// the seats read before another runner's start committed, its run
    /// after, judged that live runner dead (its places in a pool were
    /// forgotten and calls over the pool's limit went out at once).
    pub fn unseated_runs(&self, batch: &str, run_id: i64) -> Result<Vec<OpenRun>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.runs_unseated(b, run_id)
        })
    }

    /// Marks runs whose process is gone as crashed; never one that holds a
    /// seat of its batch's lock (it started after the caller looked). The
    /// scheduled fire whose cycle one of them was is recorded crashed,
    /// whatever fires were recorded after it.
    pub fn mark_crashed(&mut self, run_ids: &[i64], now: Millis) -> Result<()> {
        self.write_tx(|tx| {
            tx.runs_mark_crashed(run_ids, now)?;
            for &run in run_ids {
                if let Some((b, batch, at)) = tx.batch_cycle_crashed(run)? {
                    tx.batch_last_fire_crashed(b, at, run)?;
                    tx.event_insert(&fire_crashed(&batch, at, run, now))?;
                }
            }
            Ok(())
        })
    }
}

/// The fire record of a scheduled cycle found crashed at `now`, in the
/// run log beside the fire's other records (`log --kind fire`).
fn fire_crashed(batch: &str, at: Millis, run: i64, now: Millis) -> NewEvent {
    let fire = Fire {
        at,
        outcome: "crashed".to_string(),
        reason: Some(format!(
            "its run {run} crashed: the daemon stopped mid-cycle (killed, or the machine went down)"
        )),
        run_id: Some(run),
    };
    super::batches::fire_event(batch, &fire, now)
}
