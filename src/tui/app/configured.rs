//! What the dashboard takes from the config file. Built whole from one
//! [`Config`], so that the file read again (it changed while the dashboard
//! was open) replaces all of it, and nothing else of the [`Setup`](super::Setup).

use std::collections::BTreeMap;

use chrono_tz::Tz;

use super::App;
use crate::config::{Config, Schedule};
use crate::store::PoolSpec;

/// A batch's schedule from the config.
#[derive(Debug, Clone)]
pub struct BatchSchedule {
    pub schedule: Schedule,
    pub tz: Tz,
    /// What a daemon starting late catches up (see `schedule::plan`).
    pub catch_up: Option<std::time::Duration>,
}

impl BatchSchedule {
    /// As every view reads a config's schedule (`schedule::seen`).
    #[must_use]
    pub fn configured(&self) -> crate::schedule::seen::Configured<'_> {
        crate::schedule::seen::Configured {
            schedule: &self.schedule,
            tz: self.tz,
            catch_up: self.catch_up,
        }
    }
}

/// The config's batches, budgets, pools and schedules, as the panes use them.
#[derive(Debug, Clone, Default)]
pub struct Configured {
    pub schedules: BTreeMap<String, BatchSchedule>,
    /// Each configured batch's budgets (its own, its pool's).
    pub budgets: BTreeMap<String, Vec<crate::runner::budget::Named>>,
    /// Batches in the config, shown even before they have items.
    pub batches: Vec<String>,
    /// The config's `[limit.NAME]` pools, read with every poll.
    pub pools: Vec<PoolSpec>,
    /// Batch → the pool it draws from (`limit = "NAME"`).
    pub pool_of: BTreeMap<String, String>,
    /// Batch → the tokens one of its calls reserves from its pool
    /// (`runner::pool::call_estimate`).
    pub calls: BTreeMap<String, i64>,
    /// Batch → its own `rate_limit` as written (`4/min`).
    pub paced: BTreeMap<String, String>,
    /// Batch → its `max_attempts` (a batch the config does not name has
    /// the default).
    pub max_attempts: BTreeMap<String, u32>,
    /// Pool → the largest call of its batches (`runner::pool::largest_call`).
    pub pool_calls: BTreeMap<String, i64>,
    /// The pools' own budgets (`[limit.NAME] budget`), by pool.
    pub pool_budgets: BTreeMap<String, crate::config::budget::Budget>,
}

impl Configured {
    pub fn of(config: &Config) -> Configured {
        let mut c = Configured {
            pools: config
                .limits
                .values()
                .map(crate::runner::pool::spec)
                .collect(),
            pool_calls: config
                .limits
                .keys()
                .map(|p| (p.clone(), crate::runner::pool::largest_call(config, p)))
                .collect(),
            pool_budgets: config
                .limits
                .values()
                .filter_map(|p| Some((p.name.clone(), p.budget?)))
                .collect(),
            ..Configured::default()
        };
        for (name, b) in &config.batches {
            c.batches.push(name.clone());
            if let Some(pool) = &b.pool {
                c.pool_of.insert(name.clone(), pool.name.clone());
                c.calls
                    .insert(name.clone(), crate::runner::pool::call_estimate(b));
            }
            if let Some(rate) = b.rate_limit {
                c.paced.insert(name.clone(), rate.to_string());
            }
            c.max_attempts.insert(name.clone(), b.max_attempts);
            let budgets = crate::runner::budget::of_config(b);
            if !budgets.is_empty() {
                c.budgets.insert(name.clone(), budgets);
            }
            if let Some(schedule) = &b.schedule {
                c.schedules.insert(
                    name.clone(),
                    BatchSchedule {
                        schedule: schedule.clone(),
                        tz: b.timezone,
                        catch_up: b.catch_up,
                    },
                );
            }
        }
        c
    }

    /// The batch's `max_attempts` (the default for one the config does
    /// not name).
    #[must_use]
    pub fn max_attempts_of(&self, batch: &str) -> u32 {
        self.max_attempts
            .get(batch)
            .copied()
            .unwrap_or(crate::config::DEFAULT_MAX_ATTEMPTS)
    }
}

impl App {
    /// The config file changed: the panes follow it as it reads now (a
    /// budget, a pool, a batch added since the dashboard opened). One
    /// refused (`config_file` says why) is said and the old one kept, as
    /// the daemon's reload keeps its config.
    pub(super) fn reconfigure(&mut self, read: Result<Box<Config>, String>) {
        match read {
            Ok(config) => {
                self.setup.config = Configured::of(&config);
                // A batch only the old config named may be gone from the list.
                if self.loaded {
                    self.reselect();
                }
                self.refit();
                self.say(format!("{} reloaded", file_name(&config)));
            }
            Err(why) => self.warn(why),
        }
    }
}

/// The config's file name, as messages call it.
fn file_name(config: &Config) -> String {
    config
        .file
        .as_deref()
        .and_then(std::path::Path::file_name)
        .map_or_else(
            || crate::config::CONFIG_FILE.to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
}
