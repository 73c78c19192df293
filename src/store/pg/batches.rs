//! Batches: names, counts, the pause flag and schedule state.

use super::PgTx;
use super::conn::Conn;
use crate::key::KeySpec;
use crate::model::{Counts, Fire, Millis, Pause};
use crate::store::dialect::{BatchState, BatchesRead, BatchesWrite};
use crate::store::ops::add::keyed_alike;
use crate::store::{Result, StoreError};

/// Id of a batch, or `UnknownBatch` listing the known ones.
pub(crate) fn batch_id(c: &mut Conn, name: &str) -> Result<i64> {
    if let Some(id) = c.batch_ids.get(name) {
        return Ok(*id);
    }
    match c.opt("SELECT id FROM batches WHERE name = $1", &[&name])? {
        Some(r) => {
            let id = r.get(0);
            c.batch_ids.insert(name.to_string(), id);
            Ok(id)
        }
        None => Err(StoreError::UnknownBatch {
            name: name.to_string(),
            known: names(c).unwrap_or_default(),
        }),
    }
}

pub(crate) fn names(c: &mut Conn) -> Result<Vec<String>> {
    Ok(c.q("SELECT name FROM batches ORDER BY name", &[])?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

/// Creates the batch row if missing (two hosts may race: one insert wins).
pub(crate) fn ensure(c: &mut Conn, name: &str, now: Millis) -> Result<i64> {
    if let Some(r) = c.opt("SELECT id FROM batches WHERE name = $1", &[&name])? {
        return Ok(r.get(0));
    }
    let now = c.tin(now);
    c.x(
        "INSERT INTO batches (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        &[&name, &now],
    )?;
    Ok(c.one("SELECT id FROM batches WHERE name = $1", &[&name])?
        .get(0))
}

/// Checks an add keying the batch's items by `spec` against the spec
/// recorded on it, recording it where none is (see `ops::add::keyed_alike`).
/// In the add's transaction, before its rows: refused, nothing is written.
/// Two first adds at once: the second's update waits for the first's
/// commit and then finds the spec recorded, which it is checked against.
pub(crate) fn keyed_by(c: &mut Conn, id: i64, batch: &str, spec: &KeySpec) -> Result<()> {
    const RECORDED: &str = "SELECT key_spec FROM batches WHERE id = $1";
    let recorded: Option<String> = c.one(RECORDED, &[&id])?.get(0);
    // `ops::add::KEY_SAMPLE`.
    let sample = || {
        Ok(c.q(
            "SELECT key, payload FROM items WHERE batch_id = $1 ORDER BY id LIMIT 5",
            &[&id],
        )?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect())
    };
    let Some(record) = keyed_alike(batch, recorded.as_deref(), spec, sample)? else {
        return Ok(());
    };
    let set = c.x(
        "UPDATE batches SET key_spec = $2 WHERE id = $1 AND key_spec IS NULL",
        &[&id, &record],
    )?;
    if set == 0 {
        let recorded: Option<String> = c.one(RECORDED, &[&id])?.get(0);
        keyed_alike(batch, recorded.as_deref(), spec, || Ok(Vec::new()))?;
    }
    Ok(())
}

/// The counters, summed over their shards.
pub(crate) fn counts(c: &mut Conn, id: i64) -> Result<Counts> {
    let mut out = Counts::default();
    for r in c.q(
        "SELECT bucket, sum(n)::int8 FROM counts WHERE batch_id = $1 GROUP BY bucket",
        &[&id],
    )? {
        let n: i64 = r.get(1);
        match r.get::<_, &str>(0) {
            "pending" => out.pending = n,
            "claimed" => out.claimed = n,
            "done" => out.done = n,
            "empty" => out.empty = n,
            "skipped" => out.skipped = n,
            "retry" => out.retry = n,
            "manual" => out.manual = n,
            _ => {}
        }
    }
    Ok(out)
}

fn pause_and_schedule(c: &mut Conn, id: i64) -> Result<BatchState> {
    let r = c.one(
        "SELECT paused, paused_reason, paused_by, paused_at, next_fire,
                last_fire_at, last_fire_outcome, last_fire_reason, last_fire_run
           FROM batches WHERE id = $1",
        &[&id],
    )?;
    let pause = r.get::<_, bool>(0).then(|| Pause {
        reason: r.get::<_, Option<String>>(1).unwrap_or_default(),
        by: r.get::<_, Option<String>>(2).unwrap_or_default(),
        at: c.tout(r.get::<_, Option<i64>>(3).unwrap_or_default()),
    });
    let fire = r.get::<_, Option<i64>>(5).map(|at| Fire {
        at: c.tout(at),
        outcome: r.get::<_, Option<String>>(6).unwrap_or_default(),
        reason: r.get(7),
        run_id: r.get(8),
    });
    Ok((pause, c.tout_opt(r.get(4)), fire))
}

/// Done and failed completions per minute, oldest first, for the last
/// `minutes` minutes ending at `now` (zeros included), none from before
/// the batch was created.
pub(crate) fn minutes(c: &mut Conn, id: i64, now: Millis, minutes: i64) -> Result<Vec<(i64, i64)>> {
    let last = c.tin(now) / 60_000;
    // Not before the batch existed: those minutes hold no data, not zeros.
    let created: i64 = c
        .one("SELECT created_at FROM batches WHERE id = $1", &[&id])?
        .get(0);
    let first = (last - minutes + 1).max(created / 60_000).min(last);
    let mut out = vec![(0, 0); (last - first + 1).max(0) as usize];
    for r in c.q(
        "SELECT minute, sum(done)::int8, sum(failed)::int8 FROM minute_stats
          WHERE batch_id = $1 AND minute BETWEEN $2 AND $3 GROUP BY minute",
        &[&id, &first, &last],
    )? {
        let m: i64 = r.get(0);
        if let Some(slot) = out.get_mut((m - first) as usize) {
            *slot = (r.get(1), r.get(2));
        }
    }
    Ok(out)
}

const BATCH_ROW_LOCKED: &str = "SELECT 1 FROM batches WHERE id = $1 FOR UPDATE";

impl BatchesRead for PgTx<'_> {
    fn batch_id(&mut self, name: &str) -> Result<i64> {
        batch_id(self.c, name)
    }

    fn batch_names(&mut self) -> Result<Vec<String>> {
        names(self.c)
    }

    fn batch_counts(&mut self, batch: i64) -> Result<Counts> {
        counts(self.c, batch)
    }

    fn batch_state(&mut self, batch: i64) -> Result<BatchState> {
        pause_and_schedule(self.c, batch)
    }

    fn minute_counts(&mut self, batch: i64, now: Millis, minutes: i64) -> Result<Vec<(i64, i64)>> {
        self::minutes(self.c, batch, now, minutes)
    }
}

impl BatchesWrite for PgTx<'_> {
    fn batch_ensure(&mut self, name: &str, now: Millis) -> Result<i64> {
        ensure(self.c, name, now)
    }

    fn batch_row_locked(&mut self, batch: i64) -> Result<()> {
        self.c.x(BATCH_ROW_LOCKED, &[&batch])?;
        Ok(())
    }
}
