//! One cycle of a batch (SPEC section 3): paused check → batch lock →
//! enqueue from `source` → redrive due retry-tier failures → process
//! pending items with bounded concurrency → summary → release → alert.
//!
//! The done mark is written only after the worker returned success; a crash
//! in between means the item runs again with the same key, never that it is
//! lost. Every write about a claimed item is fenced by its lease token.
//!
//! # Rooms
//!
//! - here: the public surface ([`RunOptions`], [`cycle()`], [`released`]
//!   (a cycle up to its alert, for the daemon), [`run_blocking`],
//!   [`RunReport`]): pause check, seat, the locked run, release, the alert;
//! - `seat`: taking a seat of the batch lock; `heartbeat`: keeping it (and
//!   the leases), noticing a lost lock, a pause, a replaced store;
//! - `locked`: what a cycle does in its seat, as named phases; `recover`:
//!   what it inherits from dead runs;
//! - `cycle`: the state the slots share; `writer`: the one thread that
//!   owns the store and commits in groups; `notice`: what the run says
//!   once and counts at its end (an ignored `estimate_field` in `pool`,
//!   what persistent workers write unread in `unread`);
//! - `slot/`: the slots, `process` and `persistent` (its batches claimed
//!   ahead by `pipeline`), sharing `claim` (before a claim) and `record`
//!   (after an answer);
//! - `gate`: every worker call passes it (the retry-after hold, the rate
//!   limit of `pace`);
//! - `classify`: what a worker answered → [`classify::Answer`];
//!   `halt`: the circuit breaker's rule over the run's recent answers;
//!   `verdict`: a failed attempt → retry now / retry tier at T /
//!   quarantine; `report`: how two reports of an attempt combine;
//!   `cost`: the one rule for reported costs, `usage` for
//!   reported tokens; `pool`: the `[limit.NAME]` pool every call of the
//!   batch draws from, shared with other batches and runners;
//! - `child/`: the processes the runner starts, their process groups and
//!   what they leave behind;
//! - `source`, `summary` (with the alert), `hook`, `log`, `waiting`,
//!   `dry_run`.

pub mod budget;
pub mod child;
pub mod classify;
pub mod cost;
mod cycle;
mod dry_run;
pub mod estimate;
mod follow;
mod gate;
pub mod halt;
mod heartbeat;
mod hook;
mod idle;
mod locked;
mod log;
mod notice;
mod pace;
pub mod pool;
mod recover;
pub mod report;
mod seat;
mod slot;
mod source;
mod summary;
mod unread;
pub mod usage;
mod verdict;
pub mod waiting;
mod writer;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use child::guard::{serve as serve_guard, start as start_guard, take_arg as guard_arg};
pub use child::subreaper::adopt_orphans;
pub use cycle::{Signal, StopReason};
pub use dry_run::{DryRun, dry_run};
pub use hook::{Hook, HookFailure};
pub use log::{EventLog, close_file_log, start_file_log};

use crate::config::BatchConfig;
use crate::model::{Holder, RunCounts, RunState, Trigger};
use crate::store::{Access, Store, StoreError};
use crate::util::identity;
use crate::util::time::now_ms;
use seat::Seat;

/// Everything a cycle needs to know besides the store.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub batch: String,
    /// The batch's settings with command-line overrides applied.
    pub config: BatchConfig,
    pub worker: Vec<String>,
    /// Where workers run (the config file's directory).
    pub work_dir: Option<PathBuf>,
    /// The config file, followed while the run lives for its limit pool's
    /// limits (`pool::Pool::follow`).
    pub config_file: Option<PathBuf>,
    pub limit: Option<usize>,
    pub key: Option<String>,
    pub wait: bool,
    pub trigger: Trigger,
    /// Who started it (`user@host`), recorded with the run.
    pub actor: Option<String>,
    /// Print every event as it happens.
    pub verbose: bool,
    /// Show a live progress line on stderr.
    pub progress: bool,
    /// Called with the report once the run is recorded and its lock
    /// released, before its alert command runs: the summary is said at
    /// once, not after a slow alert.
    pub before_alert: Option<fn(&RunReport)>,
    pub log_dir: Option<PathBuf>,
}

/// How a cycle ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    pub run_id: Option<i64>,
    pub state: RunState,
    pub counts: RunCounts,
    pub summary: String,
    pub stopped: Option<StopReason>,
    /// The hooks that failed: the `source` command (its items were not
    /// added), the `alert` command.
    pub hooks_failed: Vec<HookFailure>,
    /// What the batch still holds once the run ended, and why (not part of
    /// the stored summary: it is true of the moment, not of the run).
    pub waiting: Vec<crate::model::waiting::Waiting>,
}

impl RunReport {
    /// The batch's `source` command failed.
    pub fn source_failed(&self) -> Option<&HookFailure> {
        self.hooks_failed.iter().find(|h| h.hook == Hook::Source)
    }

