//! Batches: names, counts, the pause flag and schedule state.

use rusqlite::{Connection, OptionalExtension, params};

use super::{SqliteStore, schema::BUCKETS};
use crate::model::{BatchInfo, Counts, Fire, Hold, Millis, NewEvent, Pause, Runners};
use crate::store::api::Unpaused;
use crate::store::{Result, StoreError, shared};

/// The hold as stored: until when, the key that asked, and its label
/// (while the item is kept).
const HOLD: &str = "SELECT b.hold_until, b.hold_key, i.label
                      FROM batches b LEFT JOIN items i ON i.batch_id = b.id AND i.key = b.hold_key
                     WHERE b.id = ?1 AND b.hold_until IS NOT NULL";

fn hold(conn: &Connection, batch_id: i64) -> Result<Option<Hold>> {
    Ok(conn
        .prepare_cached(HOLD)?
        .query_row([batch_id], |r| {
            Ok(Hold {
                until: r.get(0)?,
                key: r.get(1)?,
                label: r.get(2)?,
            })
        })
        .optional()?)
}

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

fn paused(conn: &Connection, batch_id: i64) -> Result<bool> {
    Ok(conn.query_row(
        "SELECT paused FROM batches WHERE id = ?1",
        [batch_id],
        |r| r.get::<_, i64>(0).map(|p| p != 0),
    )?)
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

fn pause_and_schedule(
    conn: &Connection,
    batch_id: i64,
) -> Result<(Option<Pause>, Option<Millis>, Option<Fire>)> {
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

/// Counts, pause flag, schedule state, lock and last run of one batch,
/// and who of its runners is alive at `now`.
pub(crate) fn info(c: &Connection, id: i64, name: String, now: Millis) -> Result<BatchInfo> {
    let (pause, next_fire, last_fire) = pause_and_schedule(c, id)?;
    let (last_run, stepped_down) = super::runs::last(c, id)?;
    let mut info = BatchInfo {
        counts: counts(c, id)?,
        pause,
        next_fire,
        last_fire,
        locks: super::locks::current(c, id, &name)?,
        last_run,
        stepped_down,
        hold: hold(c, id)?,
        runners: Runners::default(),
        name,
    };
    info.runners = shared::runners(&info, now, |runs| claimed_by(c, id, runs))?;
    Ok(info)
}

/// Claimed items of the batch leased to `runs`.
fn claimed_by(c: &Connection, id: i64, runs: &[i64]) -> Result<i64> {
    let mut st = c.prepare_cached(
        "SELECT count(*) FROM items WHERE batch_id = ?1 AND status = 'claimed' AND lease_run = ?2",
    )?;
    let mut n = 0;
    for run in runs {
        n += st.query_row(params![id, run], |r| r.get::<_, i64>(0))?;
    }
    Ok(n)
}

/// When the batch was made.
pub(crate) fn created_at(c: &Connection, id: i64) -> Result<Millis> {
    Ok(
        c.prepare_cached("SELECT created_at FROM batches WHERE id = ?1")?
            .query_row([id], |r| r.get(0))?,
    )
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
    let created = created_at(c, id)?;
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

impl SqliteStore {
    /// Names of all batches in the store.
    pub fn batch_names(&self) -> Result<Vec<String>> {
        self.read(names)
    }

    /// Creates a batch if it does not exist yet.
    pub fn ensure_batch(&mut self, name: &str, now: Millis) -> Result<()> {
        self.write(|tx| ensure(tx, name, now).map(drop))
    }

    /// Fails with `UnknownBatch` unless the batch exists.
    pub fn check_batch(&self, name: &str) -> Result<()> {
        self.read(|c| batch_id(c, name).map(drop))
    }

    pub fn counts(&self, batch: &str) -> Result<Counts> {
        self.read(|c| counts(c, batch_id(c, batch)?))
    }

    /// Everything the status line and dashboard header need, for every
    /// batch (or the one named), in one read transaction.
    pub fn batch_infos(&self, only: Option<&str>) -> Result<Vec<BatchInfo>> {
        let now = crate::util::time::now_ms();
        self.read(|c| {
            let wanted = match only {
                Some(name) => {
                    batch_id(c, name)?;
                    vec![name.to_string()]
                }
                None => names(c)?,
            };
            let mut out = Vec::with_capacity(wanted.len());
            for name in wanted {
                let id = batch_id(c, &name)?;
                out.push(info(c, id, name, now)?);
            }
            Ok(out)
        })
    }

    /// Pauses a batch, recording who and why. Returns whether it was
    /// already paused (the reason is updated either way).
    pub fn pause_batch(&mut self, batch: &str, p: &Pause) -> Result<bool> {
        self.write(|tx| {
            let id = ensure(tx, batch, p.at)?;
            let was = paused(tx, id)?;
            tx.execute(
                "UPDATE batches SET paused = 1, paused_reason = ?2, paused_by = ?3, paused_at = ?4 WHERE id = ?1",
                params![id, p.reason, p.by, p.at],
            )?;
            super::events::insert(
                tx,
                &NewEvent::new(p.at, batch, "paused", format!("paused by {}: {}", p.by, p.reason))
                    .actor(&p.by)
                    .fields(serde_json::json!({"reason": p.reason})),
            )?;
            Ok(was)
        })
    }

    /// Clears the pause flag and lifts a retry-after hold still on at
    /// `now`, each recorded as an operator action of `actor`.
    pub fn unpause_batch(&mut self, batch: &str, actor: &str, now: Millis) -> Result<Unpaused> {
        self.write(|tx| {
            let id = batch_id(tx, batch)?;
            let was_paused = paused(tx, id)?;
            let lifted = hold(tx, id)?.filter(|h| h.active(now));
            tx.execute(
                "UPDATE batches SET paused = 0, paused_reason = NULL, paused_by = NULL, paused_at = NULL,
                        hold_until = NULL, hold_key = NULL
                  WHERE id = ?1",
                [id],
            )?;
            if was_paused {
                super::events::insert(
                    tx,
                    &NewEvent::new(now, batch, "unpaused", format!("unpaused by {actor}")).actor(actor),
                )?;
            }
            if let Some(h) = &lifted {
                super::events::insert(tx, &crate::store::shared::hold_lifted(batch, h, actor, now))?;
            }
            Ok(Unpaused { was_paused, lifted })
        })
    }

    /// The pause flag, read fresh (the runner checks it while running).
    pub fn pause(&self, batch: &str) -> Result<Option<Pause>> {
        self.read(|c| Ok(pause_and_schedule(c, batch_id(c, batch)?)?.0))
    }

    /// The batch's last retry-after hold (over once its time has passed).
    pub fn hold(&self, batch: &str) -> Result<Option<Hold>> {
        self.read(|c| hold(c, batch_id(c, batch)?))
    }

    /// Holds every call of the batch until `until`, for the answer of
    /// `key`. Never shortens a hold: a shorter one changes nothing.
    pub fn set_hold(&mut self, batch: &str, until: Millis, key: Option<&str>) -> Result<()> {
        self.write(|tx| {
            tx.execute(
                "UPDATE batches SET hold_until = ?2, hold_key = ?3
                  WHERE name = ?1 AND (hold_until IS NULL OR hold_until < ?2)",
                params![batch, until, key],
            )?;
            Ok(())
        })
    }

    /// Records the next fire time computed by the scheduler.
    pub fn set_next_fire(&mut self, batch: &str, next: Option<Millis>, now: Millis) -> Result<()> {
        self.write(|tx| {
            let id = ensure(tx, batch, now)?;
            tx.execute(
                "UPDATE batches SET next_fire = ?2 WHERE id = ?1",
                params![id, next],
            )?;
            Ok(())
        })
    }

    /// Records what happened at a fire time, and logs it as an event (which
    /// is returned, for the log file). `last_fire_*` keeps the latest fire
    /// time: a cycle that ends after later fires were skipped while it ran
    /// still logs its outcome, but does not become the "last fire".
    pub fn record_fire(&mut self, batch: &str, fire: &Fire) -> Result<NewEvent> {
        self.write(|tx| {
            let id = ensure(tx, batch, fire.at)?;
            tx.execute(
                "UPDATE batches SET last_fire_at = ?2, last_fire_outcome = ?3, last_fire_reason = ?4,
                        last_fire_run = ?5
                  WHERE id = ?1 AND (last_fire_at IS NULL OR last_fire_at <= ?2)",
                params![id, fire.at, fire.outcome, fire.reason, fire.run_id],
            )?;
            let message = match &fire.reason {
                Some(reason) => format!("fire {}: {reason}", fire.outcome),
                None => format!("fire {}", fire.outcome),
            };
            let mut event = NewEvent::new(fire.at, batch, "fire", message).fields(serde_json::json!({
                "outcome": fire.outcome,
                "reason": fire.reason,
            }));
            event.run_id = fire.run_id;
            super::events::insert(tx, &event)?;
            Ok(event)
        })
    }

    /// Done and failed worker completions per minute, oldest first, for the
    /// last `minutes` minutes ending at `now` (zeros included).
    pub fn minute_stats(&self, batch: &str, now: Millis, minutes: i64) -> Result<Vec<(i64, i64)>> {
        self.read(|c| self::minutes(c, batch_id(c, batch)?, now, minutes))
    }
}
