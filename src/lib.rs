//! nightshift: unattended batches that are safe to re-run and easy to watch.
//!
//! # Layout
//!
//! - [`model`]: the product's nouns (item, claim, dead letter, run, lock,
//!   event) as plain types shared by everything below, the run log's one
//!   list of event kinds (`EventKind`), the one definition of every count
//!   (`Counts`), what waits and why (`waiting`), and rates and the ETA
//!   (`pace`).
//! - [`key`]: idempotency keys derived from what an item is;
//!   [`batch_name`]: the one rule for batch names.
//! - [`store`]: a SQLite file or a PostgreSQL database; every SQL statement
//!   lives there, behind methods that speak in `model` types.
//! - [`config`]: `nightshift.toml` to typed settings; errors name file, line
//!   and field. One row per setting (`config::fields`) gives the allowed
//!   keys, the parsing, the example `init` writes and nightshift.toml(5).
//!   [`duration`] parses the `30s`/`10m` values it uses, [`cron`] the
//!   `schedule`.
//! - [`cli`]: clap definitions only; [`commands`]: one module per command,
//!   turning parsed arguments into store calls and printed output (`man`
//!   generates the manual pages from the CLI, the config and the README).
//! - [`runner`]: one cycle of a batch: lock, claims with leases, worker
//!   processes, retries, dead letters, summary; its store writes go through
//!   one thread that commits them in groups.
//! - [`demo`]: `nightshift demo`: a demo store and the simulated flaky
//!   agent worker it runs.
//! - [`schedule`]: cron schedules in a time zone, and the daemon that fires
//!   runner cycles at their times (a pure decision core plus a tokio loop).
//! - [`tui`]: the dashboard: state and `update(Action)` without I/O, a
//!   keymap table, a poller thread reading the store, one render module
//!   per pane.
//! - [`util`]: the clock, process identity, making untrusted text inert,
//!   and files only their owner may change (logs, the dashboard's state).

#![forbid(unsafe_code)]

pub mod batch_name;
pub mod cli;
pub mod commands;
pub mod config;
pub mod cron;
pub mod demo;
pub mod duration;
pub mod key;
pub mod model;
pub mod runner;
pub mod schedule;
pub mod store;
pub mod tui;
pub mod util;
