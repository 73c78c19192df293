//! The long soaks: many runs, kills and restarts against one store, each
//! checking the store's invariants after. A binary of their own, so that
//! `cargo test --test it` stays quick to iterate on.
//!
//! No unsafe code, so no `std::env::set_var` (unsafe in edition 2024):
//! the tests share this process, and a child gets its environment and
//! working directory through its `Command`, never through ours.
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
#[macro_use]
mod support;

// SIGKILLs of runners, workers, daemons and the dashboard at random moments.
mod chaos;
// Four host identities sharing one batch, runners SIGKILLed and restarted.
mod multihost;
// Eight runners, requeues, a dashboard and status polls at once on one batch.
mod torture;
