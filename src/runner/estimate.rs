//! `run --dry-run`'s estimate: what the items a run would take would cost,
//! from the batch's recent mean cost and tokens per attempt, against what
//! its budgets have left in their windows and its `max_cost` allows a run,
//! and how many of them fit.

use serde::Serialize;

use super::budget::{self, BudgetState};
use crate::config::BatchConfig;
use crate::model::{Millis, Run};
use crate::store::{Store, UsageSum};
use crate::util::money::money;
use crate::util::money::{from_micros, to_micros};
use crate::util::noun;

/// Runs whose attempts the mean is taken over.
pub const RECENT_RUNS: usize = 20;

/// The estimate for `items` items.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    pub items: i64,
    /// Attempts (over `runs` recent runs) the means are taken from.
    pub attempts: i64,
    pub runs: usize,
    /// Mean cost per attempt; `None`: no recent attempt reported one.
    pub mean_cost: Option<f64>,
    /// Mean tokens per attempt (reported, or the estimate where none was).
    pub mean_tokens: Option<f64>,
    pub cost: Option<f64>,
    pub tokens: Option<i64>,
    pub budgets: Vec<Left>,
    /// The batch's `max_cost`: one run stops claiming once it has spent it.
    pub max_cost: Option<RunCap>,
}

/// What `max_cost` lets one run take.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunCap {
    pub limit: f64,
    /// Items a run takes before its spend reaches the limit, at the mean
    /// cost: it claims while it has spent less (so the last one may pass
    /// it, as may calls already in flight).
    pub fits: Option<i64>,
}

/// A budget's room in its window now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Left {
    #[serde(flatten)]
    pub state: BudgetState,
    pub left: f64,
    /// Items that fit in what is left, at the mean cost.
    pub fits: Option<i64>,
}

/// Attempts a run made: every answer, immediate retries included.
fn attempts(r: &Run) -> i64 {
    let c = &r.counts;
    c.done + c.empty + c.retry + c.manual + c.retried
}

/// The estimate from recent runs (each with its tokens) and the budgets'
/// state, for `items` items.
#[must_use]
pub fn estimate(
    items: i64,
    recent: &[(Run, UsageSum)],
    budgets: Vec<BudgetState>,
    max_cost: Option<f64>,
) -> Estimate {
    let attempts_made: i64 = recent.iter().map(|(r, _)| attempts(r)).sum();
    let cost: f64 = recent.iter().map(|(r, _)| r.counts.cost).sum();
    let (token_attempts, tokens): (i64, i64) = recent.iter().fold((0, 0), |(n, t), (_, u)| {
        let drawn = u.input_tokens + u.output_tokens + u.estimated_tokens;
        (n + u.attempts, t + drawn)
    });
    // Amounts in millionths, as the ledger keeps them: `4.3 / 0.1` in
    // floats fits 42 items, and a float's noise would reach `--json`.
    let mean = (attempts_made > 0 && cost > 0.0)
        .then(|| to_micros(cost / attempts_made as f64))
        .filter(|m| *m > 0);
    let mean_tokens = (token_attempts > 0).then(|| tokens as f64 / token_attempts as f64);
    let budgets = budgets
        .into_iter()
        .map(|s| {
            let left = (to_micros(s.limit) - to_micros(s.spent)).max(0);
            let fits = mean.map(|m| (left / m).min(items));
            Left {
                state: s,
                left: from_micros(left),
                fits,
            }
        })
        .collect();
    Estimate {
        items,
        attempts: attempts_made,
        runs: recent.len(),
        mean_cost: mean.map(from_micros),
        mean_tokens,
        cost: mean.map(|m| from_micros(m * items)),
        tokens: mean_tokens.map(|m| (m * items as f64).round() as i64),
        budgets,
        max_cost: max_cost.map(|limit| RunCap {
            limit,
            fits: mean.map(|m| ((to_micros(limit) + m - 1) / m).min(items)),
        }),
    }
}

/// Reads the recent runs and the budgets, and estimates `items` items.
pub fn read(
    store: &Store,
    cfg: &BatchConfig,
    items: i64,
    now: Millis,
) -> crate::store::Result<Estimate> {
    let runs = store.runs(&cfg.name, RECENT_RUNS)?;
    let mut recent = Vec::with_capacity(runs.len());
    for r in runs.into_iter().filter(|r| attempts(r) > 0) {
        let usage = store.run_usage(r.id)?;
        recent.push((r, usage));
    }
    Ok(estimate(
        items,
        &recent,
        budget::states(store, cfg, now)?,
        cfg.max_cost,
    ))
}

