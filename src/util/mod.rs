//! Small helpers with no knowledge of the product: clock, process identity,
//! termination signals, making untrusted text safe to print, and fitting
//! text to terminal cells.

pub mod identity;
pub mod sanitize;
pub mod signals;
pub mod text;
pub mod time;
