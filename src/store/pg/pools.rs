//! Limit pools and token usage (see the SQLite store's `pools`). Times
//! are moved by the clock offset; a bucket's time is in microseconds. A
//! pool's minute is by the settling runner's clock (a minute's sum does
//! not need the offset).

use postgres::Row;

use super::PgTx;
use super::conn::{Conn, text};
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
 WHERE h.pool = $1";
const TAT: &str = "SELECT tat_us FROM pool_dims WHERE pool = $1 AND dim = $2";
const IN_FLIGHT: &str =
    "SELECT coalesce(sum(n), 0)::int8 FROM pool_places WHERE pool = $1 AND until_ms > $2";
const MINUTES: &str = "SELECT minute, calls, input_tokens, output_tokens, unreported,
    estimated_tokens FROM pool_usage WHERE pool = $1 AND minute >= $2 ORDER BY minute";
const RUN: &str = "SELECT attempts, input_tokens, output_tokens, unreported, estimated_tokens,
    reported_estimate FROM run_usage WHERE run_id = $1";
const ITEM: &str = "SELECT i.usage FROM batches b JOIN item_keys k ON k.batch_id = b.id
       JOIN items i ON i.id = k.item_id
    WHERE b.name = $1 AND k.key = $2";
const LOCK_ROW: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES ($1, '*', 0)
    ON CONFLICT (pool, dim) DO NOTHING";
const LOCK: &str = "SELECT 1 FROM pool_dims WHERE pool = $1 AND dim = '*' FOR UPDATE";
const SET_TAT: &str = "INSERT INTO pool_dims (pool, dim, tat_us) VALUES ($1, $2, $3)
    ON CONFLICT (pool, dim) DO UPDATE SET tat_us = excluded.tat_us";
const SHIFT_TAT: &str = "UPDATE pool_dims SET tat_us = tat_us + $3 WHERE pool = $1 AND dim = $2";
const PLACES_EXPIRE: &str = "DELETE FROM pool_places WHERE pool = $1 AND until_ms <= $2";
const PLACES_TAKE: &str = "INSERT INTO pool_places (pool, runner, n, until_ms)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (pool, runner) DO UPDATE SET n = pool_places.n + excluded.n,
        until_ms = greatest(pool_places.until_ms, excluded.until_ms)";
const PLACES_GIVE: &str =
    "UPDATE pool_places SET n = greatest(n - $3, 0) WHERE pool = $1 AND runner = $2";
const PLACES_FORGET: &str = "DELETE FROM pool_places WHERE runner = $1";
const EXTEND_HOLD: &str =
    "INSERT INTO pool_holds (pool, until_ms, batch, key) VALUES ($1, $2, $3, $4)
    ON CONFLICT (pool) DO UPDATE SET until_ms = excluded.until_ms, batch = excluded.batch,
        key = excluded.key
    WHERE excluded.until_ms > pool_holds.until_ms";
const CLEAR_HOLD: &str = "DELETE FROM pool_holds WHERE pool = $1";
const ITEM_APPEND: &str = "UPDATE items SET usage = coalesce(usage || E'\\n', '') || $3
    WHERE id = (SELECT k.item_id FROM batches b JOIN item_keys k ON k.batch_id = b.id
                 WHERE b.name = $1 AND k.key = $2)";
const RUN_ADD: &str = "INSERT INTO run_usage (run_id, attempts, input_tokens, output_tokens,
    unreported, estimated_tokens, reported_estimate) VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (run_id) DO UPDATE SET attempts = run_usage.attempts + excluded.attempts,
        input_tokens = run_usage.input_tokens + excluded.input_tokens,
        output_tokens = run_usage.output_tokens + excluded.output_tokens,
        unreported = run_usage.unreported + excluded.unreported,
        estimated_tokens = run_usage.estimated_tokens + excluded.estimated_tokens,
        reported_estimate = run_usage.reported_estimate + excluded.reported_estimate";
const POOL_ADD: &str = "INSERT INTO pool_usage (pool, minute, calls, input_tokens,
    output_tokens, unreported, estimated_tokens) VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (pool, minute) DO UPDATE SET calls = pool_usage.calls + excluded.calls,
        input_tokens = pool_usage.input_tokens + excluded.input_tokens,
        output_tokens = pool_usage.output_tokens + excluded.output_tokens,
        unreported = pool_usage.unreported + excluded.unreported,
        estimated_tokens = pool_usage.estimated_tokens + excluded.estimated_tokens";

fn sum_at(r: &Row, i: usize) -> UsageSum {
    UsageSum {
        attempts: r.get(i),
        input_tokens: r.get(i + 1),
        output_tokens: r.get(i + 2),
        unreported: r.get(i + 3),
        estimated_tokens: r.get(i + 4),
        reported_estimate: 0,
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
            label: r.get(3),
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

    fn pool_minutes(&mut self, pool: &str, since: i64) -> Result<Vec<(i64, UsageSum)>> {
        Ok(self
            .c
            .q(MINUTES, &[&pool, &since])?
            .iter()
            .map(|r| (r.get(0), sum_at(r, 1)))
            .collect())
    }

    fn usage_of_run(&mut self, run: i64) -> Result<UsageSum> {
        Ok(self
            .c
            .opt(RUN, &[&run])?
            .map(|r| UsageSum {
                reported_estimate: r.get(5),
                ..sum_at(&r, 0)
            })
            .unwrap_or_default())
    }

    fn usage_of_item(&mut self, batch: &str, key: &str) -> Result<Option<String>> {
        Ok(self
            .c
            .opt(ITEM, &[&text(batch), &text(key)])?
            .and_then(|r| r.get(0)))
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

    fn pool_places_expire(&mut self, pool: &str, now: Millis) -> Result<()> {
        let now = self.c.tin(now);
        self.c.x(PLACES_EXPIRE, &[&pool, &now])?;
        Ok(())
    }

    fn pool_places_take(&mut self, pool: &str, runner: &str, n: i64, until: Millis) -> Result<()> {
        let until = self.c.tin(until);
        self.c.x(PLACES_TAKE, &[&pool, &text(runner), &n, &until])?;
        Ok(())
    }

    fn pool_places_give(&mut self, pool: &str, runner: &str, n: i64) -> Result<()> {
        self.c.x(PLACES_GIVE, &[&pool, &text(runner), &n])?;
        Ok(())
    }

    fn pool_places_forget(&mut self, runner: &str) -> Result<()> {
        self.c.x(PLACES_FORGET, &[&text(runner)])?;
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

    fn usage_item_append(&mut self, batch: &str, key: &str, lines: &str) -> Result<()> {
        self.c
            .x(ITEM_APPEND, &[&text(batch), &text(key), &text(lines)])?;
        Ok(())
    }

    fn usage_run_add(&mut self, run: i64, u: &UsageSum) -> Result<()> {
        self.c.x(
            RUN_ADD,
            &[
                &run,
                &u.attempts,
                &u.input_tokens,
                &u.output_tokens,
                &u.unreported,
                &u.estimated_tokens,
                &u.reported_estimate,
            ],
        )?;
        Ok(())
    }

    fn usage_pool_add(&mut self, pool: &str, minute: i64, u: &UsageSum) -> Result<()> {
        self.c.x(
            POOL_ADD,
            &[
                &pool,
                &minute,
                &u.attempts,
                &u.input_tokens,
                &u.output_tokens,
                &u.unreported,
                &u.estimated_tokens,
            ],
        )?;
        Ok(())
    }
}
