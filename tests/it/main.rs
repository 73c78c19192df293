//! The integration tests: one binary, a module per capability (the shape
//! of ripgrep's `tests/tests.rs`), so a change links once and every test
//! shares one private PostgreSQL server (`support/pg.rs`). The long soaks
//! are the other binary, `tests/soak`.
//!
//! Run one capability with a filter: `cargo test --test it runner::locks`.
//!
//! No unsafe code, so no `std::env::set_var` (unsafe in edition 2024):
//! the tests share this process, and a child gets its environment and
//! working directory through its `Command`, never through ours.
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
#[macro_use]
mod support;

// Every command end to end, from the shell.
mod cli;
// The daemon in real time: schedules, pauses, SIGTERM, catch-up.
mod daemon;
// The demo, in a plain run and in a terminal.
mod demo;
// The README, the example workers, completions and man pages.
mod docs;
// Every event kind the code writes is in the one list.
mod event_kinds;
// Hostile workers, hostile input, other users.
mod hostile;
// Running batches: locks, seats, stops, signals, faults, orphans.
mod runner;
// The store's contract on both backends, and each backend's own rules.
mod store;
// The dashboard: rendered, in a pseudo-terminal, on PostgreSQL.
mod tui;