    /// The summary line, then what the batch still holds:
    /// `…, 40 skipped-done, 1s · still in the batch: 2 quarantined await a
    /// human; 2 in the retry tier, next at 07:16:00Z`.
    pub fn line(&self) -> String {
        if self.waiting.is_empty() {
            return self.summary.clone();
        }
        format!(
            "{} · still in the batch: {}",
            self.summary,
            crate::model::waiting::describe(&self.waiting, now_ms())
        )
    }

    /// Something failed: an item, or the source command, or the run lost
    /// its lock (its in-flight results were discarded) or its worker (the
    /// state says so: `RunState::ended`). Cron acts on it, and the alert
    /// runs.
    pub fn exit_failed(&self) -> bool {
        self.state == RunState::Failed || self.counts.failed > 0 || self.source_failed().is_some()
    }

    /// A signal or `nightshift stop` ended it (its state is `aborted`):
    /// exit 130, whatever failed before the stop (the summary and the
    /// alert tell of that).
    pub fn interrupted(&self) -> bool {
        self.state == RunState::Aborted
    }
}

/// Is the emergency-stop file beside the database present?
pub fn paused_file(db: &Path) -> Option<PathBuf> {
    crate::store::paused_file(db)
}

/// Runs one cycle, its alert included. `signals` carries stop requests
/// from outside (signal handlers).
pub async fn cycle(
    db_path: &Path,
    opts: RunOptions,
    signals: watch::Receiver<Signal>,
) -> anyhow::Result<RunReport> {
    let Released { mut report, alert } = released(db_path, opts, signals).await?;
    if let Some(alert) = alert {
        report.hooks_failed.extend(alert.run().await);
    }
    Ok(report)
}

/// A cycle whose run has ended and released its batch lock, and the
/// alert it owes, not run yet: a slow alert holds up no other run, nor,
/// in the daemon, the batch's next fire.
pub struct Released {
    pub report: RunReport,
    pub alert: Option<PendingAlert>,
}

impl Released {
    /// A cycle that never ran (paused, the lock held): it owes no alert.
    fn alone(report: RunReport) -> Released {
        Released {
            report,
            alert: None,
        }
    }
}

/// The `alert` a released cycle owes, with what it logs to and the stop
/// requests that end it (those sent once it runs).
pub struct PendingAlert {
    alert: summary::Alert,
    store: Option<Store>,
    log: EventLog,
    signals: watch::Receiver<Signal>,
}

impl PendingAlert {
    /// Runs the alert command; its failure, if it failed.
    pub async fn run(mut self) -> Option<HookFailure> {
        self.alert
            .run(self.store.as_mut(), &self.log, self.signals)
            .await
    }
}

/// Runs one cycle up to its alert (see [`Released`]). `signals` carries
/// stop requests from outside (signal handlers, the daemon); the alert
/// keeps listening to them.
pub async fn released(
    db_path: &Path,
    opts: RunOptions,
    mut signals: watch::Receiver<Signal>,
) -> anyhow::Result<Released> {
    let started = Instant::now();
    let mut store = Store::open(db_path, Access::ReadWrite)?;
    // Once the store is known to be usable: a run refused for its store
    // says that alone.
    if let Some(dir) = &opts.log_dir {
        start_file_log(dir);
    }
    if let Some(key) = &opts.key {
        key_runnable(&store, &opts.batch, key, opts.config.source.is_some())?;
    }
    let now = now_ms();
    store.ensure_batch(&opts.batch, now)?;
    let log = EventLog::new(opts.verbose);
    let holder = Holder {
        host: identity::host(),
        pid: std::process::id(),
        pid_start: identity::pid_start(std::process::id()),
    };

    // 1. Paused: record it and do nothing else.
    let pause = match store.pause(&opts.batch)? {
        Some(p) => Some(p.reason),
        None => paused_file(db_path).map(|f| format!("emergency stop file {} exists", f.display())),
    };
    if let Some(reason) = pause {
        return summary::record_skip(
            &mut store,
            &opts,
            &holder,
            (RunState::Paused, None),
            &reason,
            &log,
        )
        .map(Released::alone);
    }

    // 2. The batch lock.
    let token = format!("{:032x}", fastrand::u128(..));
    let lock_ttl = opts.config.lock_ttl.max(Duration::from_millis(300));
    let took_over =
        match seat::acquire(&mut store, &opts, &token, &holder, lock_ttl, &mut signals).await? {
            seat::Acquired::Yes(took_over) => took_over,
            seat::Acquired::No(held) => {
                let holders: Vec<String> = held
                    .iter()
                    .map(|l| {
                        let run = l.run_id.map_or("?".into(), |r| r.to_string());
                        format!("{} (run {run})", l.holder)
                    })
                    .collect();
                let reason = format!("lock held by {}, stepped down", holders.join(", "));
                return summary::record_skip(
                    &mut store,
                    &opts,
                    &holder,
                    (RunState::LockHeld, None),
                    &reason,
                    &log,
                )
                .map(Released::alone);
            }
            seat::Acquired::Interrupted => {
                return summary::record_skip(
                    &mut store,
                    &opts,
                    &holder,
                    (RunState::Aborted, Some(StopReason::Interrupted)),
                    "interrupted while waiting for the lock",
                    &log,
                )
                .map(Released::alone);
            }
            seat::Acquired::Stopped(by) => {
                let reason = format!(
                    "stopped by {} while waiting for the lock",
                    crate::util::sanitize::line(&by)
                );
                return summary::record_skip(
                    &mut store,
                    &opts,
                    &holder,
                    (RunState::Aborted, Some(StopReason::Asked(by))),
                    &reason,
                    &log,
                )
                .map(Released::alone);
            }
        };
    let seat = Seat {
        token,
        holder,
        ttl: lock_ttl,
        took_over,
    };
    let after = signals.clone();
    let result = locked::run(store, &opts, &seat, signals, started, &log).await;
    // Release the lock on every path, even after an error; but not in a
    // store that replaced ours.
    let replaced = result.as_ref().err().is_some_and(|e| {
        e.chain()
            .any(|c| matches!(c.downcast_ref(), Some(StoreError::Replaced(_))))
    });
    let (mut result, alert) = match result {
        Ok((report, alert)) => (Ok(report), alert),
        Err(e) => (Err(e), None),
    };
    let mut store = (!replaced)
        .then(|| Store::open(db_path, Access::ReadWrite).ok())
        .flatten();
    if let Some(s) = store.as_mut() {
        let _ = s.release_lock(&opts.batch, &seat.token);
        if let Ok(report) = &mut result {
            // After the release: our own seat is not "another runner".
            let others = waiting::Others::Any;
            let cfg = Some(&opts.config);
            match waiting::read(s, db_path, &opts.batch, cfg, others, 0, now_ms()) {
                Ok(w) => report.waiting = w,
                Err(e) => tracing::warn!("reading what {} still holds: {e}", opts.batch),
            }
        }
    }
    let report = result?;
    if let Some(say) = opts.before_alert {
        say(&report);
    }
    Ok(Released {
        report,
        alert: alert.map(|alert| PendingAlert {
            alert,
            store,
            log,
            signals: after,
        }),
    })
}

