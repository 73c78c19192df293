//! Limit pools and token usage (see the SQLite store's `pools`). Times
//! are moved by the clock offset; a bucket's time is in microseconds.

use postgres::Row;

use super::PgTx;
use super::conn::{Conn, text};
use crate::model::Millis;
use crate::store::Result;
use crate::store::api::{AttemptUsage, PoolHold, UsageSum};
use crate::store::dialect::{PoolsRead, PoolsWrite};

const HOLD: &str = "SELECT until_ms, batch, key FROM pool_holds WHERE pool = $1";
const TAT: &str = "SELECT tat_us FROM pool_dims WHERE pool = $1 AND dim = $2";
const IN_FLIGHT: &str = "SELECT count(*) FROM pool_calls WHERE pool = $1 AND until_ms > $2";
const MINUTES: &str =
    "SELECT (at - $3) / 60000 AS m, sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL
    THEN estimate ELSE coalesce(input_tokens, 0) + coalesce(output_tokens, 0) END)::int8
    FROM usage WHERE pool = $1 AND at >= $2 GROUP BY m";
const SUM_COLUMNS: &str = "count(*), coalesce(sum(input_tokens), 0)::int8, coalesce(sum(output_tokens), 0)::int8,
    coalesce(sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN 1 ELSE 0 END), 0)::int8,
    coalesce(sum(CASE WHEN input_tokens IS NULL AND output_tokens IS NULL THEN estimate ELSE 0 END), 0)::int8";
const ITEM: &str =
    "SELECT batch, run_id, key, attempt, pool, at, estimate, input_tokens, output_tokens
    FROM usage WHERE batch = $1 AND key = $2 ORDER BY id";
const LOCK_ROW: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES ($1, '*', 0)
    ON CONFLICT (pool, dim) DO NOTHING";
const LOCK: &str = "SELECT 1 FROM pool_dims WHERE pool = $1 AND dim = '*' FOR UPDATE";
const SET_TAT: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES ($1, $2, $3)
    ON CONFLICT (pool, dim) DO UPDATE SET tat_us = excluded.tat_us";
const SHIFT_TAT: &str = "UPDATE pool_dims SET tat_us = tat_us + $3 WHERE pool = $1 AND dim = $2";
const CALLS_EXPIRE: &str = "DELETE FROM pool_calls WHERE pool = $1 AND until_ms <= $2";
const CALL_INSERT: &str = "INSERT INTO pool_calls (pool, call, until_ms) VALUES ($1, $2, $3)
    ON CONFLICT (pool, call) DO UPDATE SET until_ms = excluded.until_ms";
const CALL_DELETE: &str = "DELETE FROM pool_calls WHERE pool = $1 AND call = $2";
const EXTEND_HOLD: &str =
    "INSERT INTO pool_holds (pool, until_ms, batch, key) VALUES ($1, $2, $3, $4)
    ON CONFLICT (pool) DO UPDATE SET until_ms = excluded.until_ms, batch = excluded.batch,
        key = excluded.key
    WHERE excluded.until_ms > pool_holds.until_ms";
const CLEAR_HOLD: &str = "DELETE FROM pool_holds WHERE pool = $1";
const USAGE_INSERT: &str = "INSERT INTO usage (batch, run_id, key, attempt, pool, at, estimate,
    input_tokens, output_tokens) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

fn sum_from_row(r: &Row) -> UsageSum {
    UsageSum {
        attempts: r.get(0),
        input_tokens: r.get(1),
        output_tokens: r.get(2),
        unreported: r.get(3),
        estimated_tokens: r.get(4),
    }
}

/// The clock offset in microseconds.
fn off_us(c: &Conn) -> i64 {
    c.tin(0).saturating_mul(1000)
}

