//! Batches: names, counts, the pause flag and schedule state.

use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteTx;
use super::schema::BUCKETS;
use crate::key::KeySpec;
use crate::model::{Counts, Fire, Millis, Pause};
use crate::store::dialect::{BatchState, BatchesRead, BatchesWrite};
use crate::store::ops::add::keyed_alike;
use crate::store::{Result, StoreError};

/// Id of a batch, or `UnknownBatch` listing the known ones.
pub(crate) fn batch_id(conn: &Connection, name: &str) -> Result<i64> {
    // Cached: this runs for every event and most transitions.
    conn.prepare_cached("SELECT id FROM batches WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?
        .ok_or_else(|| StoreError::UnknownBatch {
            name: name.to_string(),
            known: names(conn).unwrap_or_default(),
        })
}

pub(crate) fn names(conn: &Connection) -> Result<Vec<String>> {
    let mut st = conn.prepare_cached("SELECT name FROM batches ORDER BY name")?;
    let rows = st
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

/// Creates the batch row (and its zeroed counters) if missing.
pub(crate) fn ensure(conn: &Connection, name: &str, now: Millis) -> Result<i64> {
    if let Some(id) = conn
        .prepare_cached("SELECT id FROM batches WHERE name = ?1")?
        .query_row([name], |r| r.get(0))
        .optional()?
    {
        return Ok(id);
    }
    conn.execute(
        "INSERT INTO batches (name, created_at) VALUES (?1, ?2)",
        params![name, now],
    )?;
    let id = conn.last_insert_rowid();
    let mut st =
        conn.prepare_cached("INSERT INTO counts (batch_id, bucket, n) VALUES (?1, ?2, 0)")?;
    for bucket in BUCKETS {
        st.execute(params![id, bucket])?;
    }
    Ok(id)
}

/// Checks an add keying the batch's items by `spec` against the spec
/// recorded on it, recording it where none is (see `ops::add::keyed_alike`).
/// In the add's transaction, before its rows: refused, nothing is written.
pub(crate) fn keyed_by(conn: &Connection, id: i64, batch: &str, spec: &KeySpec) -> Result<()> {
    let recorded: Option<String> = conn
        .prepare_cached("SELECT key_spec FROM batches WHERE id = ?1")?
        .query_row([id], |r| r.get(0))?;
    let sample = || {
        Ok(conn
            .prepare_cached(crate::store::ops::add::KEY_SAMPLE)?
            .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<Vec<(String, String)>>>()?)
    };
    if let Some(record) = keyed_alike(batch, recorded.as_deref(), spec, sample)? {
        conn.prepare_cached("UPDATE batches SET key_spec = ?2 WHERE id = ?1")?
            .execute(params![id, record])?;
    }
    Ok(())
}

pub(crate) fn counts(conn: &Connection, batch_id: i64) -> Result<Counts> {
    let mut st = conn.prepare_cached("SELECT bucket, n FROM counts WHERE batch_id = ?1")?;
    let mut rows = st.query([batch_id])?;
    let mut c = Counts::default();
    while let Some(row) = rows.next()? {
        let n: i64 = row.get(1)?;
        match row.get_ref(0)?.as_str().map_err(rusqlite::Error::from)? {
            "pending" => c.pending = n,
            "claimed" => c.claimed = n,
            "done" => c.done = n,
            "empty" => c.empty = n,
            "skipped" => c.skipped = n,
            "retry" => c.retry = n,
            "manual" => c.manual = n,
            _ => {}
        }
    }
    Ok(c)
}

fn pause_and_schedule(conn: &Connection, batch_id: i64) -> Result<BatchState> {
    Ok(conn.query_row(
        "SELECT paused, paused_reason, paused_by, paused_at, next_fire,
                last_fire_at, last_fire_outcome, last_fire_reason, last_fire_run
           FROM batches WHERE id = ?1",
        [batch_id],
        |r| {
            let pause = (r.get::<_, i64>(0)? != 0).then(|| -> rusqlite::Result<Pause> {
                Ok(Pause {
                    reason: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    by: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                    at: r.get::<_, Option<i64>>(3)?.unwrap_or_default(),
                })
            });
            let fire = match r.get::<_, Option<i64>>(5)? {
                Some(at) => Some(Fire {
                    at,
                    outcome: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
                    reason: r.get(7)?,
                    run_id: r.get(8)?,
                }),
                None => None,
            };
            Ok((pause.transpose()?, r.get(4)?, fire))
        },
    )?)
}

/// Done and failed completions per minute, oldest first, for the last
/// `minutes` minutes ending at `now` (zeros included), none from before
/// the batch was created.
pub(crate) fn minutes(
    c: &Connection,
    id: i64,
    now: Millis,
    minutes: i64,
) -> Result<Vec<(i64, i64)>> {
    let last = now / 60_000;
    // Not before the batch existed: those minutes hold no data, not zeros.
    let created: i64 = c
        .prepare_cached("SELECT created_at FROM batches WHERE id = ?1")?
        .query_row([id], |r| r.get(0))?;
    let first = (last - minutes + 1).max(created / 60_000).min(last);
    let mut out = vec![(0, 0); (last - first + 1).max(0) as usize];
    let mut st = c.prepare_cached(
        "SELECT minute, done, failed FROM minute_stats
          WHERE batch_id = ?1 AND minute BETWEEN ?2 AND ?3",
    )?;
    let mut rows = st.query(params![id, first, last])?;
    while let Some(r) = rows.next()? {
        let m: i64 = r.get(0)?;
        if let Some(slot) = out.get_mut((m - first) as usize) {
            *slot = (r.get(1)?, r.get(2)?);
        }
    }
    Ok(out)
}

impl BatchesRead for SqliteTx<'_> {
    fn batch_id(&mut self, name: &str) -> Result<i64> {
        batch_id(self.conn, name)
    }

    fn batch_names(&mut self) -> Result<Vec<String>> {
        names(self.conn)
    }

    fn batch_counts(&mut self, batch: i64) -> Result<Counts> {
        counts(self.conn, batch)
    }

    fn batch_state(&mut self, batch: i64) -> Result<BatchState> {
        pause_and_schedule(self.conn, batch)
    }

    fn minute_counts(&mut self, batch: i64, now: Millis, minutes: i64) -> Result<Vec<(i64, i64)>> {
        self::minutes(self.conn, batch, now, minutes)
    }
}

impl BatchesWrite for SqliteTx<'_> {
    fn batch_ensure(&mut self, name: &str, now: Millis) -> Result<i64> {
        ensure(self.conn, name, now)
    }

    /// `BEGIN IMMEDIATE` already excludes every other writer.
    fn batch_row_locked(&mut self, _batch: i64) -> Result<()> {
        Ok(())
    }
}
