//! Worker process groups (see `ops::workers`).

use rusqlite::params;

use super::SqliteTx;
use crate::model::WorkerGroup;
use crate::store::Result;
use crate::store::dialect::{WorkersRead, WorkersWrite};

const WORKER_UPSERT: &str = "INSERT INTO workers (run_id, slot, host, boot, pgid, started)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)
     ON CONFLICT (run_id, slot) DO UPDATE SET host = excluded.host,
        boot = excluded.boot, pgid = excluded.pgid, started = excluded.started";
const WORKERS_OF_RUNS: &str = "SELECT run_id, slot, host, boot, pgid, started FROM workers
  WHERE run_id = ?1 ORDER BY slot";
const WORKERS_DELETE_ENDED: &str = "DELETE FROM workers WHERE run_id = ?1
    AND NOT EXISTS (SELECT 1 FROM runs WHERE id = ?1 AND state = 'running')";

impl WorkersRead for SqliteTx<'_> {
    fn workers_of_runs(&mut self, runs: &[i64]) -> Result<Vec<WorkerGroup>> {
        let mut st = self.conn.prepare_cached(WORKERS_OF_RUNS)?;
        let mut out = Vec::new();
        for id in runs {
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
    }
}

impl WorkersWrite for SqliteTx<'_> {
    fn worker_upsert(&mut self, group: &WorkerGroup) -> Result<()> {
        self.conn.prepare_cached(WORKER_UPSERT)?.execute(params![
            group.run_id,
            group.slot,
            group.host,
            group.boot,
            group.pgid,
            group.started as i64
        ])?;
        Ok(())
    }

    fn workers_delete_ended(&mut self, runs: &[i64]) -> Result<()> {
        let mut st = self.conn.prepare_cached(WORKERS_DELETE_ENDED)?;
        for id in runs {
            st.execute([id])?;
        }
        Ok(())
    }
}
