//! The scheduler (SPEC section 5).
//!
//! - [`Schedule`] (in [`crate::cron`], beside the config that reads it): a
//!   cron expression matched on the wall clock of a time zone, with the DST
//!   rule users rely on.
//! - [`plan`]: the scheduler's decisions for one batch as a pure state
//!   machine (fire, skip because paused, skip because the cycle still runs,
//!   queue, missed, catch up), driven by a clock it is handed.
//! - [`outcome`]: how a fire ended (`ran`, `skipped-paused`, ...) and what
//!   that means in plain words.
//! - [`daemon`]: the tokio loop that drives the plans with the real clock,
//!   runs cycles (`runner::cycle`), records every fire in the store, and
//!   its heartbeat.
//! - [`seen`]: a schedule as every view shows it: fired by a live daemon,
//!   or not, and the fire times that passed unfired.

pub mod daemon;
pub mod outcome;
pub mod plan;
pub mod seen;

#[cfg(test)]
mod tests;

pub use crate::cron::{Schedule, ScheduleError};
pub use outcome::{Outcome, describe, fire_seen};
pub use plan::{
    Cut, Decision, Late, MissedWhy, Observed, Overdue, Plan, RunWhy, Step, Stored, Unfired,
};
pub use seen::{ScheduleSeen, late_text, overdue_text};
