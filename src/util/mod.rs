//! Small helpers with no knowledge of the product: clock, process identity,
//! termination signals, and making untrusted text safe to print.

pub mod identity;
pub mod sanitize;
pub mod signals;
pub mod time;
