//! Limit pools and token usage.

use rusqlite::{OptionalExtension, Row, params};

use super::SqliteTx;
use crate::model::Millis;
use crate::store::Result;
use crate::store::api::{PoolHold, UsageSum};
use crate::store::dialect::{PoolsRead, PoolsWrite};

/// The hold, and the label of the item that asked for it while the item
/// is kept (as the batch's own hold is read, `dialect::batches::HOLD`).
const HOLD: &str = "SELECT h.until_ms, h.batch, h.key, i.label
  FROM pool_holds h LEFT JOIN batches b ON b.name = h.batch
       LEFT JOIN item_keys k ON k.batch_id = b.id AND k.key = h.key
       LEFT JOIN items i ON i.id = k.item_id
 WHERE h.pool = ?1";
const TAT: &str = "SELECT tat_us FROM pool_dims WHERE pool = ?1 AND dim = ?2";
const IN_FLIGHT: &str =
    "SELECT coalesce(sum(n), 0) FROM pool_places WHERE pool = ?1 AND until_ms > ?2";
const MINUTES: &str = "SELECT minute, calls, input_tokens, output_tokens, unreported,
    estimated_tokens FROM pool_usage WHERE pool = ?1 AND minute >= ?2 ORDER BY minute";
const RUN: &str = "SELECT attempts, input_tokens, output_tokens, unreported, estimated_tokens,
    reported_estimate FROM run_usage WHERE run_id = ?1";
const ITEM: &str = "SELECT i.usage FROM batches b JOIN item_keys k ON k.batch_id = b.id
    JOIN items i ON i.id = k.item_id WHERE b.name = ?1 AND k.key = ?2";
const LOCK: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES (?1, '*', 0)
    ON CONFLICT (pool, dim) DO NOTHING";
const SET_TAT: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES (?1, ?2, ?3)
    ON CONFLICT (pool, dim) DO UPDATE SET tat_us = excluded.tat_us";
const SHIFT_TAT: &str = "UPDATE pool_dims SET tat_us = tat_us + ?3 WHERE pool = ?1 AND dim = ?2";
const PLACES_EXPIRE: &str = "DELETE FROM pool_places WHERE pool = ?1 AND until_ms <= ?2";
const PLACES_TAKE: &str = "INSERT INTO pool_places (pool, runner, n, until_ms)
    VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (pool, runner) DO UPDATE SET n = n + excluded.n,
        until_ms = max(until_ms, excluded.until_ms)";
const PLACES_GIVE: &str =
    "UPDATE pool_places SET n = max(n - ?3, 0) WHERE pool = ?1 AND runner = ?2";
const PLACES_FORGET: &str = "DELETE FROM pool_places WHERE runner = ?1";
const EXTEND_HOLD: &str =
    "INSERT INTO pool_holds (pool, until_ms, batch, key) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (pool) DO UPDATE SET until_ms = excluded.until_ms, batch = excluded.batch,
        key = excluded.key
    WHERE excluded.until_ms > pool_holds.until_ms";
const CLEAR_HOLD: &str = "DELETE FROM pool_holds WHERE pool = ?1";
const ITEM_APPEND: &str = "UPDATE items SET usage = coalesce(usage || char(10), '') || ?3
    WHERE id = (SELECT k.item_id FROM batches b JOIN item_keys k ON k.batch_id = b.id
                 WHERE b.name = ?1 AND k.key = ?2)";
const RUN_ADD: &str = "INSERT INTO run_usage (run_id, attempts, input_tokens, output_tokens,
    unreported, estimated_tokens, reported_estimate) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
    ON CONFLICT (run_id) DO UPDATE SET attempts = attempts + excluded.attempts,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        unreported = unreported + excluded.unreported,
        estimated_tokens = estimated_tokens + excluded.estimated_tokens,
        reported_estimate = reported_estimate + excluded.reported_estimate";
const POOL_ADD: &str = "INSERT INTO pool_usage (pool, minute, calls, input_tokens,
    output_tokens, unreported, estimated_tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
    ON CONFLICT (pool, minute) DO UPDATE SET calls = calls + excluded.calls,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        unreported = unreported + excluded.unreported,
        estimated_tokens = estimated_tokens + excluded.estimated_tokens";

fn sum_at(r: &Row<'_>, i: usize) -> rusqlite::Result<UsageSum> {
    Ok(UsageSum {
        attempts: r.get(i)?,
        input_tokens: r.get(i + 1)?,
        output_tokens: r.get(i + 2)?,
        unreported: r.get(i + 3)?,
        estimated_tokens: r.get(i + 4)?,
        reported_estimate: 0,
    })
}

