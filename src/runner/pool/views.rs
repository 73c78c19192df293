//! The pool as every view judges it, with or without a runner: the
//! store's form of a `[limit.NAME]` table, the tokens a batch's call
//! reserves, whether a pool has room for it, and the words for a full
//! rate and a hold that stays.

use crate::config::limits::LimitPool;
use crate::config::{BatchConfig, Config};
use crate::model::Millis;
use crate::model::waiting::RateLimited;
use crate::store::{PoolDim, PoolDimView, PoolHold, PoolSpec, PoolView};
use crate::util::time::utc_clock;

/// The store's form of a `[limit.NAME]` table.
pub fn spec(pool: &LimitPool) -> PoolSpec {
    PoolSpec {
        name: pool.name.clone(),
        dims: pool
            .limits
            .iter()
            .map(|l| PoolDim {
                name: l.dimension(),
                measure: l.measure,
                count: i64::try_from(l.rate.count).unwrap_or(i64::MAX),
                per_us: i64::try_from(l.rate.per.as_micros()).unwrap_or(i64::MAX),
            })
            .collect(),
        concurrency: pool.concurrency,
    }
}

/// The tokens a call of the batch reserves from its pool when its item
/// names none (`token_estimate`): what the views judge the pool's room
/// by for it. (An item's `estimate_field` may ask for more or less.)
#[must_use]
pub fn call_estimate(cfg: &BatchConfig) -> i64 {
    reserved(cfg.token_estimate)
}

/// The largest call of the batches drawing from `pool`: a pool with no
/// room for it is full for some batch of it, which its views say.
#[must_use]
pub fn largest_call(config: &Config, pool: &str) -> i64 {
    config
        .batches
        .values()
        .filter(|b| b.pool.as_ref().is_some_and(|p| p.name == pool))
        .map(call_estimate)
        .max()
        .unwrap_or(0)
}

/// A rate that has no room for a call reserving `estimate` tokens, in
/// words: `full`, or for a token rate `full for 1200-token calls` (a
/// smaller call may still fit). `num` writes the number as the view does.
pub fn full_words(d: &PoolDimView, estimate: i64, num: impl Fn(i64) -> String) -> String {
    match d.units(estimate) {
        units if units > 1 => format!("full for {}-token calls", num(units)),
        _ => "full".to_string(),
    }
}

/// Tokens reserved for a call asking `n` (none: nothing), within the
/// bound a setting may give.
pub(super) fn reserved(n: Option<u64>) -> i64 {
    let n = n.unwrap_or(0);
    i64::try_from(n.min(crate::config::fields::MAX_TOKEN_ESTIMATE.unsigned_abs())).unwrap_or(0)
}

/// A pool with no room at `now` for a call reserving `estimate` tokens,
/// as a waiting reason: held, every place in flight taken, or a rate
/// whose bucket cannot take the call (the last of them to open is named:
/// the call waits for every one).
pub fn limited(view: &PoolView, estimate: i64, now: Millis) -> Option<RateLimited> {
    let named = |dimension: &str, next_slot| RateLimited {
        pool: view.name.clone(),
        dimension: dimension.to_string(),
        next_slot,
    };
    if let Some(h) = view.hold.as_ref().filter(|h| h.until > now) {
        return Some(named(crate::model::waiting::POOL_HOLD, Some(h.until)));
    }
    if view
        .concurrency
        .is_some_and(|c| view.in_flight >= i64::from(c))
    {
        return Some(named("concurrency", None));
    }
    view.dims
        .iter()
        .filter_map(|d| d.next_slot(estimate, now).map(|t| (t, d)))
        .max_by_key(|(t, _)| *t)
        .map(|(t, d)| named(&d.dimension, Some(t)))
}

/// What `unpause` (and the dashboard's unpause and run keys) say of a
/// pool hold still on: it is not lifted. A retry-after is the provider's
/// word on the whole account the pool stands for, shared with every batch
/// of the pool; lifting it from one batch would only earn every batch of
/// the pool another 429.
pub fn hold_stays(pool: &str, hold: &PoolHold, now: Millis) -> String {
    format!(
        "its pool {} stays held until {} by a retry-after from {}: the provider's limit for \
         every batch of the pool, not lifted here; it ends by itself",
        crate::util::sanitize::line(pool),
        utc_clock(hold.until, now),
        crate::util::sanitize::line(&hold.batch)
    )
}
