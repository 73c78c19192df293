//! Statements on limit pools and token usage.

use crate::model::Millis;
use crate::store::Result;
use crate::store::api::{AttemptUsage, PoolHold, UsageSum};

pub(crate) trait PoolsRead {
    /// The pool's retry-after hold, over or not.
    fn pool_hold(&mut self, pool: &str) -> Result<Option<PoolHold>>;
    /// A dimension's theoretical arrival time (µs on the caller's clock),
    /// `None` for a bucket never drawn from.
    fn pool_tat(&mut self, pool: &str, dim: &str) -> Result<Option<i64>>;
    /// Calls in flight whose places have not lapsed at `now`.
    fn pool_in_flight(&mut self, pool: &str, now: Millis) -> Result<i64>;
    /// Tokens drawn per minute for the last `minutes` minutes ending with
    /// the one of `now`, oldest first (zeros included).
    fn pool_minute_tokens(&mut self, pool: &str, now: Millis, minutes: i64) -> Result<Vec<i64>>;
    /// The pool's attempts since `since`.
    fn usage_of_pool(&mut self, pool: &str, since: Millis) -> Result<UsageSum>;
    fn usage_of_run(&mut self, run: i64) -> Result<UsageSum>;
    /// Every attempt of one item, oldest first.
    fn usage_of_item(&mut self, batch: &str, key: &str) -> Result<Vec<AttemptUsage>>;
}

pub(crate) trait PoolsWrite {
    /// Locks the pool until commit (its lock row made if missing): every
    /// admission and settlement of the pool, on any runner, takes turns.
    fn pool_locked(&mut self, pool: &str) -> Result<()>;
    fn pool_set_tat(&mut self, pool: &str, dim: &str, tat_us: i64) -> Result<()>;
    /// Moves a drawn bucket's time by `delta_us` (a settlement).
    fn pool_shift_tat(&mut self, pool: &str, dim: &str, delta_us: i64) -> Result<()>;
    /// Forgets the calls whose places lapsed at `now`.
    fn pool_calls_expire(&mut self, pool: &str, now: Millis) -> Result<()>;
    fn pool_call_insert(&mut self, pool: &str, call: &str, until: Millis) -> Result<()>;
    fn pool_call_delete(&mut self, pool: &str, call: &str) -> Result<()>;
    /// Never shortens a hold on.
    fn pool_extend_hold(&mut self, pool: &str, hold: &PoolHold) -> Result<()>;
    fn pool_clear_hold(&mut self, pool: &str) -> Result<()>;
    fn usage_insert(&mut self, usage: &AttemptUsage) -> Result<()>;
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
