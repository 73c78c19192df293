//! Scheduler daemons' heartbeats (see the SQLite store's `daemons`);
//! times on the database's clock, so hosts with skewed clocks agree on
//! how long a daemon has been silent.

use super::PgStore;
use super::conn::Conn;
use crate::model::{Daemon, DaemonInfo, Holder, Millis};
use crate::store::Result;
use crate::store::ops::liveness;

/// Every daemon recorded, with its state as of `now`, newest beat first.
pub(crate) fn all(c: &mut Conn, now: Millis) -> Result<Vec<DaemonInfo>> {
    let rows = c.q(
        "SELECT token, host, pid, pid_start, started_at, beat_at, stopped_at, batches
           FROM daemons ORDER BY beat_at DESC, token",
        &[],
    )?;
    let daemons = rows
        .iter()
        .map(|r| Daemon {
            token: r.get(0),
            holder: Holder {
                host: r.get(1),
                pid: r.get::<_, i64>(2) as u32,
                pid_start: r.get::<_, Option<i64>>(3).map(|s| s as u64),
            },
            started_at: c.tout(r.get(4)),
            beat_at: c.tout(r.get(5)),
            stopped_at: c.tout_opt(r.get(6)),
            batches: r.get(7),
        })
        .collect();
    Ok(liveness::daemon_infos(daemons, now))
}

fn upsert(c: &mut Conn, d: &Daemon) -> Result<()> {
    let (started, beat, stopped) = (
        c.tin(d.started_at),
        c.tin(d.beat_at),
        c.tin_opt(d.stopped_at),
    );
    let pid = i64::from(d.holder.pid);
    let pid_start = d.holder.pid_start.map(|s| s as i64);
    c.x(
        "INSERT INTO daemons (token, host, pid, pid_start, started_at, beat_at, stopped_at, batches)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (token) DO UPDATE SET beat_at = excluded.beat_at,
            stopped_at = excluded.stopped_at, batches = excluded.batches",
        &[
            &d.token,
            &d.holder.host,
            &pid,
            &pid_start,
            &started,
            &beat,
            &stopped,
            &d.batches,
        ],
    )?;
    Ok(())
}

impl PgStore {
    /// Records a daemon starting, and forgets the records it replaces.
    pub fn daemon_started(&mut self, d: &Daemon, now: Millis) -> Result<()> {
        self.write(|c| {
            let known = all(c, now)?;
            let gone: Vec<String> = liveness::superseded(&known, d)
                .into_iter()
                .map(str::to_string)
                .collect();
            if !gone.is_empty() {
                c.x("DELETE FROM daemons WHERE token = ANY($1)", &[&gone])?;
            }
            upsert(c, d)
        })
    }

    /// Records a daemon's heartbeat (or, with `stopped_at`, its clean stop).
    pub fn daemon_beat(&mut self, d: &Daemon) -> Result<()> {
        self.write(|c| upsert(c, d))
    }

    /// Every daemon recorded, with its state as of `now`.
    pub fn daemons(&self, now: Millis) -> Result<Vec<DaemonInfo>> {
        self.read(|c| all(c, now))
    }
}
