//! Small helpers with no knowledge of the product: clock, process identity,
//! termination signals, standard streams kept open, money as the views show
//! it, making untrusted text safe to print, fitting text to terminal cells,
//! a line redrawn in place on a terminal, and files only their owner may
//! change.

pub mod files;
pub mod identity;
pub mod json;
pub mod json_text;
pub mod live;
pub mod money;
pub mod noun;
pub mod sanitize;
pub mod signals;
pub mod stdio;
pub mod text;
pub mod time;