impl PoolsRead for SqliteTx<'_> {
    fn pool_hold(&mut self, pool: &str) -> Result<Option<PoolHold>> {
        Ok(self
            .conn
            .prepare_cached(HOLD)?
            .query_row([pool], |r| {
                Ok(PoolHold {
                    until: r.get(0)?,
                    batch: r.get(1)?,
                    key: r.get(2)?,
                    label: r.get(3)?,
                })
            })
            .optional()?)
    }

    fn pool_tat(&mut self, pool: &str, dim: &str) -> Result<Option<i64>> {
        Ok(self
            .conn
            .prepare_cached(TAT)?
            .query_row([pool, dim], |r| r.get(0))
            .optional()?)
    }

    fn pool_in_flight(&mut self, pool: &str, now: Millis) -> Result<i64> {
        Ok(self
            .conn
            .prepare_cached(IN_FLIGHT)?
            .query_row(params![pool, now], |r| r.get(0))?)
    }

    fn pool_minutes(&mut self, pool: &str, since: i64) -> Result<Vec<(i64, UsageSum)>> {
        let mut st = self.conn.prepare_cached(MINUTES)?;
        let rows = st
            .query_map(params![pool, since], |r| Ok((r.get(0)?, sum_at(r, 1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn usage_of_run(&mut self, run: i64) -> Result<UsageSum> {
        Ok(self
            .conn
            .prepare_cached(RUN)?
            .query_row([run], |r| {
                Ok(UsageSum {
                    reported_estimate: r.get(5)?,
                    ..sum_at(r, 0)?
                })
            })
            .optional()?
            .unwrap_or_default())
    }

    fn usage_of_item(&mut self, batch: &str, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .prepare_cached(ITEM)?
            .query_row([batch, key], |r| r.get(0))
            .optional()?
            .flatten())
    }
}

impl PoolsWrite for SqliteTx<'_> {
    // `BEGIN IMMEDIATE` already excludes every other writer; the row is
    // made so that both dialects keep the same rows.
    fn pool_locked(&mut self, pool: &str) -> Result<()> {
        self.conn.prepare_cached(LOCK)?.execute([pool])?;
        Ok(())
    }

    fn pool_set_tat(&mut self, pool: &str, dim: &str, tat_us: i64) -> Result<()> {
        self.conn
            .prepare_cached(SET_TAT)?
            .execute(params![pool, dim, tat_us])?;
        Ok(())
    }

    fn pool_shift_tat(&mut self, pool: &str, dim: &str, delta_us: i64) -> Result<()> {
        self.conn
            .prepare_cached(SHIFT_TAT)?
            .execute(params![pool, dim, delta_us])?;
        Ok(())
    }

    fn pool_places_expire(&mut self, pool: &str, now: Millis) -> Result<()> {
        self.conn
            .prepare_cached(PLACES_EXPIRE)?
            .execute(params![pool, now])?;
        Ok(())
    }

    fn pool_places_take(&mut self, pool: &str, runner: &str, n: i64, until: Millis) -> Result<()> {
        self.conn
            .prepare_cached(PLACES_TAKE)?
            .execute(params![pool, runner, n, until])?;
        Ok(())
    }

    fn pool_places_give(&mut self, pool: &str, runner: &str, n: i64) -> Result<()> {
        self.conn
            .prepare_cached(PLACES_GIVE)?
            .execute(params![pool, runner, n])?;
        Ok(())
    }

    fn pool_places_forget(&mut self, runner: &str) -> Result<()> {
        self.conn
            .prepare_cached(PLACES_FORGET)?
            .execute(params![runner])?;
        Ok(())
    }

    fn pool_extend_hold(&mut self, pool: &str, hold: &PoolHold) -> Result<()> {
        self.conn
            .prepare_cached(EXTEND_HOLD)?
            .execute(params![pool, hold.until, hold.batch, hold.key])?;
        Ok(())
    }

    fn pool_clear_hold(&mut self, pool: &str) -> Result<()> {
        self.conn.prepare_cached(CLEAR_HOLD)?.execute([pool])?;
        Ok(())
    }

    fn usage_item_append(&mut self, batch: &str, key: &str, lines: &str) -> Result<()> {
        self.conn
            .prepare_cached(ITEM_APPEND)?
            .execute(params![batch, key, lines])?;
        Ok(())
    }

    fn usage_run_add(&mut self, run: i64, u: &UsageSum) -> Result<()> {
        self.conn.prepare_cached(RUN_ADD)?.execute(params![
            run,
            u.attempts,
            u.input_tokens,
            u.output_tokens,
            u.unreported,
            u.estimated_tokens,
            u.reported_estimate
        ])?;
        Ok(())
    }

    fn usage_pool_add(&mut self, pool: &str, minute: i64, u: &UsageSum) -> Result<()> {
        self.conn.prepare_cached(POOL_ADD)?.execute(params![
            pool,
            minute,
            u.attempts,
            u.input_tokens,
            u.output_tokens,
            u.unreported,
            u.estimated_tokens
        ])?;
        Ok(())
    }
}
