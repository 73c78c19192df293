//! Statements on the scheduler daemons' heartbeat rows (`ops::daemons`):
//! who, since when, its last beat, the batches it schedules (a JSON
//! array).

use rusqlite::{Connection, params};

use super::SqliteTx;
use crate::model::{Daemon, Holder};
use crate::store::Result;
use crate::store::dialect::{DaemonsRead, DaemonsWrite};

const DAEMON_UPSERT: &str =
    "INSERT INTO daemons (token, host, pid, pid_start, started_at, beat_at, stopped_at, batches, stopping_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
     ON CONFLICT (token) DO UPDATE SET beat_at = excluded.beat_at,
        stopped_at = excluded.stopped_at, batches = excluded.batches,
        stopping_at = excluded.stopping_at";

const DAEMONS_ALL: &str =
    "SELECT token, host, pid, pid_start, started_at, beat_at, stopped_at, batches, stopping_at
       FROM daemons ORDER BY beat_at DESC, token";
const DAEMON_DELETE: &str = "DELETE FROM daemons WHERE token = ?1";

/// Every daemon recorded, newest beat first.
fn rows(c: &Connection) -> Result<Vec<Daemon>> {
    let mut st = c.prepare_cached(DAEMONS_ALL)?;
    let rows = st
        .query_map([], |r| {
            let batches: String = r.get(7)?;
            Ok(Daemon {
                token: r.get(0)?,
                holder: Holder {
                    host: r.get(1)?,
                    pid: r.get(2)?,
                    pid_start: r.get::<_, Option<i64>>(3)?.map(|s| s as u64),
                },
                started_at: r.get(4)?,
                beat_at: r.get(5)?,
                stopped_at: r.get(6)?,
                batches: serde_json::from_str(&batches).unwrap_or_default(),
                stopping_at: r.get(8)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows)
}

impl DaemonsRead for SqliteTx<'_> {
    fn daemons_all(&mut self) -> Result<Vec<Daemon>> {
        rows(self.conn)
    }
}

impl DaemonsWrite for SqliteTx<'_> {
    fn daemons_all_locked(&mut self) -> Result<Vec<Daemon>> {
        rows(self.conn)
    }

    fn daemon_upsert(&mut self, d: &Daemon) -> Result<()> {
        let batches = serde_json::to_string(&d.batches).unwrap_or_else(|_| "[]".into());
        self.conn.prepare_cached(DAEMON_UPSERT)?.execute(params![
            d.token,
            d.holder.host,
            d.holder.pid,
            d.holder.pid_start.map(|s| s as i64),
            d.started_at,
            d.beat_at,
            d.stopped_at,
            batches,
            d.stopping_at
        ])?;
        Ok(())
    }

    fn daemons_delete(&mut self, tokens: &[&str]) -> Result<()> {
        let mut st = self.conn.prepare_cached(DAEMON_DELETE)?;
        for token in tokens {
            st.execute([token])?;
        }
        Ok(())
    }
}