impl PoolsRead for PgTx<'_> {
    fn pool_hold(&mut self, pool: &str) -> Result<Option<PoolHold>> {
        let c = &mut *self.c;
        Ok(c.opt(HOLD, &[&pool])?.map(|r| PoolHold {
            until: c.tout(r.get(0)),
            batch: r.get(1),
            key: r.get(2),
        }))
    }

    fn pool_tat(&mut self, pool: &str, dim: &str) -> Result<Option<i64>> {
        let c = &mut *self.c;
        let off = off_us(c);
        Ok(c.opt(TAT, &[&pool, &dim])?
            .map(|r| r.get::<_, i64>(0).saturating_sub(off)))
    }

    fn pool_in_flight(&mut self, pool: &str, now: Millis) -> Result<i64> {
        let c = &mut *self.c;
        let now = c.tin(now);
        Ok(c.one(IN_FLIGHT, &[&pool, &now])?.get(0))
    }

    fn pool_minute_tokens(&mut self, pool: &str, now: Millis, minutes: i64) -> Result<Vec<i64>> {
        let c = &mut *self.c;
        let since = c.tin((now.div_euclid(60_000) - minutes + 1) * 60_000);
        let off = c.tin(0);
        let rows: Vec<(i64, i64)> = c
            .q(MINUTES, &[&pool, &since, &off])?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        Ok(crate::store::dialect::fill_minutes(&rows, now, minutes))
    }

    fn usage_of_pool(&mut self, pool: &str, since: Millis) -> Result<UsageSum> {
        let c = &mut *self.c;
        let since = c.tin(since);
        let sql = format!("SELECT {SUM_COLUMNS} FROM usage WHERE pool = $1 AND at >= $2");
        Ok(sum_from_row(&c.one(&sql, &[&pool, &since])?))
    }

    fn usage_of_run(&mut self, run: i64) -> Result<UsageSum> {
        let sql = format!("SELECT {SUM_COLUMNS} FROM usage WHERE run_id = $1");
        Ok(sum_from_row(&self.c.one(&sql, &[&run])?))
    }

    fn usage_of_item(&mut self, batch: &str, key: &str) -> Result<Vec<AttemptUsage>> {
        let c = &mut *self.c;
        let rows = c.q(ITEM, &[&text(batch), &text(key)])?;
        Ok(rows
            .iter()
            .map(|r| AttemptUsage {
                batch: r.get(0),
                run_id: r.get(1),
                key: r.get(2),
                attempt: r.get(3),
                pool: r.get(4),
                call: None,
                at: c.tout(r.get(5)),
                estimate: r.get(6),
                input_tokens: r.get(7),
                output_tokens: r.get(8),
            })
            .collect())
    }
}

impl PoolsWrite for PgTx<'_> {
    fn pool_locked(&mut self, pool: &str) -> Result<()> {
        self.c.x(LOCK_ROW, &[&pool])?;
        self.c.q(LOCK, &[&pool])?;
        Ok(())
    }

    fn pool_set_tat(&mut self, pool: &str, dim: &str, tat_us: i64) -> Result<()> {
        let tat = tat_us.saturating_add(off_us(self.c));
        self.c.x(SET_TAT, &[&pool, &dim, &tat])?;
        Ok(())
    }

    fn pool_shift_tat(&mut self, pool: &str, dim: &str, delta_us: i64) -> Result<()> {
        self.c.x(SHIFT_TAT, &[&pool, &dim, &delta_us])?;
        Ok(())
    }

    fn pool_calls_expire(&mut self, pool: &str, now: Millis) -> Result<()> {
        let now = self.c.tin(now);
        self.c.x(CALLS_EXPIRE, &[&pool, &now])?;
        Ok(())
    }

    fn pool_call_insert(&mut self, pool: &str, call: &str, until: Millis) -> Result<()> {
        let until = self.c.tin(until);
        self.c.x(CALL_INSERT, &[&pool, &call, &until])?;
        Ok(())
    }

    fn pool_call_delete(&mut self, pool: &str, call: &str) -> Result<()> {
        self.c.x(CALL_DELETE, &[&pool, &call])?;
        Ok(())
    }

    fn pool_extend_hold(&mut self, pool: &str, hold: &PoolHold) -> Result<()> {
        let until = self.c.tin(hold.until);
        let (batch, key) = (text(&hold.batch), hold.key.as_deref().map(text));
        self.c.x(EXTEND_HOLD, &[&pool, &until, &batch, &key])?;
        Ok(())
    }

    fn pool_clear_hold(&mut self, pool: &str) -> Result<()> {
        self.c.x(CLEAR_HOLD, &[&pool])?;
        Ok(())
    }

    fn usage_insert(&mut self, u: &AttemptUsage) -> Result<()> {
        let at = self.c.tin(u.at);
        let (batch, key) = (text(&u.batch), text(&u.key));
        self.c.x(
            USAGE_INSERT,
            &[
                &batch,
                &u.run_id,
                &key,
                &u.attempt,
                &u.pool,
                &at,
                &u.estimate,
                &u.input_tokens,
                &u.output_tokens,
            ],
        )?;
        Ok(())
    }
}
