//! Scheduler daemons' heartbeats, one row per daemon process: who, since
//! when, its last beat, the batches it schedules (a JSON array). Views
//! judge from them whether a schedule has a live daemon
//! (`ops::liveness::daemon_state`).

use rusqlite::{Connection, params};

use super::SqliteStore;
use crate::model::{Daemon, DaemonInfo, Holder, Millis};
use crate::store::Result;
use crate::store::ops::liveness;

const UPSERT: &str =
    "INSERT INTO daemons (token, host, pid, pid_start, started_at, beat_at, stopped_at, batches)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
     ON CONFLICT (token) DO UPDATE SET beat_at = excluded.beat_at,
        stopped_at = excluded.stopped_at, batches = excluded.batches";

/// Every daemon recorded, with its state as of `now`, newest beat first.
pub(crate) fn all(c: &Connection, now: Millis) -> Result<Vec<DaemonInfo>> {
    let mut st = c.prepare_cached(
        "SELECT token, host, pid, pid_start, started_at, beat_at, stopped_at, batches
           FROM daemons ORDER BY beat_at DESC, token",
    )?;
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
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(liveness::daemon_infos(rows, now))
}

fn upsert(c: &Connection, d: &Daemon) -> Result<()> {
    let batches = serde_json::to_string(&d.batches).unwrap_or_else(|_| "[]".into());
    c.prepare_cached(UPSERT)?.execute(params![
        d.token,
        d.holder.host,
        d.holder.pid,
        d.holder.pid_start.map(|s| s as i64),
        d.started_at,
        d.beat_at,
        d.stopped_at,
        batches
    ])?;
    Ok(())
}

impl SqliteStore {
    /// Records a daemon starting, and forgets the records it replaces
    /// (`ops::liveness::superseded`).
    pub fn daemon_started(&mut self, d: &Daemon, now: Millis) -> Result<()> {
        self.write(|tx| {
            let known = all(tx, now)?;
            for token in liveness::superseded(&known, d) {
                tx.execute("DELETE FROM daemons WHERE token = ?1", [token])?;
            }
            upsert(tx, d)
        })
    }

    /// Records a daemon's heartbeat (or, with `stopped_at`, its clean stop).
    pub fn daemon_beat(&mut self, d: &Daemon) -> Result<()> {
        self.write(|tx| upsert(tx, d))
    }

    /// Every daemon recorded, with its state as of `now`.
    pub fn daemons(&self, now: Millis) -> Result<Vec<DaemonInfo>> {
        self.read(|c| all(c, now))
    }
}
