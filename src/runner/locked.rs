//! What a cycle does while it holds a seat of the batch lock, as named
//! phases: begin the run (its record, what it inherits), build the
//! [`Cycle`], start its helpers (stop requests, heartbeat, deadline,
//! progress), enqueue from `source`, redrive due retry-tier failures, run
//! the slots, stop the helpers, and finish (summary, alert).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::child::{self, KillReason, orphans, subreaper};
use super::classify::Rules;
use super::cycle::{Cycle, Signal, StopReason, Tally};
use super::hook::HookFailure;
use super::seat::Seat;
use super::writer::Writer;
use super::{
    EventLog, RunOptions, RunReport, gate, heartbeat, pace, recover, slot, source, summary,
};
use crate::config::{BatchConfig, WorkerMode};
use crate::model::{EventKind, Hold, NewEvent, RunState};
use crate::store::{RunEnd, Store, StoreError};
use crate::util::time::now_ms;

/// Runs the cycle in the seat taken; the caller releases it, then runs
/// the alert the run owes, if any.
pub(super) async fn run(
    store: Store,
    opts: &RunOptions,
    seat: &Seat,
    signals: watch::Receiver<Signal>,
    started: Instant,
    log: &EventLog,
) -> anyhow::Result<(RunReport, Option<summary::Alert>)> {
    let begun = begin(store, opts, seat, log).await?;
    let skipped_done = begun.skipped_done;
    let cycle = new_cycle(opts, seat, begun, log);
    // A budget spent by earlier runs holds this one until its reset.
    cycle.budget_check().await;
    let helpers = Helpers::spawn(&cycle, signals, seat, started, opts.progress);
    let hooks_failed = enqueue(&cycle).await;
    if opts.key.is_none() {
        redrive(&cycle).await?;
    }
    let first_error = run_slots(&cycle, opts.key.as_deref()).await;
    helpers.stop(&cycle).await;
    finish(
        &cycle,
        opts,
        started,
        skipped_done,
        hooks_failed,
        first_error,
    )
    .await
}

/// A run begun in the store, and what it inherited.
struct Begun {
    store: Store,
    run_id: i64,
    /// Items already finished when the run began.
    skipped_done: i64,
    /// A retry-after hold an earlier run was given.
    inherited: Option<Hold>,
    /// Claims of dead runs this one quarantined (their attempts used up).
    quarantined: usize,
}

/// Records the run (with its seat), says whom it took the lock over from,
/// logs `run-started`, takes over what dead runs left and reads what the
/// batch holds.
async fn begin(
    mut store: Store,
    opts: &RunOptions,
    seat: &Seat,
    log: &EventLog,
) -> anyhow::Result<Begun> {
    let batch = &opts.batch;
    let cfg = &opts.config;
    let holder = &seat.holder;
    let now = now_ms();
    let run_id = store.start_run(
        batch,
        opts.trigger,
        opts.actor.as_deref(),
        holder,
        now,
        Some(&seat.token),
    )?;
    if let Some(prev) = &seat.took_over {
        log.emit(
            &NewEvent::new(
                now,
                batch,
                EventKind::LockTakeover,
                format!("took over the lock of {}", prev.holder),
            )
            .run(run_id),
        );
    }
    // Who started it goes in the event's actor: `log` shows it as `[user@host]`.
    let mut start_event = NewEvent::new(now, batch, EventKind::RunStarted, format!("run {run_id} started ({}) on {holder}", opts.trigger))
        .run(run_id)
        .fields(serde_json::json!({"trigger": opts.trigger, "holder": holder.to_string(), "concurrency": cfg.concurrency}));
    start_event.actor.clone_from(&opts.actor);
    store.log_event(&start_event)?;
    log.emit(&start_event);

    let quarantined =
        recover::take_over(&mut store, batch, run_id, holder, cfg.max_attempts, log).await?;
    let skipped_done = store.counts(batch)?.finished();
    let inherited = recover::inherited_hold(&mut store, batch, run_id, log)?;
    Ok(Begun {
        store,
        run_id,
        skipped_done,
        inherited,
        quarantined,
    })
}

/// Most sessions of its own a runner's slots write on (see
/// `Writer::add_lanes`); more slots share them.
const MAX_LANES: usize = 4;

