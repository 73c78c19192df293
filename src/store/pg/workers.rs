//! Worker process groups (see `ops::workers`).

use super::PgTx;
use crate::model::WorkerGroup;
use crate::store::Result;
use crate::store::dialect::{WorkersRead, WorkersWrite};

const WORKER_UPSERT: &str = "INSERT INTO workers (run_id, slot, host, boot, pgid, started)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (run_id, slot) DO UPDATE SET host = excluded.host,
        boot = excluded.boot, pgid = excluded.pgid, started = excluded.started";
const WORKERS_OF_RUNS: &str = "SELECT run_id, slot, host, boot, pgid, started FROM workers
  WHERE run_id = ANY($1) ORDER BY run_id, slot";
const WORKERS_DELETE_ENDED: &str = "DELETE FROM workers w WHERE w.run_id = ANY($1)
    AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = w.run_id AND r.state = 'running')";

impl WorkersRead for PgTx<'_> {
    fn workers_of_runs(&mut self, runs: &[i64]) -> Result<Vec<WorkerGroup>> {
        Ok(self
            .c
            .q(WORKERS_OF_RUNS, &[&runs])?
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
    }
}

impl WorkersWrite for PgTx<'_> {
    fn worker_upsert(&mut self, group: &WorkerGroup) -> Result<()> {
        self.c.x(
            WORKER_UPSERT,
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
    }

    fn workers_delete_ended(&mut self, runs: &[i64]) -> Result<()> {
        self.c.x(WORKERS_DELETE_ENDED, &[&runs])?;
        Ok(())
    }
}
