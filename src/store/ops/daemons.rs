//! Scheduler daemons' heartbeats: one row per daemon process. Views judge
//! from them whether a schedule has a live daemon (`liveness`).
//!
//! One daemon a batch: every write of a daemon's record reads the others
//! under the daemons' lock (`daemons_all_locked`) and checks
//! `liveness::taken` in the same transaction, so two daemons starting at
//! once, a reload, or a daemon heard again after it was replaced never
//! leave two live records naming one batch.

use super::liveness;
use crate::model::{Daemon, DaemonInfo, Millis, Taken};
use crate::store::{Refusal, Result, Store};

impl Store {
    /// Records a daemon starting, and forgets the records it replaces
    /// (`liveness::superseded`). Refused when another live daemon
    /// schedules any of its batches.
    pub fn daemon_started(&mut self, d: &Daemon, now: Millis) -> Result<()> {
        self.write_tx(|tx| {
            let known = liveness::daemon_infos(tx.daemons_all_locked()?, now);
            let taken = liveness::taken(&known, d);
            if let Some(first) = taken.first() {
                return Err(Refusal::DaemonLive {
                    holder: first.by.to_string(),
                    batches: (taken.iter())
                        .filter(|t| t.by == first.by)
                        .map(|t| t.batch.clone())
                        .collect(),
                }
                .into());
            }
            let gone = liveness::superseded(&known, d);
            if !gone.is_empty() {
                tx.daemons_delete(&gone)?;
            }
            tx.daemon_upsert(d)
        })
    }

    /// Records a daemon's heartbeat, its batches after a reload, or (with
    /// `stopping_at`, `stopped_at`) its stop, leaving out the batches
    /// another live daemon schedules: those it returns, and the daemon no
    /// longer fires them.
    pub fn daemon_beat(&mut self, d: &Daemon, now: Millis) -> Result<Vec<Taken>> {
        self.write_tx(|tx| {
            let known = liveness::daemon_infos(tx.daemons_all_locked()?, now);
            let taken = liveness::taken(&known, d);
            if taken.is_empty() {
                tx.daemon_upsert(d)?;
            } else {
                let mut kept = d.clone();
                kept.batches
                    .retain(|b| !taken.iter().any(|t| &t.batch == b));
                tx.daemon_upsert(&kept)?;
            }
            Ok(taken)
        })
    }

    /// What [`Store::daemon_beat`] of `d` would leave out now, written
    /// nowhere: a reload that would leave its daemon nothing is refused.
    pub fn daemon_taken(&self, d: &Daemon, now: Millis) -> Result<Vec<Taken>> {
        self.read_tx(|tx| {
            let known = liveness::daemon_infos(tx.daemons_all()?, now);
            Ok(liveness::taken(&known, d))
        })
    }

    /// Every daemon recorded, with its state as of `now`.
    pub fn daemons(&self, now: Millis) -> Result<Vec<DaemonInfo>> {
        self.read_tx(|tx| Ok(liveness::daemon_infos(tx.daemons_all()?, now)))
    }
}