/// Sessions of their own for a persistent run's slots, where the store
/// takes writers side by side (PostgreSQL) and there are two slots or more:
/// each slot's chained commit then has a server process of its own, not
/// one after the other's in the writer's. Not with a limit pool, whose
/// bookkeeping rows every claim shares. Only when every one opened: a
/// chained commit is then always alone in its transaction (see
/// `slot::pipeline`), never in a group of the writer's.
fn lanes(cfg: &BatchConfig, store: &Store) -> Vec<Store> {
    if cfg.mode != WorkerMode::Persistent || cfg.pool.is_some() || cfg.concurrency < 2 {
        return Vec::new();
    }
    let mut lanes = Vec::new();
    for _ in 0..cfg.concurrency.min(MAX_LANES) {
        match store.another_session() {
            Some(Ok(s)) => lanes.push(s),
            Some(Err(e)) => {
                tracing::warn!("a store session of its own for a slot: {e}");
                return Vec::new();
            }
            None => return Vec::new(),
        }
    }
    lanes
}

/// The state the cycle's slots share; the store goes to its writer.
fn new_cycle(opts: &RunOptions, seat: &Seat, begun: Begun, log: &EventLog) -> Arc<Cycle> {
    let cfg = &opts.config;
    let (stop_tx, _) = watch::channel(None);
    let identity = begun.store.identity();
    let budgets = super::budget::Budgets::of(cfg, &begun.store, now_ms());
    let tally = Tally::default();
    tally.count_quarantined(begun.quarantined);
    // The recovery above may have written scattered pages; the hot path
    // from here on does not need them cached.
    begun.store.use_runner_cache();
    let mut store = begun.store;
    let mut lanes = lanes(cfg, &store);
    // The writer's groups then lock the run's seat first, as the lanes'
    // commits do (the one lock order, `store::pg::locks`).
    if !lanes.is_empty()
        && let Err(e) = store.seat_first_in_groups(&opts.batch, begun.run_id)
    {
        tracing::warn!("the run's seat first in the writer's groups: {e}");
        lanes.clear();
    }
    let mut writer = Writer::start(store);
    writer.add_lanes(lanes);
    Arc::new(Cycle {
        batch: opts.batch.clone(),
        run_id: begun.run_id,
        cfg: cfg.clone(),
        worker: opts.worker.clone(),
        work_dir: opts.work_dir.clone(),
        rules: Rules {
            transient_exit_codes: cfg.transient_exit_codes.clone(),
            transient_error_classes: cfg.transient_error_classes.clone(),
        },
        writer,
        tally,
        log: log.clone(),
        stop_tx,
        inflight: std::sync::Mutex::new(HashMap::new()),
        retry_at: std::sync::Mutex::new(HashMap::new()),
        gate: gate::Gate::new(
            cfg.rate_limit
                .as_ref()
                .map(|r| pace::Pacer::new(r.count, r.per)),
            begun.inherited.as_ref(),
        ),
        // Its places in a pool are kept under its host and process, which
        // any host matches to its seats (gone, they are free at once).
        pool: super::pool::Pool::of(cfg, &crate::store::place_key(&seat.holder))
            .map(std::sync::Arc::new),
        config_file: opts
            .config_file
            .as_deref()
            .map(super::follow::ConfigFile::new),
        settling: super::pool::Settling::default(),
        budgets,
        claims_left: opts.limit.map(AtomicUsize::new),
        lease_ttl: seat.ttl,
        runner_id: orphans::runner_id(seat.holder.pid, seat.holder.pid_start),
        program: opts.worker.first().and_then(|p| child::resolve(p)),
        chain: opts.key.is_none()
            && cfg.rate_limit.is_none()
            && cfg.max_cost.is_none()
            && budgets_off(cfg),
        identity,
        answers: std::sync::Mutex::new(std::collections::VecDeque::new()),
        halted: std::sync::atomic::AtomicBool::new(false),
        notices: super::notice::Notices::of(cfg),
        idle: Arc::new(super::idle::Idle::new(if opts.key.is_some() {
            1
        } else {
            cfg.concurrency.max(1)
        })),
    })
}

/// No budget to weigh between calls (a chained claim would skip it).
fn budgets_off(cfg: &crate::config::BatchConfig) -> bool {
    cfg.budget.is_none() && cfg.pool.as_ref().is_none_or(|p| p.budget.is_none())
}