/// A run of one key (`run --key`) is refused before it records a run,
/// takes the lock or runs the source, so its "nothing was changed" holds:
/// the key done, pruned, in no item (unless a source may add it), or in
/// flight in a live run (with `runners` above 1 this run would get a seat
/// beside it, and only then find the claim). A dead run's claim is no
/// refusal: the run takes it back first.
fn key_runnable(store: &Store, batch: &str, key: &str, has_source: bool) -> anyhow::Result<()> {
    match store.item(batch, key) {
        Ok(item) if item.status == crate::model::Status::Done => {
            Err(StoreError::Refused(crate::store::Refusal::AlreadyDone {
                key: key.to_string(),
            })
            .into())
        }
        Ok(item)
            if item.status == crate::model::Status::Claimed
                && store.claimed_live(batch, key, now_ms())? =>
        {
            Err(StoreError::Refused(crate::store::Refusal::InFlightClaim {
                key: key.to_string(),
            })
            .into())
        }
        Ok(_) => Ok(()),
        Err(StoreError::UnknownKey { .. } | StoreError::UnknownBatch { .. }) if has_source => {
            Ok(())
        }
        // A batch with no items yet (the config names it) has not this key.
        Err(StoreError::UnknownBatch { .. }) => Err(StoreError::UnknownKey {
            batch: batch.to_string(),
            key: key.to_string(),
        }
        .into()),
        Err(e) => Err(e.into()),
    }
}

/// Runs a cycle on a fresh runtime, with SIGINT/SIGTERM/SIGHUP handled:
/// the first asks for a graceful stop, the second stops workers at once.
pub fn run_blocking(db_path: &Path, opts: RunOptions) -> anyhow::Result<RunReport> {
    // One worker thread (and `block_on`'s own): the store has its own
    // thread and blocking work goes to the blocking pool, so a second
    // worker only moved the slots' tasks between threads, a wake-up each
    // time. Process mode, 3,000 `true` at -j4: 5-7 % less CPU an item and
    // 2-5 % less wall; persistent mode the same (bench/README.md).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (tx, rx) = watch::channel(Signal::Run);
        let signals = tokio::spawn(forward_signals(tx));
        let report = cycle(db_path, opts, rx).await;
        signals.abort();
        report
    })
}

/// First termination signal: graceful; the next: immediate.
pub async fn forward_signals(tx: watch::Sender<Signal>) {
    crate::util::signals::count_termination(|count| {
        let _ = tx.send(if count == 1 {
            Signal::Graceful
        } else {
            // Now: a store whose session went is not waited for either.
            writer::outage::give_up();
            Signal::Immediate
        });
        // Said after the stop is set, so whoever reads it knows no new item
        // is claimed from here on.
        if count == 1 {
            crate::util::stdio::err_line("\nnightshift: stopping: no new items; in-flight items get the grace period (signal again to stop them now)");
        }
    })
    .await;
}