impl Estimate {
    /// `12 items would cost about $3.00 (mean $0.25 over 40 attempts of 3
    /// runs), about 14400 tokens`, then a line per budget.
    #[must_use]
    pub fn lines(&self, now: Millis) -> Vec<String> {
        let n = self.items;
        let items = noun::count(n, "item");
        let from = format!(
            "over {} of the last {}",
            noun::count(self.attempts, "attempt"),
            noun::count(self.runs, "run")
        );
        let mut first = match (self.cost, self.mean_cost) {
            (Some(c), Some(m)) => format!(
                "estimate: {items} would cost about {} (mean {} per attempt {from})",
                money(c),
                money(m)
            ),
            _ => format!("estimate: no recent attempt reported a cost, so no estimate for {items}"),
        };
        if let (Some(t), Some(m)) = (self.tokens, self.mean_tokens) {
            first.push_str(&format!(", and about {t} tokens ({m:.0} per attempt)"));
        }
        let mut out = vec![first];
        for b in &self.budgets {
            let mut line = format!("  {}: {} left", b.state.describe(now), money(b.left));
            if let Some(fits) = b.fits {
                if fits >= n {
                    line.push_str(&format!(", all {n} fit"));
                } else {
                    line.push_str(&format!(", {fits} of the {n} fit before the reset"));
                }
            }
            if b.state.reached {
                line.push_str(&format!(
                    "; a run would start no call before {}",
                    crate::util::time::utc_clock(b.state.window_end, now)
                ));
            }
            out.push(line);
        }
        if let Some(cap) = &self.max_cost {
            let mut line = format!("  max_cost {} a run", money(cap.limit));
            match cap.fits {
                Some(fits) if fits >= n => line.push_str(&format!(": all {n} fit")),
                Some(fits) => line.push_str(&format!(
                    ": the run stops claiming once it has spent that, after about {fits} of the {n}"
                )),
                None => {}
            }
            out.push(line);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RunCounts, RunState, Trigger};
    use crate::store::SpendScope;

    fn run(done: i64, retried: i64, cost: f64) -> (Run, UsageSum) {
        let r = Run {
            id: 1,
            batch: "a".into(),
            trigger: Trigger::Manual,
            actor: None,
            host: "h".into(),
            pid: 1,
            started_at: 0,
            ended_at: Some(1),
            state: RunState::Ok,
            stopped: None,
            counts: RunCounts {
                done,
                retried,
                cost,
                ..RunCounts::default()
            },
            summary: None,
        };
        let u = UsageSum {
            attempts: done + retried,
            input_tokens: 100 * (done + retried),
            output_tokens: 50 * (done + retried),
            ..UsageSum::default()
        };
        (r, u)
    }

    /// Amounts are the ledger's millionths: `4.3 / 0.1` in floats is
    /// 42.99…, one item short, and `0.7 / 7` is 0.09999… in `--json`.
    #[test]
    fn amounts_are_reckoned_in_millionths_not_floats() {
        let budget = BudgetState {
            scope: SpendScope::Batch,
            name: "a".into(),
            limit: 5.0,
            spent: 0.7,
            attempts: 7,
            period: std::time::Duration::from_secs(86_400),
            window_end: 86_400_000,
            reached: false,
        };
        let e = estimate(50, &[run(7, 0, 0.7)], vec![budget], Some(0.3));
        assert_eq!(e.mean_cost, Some(0.1));
        assert_eq!(e.cost, Some(5.0));
        assert_eq!(e.budgets[0].left, 4.3);
        assert_eq!(e.budgets[0].fits, Some(43), "4.30 left at 0.10");
        assert_eq!(
            e.max_cost.unwrap().fits,
            Some(3),
            "spent 0.20 < 0.30 claims a third"
        );
    }

    #[test]
    fn the_mean_per_attempt_says_how_many_items_fit_in_what_is_left() {
        // 8 attempts (6 done, 2 retries) cost 2.00: 0.25 per attempt.
        let budget = BudgetState {
            scope: SpendScope::Batch,
            name: "a".into(),
            limit: 2.0,
            spent: 1.2,
            attempts: 5,
            period: std::time::Duration::from_secs(86_400),
            window_end: 86_400_000,
            reached: false,
        };
        let e = estimate(
            10,
            &[run(4, 1, 1.25), run(2, 1, 0.75)],
            vec![budget],
            Some(0.6),
        );
        assert_eq!((e.attempts, e.runs), (8, 2));
        assert_eq!(e.mean_cost, Some(0.25));
        assert_eq!(e.cost, Some(2.5));
        assert_eq!(e.tokens, Some(1500));
        assert_eq!(e.budgets[0].fits, Some(3), "0.80 left at 0.25");
        let lines = e.lines(1);
        assert_eq!(
            lines[0],
            "estimate: 10 items would cost about $2.50 (mean $0.25 per attempt over 8 attempts of the last 2 runs), and about 1500 tokens (150 per attempt)"
        );
        assert_eq!(
            lines[1],
            "  budget $1.20 of $2.00 today, resets 00:00Z: $0.80 left, 3 of the 10 fit before the reset"
        );
        // It claims while it has spent less than 0.60: a third item at 0.50.
        assert_eq!(
            lines[2],
            "  max_cost $0.60 a run: the run stops claiming once it has spent that, after about 3 of the 10"
        );
        let few = estimate(2, &[run(4, 1, 1.25)], Vec::new(), Some(0.6));
        assert_eq!(few.lines(1)[1], "  max_cost $0.60 a run: all 2 fit");
        // Nothing reported a cost: no guess.
        let none = estimate(3, &[run(2, 0, 0.0)], Vec::new(), Some(1.0));
        assert_eq!((none.cost, none.mean_cost), (None, None));
        assert_eq!(none.max_cost.as_ref().and_then(|c| c.fits), None);
        assert_eq!(none.lines(1)[1], "  max_cost $1.00 a run");
    }
}
