//! Statements on limit pools and token usage.

use super::sql::{Arg, Sql};
use crate::model::Millis;
use crate::store::Result;
use crate::store::api::{PoolHold, UsageSum};

/// The claim's call deferred: its item waits for its place (the first
/// deferral's time kept). Its lease token fences a claim taken back.
const ITEM_POOL_WAITS: &str = "UPDATE items SET pool_wait_since = ?3
  WHERE id = ?1 AND lease_token = ?2 AND status = 'claimed' AND pool_wait_since IS NULL";
/// The call deferred before has its place.
const ITEM_POOL_PLACED: &str = "UPDATE items SET pool_wait_since = NULL
  WHERE id = ?1 AND pool_wait_since IS NOT NULL";

/// Each runner's places in flight in a pool, not lapsed at `?2`.
const PLACES: &str = "SELECT runner, n, until_ms FROM pool_places
  WHERE pool = ?1 AND n > 0 AND until_ms > ?2 ORDER BY runner";

pub(crate) trait PoolsRead: Sql {
    /// Each runner's places in flight in the pool, not lapsed at `now`:
    /// (its place key, how many, when they lapse).
    fn pool_places(&mut self, pool: &str, now: Millis) -> Result<Vec<(String, i64, Millis)>> {
        let args = [Arg::Text(pool), Arg::Time(now)];
        super::sql::all(self, PLACES, &args, |r| {
            Ok((r.text(0)?, r.int(1)?, r.time(2)?))
        })
    }

    /// The pool's retry-after hold, over or not.
    fn pool_hold(&mut self, pool: &str) -> Result<Option<PoolHold>>;
    /// A dimension's theoretical arrival time (µs on the caller's clock),
    /// `None` for a bucket never drawn from.
    fn pool_tat(&mut self, pool: &str, dim: &str) -> Result<Option<i64>>;
    /// Places in flight, over every runner, that have not lapsed at `now`.
    fn pool_in_flight(&mut self, pool: &str, now: Millis) -> Result<i64>;
    /// The pool's settled calls per minute (minutes since the epoch), from
    /// minute `since` on, in minute order.
    fn pool_minutes(&mut self, pool: &str, since: i64) -> Result<Vec<(i64, UsageSum)>>;
    fn usage_of_run(&mut self, run: i64) -> Result<UsageSum>;
    /// The item's attempts' usage lines (`None`: no item or none).
    fn usage_of_item(&mut self, batch: &str, key: &str) -> Result<Option<String>>;
}

pub(crate) trait PoolsWrite: Sql {
    /// Locks the pool until commit (its lock row made if missing): every
    /// admission and settlement of the pool, on any runner, takes turns.
    fn pool_locked(&mut self, pool: &str) -> Result<()>;
    fn pool_set_tat(&mut self, pool: &str, dim: &str, tat_us: i64) -> Result<()>;
    /// Moves a drawn bucket's time by `delta_us` (a settlement).
    fn pool_shift_tat(&mut self, pool: &str, dim: &str, delta_us: i64) -> Result<()>;
    /// Forgets the places of runners whose places lapsed at `now`.
    fn pool_places_expire(&mut self, pool: &str, now: Millis) -> Result<()>;
    /// `runner` takes `n` more places, held at least until `until`.
    fn pool_places_take(&mut self, pool: &str, runner: &str, n: i64, until: Millis) -> Result<()>;
    /// `runner` gives `n` places back.
    fn pool_places_give(&mut self, pool: &str, runner: &str, n: i64) -> Result<()>;
    /// Forgets every place `runner` holds, in every pool.
    fn pool_places_forget(&mut self, runner: &str) -> Result<()>;
    /// Never shortens a hold on.
    fn pool_extend_hold(&mut self, pool: &str, hold: &PoolHold) -> Result<()>;
    fn pool_clear_hold(&mut self, pool: &str) -> Result<()>;
    /// Appends usage lines to the item's.
    fn usage_item_append(&mut self, batch: &str, key: &str, lines: &str) -> Result<()>;
    fn usage_run_add(&mut self, run: i64, sum: &UsageSum) -> Result<()>;
    fn usage_pool_add(&mut self, pool: &str, minute: i64, sum: &UsageSum) -> Result<()>;

    /// The claimed item `id` (lease `token`) waits for its place since `at`.
    fn item_pool_waits(&mut self, id: i64, token: i64, at: Millis) -> Result<()> {
        let args = [Arg::Int(id), Arg::Int(token), Arg::Time(at)];
        self.exec(ITEM_POOL_WAITS, &args)?;
        Ok(())
    }

    /// The item `id` waits for its place no more.
    fn item_pool_placed(&mut self, id: i64) -> Result<()> {
        self.exec(ITEM_POOL_PLACED, &[Arg::Int(id)])?;
        Ok(())
    }
}

/// Per-minute sums (`(minute, tokens)`, minutes since the epoch) laid out
/// over the `minutes` minutes ending with the one of `now`.
pub(crate) fn fill_minutes(rows: &[(i64, i64)], now: Millis, minutes: i64) -> Vec<i64> {
    let last = now.div_euclid(60_000);
    let first = last - minutes + 1;
    let mut out = vec![0; usize::try_from(minutes.max(0)).unwrap_or(0)];
    for &(m, n) in rows {
        if let Ok(i) = usize::try_from(m - first)
            && let Some(slot) = out.get_mut(i)
        {
            *slot += n;
        }
    }
    out
}
