//! The scheduler (SPEC section 5).
//!
//! - [`cron`]: [`Schedule`], a cron expression matched on the wall clock of
//!   a time zone, with the DST rule users rely on.

pub mod cron;

pub use cron::{Schedule, ScheduleError};
