//! The processes the runner starts, and what they leave behind.

pub mod groups;
pub mod orphans;
pub mod persistent;
pub mod subreaper;
pub mod worker;
