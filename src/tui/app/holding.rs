//! What the last poll says holds a batch back: its budgets, its schedule
//! as it is, and the [`Holding`] the waiting reasons are decided from
//! (`model::waiting`), read by the batch detail and the item detail alike.

use super::App;
use crate::model::BatchInfo;
use crate::model::waiting::{Holding, Idle};
use crate::runner::budget::BudgetState;

impl App {
    /// The batch's budgets whose window now the last poll read (one not
    /// read yet, or whose window ended since, is left out until it is).
    pub fn budget_states(&self, info: &BatchInfo) -> Vec<BudgetState> {
        let Some(list) = self.setup.config.budgets.get(&info.name) else {
            return Vec::new();
        };
        list.iter()
            .filter_map(|(scope, name, budget)| {
                let now_key = crate::runner::budget::key(*scope, name, budget, self.now);
                let (_, spent) = self.data.spent.iter().find(|(k, _)| *k == now_key)?;
                Some(crate::runner::budget::state(
                    *scope,
                    name.clone(),
                    budget,
                    *spent,
                    self.now,
                ))
            })
            .collect()
    }

    /// The batch's schedule as it is (`schedule::seen`), if the config or
    /// a live daemon gives it one.
    pub fn schedule_seen(&self, info: &BatchInfo) -> Option<crate::schedule::ScheduleSeen<'_>> {
        let config = self
            .setup
            .config
            .schedules
            .get(&info.name)
            .map(super::BatchSchedule::configured);
        crate::schedule::seen::seen(info, config, &self.data.daemons, self.now)
    }

    /// The selected batch as far as waiting goes, once the poll has read
    /// its retry tier (`None` before: say nothing rather than guess).
    pub fn holding(&self, info: &BatchInfo) -> Option<Holding> {
        let retry = match &self.data.retry {
            Some((name, tier)) if *name == info.name => *tier,
            _ => return None,
        };
        let fire = self.schedule_seen(info).and_then(|s| s.live_fire());
        Some(Holding {
            counts: info.counts,
            retry,
            emergency_stop: self.data.emergency.is_some(),
            paused: info.pause.is_some(),
            lock_held: info.running(),
            lock_stopping: info.lock_stopping(),
            hold_until: info.hold.as_ref().map(|h| h.until),
            budget_until: crate::runner::budget::held_until(&self.budget_states(info)),
            rate_limit: self
                .pool_of(&info.name)
                .and_then(|v| crate::runner::pool::limited(v, self.call_of(&info.name), self.now)),
            pool: self.setup.config.pool_of.get(&info.name).cloned(),
            paced: self.setup.config.paced.get(&info.name).cloned(),
            pool_waits: self.data.pool_waiting,
            orphaned: info.runners.orphaned(),
            retry_waits: self.data.retry_waiting,
            taken: 0,
            idle: Some(Idle::from_fire(fire)),
        })
    }
}
