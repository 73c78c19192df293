//! One cycle of a batch (SPEC section 3): paused check → batch lock →
//! enqueue from `source` → redrive due retry-tier failures → process
//! pending items with bounded concurrency → summary → release → alert.
//!
//! The done mark is written only after the worker returned success; a crash
//! in between means the item runs again with the same key, never that it is
//! lost. Every write about a claimed item is fenced by its lease token.

pub mod child;
pub mod classify;
pub mod cost;
mod cycle;
mod dry_run;
mod gate;
mod heartbeat;
mod hook;
mod log;
mod pace;
mod recover;
mod seat;
mod slot;
mod source;
mod summary;
mod verdict;
mod waiting;
mod writer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub use child::subreaper::adopt_orphans;
pub use cycle::{Signal, StopReason};
pub use dry_run::dry_run;
pub use hook::{Hook, HookFailure};
pub use log::{EventLog, close_file_log, start_file_log};

use crate::config::{BatchConfig, WorkerMode};
use crate::model::{EventKind, Holder, NewEvent, RunCounts, RunState, Trigger};
use crate::store::{Access, Store, StoreError};
use crate::util::identity;
use crate::util::time::now_ms;
use child::KillReason;
use child::{orphans, subreaper};
use classify::Rules;
use cycle::{Cycle, Tally};
use writer::Writer;

/// Everything a cycle needs to know besides the store.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub batch: String,
    /// The batch's settings with command-line overrides applied.
    pub config: BatchConfig,
    pub worker: Vec<String>,
    /// Where workers run (the config file's directory).
    pub work_dir: Option<PathBuf>,
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
    /// human; 2 in the retry tier, next at 07:16Z`.
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
    /// its lock (its in-flight results were discarded). Cron acts on it.
    pub fn exit_failed(&self) -> bool {
        self.counts.failed > 0
            || self.source_failed().is_some()
            || self.stopped == Some(StopReason::LockLost)
    }
}

/// Is the emergency-stop file beside the database present?
pub fn paused_file(db: &Path) -> Option<PathBuf> {
    crate::store::paused_file(db)
}