/// The tasks beside the slots while the cycle runs.
struct Helpers {
    token: String,
    watcher: JoinHandle<()>,
    heartbeat: JoinHandle<()>,
    deadline: Option<JoinHandle<()>>,
    progress: Option<JoinHandle<()>>,
}

impl Helpers {
    /// Outside stop requests become stop reasons; the heartbeat keeps the
    /// seat; `max_duration` stops the cycle; the progress line.
    fn spawn(
        cycle: &Arc<Cycle>,
        mut signals: watch::Receiver<Signal>,
        seat: &Seat,
        started: Instant,
        progress: bool,
    ) -> Helpers {
        let watcher = {
            let (cycle, token) = (cycle.clone(), seat.token.clone());
            tokio::spawn(async move {
                while signals.changed().await.is_ok() {
                    let signal = *signals.borrow();
                    if signal != Signal::Run {
                        cycle.request_stop(signal, StopReason::Interrupted);
                        if signal == Signal::Immediate {
                            cycle.kill_all(KillReason::Shutdown);
                        }
                        mark_stopping(&cycle, &token, signal == Signal::Immediate).await;
                    }
                }
            })
        };
        let heartbeat = tokio::spawn(heartbeat::run(cycle.clone(), seat.token.clone(), seat.ttl));
        let deadline = cycle.cfg.max_duration.map(|max| {
            let cycle = cycle.clone();
            tokio::spawn(async move {
                tokio::time::sleep(max.saturating_sub(started.elapsed())).await;
                cycle.request_stop(Signal::Graceful, StopReason::MaxDuration);
            })
        });
        let progress = progress.then(|| tokio::spawn(summary::progress(cycle.clone(), started)));
        Helpers {
            token: seat.token.clone(),
            watcher,
            heartbeat,
            deadline,
            progress,
        }
    }

    /// The slots are done: what our workers left behind is stopped, then
    /// the helpers.
    async fn stop(self, cycle: &Arc<Cycle>) {
        reap_leftovers(cycle).await;
        super::child::guard::run_ended(cycle.run_id);
        self.heartbeat.abort();
        // A stop asked of our seat that the claims honoured before the
        // heartbeat read it (they claim nothing once it is asked): the run
        // says who stopped it, as the heartbeat would have.
        if cycle.stopping().is_none() {
            let (batch, run, token) = (cycle.batch.clone(), cycle.run_id, self.token.clone());
            if let Ok(steering) = cycle
                .writer
                .call(move |s| s.steering(&batch, run, &token))
                .await
            {
                heartbeat::steer(cycle, &steering);
            }
        }
        if let Some(d) = self.deadline {
            d.abort();
        }
        self.watcher.abort();
        if let Some(p) = self.progress {
            p.abort();
            summary::clear_progress();
        }
    }
}

/// Says in the store that this runner stops for a signal (its seat's stop
/// mark, as `nightshift stop` leaves it), so `status` and the dashboard
/// say "stopping" through the grace period. Only a view's words: the stop
/// itself is already under way.
async fn mark_stopping(cycle: &Cycle, token: &str, now: bool) {
    let (b, token) = (cycle.batch.clone(), token.to_string());
    let marked = cycle
        .writer
        .call(move |s| s.mark_stopping(&b, &token, now, super::seat::SIGNALLED))
        .await;
    if let Err(e) = marked {
        tracing::warn!("marking {}'s seat stopping: {e}", cycle.batch);
    }
}

/// Adds the `source` command's items, if the batch has one: its failure.
async fn enqueue(cycle: &Arc<Cycle>) -> Vec<HookFailure> {
    let mut hooks_failed = Vec::new();
    if let Some(source) = &cycle.cfg.source {
        hooks_failed.extend(source::enqueue(cycle, source).await);
    }
    hooks_failed
}

/// Redrives the retry-tier failures that are due.
async fn redrive(cycle: &Cycle) -> Result<(), StoreError> {
    let (b, run_id) = (cycle.batch.clone(), cycle.run_id);
    let keys = cycle
        .writer
        .call(move |s| s.redrive_due(&b, Some(run_id), now_ms()))
        .await?;
    cycle
        .tally
        .redriven
        .fetch_add(keys.len() as i64, Ordering::Relaxed);
    for key in &keys {
        cycle.log.emit(
            &NewEvent::new(
                now_ms(),
                &cycle.batch,
                EventKind::Redriven,
                "redriven: retry time reached",
            )
            .run(run_id)
            .key(key),
        );
    }
    Ok(())
}

