//! Budgets that pause, not kill (`budget = "20.0/day"` on a batch or its
//! `[limit.NAME]` pool).
//!
//! # Design
//!
//! The spend is a ledger in the store (`store::ops::budgets`): one sum per
//! budget and UTC-aligned window (`config::budget`), added to by every
//! attempt that reports a cost, failed and retried ones included, on every
//! runner of the store. The add is queued to the writer without waiting,
//! so it commits in the writer's next group: the call waits for no
//! transaction of its own. (A runner killed in between loses that one
//! attempt's cost: the ledger can under-count by the calls of a crash.) The run keeps what it knows of each window's
//! sum (the store's at the start and each heartbeat, plus its own adds), so
//! the gate asks no store at a claim; another runner's spend is seen
//! within a heartbeat.
//!
//! At the budget the gate holds every call (first calls and retries) until
//! the window ends; calls in flight finish. The hold is a fact of the
//! ledger, not a row of its own: every view derives it from the spend and
//! the config ([`states`]), and a `budget` event records when it began.

use std::sync::Mutex;

use serde::Serialize;
use serde_json::json;

use super::cycle::Cycle;
use crate::config::BatchConfig;
use crate::config::budget::{Budget, window_word};
use crate::model::{EventKind, Millis};
use crate::store::{SpendAdd, SpendKey, SpendScope, Spent, Store, StoreError};
use crate::util::money::money;
use crate::util::money::{Carry, from_micros};
use crate::util::time::{now_ms, rfc3339, utc_clock};

/// One budget of a batch, with its window's spend as the run knows it.
struct Tracked {
    scope: SpendScope,
    name: String,
    /// As the config file says it now (`follow`); `None`: taken out of it.
    budget: Mutex<Option<Budget>>,
    /// The window's start and its spend (millionths).
    known: Mutex<(Millis, i64)>,
}

impl Tracked {
    fn budget(&self) -> Option<Budget> {
        *self.budget.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The budgets a batch is under: its own and its pool's.
pub struct Budgets {
    tracked: Vec<Tracked>,
    /// The window whose hold was announced, per budget (one event each).
    announced: Mutex<Vec<Option<Millis>>>,
    /// What the costs left below a millionth (`Carry`): the ledger sums
    /// millionths.
    carry: Carry,
}

/// A budget as the views show it: whose, how much of it is spent in the
/// window now, when the window ends; `reached` when no call starts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetState {
    pub scope: SpendScope,
    pub name: String,
    pub limit: f64,
    pub spent: f64,
    /// Attempts that reported a cost in the window.
    pub attempts: i64,
    #[serde(skip)]
    pub period: std::time::Duration,
    #[serde(serialize_with = "crate::util::time::json")]
    pub window_end: Millis,
    pub reached: bool,
}

impl BudgetState {
    /// `budget $12.40 of $20.00 today, resets 00:00Z`, or `budget reached
    /// ($20.10 of $20.00 today), resets 00:00Z` (`pool openai budget …`
    /// for a pool's).
    #[must_use]
    pub fn describe(&self, now: Millis) -> String {
        let whose = match self.scope {
            SpendScope::Batch => "budget".to_string(),
            SpendScope::Pool => format!("pool {} budget", crate::util::sanitize::line(&self.name)),
        };
        format!("{whose} {}", self.summary(now))
    }