/// Runs one cycle. `signals` carries stop requests from outside (signal
/// handlers, the daemon).
pub async fn cycle(
    db_path: &Path,
    opts: RunOptions,
    mut signals: watch::Receiver<Signal>,
) -> anyhow::Result<RunReport> {
    let started = Instant::now();
    let mut store = Store::open(db_path, Access::ReadWrite)?;
    // Once the store is known to be usable: a run refused for its store
    // says that alone.
    if let Some(dir) = &opts.log_dir {
        start_file_log(dir);
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
        return summary::record_skip(&mut store, &opts, &holder, RunState::Paused, &reason, &log);
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
                    RunState::LockHeld,
                    &reason,
                    &log,
                );
            }
            seat::Acquired::Interrupted => {
                return summary::record_skip(
                    &mut store,
                    &opts,
                    &holder,
                    RunState::Aborted,
                    "interrupted while waiting for the lock",
                    &log,
                );
            }
        };
    let result = locked_cycle(
        store, &opts, &token, &holder, took_over, lock_ttl, signals, started, &log,
    )
    .await;
    // Release the lock on every path, even after an error; but not in a
    // store that replaced ours.
    let replaced = result.as_ref().err().is_some_and(|e| {
        e.chain()
            .any(|c| matches!(c.downcast_ref(), Some(StoreError::Replaced(_))))
    });
    let mut result = result;
    if !replaced && let Ok(mut s) = Store::open(db_path, Access::ReadWrite) {
        let _ = s.release_lock(&opts.batch, &token);
        if let Ok(report) = &mut result {
            // After the release: our own seat is not "another runner".
            let others = waiting::Others::Any;
            match waiting::read(&s, db_path, &opts.batch, others, 0, now_ms()) {
                Ok(w) => report.waiting = w,
                Err(e) => tracing::warn!("reading what {} still holds: {e}", opts.batch),
            }
        }
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn locked_cycle(
    mut store: Store,
    opts: &RunOptions,
    token: &str,
    holder: &Holder,
    took_over: Option<crate::model::LockInfo>,
    lock_ttl: Duration,
    mut signals: watch::Receiver<Signal>,
    started: Instant,
    log: &EventLog,
) -> anyhow::Result<RunReport> {
    let batch = opts.batch.clone();
    let cfg = &opts.config;
    let now = now_ms();
    let run_id = store.start_run(
        &batch,
        opts.trigger,
        opts.actor.as_deref(),
        holder,
        now,
        Some(token),
    )?;
    if let Some(prev) = &took_over {
        log.emit(
            &NewEvent::of(
                now,
                &batch,
                EventKind::LockTakeover,
                format!("took over the lock of {}", prev.holder),
            )
            .run(run_id),
        );
    }
    // Who started it goes in the event's actor: `log` shows it as `[user@host]`.
    let mut start_event = NewEvent::of(now, &batch, EventKind::RunStarted, format!("run {run_id} started ({}) on {holder}", opts.trigger))
        .run(run_id)
        .fields(serde_json::json!({"trigger": opts.trigger, "holder": holder.to_string(), "concurrency": cfg.concurrency}));
    start_event.actor.clone_from(&opts.actor);
    store.log_event(&start_event)?;
    log.emit(&start_event);

    recover::take_over(&mut store, &batch, run_id, holder, cfg.max_attempts, log).await?;
    let skipped_done = store.counts(&batch)?.finished();
    let inherited = recover::inherited_hold(&mut store, &batch, run_id, log)?;

    let (stop_tx, _) = watch::channel(None);
    let identity = store.identity();
    let cycle = Arc::new(Cycle {
        batch: batch.clone(),
        run_id,
        cfg: cfg.clone(),
        worker: opts.worker.clone(),
        work_dir: opts.work_dir.clone(),
        rules: Rules {
            transient_exit_codes: cfg.transient_exit_codes.clone(),
            transient_error_classes: cfg.transient_error_classes.clone(),
        },
        writer: Writer::start(store),
        tally: Tally::default(),
        log: log.clone(),
        stop_tx,
        inflight: std::sync::Mutex::new(HashMap::new()),
        gate: gate::Gate::new(
            cfg.rate_limit
                .as_ref()
                .map(|r| pace::Pacer::new(r.count, r.per)),
            inherited.as_ref(),
        ),
        claims_left: opts.limit.map(AtomicUsize::new),
        lease_ttl: lock_ttl,
        runner_id: orphans::runner_id(holder.pid, holder.pid_start),
        program: opts.worker.first().and_then(|p| child::resolve(p)),
        chain: opts.key.is_none() && cfg.rate_limit.is_none() && cfg.max_cost.is_none(),
        identity,
    });

    // Outside stop requests become stop reasons.
    let watcher = {
        let cycle = cycle.clone();
        tokio::spawn(async move {
            while signals.changed().await.is_ok() {
                let signal = *signals.borrow();
                if signal != Signal::Run {
                    cycle.request_stop(signal, StopReason::Interrupted);
                    if signal == Signal::Immediate {
                        cycle.kill_all(KillReason::Shutdown);
                    }
                }
            }
        })
    };
    let heartbeat = tokio::spawn(heartbeat::run(cycle.clone(), token.to_string(), lock_ttl));
    let deadline = cfg.max_duration.map(|max| {
        let cycle = cycle.clone();
        tokio::spawn(async move {
            tokio::time::sleep(max.saturating_sub(started.elapsed())).await;
            cycle.request_stop(Signal::Graceful, StopReason::MaxDuration);
        })
    });
    let progress = opts
        .progress
        .then(|| tokio::spawn(summary::progress(cycle.clone(), started)));

    // 3. Enqueue from the source command.
    let mut hooks_failed = Vec::new();
    if let Some(source) = &cfg.source {
        hooks_failed.extend(source::enqueue(&cycle, source).await);
    }
    let source_failed = hooks_failed.first().cloned();

    // 4. Redrive due retry-tier failures.
    if opts.key.is_none() {
        let b = batch.clone();
        let keys = cycle
            .writer
            .call(move |s| s.redrive_due(&b, Some(run_id), now_ms()))
            .await?;
        cycle
            .tally
            .redriven
            .fetch_add(keys.len() as i64, Ordering::Relaxed);
        for key in &keys {
            log.emit(
                &NewEvent::of(
                    now_ms(),
                    &batch,
                    EventKind::Redriven,
                    "redriven: retry time reached",
                )
                .run(run_id)
                .key(key),
            );
        }
    }

    // 5. Process with bounded concurrency.
    let slots = match &opts.key {
        Some(key) => {
            let c = cycle.clone();
            let key = key.clone();
            vec![match c.cfg.mode {
                WorkerMode::Process => {
                    tokio::spawn(async move { slot::process::run_key(c, 0, key).await })
                }
                WorkerMode::Persistent => {
                    tokio::spawn(async move { slot::persistent::run_key(c, 0, key).await })
                }
            }]
        }
        None => (0..cfg.concurrency.max(1))
            .map(|i| {
                let c = cycle.clone();
                let i = i as u32;
                match c.cfg.mode {
                    WorkerMode::Process => {
                        tokio::spawn(async move { slot::process::run_slot(c, i).await })
                    }
                    WorkerMode::Persistent => {
                        tokio::spawn(async move { slot::persistent::run_slot(c, i).await })
                    }
                }
            })
            .collect(),
    };
    let grace = grace_watch(cycle.clone());
    let mut first_error: Option<StoreError> = None;
    for s in slots {
        if let Ok(Err(e)) = s.await {
            first_error.get_or_insert(e);
        }
    }
    grace.abort();
    reap_leftovers(&cycle).await;
    heartbeat.abort();
    if let Some(d) = deadline {
        d.abort();
    }
    watcher.abort();
    if let Some(p) = progress {
        p.abort();
        summary::clear_progress();
    }

    // 6. Summary, release, alert.
    let stopped = cycle.stopping().map(|(_, r)| r);
    let counts = cycle.tally.counts(skipped_done);
    let state = match (&stopped, counts.failed > 0 || source_failed.is_some()) {
        (Some(StopReason::Paused(_)), _) => RunState::Paused,
        (Some(_), _) => RunState::Aborted,
        (None, true) => RunState::Failed,
        (None, false) => RunState::Ok,
    };
    let line = summary::line(
        &batch,
        &counts,
        started.elapsed(),
        stopped.as_ref(),
        source_failed.as_ref(),
    );
    let finish = {
        let line = line.clone();
        move |s: &mut Store| {
            s.finish_run(run_id, state, &line, skipped_done, counts.retried, now_ms())?;
            // Its worker groups are gone (each killed as its worker ended).
            s.forget_workers(&[run_id])?;
            let e = NewEvent::of(now_ms(), &batch, EventKind::RunFinished, line.clone())
                .run(run_id)
                .fields(serde_json::json!({"state": state, "counts": counts}));
            s.log_event(&e)?;
            // Housekeeping only: never fail a finished run over it.
            if let Err(e) = s.checkpoint() {
                tracing::warn!("WAL checkpoint after run {run_id}: {e}");
            }
            Ok(e)
        }
    };
    let event = cycle.writer.call(finish).await?;
    log.emit(&event);
    if let Some(e) = first_error {
        return Err(
            anyhow::Error::new(e).context(format!("run {run_id} of {} stopped", opts.batch))
        );
    }
    let mut report = RunReport {
        run_id: Some(run_id),
        state,
        counts,
        summary: line,
        stopped,
        hooks_failed,
        waiting: Vec::new(),
    };
    if counts.failed > 0 || report.source_failed().is_some() {
        report
            .hooks_failed
            .extend(summary::alert(&cycle, &report).await);
    }
    Ok(report)
}

/// Kills what our workers left running outside their process groups (a
/// daemon that called `setsid` and closed its pipes): each worker's own
/// group is killed when it ends, but such a process is only found by the
/// environment it inherited or, having cleared that, as an orphan we
/// adopted (`children`). One `/proc` scan each per cycle.
async fn reap_leftovers(cycle: &Arc<Cycle>) {
    let batch = cycle.batch.clone();
    let ours = orphans::DeadRun {
        run_id: cycle.run_id,
        runner: cycle.runner_id.clone(),
    };
    let reaped = tokio::task::spawn_blocking(move || {
        orphans::reap(&batch, &[ours]) + subreaper::reap_adopted(true)
    })
    .await
    .unwrap_or(0);
    if reaped > 0 {
        let e = cycle.new_event(
            "orphans-stopped",
            format!(
                "stopped {} our workers left running",
                orphans::processes(reaped)
            ),
        );
        cycle.event(e).await;
    }
}

/// After a graceful stop request, in-flight items get `grace`; then their
/// workers are stopped and the items released.
fn grace_watch(cycle: Arc<Cycle>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut rx = cycle.stop_tx.subscribe();
        loop {
            if let Some((signal, _)) = rx.borrow().clone() {
                if signal == Signal::Immediate {
                    cycle.kill_all(KillReason::Shutdown);
                    return;
                }
                break;
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
        let grace = cycle.cfg.grace;
        let _ = tokio::time::timeout(grace, async {
            while rx.changed().await.is_ok() {
                if matches!(*rx.borrow(), Some((Signal::Immediate, _))) {
                    return;
                }
            }
        })
        .await;
        cycle.kill_all(KillReason::Shutdown);
    })
}

/// Runs a cycle on a fresh runtime, with SIGINT/SIGTERM/SIGHUP handled:
/// the first asks for a graceful stop, the second stops workers at once.
pub fn run_blocking(db_path: &Path, opts: RunOptions) -> anyhow::Result<RunReport> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
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
        if count == 1 {
            eprintln!(
                "\nnightshift: stopping: no new items; in-flight items get the grace period (signal again to stop them now)"
            );
        }
        let _ = tx.send(if count == 1 {
            Signal::Graceful
        } else {
            Signal::Immediate
        });
    })
    .await;
}
