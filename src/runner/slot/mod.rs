//! The cycle's concurrency slots, one worker each, in the two modes:
//! `process` (a process per item) and `persistent` (a long-lived worker,
//! its batches claimed ahead by `pipeline`). Both pass `claim` before and
//! at a claim, and `record` after an answer.

mod claim;
pub mod persistent;
mod pipeline;
pub mod process;
mod record;
