//! Worker process groups, one row per run slot, written as each worker
//! starts: what a later run on this host stops when the runner died
//! (`runner::child::groups`). Rows go once their run has ended.

use rusqlite::params;

use super::SqliteStore;
use crate::model::WorkerGroup;
use crate::store::Result;

impl SqliteStore {
    /// Records the worker now serving `group.slot` of `group.run_id`
    /// (replacing the slot's earlier worker, whose group is gone).
    pub fn record_worker(&mut self, group: &WorkerGroup) -> Result<()> {
        self.write(|tx| {
            tx.prepare_cached(
                "INSERT INTO workers (run_id, slot, host, boot, pgid, started)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (run_id, slot) DO UPDATE SET host = excluded.host,
                    boot = excluded.boot, pgid = excluded.pgid, started = excluded.started",
            )?
            .execute(params![
                group.run_id,
                group.slot,
                group.host,
                group.boot,
                group.pgid,
                group.started as i64
            ])?;
            Ok(())
        })
    }

    /// The worker groups recorded for `run_ids`.
    pub fn worker_groups(&self, run_ids: &[i64]) -> Result<Vec<WorkerGroup>> {
        self.read(|c| {
            let mut st = c.prepare_cached(
                "SELECT run_id, slot, host, boot, pgid, started FROM workers
                  WHERE run_id = ?1 ORDER BY slot",
            )?;
            let mut out = Vec::new();
            for id in run_ids {
                let rows = st.query_map([id], |r| {
                    Ok(WorkerGroup {
                        run_id: r.get(0)?,
                        slot: r.get(1)?,
                        host: r.get(2)?,
                        boot: r.get(3)?,
                        pgid: r.get(4)?,
                        started: r.get::<_, i64>(5)? as u64,
                    })
                })?;
                for row in rows {
                    out.push(row?);
                }
            }
            Ok(out)
        })
    }

    /// Forgets the worker groups of those of `run_ids` that have ended.
    pub fn forget_workers(&mut self, run_ids: &[i64]) -> Result<()> {
        self.write(|tx| {
            let mut st = tx.prepare_cached(
                "DELETE FROM workers WHERE run_id = ?1
                    AND NOT EXISTS (SELECT 1 FROM runs WHERE id = ?1 AND state = 'running')",
            )?;
            for id in run_ids {
                st.execute([id])?;
            }
            Ok(())
        })
    }
}
