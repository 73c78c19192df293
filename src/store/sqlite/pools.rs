//! Limit pools and token usage.

use rusqlite::{OptionalExtension, Row, params};

use super::SqliteTx;
use crate::model::Millis;
use crate::store::Result;
use crate::store::api::{AttemptUsage, PoolHold, UsageSum};
use crate::store::dialect::{PoolsRead, PoolsWrite};

const HOLD: &str = "SELECT until_ms, batch, key FROM pool_holds WHERE pool = ?1";
const TAT: &str = "SELECT tat_us FROM pool_dims WHERE pool = ?1 AND dim = ?2";
const IN_FLIGHT: &str = "SELECT count(*) FROM pool_calls WHERE pool = ?1 AND until_ms > ?2";
const MINUTES: &str = concat!(
    "SELECT at / 60000 AS m, sum(",
    "CASE WHEN input_tokens IS NULL AND output_tokens IS NULL
    THEN estimate ELSE coalesce(input_tokens, 0) + coalesce(output_tokens, 0) END",
    ") FROM usage WHERE pool = ?1 AND at >= ?2 GROUP BY m"
);
const SUM_COLUMNS: &str = "count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0),
    coalesce(sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END), 0),
    coalesce(sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN estimate ELSE 0 END), 0)";
const ITEM: &str =
    "SELECT batch, run_id, key, attempt, pool, at, estimate, input_tokens, output_tokens
    FROM usage WHERE batch = ?1 AND key = ?2 ORDER BY id";
const LOCK: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES (?1, '*', 0)
    ON CONFLICT (pool, dim) DO NOTHING";
const SET_TAT: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES (?1, ?2, ?3)
    ON CONFLICT (pool, dim) DO UPDATE SET tat_us = excluded.tat_us";
const SHIFT_TAT: &str = "UPDATE pool_dims SET tat_us = tat_us + ?3 WHERE pool = ?1 AND dim = ?2";
const CALLS_EXPIRE: &str = "DELETE FROM pool_calls WHERE pool = ?1 AND until_ms <= ?2";
const CALL_INSERT: &str = "INSERT INTO pool_calls (pool, call, until_ms) VALUES (?1, ?2, ?3)
    ON CONFLICT (pool, call) DO UPDATE SET until_ms = excluded.until_ms";
const CALL_DELETE: &str = "DELETE FROM pool_calls WHERE pool = ?1 AND call = ?2";
const EXTEND_HOLD: &str =
    "INSERT INTO pool_holds (pool, until_ms, batch, key) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (pool) DO UPDATE SET until_ms = excluded.until_ms, batch = excluded.batch,
        key = excluded.key
    WHERE excluded.until_ms > pool_holds.until_ms";
const CLEAR_HOLD: &str = "DELETE FROM pool_holds WHERE pool = ?1";
const USAGE_INSERT: &str = "INSERT INTO usage (batch, run_id, key, attempt, pool, at, estimate,
    input_tokens, output_tokens) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

fn sum_from_row(r: &Row<'_>) -> rusqlite::Result<UsageSum> {
    Ok(UsageSum {
        attempts: r.get(0)?,
        input_tokens: r.get(1)?,
        output_tokens: r.get(2)?,
        unreported: r.get(3)?,
        estimated_tokens: r.get(4)?,
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

    fn pool_minute_tokens(&mut self, pool: &str, now: Millis, minutes: i64) -> Result<Vec<i64>> {
        let since = (now.div_euclid(60_000) - minutes + 1) * 60_000;
        let mut st = self.conn.prepare_cached(MINUTES)?;
        let rows: Vec<(i64, i64)> = st
            .query_map(params![pool, since], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(crate::store::dialect::fill_minutes(&rows, now, minutes))
    }

    fn usage_of_pool(&mut self, pool: &str, since: Millis) -> Result<UsageSum> {
        let sql = format!("SELECT {SUM_COLUMNS} FROM usage WHERE pool = ?1 AND at >= ?2");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row(params![pool, since], sum_from_row)?)
    }

    fn usage_of_run(&mut self, run: i64) -> Result<UsageSum> {
        let sql = format!("SELECT {SUM_COLUMNS} FROM usage WHERE run_id = ?1");
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_row([run], sum_from_row)?)
    }

    fn usage_of_item(&mut self, batch: &str, key: &str) -> Result<Vec<AttemptUsage>> {
        let mut st = self.conn.prepare_cached(ITEM)?;
        let rows = st
            .query_map([batch, key], |r| {
                Ok(AttemptUsage {
                    batch: r.get(0)?,
                    run_id: r.get(1)?,
                    key: r.get(2)?,
                    attempt: r.get(3)?,
                    pool: r.get(4)?,
                    call: None,
                    at: r.get(5)?,
                    estimate: r.get(6)?,
                    input_tokens: r.get(7)?,
                    output_tokens: r.get(8)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
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

    fn pool_calls_expire(&mut self, pool: &str, now: Millis) -> Result<()> {
        self.conn
            .prepare_cached(CALLS_EXPIRE)?
            .execute(params![pool, now])?;
        Ok(())
    }

    fn pool_call_insert(&mut self, pool: &str, call: &str, until: Millis) -> Result<()> {
        self.conn
            .prepare_cached(CALL_INSERT)?
            .execute(params![pool, call, until])?;
        Ok(())
    }

    fn pool_call_delete(&mut self, pool: &str, call: &str) -> Result<()> {
        self.conn
            .prepare_cached(CALL_DELETE)?
            .execute(params![pool, call])?;
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

    fn usage_insert(&mut self, u: &AttemptUsage) -> Result<()> {
        self.conn.prepare_cached(USAGE_INSERT)?.execute(params![
            u.batch,
            u.run_id,
            u.key,
            u.attempt,
            u.pool,
            u.at,
            u.estimate,
            u.input_tokens,
            u.output_tokens
        ])?;
        Ok(())
    }
}
