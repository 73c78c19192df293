//! How the views say a budget (`runner::budget`): `status` (a line per
//! budget), `--json` (`budget: {limit, spent, window_end}`) and `show`.

use serde_json::{Value, json};

use crate::model::Millis;
use crate::runner::budget::{self, BudgetState};
use crate::store::{SpendScope, Store};
use crate::util::time::rfc3339;

/// `{"limit": 20.0, "spent": 12.4, "window_end": "…", "period": "day",
/// "reached": false, "attempts": 31}`.
pub fn budget_json(s: &BudgetState) -> Value {
    json!({
        "limit": s.limit,
        "spent": s.spent,
        "window_end": rfc3339(s.window_end),
        "period": crate::config::budget::period_word(s.period),
        "reached": s.reached,
        "attempts": s.attempts,
    })
}

/// The batch's own budget and its pool's, as they stand at `now`.
pub fn of_batch(
    ctx: &super::Ctx,
    store: &Store,
    batch: &str,
    now: Millis,
) -> anyhow::Result<Vec<BudgetState>> {
    match ctx.config.batch(batch) {
        Some(cfg) => Ok(budget::states(store, cfg, now)?),
        None => Ok(Vec::new()),
    }
}

/// The batch's own budget as `--json` gives it (`null` without one).
pub fn batch_json(states: &[BudgetState]) -> Value {
    states
        .iter()
        .find(|s| s.scope == SpendScope::Batch)
        .map_or(Value::Null, budget_json)
}

/// A pool's budget as `--json` gives it (`null` without one).
pub fn pool_json(
    ctx: &super::Ctx,
    store: &Store,
    pool: &str,
    now: Millis,
) -> anyhow::Result<Value> {
    let Some(p) = ctx.config.limits.get(pool) else {
        return Ok(Value::Null);
    };
    Ok(budget::pool_state(store, p, now)?.map_or(Value::Null, |s| budget_json(&s)))
}

/// One line per budget: `budget $12.40 of $20.00 today, resets 00:00Z`.
pub fn lines(states: &[BudgetState], now: Millis) -> Vec<String> {
    states.iter().map(|s| s.describe(now)).collect()
}