    /// What [`describe`](Self::describe) says after whose budget it is:
    /// `$12.40 of $20.00 today, resets 00:00Z` or `reached (…), resets …`
    /// (the Pools pane's budget row, under the pool's name).
    #[must_use]
    pub fn summary(&self, now: Millis) -> String {
        let amounts = format!(
            "{} of {} {}",
            money(self.spent),
            money(self.limit),
            window_word(self.period)
        );
        let resets = crate::util::time::hhmm(self.window_end, now);
        let resets = if self.period.as_secs().is_multiple_of(60) {
            resets
        } else {
            utc_clock(self.window_end, now)
        };
        if self.reached {
            format!("reached ({amounts}), resets {resets}")
        } else {
            format!("{amounts}, resets {resets}")
        }
    }
}

/// A budget by whose it is: `(scope, name, budget)`.
pub type Named = (SpendScope, String, Budget);

/// The budgets of a batch: its own, then its pool's.
#[must_use]
pub fn of_config(cfg: &BatchConfig) -> Vec<Named> {
    let mut out = Vec::new();
    if let Some(b) = cfg.budget {
        out.push((SpendScope::Batch, cfg.name.clone(), b));
    }
    if let Some(p) = &cfg.pool
        && let Some(b) = p.budget
    {
        out.push((SpendScope::Pool, p.name.clone(), b));
    }
    out
}

/// The ledger row of a budget's window at `now`.
#[must_use]
pub fn key(scope: SpendScope, name: &str, budget: &Budget, now: Millis) -> SpendKey {
    SpendKey {
        scope,
        name: name.to_string(),
        period_ms: budget.period_ms(),
        window_start: budget.window(now).start,
    }
}

/// Every budget of the batch as it stands at `now` (empty without one):
/// its own, then its pool's.
pub fn states(
    store: &Store,
    cfg: &BatchConfig,
    now: Millis,
) -> crate::store::Result<Vec<BudgetState>> {
    states_of(store, of_config(cfg), now)
}

/// A pool's budget as it stands at `now`, if it has one.
pub fn pool_state(
    store: &Store,
    pool: &crate::config::limits::LimitPool,
    now: Millis,
) -> crate::store::Result<Option<BudgetState>> {
    let list = pool
        .budget
        .map(|b| (SpendScope::Pool, pool.name.clone(), b))
        .into_iter()
        .collect();
    Ok(states_of(store, list, now)?.pop())
}

fn states_of(
    store: &Store,
    budgets: Vec<(SpendScope, String, Budget)>,
    now: Millis,
) -> crate::store::Result<Vec<BudgetState>> {
    let keys: Vec<SpendKey> = budgets.iter().map(|(s, n, b)| key(*s, n, b, now)).collect();
    let spent = store.spent(&keys)?;
    Ok(budgets
        .into_iter()
        .zip(spent)
        .map(|((scope, name, budget), spent)| state(scope, name, &budget, spent, now))
        .collect())
}

/// A budget as it stands at `now`, given its window's spend.
#[must_use]
pub fn state(
    scope: SpendScope,
    name: String,
    b: &Budget,
    spent: Spent,
    now: Millis,
) -> BudgetState {
    BudgetState {
        scope,
        name,
        limit: b.amount,
        spent: from_micros(spent.micros),
        attempts: spent.attempts,
        period: b.period,
        window_end: b.window(now).end,
        reached: spent.micros >= b.micros(),
    }
}

/// The budget hold of a batch at `now`: until when no call starts (the
/// latest end among its budgets reached), if any is.
#[must_use]
pub fn held_until<'a>(states: impl IntoIterator<Item = &'a BudgetState>) -> Option<Millis> {
    states
        .into_iter()
        .filter(|s| s.reached)
        .map(|s| s.window_end)
        .max()
}

impl Budgets {
    /// The batch's budgets, with the spend the store has now.
    pub fn of(cfg: &BatchConfig, store: &Store, now: Millis) -> Option<Budgets> {
        let list = of_config(cfg);
        if list.is_empty() {
            return None;
        }
        let keys: Vec<SpendKey> = list.iter().map(|(s, n, b)| key(*s, n, b, now)).collect();
        let spent = store.spent(&keys).unwrap_or_else(|e| {
            tracing::warn!("reading the budgets' spend: {e}");
            vec![Spent::default(); keys.len()]
        });
        let n = list.len();
        Some(Budgets {
            tracked: list
                .into_iter()
                .zip(spent)
                .map(|((scope, name, budget), s)| Tracked {
                    scope,
                    name,
                    known: Mutex::new((budget.window(now).start, s.micros)),
                    budget: Mutex::new(Some(budget)),
                })
                .collect(),
            announced: Mutex::new(vec![None; n]),
            carry: Carry::default(),
        })
    }

    /// The ledger rows to read for the windows of `now`, one per budget
    /// the config still sets.
    pub fn keys(&self, now: Millis) -> Vec<SpendKey> {
        self.tracked
            .iter()
            .filter_map(|t| Some(key(t.scope, &t.name, &t.budget()?, now)))
            .collect()
    }

    /// Takes the budgets as the config file says them now
    /// (`runner::follow`): raised, the calls held for the reset go on;
    /// lowered under the spend, no call starts. A budget taken out of the
    /// file holds nothing; one put in it the run did not start with waits
    /// for the next run.
    pub fn follow(&self, cfg: &BatchConfig) {
        let fresh = of_config(cfg);
        for t in &self.tracked {
            let now = fresh
                .iter()
                .find(|(scope, name, _)| *scope == t.scope && *name == t.name)
                .map(|(_, _, b)| *b);
            *t.budget.lock().unwrap_or_else(|p| p.into_inner()) = now;
        }
    }

