//! Worker process groups, one row per run slot (see the SQLite store's
//! `workers`).

use super::PgStore;
use crate::model::WorkerGroup;
use crate::store::Result;

impl PgStore {
    /// Records the worker now serving `group.slot` of `group.run_id`.
    pub fn record_worker(&mut self, group: &WorkerGroup) -> Result<()> {
        self.write(|c| {
            c.x(
                "INSERT INTO workers (run_id, slot, host, boot, pgid, started)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (run_id, slot) DO UPDATE SET host = excluded.host,
                    boot = excluded.boot, pgid = excluded.pgid, started = excluded.started",
                &[
                    &group.run_id,
                    &i64::from(group.slot),
                    &group.host,
                    &group.boot,
                    &i64::from(group.pgid),
                    &(group.started as i64),
                ],
            )?;
            Ok(())
        })
    }

    /// The worker groups recorded for `run_ids`.
    pub fn worker_groups(&self, run_ids: &[i64]) -> Result<Vec<WorkerGroup>> {
        self.read(|c| {
            let rows = c.q(
                "SELECT run_id, slot, host, boot, pgid, started FROM workers
                  WHERE run_id = ANY($1) ORDER BY run_id, slot",
                &[&run_ids],
            )?;
            Ok(rows
                .iter()
                .map(|r| WorkerGroup {
                    run_id: r.get(0),
                    slot: r.get::<_, i64>(1) as u32,
                    host: r.get(2),
                    boot: r.get(3),
                    pgid: r.get::<_, i64>(4) as u32,
                    started: r.get::<_, i64>(5) as u64,
                })
                .collect())
        })
    }

    /// Forgets the worker groups of those of `run_ids` that have ended.
    pub fn forget_workers(&mut self, run_ids: &[i64]) -> Result<()> {
        self.write(|c| {
            c.x(
                "DELETE FROM workers w WHERE w.run_id = ANY($1)
                    AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.run_id AND r.state = 'running')",
                &[&run_ids],
            )?;
            Ok(())
        })
    }
}
