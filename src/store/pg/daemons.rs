//! Statements on the scheduler daemons' heartbeat rows (`ops::daemons`);
//! times on the database's clock, so hosts with skewed clocks agree on
//! how long a daemon has been silent.

use super::PgTx;
use super::conn::Conn;
use crate::model::{Daemon, Holder};
use crate::store::Result;
use crate::store::dialect::{DaemonsRead, DaemonsWrite};

const DAEMONS_ALL: &str =
    "SELECT token, host, pid, pid_start, started_at, beat_at, stopped_at, batches, stopping_at
       FROM daemons ORDER BY beat_at DESC, token";
const DAEMON_UPSERT: &str =
    "INSERT INTO daemons (token, host, pid, pid_start, started_at, beat_at, stopped_at, batches, stopping_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (token) DO UPDATE SET beat_at = excluded.beat_at,
        stopped_at = excluded.stopped_at, batches = excluded.batches,
        stopping_at = excluded.stopping_at";
const DAEMONS_DELETE: &str = "DELETE FROM daemons WHERE token = ANY($1)";

/// Advisory lock key of the daemons' records (one 64-bit space with
/// `tombstones::TOMBSTONE_LOCK` and the migration lock): "NSHT" and
/// "DAEM". Taken until commit by every write of a daemon's record: under
/// `READ COMMITTED` two daemons starting at once each read the other's
/// row as absent, and both started.
const DAEMONS_LOCK: i64 = 0x4E53_4854_4441_454D;

/// Every daemon recorded, newest beat first.
fn rows(c: &mut Conn) -> Result<Vec<Daemon>> {
    let rows = c.q(DAEMONS_ALL, &[])?;
    Ok(rows
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
            stopping_at: c.tout_opt(r.get(8)),
        })
        .collect())
}

impl DaemonsRead for PgTx<'_> {
    fn daemons_all(&mut self) -> Result<Vec<Daemon>> {
        rows(self.c)
    }
}

impl DaemonsWrite for PgTx<'_> {
    fn daemons_all_locked(&mut self) -> Result<Vec<Daemon>> {
        self.c
            .x("SELECT pg_advisory_xact_lock($1)", &[&DAEMONS_LOCK])?;
        rows(self.c)
    }

    fn daemon_upsert(&mut self, d: &Daemon) -> Result<()> {
        let c = &mut *self.c;
        let (started, beat, stopped, stopping) = (
            c.tin(d.started_at),
            c.tin(d.beat_at),
            c.tin_opt(d.stopped_at),
            c.tin_opt(d.stopping_at),
        );
        let pid = i64::from(d.holder.pid);
        let pid_start = d.holder.pid_start.map(|s| s as i64);
        c.x(
            DAEMON_UPSERT,
            &[
                &d.token,
                &d.holder.host,
                &pid,
                &pid_start,
                &started,
                &beat,
                &stopped,
                &d.batches,
                &stopping,
            ],
        )?;
        Ok(())
    }

    fn daemons_delete(&mut self, tokens: &[&str]) -> Result<()> {
        self.c.x(DAEMONS_DELETE, &[&tokens])?;
        Ok(())
    }
}
