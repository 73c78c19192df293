//! The scheduler (SPEC section 5).
//!
//! - [`cron`]: [`Schedule`], a cron expression matched on the wall clock of
//!   a time zone, with the DST rule users rely on.
//! - [`plan`]: the scheduler's decisions for one batch as a pure state
//!   machine (fire, skip because paused, skip because the cycle still runs,
//!   queue, missed, catch up), driven by a clock it is handed.

pub mod cron;
pub mod plan;

#[cfg(test)]
mod tests;

pub use cron::{Schedule, ScheduleError};
pub use plan::{Decision, Observed, Outcome, Plan, RunWhy, Step, Stored};