/// Processes with bounded concurrency: one task per slot (one slot for
/// `--key`), in the batch's mode, under the grace watch. The first store
/// error a slot stopped on.
async fn run_slots(cycle: &Arc<Cycle>, key: Option<&str>) -> Option<StoreError> {
    let slots = match key {
        Some(key) => {
            let c = cycle.clone();
            let key = key.to_string();
            vec![match c.cfg.mode {
                WorkerMode::Process => {
                    tokio::spawn(async move { slot::process::run_key(c, 0, key).await })
                }
                WorkerMode::Persistent => {
                    tokio::spawn(async move { slot::persistent::run_key(c, 0, key).await })
                }
            }]
        }
        None => (0..cycle.cfg.concurrency.max(1))
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
    first_error
}

/// Records the end of the run (summary, `run-finished`), and alerts when
/// something failed.
async fn finish(
    cycle: &Arc<Cycle>,
    opts: &RunOptions,
    started: Instant,
    skipped_done: i64,
    hooks_failed: Vec<HookFailure>,
    first_error: Option<StoreError>,
) -> anyhow::Result<(RunReport, Option<summary::Alert>)> {
    cycle.tally_notices().await;
    let (batch, run_id) = (cycle.batch.clone(), cycle.run_id);
    let source_failed = hooks_failed.first().cloned();
    // A store that failed the run ended it, whatever else was asked of it
    // (but a lost lock or store, which say more): its summary and every
    // view say why.
    let stopped = match (cycle.stopping().map(|(_, r)| r), &first_error) {
        (Some(r @ (StopReason::LockLost | StopReason::StoreLost)), _) => Some(r),
        (_, Some(e)) if !e.is_user_error() => Some(StopReason::store_failed(e)),
        (r, _) => r,
    };
    let cause = stopped.as_ref().map(StopReason::cause);
    let counts = cycle.tally.counts(skipped_done);
    // A run cut short by an error of its own (the store's, a key it was
    // named that it cannot run) is no ok run.
    let state = match RunState::ended(cause, counts.failed > 0 || source_failed.is_some()) {
        RunState::Ok | RunState::Failed if first_error.is_some() => RunState::Aborted,
        state => state,
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
            let end = RunEnd {
                state,
                stopped: cause,
                summary: &line,
                skipped_done,
                retried: counts.retried,
            };
            s.finish_run(run_id, &end, now_ms())?;
            // Its worker groups are gone (each killed as its worker ended).
            s.forget_workers(&[run_id])?;
            let e = NewEvent::new(now_ms(), &batch, EventKind::RunFinished, line.clone())
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
    if let Some(StopReason::StoreFailed {
        since: Some(since), ..
    }) = &stopped
    {
        super::writer::outage::run_ends(*since);
    }
    let recorded = cycle.writer.call(finish).await;
    if let Some(e) = first_error {
        // Recorded if the store answers again; said in any case.
        match recorded {
            Ok(event) => cycle.log.emit(&event),
            Err(f) => tracing::warn!("could not record the end of run {run_id}: {f}"),
        }
        let why = match &stopped {
            Some(StopReason::StoreFailed { since, .. }) => {
                format!(": {}", StopReason::store_failed_words(*since))
            }
            _ => String::new(),
        };
        return Err(
            anyhow::Error::new(e).context(format!("run {run_id} of {} stopped{why}", opts.batch))
        );
    }
    let event = recorded?;
    cycle.log.emit(&event);
    let report = RunReport {
        run_id: Some(run_id),
        state,
        counts,
        summary: line,
        stopped,
        hooks_failed,
        waiting: Vec::new(),
    };
    // Whatever makes its exit code 1 alerts (an item failed, the source,
    // its lock or its worker lost), and a tripped circuit breaker (once:
    // the paused runs after it do not).
    let halted = cycle.halted.load(std::sync::atomic::Ordering::SeqCst);
    let alert = (report.exit_failed() || halted)
        .then(|| summary::alert_due(cycle, &report))
        .flatten();
    Ok((report, alert))
}

/// Kills what our workers left running outside their process groups (a
/// daemon that called `setsid` and closed its pipes): each worker's own
/// group is killed when it ends, but such a process is only found by the
/// environment it inherited or, having cleared that, as an orphan we
/// adopted (`child::subreaper`). One `/proc` scan each per cycle.
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
            EventKind::OrphansStopped,
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