    /// Takes in the store's sums (read for [`Budgets::keys`] at `now`):
    /// the larger of it and what the run knows, so neither this run's
    /// adds not yet committed nor another runner's are lost.
    pub fn sync(&self, spent: &[Spent], now: Millis) {
        let set = self.tracked.iter().filter_map(|t| Some((t, t.budget()?)));
        for ((t, budget), s) in set.zip(spent) {
            let start = budget.window(now).start;
            let mut known = t.known.lock().unwrap_or_else(|p| p.into_inner());
            *known = if known.0 == start {
                (start, known.1.max(s.micros))
            } else {
                (start, s.micros)
            };
        }
    }

    /// Counts an attempt's cost in every budget's window: the rows to add.
    fn add(&self, micros: i64, now: Millis) -> Vec<SpendAdd> {
        self.tracked
            .iter()
            .filter_map(|t| Some((t, t.budget()?)))
            .map(|(t, budget)| {
                let start = budget.window(now).start;
                let mut known = t.known.lock().unwrap_or_else(|p| p.into_inner());
                if known.0 != start {
                    *known = (start, 0);
                }
                known.1 = known.1.saturating_add(micros);
                SpendAdd {
                    key: key(t.scope, &t.name, &budget, now),
                    micros,
                }
            })
            .collect()
    }

    /// Each budget the config sets as the run knows it at `now`.
    fn states(&self, now: Millis) -> Vec<(usize, BudgetState)> {
        self.tracked
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((i, t, t.budget()?)))
            .map(|(i, t, budget)| {
                let start = budget.window(now).start;
                let known = *t.known.lock().unwrap_or_else(|p| p.into_inner());
                let micros = if known.0 == start { known.1 } else { 0 };
                let spent = Spent {
                    micros,
                    attempts: 0,
                };
                (i, state(t.scope, t.name.clone(), &budget, spent, now))
            })
            .collect()
    }
}

impl Cycle {
    /// Counts an attempt's reported cost in the run's tally and against
    /// the batch's budgets (in the store without waiting), and holds the
    /// gate if one is reached: every paid call, whatever became of it.
    pub(super) async fn spend(&self, cost: Option<f64>) {
        self.tally.add_cost(cost);
        let Some(budgets) = &self.budgets else {
            return;
        };
        let Some(micros) = cost
            .filter(|c| c.is_finite() && *c > 0.0)
            .map(|c| budgets.carry.micros(c))
        else {
            return;
        };
        let adds = budgets.add(micros, now_ms());
        self.writer.send(move |s| s.add_spend(&adds));
        self.budget_check().await;
    }

    /// Holds every call until the window ends when a budget is reached
    /// (and no longer once none is: a budget raised in the config file),
    /// recording a `budget` event the first time it is reached in its
    /// window (and saying so on stderr: the run waits, it does not end).
    pub(super) async fn budget_check(&self) {
        let Some(budgets) = &self.budgets else {
            return;
        };
        let now = now_ms();
        // Decided under one lock: a check that read the spend before
        // another call's cost cannot lift the hold that one set.
        let news: Vec<BudgetState> = {
            let mut announced = budgets.announced.lock().unwrap_or_else(|p| p.into_inner());
            let states = budgets.states(now);
            self.gate
                .hold_for_budget(held_until(states.iter().map(|(_, s)| s)));
            states
                .into_iter()
                .filter_map(|(i, s)| {
                    let first = s.reached && announced[i] != Some(s.window_end);
                    announced[i] = s.reached.then_some(s.window_end);
                    first.then_some(s)
                })
                .collect()
        };
        for s in news {
            let message = format!(
                "{}: no call starts until {} (calls in flight finish)",
                s.describe(now),
                utc_clock(s.window_end, now)
            );
            self.say(&message);
            let event = self.new_event(EventKind::Budget, message).fields(json!({
                "scope": s.scope,
                "name": s.name,
                "limit": s.limit,
                "spent": s.spent,
                "until": rfc3339(s.window_end),
            }));
            self.event(event).await;
        }
    }

    /// The heartbeat's read of the ledger: `None` without a budget.
    pub(super) fn budget_keys(&self, now: Millis) -> Option<Vec<SpendKey>> {
        self.budgets.as_ref().map(|b| b.keys(now))
    }

    /// Takes in the heartbeat's read (see [`Budgets::sync`]).
    pub(super) async fn budget_sync(&self, spent: Result<Vec<Spent>, StoreError>, now: Millis) {
        if let (Some(b), Ok(spent)) = (&self.budgets, spent) {
            b.sync(&spent, now);
            self.budget_check().await;
        }
    }
}
