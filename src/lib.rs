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
//!   lives there, behind methods that speak in `model` types. The contract
//!   types are in `store/api.rs`; `store/ops/` holds each operation's
//!   decisions, once, over the statement-level traits of `store/dialect/`,
//!   where a statement whose SQL is the same on both engines is written
//!   once (`dialect/sql.rs`: `?N` placeholders). `store/sqlite/` and
//!   `store/pg/` keep what differs on purpose, each with its reason: the
//!   hot paths (`hot.rs`), the schema, following the log, prune's chunks
//!   and the item pages' filters.
//! - [`config`]: `nightshift.toml` to typed settings; errors name file, line
//!   and field. One row per setting (`config::fields`) gives the allowed
//!   keys, the parsing, the example `init` writes and nightshift.toml(5).
//!   [`duration`] parses the `30s`/`10m` values it uses, [`cron`] the
//!   `schedule`.
//! - [`cli`]: clap definitions only; [`commands`]: one module per command,
//!   turning parsed arguments into store calls and printed output (`man`
//!   generates the manual pages from the CLI, the config and the README).
//! - [`runner`]: one cycle of a batch (map in `runner/mod.rs`): `seat.rs`
//!   takes the lock and `heartbeat.rs` keeps it; `locked.rs` runs the cycle
//!   in its phases over the shared state in `cycle.rs`; `slot/` claims and
//!   works items (process and persistent modes); `child/` starts and stops
//!   worker processes; `classify.rs` reads a worker's answer and
//!   `verdict.rs` decides what a failure means; `writer.rs` commits the
//!   store writes in groups.
//! - [`demo`]: `nightshift demo`: a demo store and the simulated flaky
//!   agent worker it runs.
//! - [`schedule`]: cron schedules in a time zone, and the daemon that fires
//!   runner cycles at their times (a pure decision core plus a tokio loop).
//! - [`tui`]: the dashboard: state and `update(Action)` without I/O (user
//!   intents apart from data arrivals, `action.rs`), a keymap table, the
//!   geometry both sides share (`layout.rs`), a poller thread reading the
//!   store (and the config file when it changed, `config_file.rs`), one
//!   render module per pane under `tui/ui/`.
//! - [`util`]: the clock, process identity, making untrusted text inert,
//!   and files only their owner may change (logs, the dashboard's state).
//!
//! # Where things happen
//!
//! | what | where |
//! |---|---|
//! | an item is claimed | `runner/slot/claim.rs` asks; `store/sqlite/hot/claim.rs` and `store/pg/hot.rs` claim (a hot path per dialect) |
//! | a failure is classified | `runner/classify.rs` (what the worker said), `runner/verdict.rs` (retry now, retry tier, quarantine) |
//! | the batch lock is taken | `runner/seat.rs`, deciding through `store/ops/seats.rs` |
//! | the done mark is written | `runner/slot/process.rs` and `slot/pipeline.rs` send it through `runner/writer.rs` to the store's complete path (one per dialect) |
//! | a worker is started or killed | `runner/child/` |
//! | the DLQ pane is drawn | `tui/ui/dlq.rs` |
//! | the dashboard follows an edited config | `tui/config_file.rs` looks, `tui/app/configured.rs` takes it |
//! | a setting is defined | `config/fields.rs` |
//! | an event kind is defined | `model/event_kind.rs` |
//! | who holds a claim is said (`show`, the item detail) | `model/claim_view.rs` |

// `unsafe` in one module only, which allows it: `runner/child/clone.rs`,
// a worker's clone and exec without the runtime's thread waiting for it.
#![deny(unsafe_code)]
// Outside tests an unwrap is a panic waiting for bad input: say why with `expect`.
#![deny(clippy::unwrap_used)]
// `println!` and `eprintln!` panic when the stream is gone (a closed pipe or
// terminal): every line goes through `util::stdio`, which does not.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)
)]

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
