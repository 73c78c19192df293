//! Small helpers with no knowledge of the product: clock, process identity,
//! and making untrusted text safe to print.

pub mod identity;
pub mod sanitize;
pub mod time;
