//! Scheduler daemons' heartbeats: one row per daemon process. Views judge
//! from them whether a schedule has a live daemon (`liveness`).
//!
//! One daemon a batch: a daemon's start reads the others under the
//! daemons' lock (`daemons_all_locked`) and checks them in the same
//! transaction, so of two daemons starting at once the second sees the
//! first.

use super::liveness;
use crate::model::{Daemon, DaemonInfo, Millis};
use crate::store::{Refusal, Result, Store};

impl Store {
    /// Records a daemon starting, and forgets the records it replaces
    /// (`liveness::superseded`).
    pub fn daemon_started(&mut self, d: &Daemon, now: Millis) -> Result<()> {
        self.write_tx(|tx| {
            let known = liveness::daemon_infos(tx.daemons_all_locked()?, now);
            if let Some(other) = known.iter().find(|o| {
                o.daemon.token != d.token
                    && o.live()
                    && o.daemon.batches.iter().any(|b| d.batches.contains(b))
            }) {
                return Err(Refusal::DaemonLive {
                    holder: other.daemon.holder.to_string(),
                    batches: (other.daemon.batches.iter())
                        .filter(|b| d.batches.contains(b))
                        .cloned()
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

    /// Records a daemon's heartbeat (or, with `stopped_at`, its clean stop).
    pub fn daemon_beat(&mut self, d: &Daemon) -> Result<()> {
        self.write_tx(|tx| tx.daemon_upsert(d))
    }

    /// Every daemon recorded, with its state as of `now`.
    pub fn daemons(&self, now: Millis) -> Result<Vec<DaemonInfo>> {
        self.read_tx(|tx| Ok(liveness::daemon_infos(tx.daemons_all()?, now)))
    }
}
