//! The daemon loop: drives each scheduled batch's [`Plan`] with the real
//! clock, starts runner cycles for its fires and records every fire.
//!
//! One task owns the plans and the store handle; cycles run as their own
//! tasks, each with a stop channel (the runner's `Signal`). A cycle ends
//! when its run has ended and released the batch lock: the alert it owes
//! runs as a task of its own (same stop channel), so that a slow alert
//! holds up no fire. The loop wakes at
//! the earliest next fire, when a cycle ends, on a stop request, and at least
//! every [`POLL`] (to notice the `PAUSED` file and a clock that jumped, e.g.
//! after the machine slept). Every [`DAEMON_BEAT`] it records a heartbeat,
//! so that views can say when no daemon fires a schedule.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::outcome::{Outcome, describe};
use super::plan::{Decision, Observed, Plan};
use crate::model::{DAEMON_BEAT, EventKind, Fire, Holder, NewEvent, RunState, Taken};
use crate::runner::{self, EventLog, HookFailure, PendingAlert, RunOptions, RunReport, Signal};
use crate::store::{Access, Store, StoreIdentity, Verdict};
use crate::util::time::{now_ms, rfc3339};
use crate::util::{identity, time};
use crate::util::{sanitize, stdio};

/// The longest the loop sleeps without looking around.
pub const POLL: Duration = Duration::from_secs(1);

/// Longer than this between two passes of the loop (each waits at most
/// [`POLL`]) means the daemon was not running meanwhile.
const PASS_GAP: crate::model::Millis = 3_000;

/// A scheduled batch: its plan and the options its cycles run with.
pub struct Target {
    pub plan: Plan,
    pub opts: RunOptions,
}

/// What the stop channel carries: how many stop requests came (0 = run).
/// The first lets running cycles stop gracefully, the next stops them now.
pub type StopCount = watch::Receiver<u32>;

/// Builds the targets again from the config as it is now, or says why it
/// cannot (the daemon then keeps the ones it has).
pub type Load<'a> = Box<dyn FnMut() -> anyhow::Result<Vec<Target>> + Send + 'a>;

/// How the daemon is asked to reload its config (SIGHUP: `asked` counts
/// the requests) and how it does (`load`).
pub struct Reload<'a> {
    pub asked: watch::Receiver<u64>,
    pub load: Load<'a>,
}

struct Running {
    stop: watch::Sender<Signal>,
    task: tokio::task::Id,
    at: DateTime<Utc>,
}

struct Finished {
    batch: String,
    at: DateTime<Utc>,
    /// The reason recorded when the cycle started (catch-up, queued, ...).
    note: Option<String>,
    result: anyhow::Result<RunReport>,
    /// The alert the cycle owes, run once its fire is recorded.
    alert: Option<PendingAlert>,
}

/// How a cycle's alert ended: its batch, and its failure if it failed.
type AlertDone = (String, Option<HookFailure>);

struct Daemon {
    db: PathBuf,
    store: Store,
    targets: Vec<Target>,
    running: HashMap<String, Running>,
    cycles: JoinSet<Finished>,
    /// Alerts of ended cycles, each with its cycle's stop channel.
    alerts: JoinSet<AlertDone>,
    alert_stops: HashMap<tokio::task::Id, watch::Sender<Signal>>,
    log: EventLog,
    /// The `PAUSED` file, as last seen.
    emergency: Option<PathBuf>,
    /// This daemon's heartbeat record.
    me: crate::model::Daemon,
}

/// Runs until `stop` counts a request, then lets running cycles stop (see
/// [`StopCount`]) and returns. Needs a multi-threaded tokio runtime: store
/// calls are made with `block_in_place`.
///
/// # Errors
///
/// The store cannot be opened, another live daemon schedules one of the
/// batches, or the daemon's start cannot be recorded: then nothing was
/// started, and nothing is said but the error. Later store errors are
/// reported on stderr and retried.
pub async fn run(
    db: &Path,
    targets: Vec<Target>,
    mut stop: StopCount,
    mut reload: Reload<'_>,
) -> anyhow::Result<()> {
    let store = Store::open(db, Access::ReadWrite)?;
    let pid = std::process::id();
    let me = crate::model::Daemon {
        token: format!("{:032x}", fastrand::u128(..)),
        holder: Holder {
            host: identity::host(),
            pid,
            pid_start: identity::pid_start(pid),
        },
        started_at: now_ms(),
        beat_at: now_ms(),
        stopped_at: None,
        batches: targets.iter().map(|t| t.plan.batch.clone()).collect(),
        stopping_at: None,
    };
    let mut d = Daemon {
        db: db.to_path_buf(),
        store,
        targets,
        running: HashMap::new(),
        cycles: JoinSet::new(),
        alerts: JoinSet::new(),
        alert_stops: HashMap::new(),
        log: EventLog::new(false),
        emergency: None,
        me,
    };
    tokio::task::block_in_place(|| d.store.daemon_started(&d.me, now_ms()))?;
    stdio::out_line(&format!(
        "nightshift daemon: scheduling {} (pid {pid}); stop with SIGTERM or Ctrl-C, reload the config with SIGHUP",
        d.batches().join(", ")
    ));
    let result = d.serve(&mut stop, &mut reload).await;
    stdio::out_line("nightshift daemon: stopped");
    result
}

impl Daemon {
    /// The daemon once started: fires until asked to stop, or until it has
    /// no batch left (another daemon took each over), then stops.
    async fn serve(&mut self, stop: &mut StopCount, reload: &mut Reload<'_>) -> anyhow::Result<()> {
        let d = self;
        d.announce_start()?;
        d.record_crashes();
        let identity = d.store.identity();
        // Whether anyone can still ask us to stop or reload (the signal task
        // is alive).
        let mut listening = true;
        let mut reloadable = true;
        let mut last_pass = now_ms();
        while *stop.borrow() == 0 {
            let now = crate::util::time::now();
            if replaced(identity.as_ref()) {
                d.abandon().await;
                return Err(crate::store::StoreError::Replaced(d.db.clone()).into());
            }
            d.said_output_lost();
            // Before any fire, a daemon replaced while it was not heard
            // from learns it at its heartbeat and fires nothing it lost:
            // taken at once after a gap (the process was stopped, the
            // machine slept, the clock went back), whenever the last was.
            let pass = now_ms();
            if !(0..=PASS_GAP).contains(&(pass - last_pass)) {
                d.me.beat_at = 0;
            }
            last_pass = pass;
            d.beat();
            if d.targets.is_empty() {
                warn(
                    "every batch this daemon scheduled has another live daemon now: it steps down",
                );
                break;
            }
            d.watch_emergency_file();
            for i in 0..d.targets.len() {
                d.step(i, now);
            }
            let wait = d
                .targets
                .iter()
                .filter_map(|t| t.plan.next())
                .min()
                .map_or(POLL, |next| {
                    (next - crate::util::time::now())
                        .to_std()
                        .unwrap_or(Duration::ZERO)
                        .min(POLL)
                });
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                Some(done) = d.cycles.join_next(), if !d.cycles.is_empty() => d.finish(done),
                Some(done) = d.alerts.join_next_with_id(), if !d.alerts.is_empty() => d.alerted(done),
                changed = stop.changed(), if listening => listening = changed.is_ok(),
                changed = reload.asked.changed(), if reloadable => match changed {
                    Ok(()) => d.reload(&mut reload.load),
                    Err(_) => reloadable = false,
                },
            }
        }
        d.shutdown(stop).await;
        Ok(())
    }
}

/// Whether the store at the daemon's path is another than the one it
/// opened (deleted, or replaced by `mv backup.db nightshift.db`), as a run
/// checks it: the daemon's cycles ran in the new store while its fire
/// records and heartbeat went to the old file.
fn replaced(identity: Option<&StoreIdentity>) -> bool {
    matches!(
        identity.map(|i| tokio::task::block_in_place(|| i.check())),
        Some(Verdict::Changed)
    )
}

impl Daemon {
    /// The store was replaced under the daemon: no more fires, its cycles
    /// stopped at once (each sees the same and writes nothing more), and
    /// nothing recorded in either store.
    async fn abandon(&mut self) {
        warn(&format!(
            "the store {} was deleted or replaced under this daemon: no more fires; running cycles stop at once",
            crate::store::place(&self.db)
        ));
        for stop in self.stops() {
            let _ = stop.send(Signal::Immediate);
        }
        while self.cycles.join_next().await.is_some() {}
        while self.alerts.join_next().await.is_some() {}
    }

    /// Stores each batch's next fire and says the daemon took it over.
    fn announce_start(&mut self) -> anyhow::Result<()> {
        let holder = self.me.holder.to_string();
        self.announce(&format!("daemon on {holder} schedules"))
    }

    /// Records the fires whose cycles the last daemon left unfinished as
    /// crashed, whatever fires it recorded after them: it stopped
    /// mid-cycle, so no outcome was ever written (a second daemon
    /// of these batches is refused, so none of them runs now). Each is run
    /// again at the first step if `catch_up` covers it.
    fn record_crashes(&mut self) {
        let cut: Vec<(String, DateTime<Utc>)> = self
            .targets
            .iter()
            .filter_map(|t| Some((t.plan.batch.clone(), t.plan.unrecorded_crash()?)))
            .collect();
        for (batch, at) in cut {
            let fire = Fire {
                at: at.timestamp_millis(),
                outcome: Outcome::Crashed.as_str().to_string(),
                reason: Some(
                    "its cycle never ended: the daemon stopped mid-cycle (killed, or the machine went down)"
                        .to_string(),
                ),
                run_id: None,
            };
            self.record(&batch, &fire);
        }
    }

    /// Takes the config as it is now (SIGHUP): a batch whose rule is
    /// unchanged keeps its plan (its next fire, a queued one) and gets the
    /// new options; running cycles go on as they started. A batch another
    /// live daemon schedules is left out, and said so (one daemon a
    /// batch). A config that cannot be loaded, or that leaves this daemon
    /// no batch, is refused, said and logged, and the old one kept.
    fn reload(&mut self, load: &mut Load<'_>) {
        let targets =
            match tokio::task::block_in_place(load).and_then(|targets| self.not_taken(targets)) {
                Ok(targets) => targets,
                Err(e) => {
                    self.warn_all(format!(
                        "config reload refused, the old config stays: {e:#}"
                    ));
                    return;
                }
            };
        let mut old: HashMap<String, Target> = self
            .targets
            .drain(..)
            .map(|t| (t.plan.batch.clone(), t))
            .collect();
        self.targets = targets
            .into_iter()
            .map(|mut t| {
                if let Some(before) = old.remove(&t.plan.batch) {
                    if before.plan.same_rule(&t.plan) {
                        t.plan = before.plan;
                    } else {
                        t.plan.carry_over(before.plan);
                    }
                }
                t
            })
            .collect();
        for batch in old.into_keys() {
            let message = "config reloaded: the daemon no longer schedules this batch";
            self.write_event(&NewEvent::new(now_ms(), &batch, EventKind::Daemon, message));
        }
        self.me.batches = self.batches();
        // Recorded at once, so views name the batches it schedules now;
        // checked again as it is recorded (a daemon started meanwhile).
        self.me.beat_at = 0;
        self.beat();
        let holder = self.me.holder.to_string();
        if let Err(e) = self.announce(&format!("config reloaded: daemon on {holder} schedules")) {
            warn(&format!("cannot record the reload: {e:#}"));
        }
    }

    /// `targets` (a reload's) without the batches another live daemon
    /// schedules, each said and logged in its batch's log; refused when
    /// none is left.
    fn not_taken(&mut self, mut targets: Vec<Target>) -> anyhow::Result<Vec<Target>> {
        let wanted = crate::model::Daemon {
            batches: targets.iter().map(|t| t.plan.batch.clone()).collect(),
            ..self.me.clone()
        };
        let taken = tokio::task::block_in_place(|| self.store.daemon_taken(&wanted, now_ms()))?;
        if taken.is_empty() {
            return Ok(targets);
        }
        let said = |t: &Taken| format!("{:?} (daemon {})", t.batch, t.by);
        if taken.len() == targets.len() {
            anyhow::bail!(
                "every batch it names has another live daemon: {} (one daemon a batch)",
                taken.iter().map(said).collect::<Vec<_>>().join(", ")
            );
        }
        targets.retain(|t| !taken.iter().any(|k| k.batch == t.plan.batch));
        for t in &taken {
            let message = format!(
                "config reload: daemon on {} leaves this batch out: a live daemon ({}) already schedules it (one daemon a batch)",
                self.me.holder, t.by
            );
            self.warn_of(&t.batch, message);
        }
        Ok(targets)
    }

    /// Stops firing the batches another live daemon schedules now (it
    /// replaced this one while it was not heard from, e.g. stopped with
    /// SIGSTOP or on a machine that slept): said and logged in each one's
    /// log. Their running cycles go on as they started.
    fn step_down(&mut self, taken: &[Taken]) {
        for t in taken {
            let before = self.targets.len();
            self.targets.retain(|x| x.plan.batch != t.batch);
            if self.targets.len() == before {
                continue;
            }
            let message = format!(
                "daemon on {} steps down from this batch: a live daemon ({}) schedules it now (this one was not heard from, and was replaced); it fires it no more",
                self.me.holder, t.by
            );
            self.warn_of(&t.batch, message);
        }
        self.me.batches = self.batches();
    }

    /// Says once, in the log of each batch it schedules, that the daemon's
    /// stdout or stderr stopped taking lines (a closed pipe, a closed
    /// terminal): it goes on, and what it does is in the store.
    fn said_output_lost(&mut self) {
        for (stream, why) in stdio::newly_failing() {
            let message = format!(
                "the daemon's {} is gone ({why}): it goes on scheduling; its fires and events are in the store (`nightshift log`)",
                stream.name()
            );
            self.warn_all(message);
        }
    }

    fn batches(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.plan.batch.clone()).collect()
    }

    /// Stores each batch's rule and next fire, and logs `what` with its
    /// schedule.
    fn announce(&mut self, what: &str) -> anyhow::Result<()> {
        for t in &self.targets {
            // Stored as is (missed fires are still to be handled); said as
            // the next fire to come.
            let next = t.plan.next();
            let coming = t
                .plan
                .schedule
                .next_after(crate::util::time::now(), t.plan.tz);
            let message = format!(
                "{what} `{}` in {}; next fire {}",
                t.plan.schedule,
                t.plan.tz.name(),
                coming.map_or("never".to_string(), |n| t.plan.local(n))
            );
            let event = NewEvent::new(now_ms(), &t.plan.batch, EventKind::Daemon, message);
            // The rule beside the next fire: views give this daemon's
            // fires, whatever the file says since.
            let rule = super::seen::Rule {
                schedule: t.plan.schedule.clone(),
                tz: t.plan.tz,
            };
            tokio::task::block_in_place(|| -> anyhow::Result<()> {
                self.store.set_fire_plan(
                    &t.plan.batch,
                    &rule.stored(),
                    next.map(|n| n.timestamp_millis()),
                    now_ms(),
                )?;
                self.store.log_event(&event)?;
                Ok(())
            })?;
            self.emit(&event);
        }
        Ok(())
    }

    /// Records the heartbeat when one is due (or the clock went back),
    /// and steps down from the batches the store says another live daemon
    /// schedules now. A store too busy to take it is tried again at the
    /// next pass; views judge a daemon on this host by its process, not
    /// its beat.
    fn beat(&mut self) {
        let now = now_ms();
        let before = self.me.beat_at;
        if (0..DAEMON_BEAT).contains(&(now - before)) {
            return;
        }
        self.me.beat_at = now;
        match tokio::task::block_in_place(|| self.store.daemon_beat(&self.me, now)) {
            Ok(taken) => self.step_down(&taken),
            Err(e) => {
                self.me.beat_at = before;
                warn(&format!("cannot record the heartbeat: {e}"));
            }
        }
    }

    /// Notices the emergency stop file appearing or going away, and says so
    /// (cycles that run stop by themselves: the runner watches it too).
    fn watch_emergency_file(&mut self) {
        let now_file = runner::paused_file(&self.db);
        if now_file == self.emergency {
            return;
        }
        let message = match &now_file {
            Some(f) => format!(
                "emergency stop: {} exists; every fire is skipped until it is removed",
                f.display()
            ),
            None => "emergency stop file removed; fires run again".to_string(),
        };
        self.emergency = now_file;
        let batches: Vec<String> = self.targets.iter().map(|t| t.plan.batch.clone()).collect();
        for batch in batches {
            let event = NewEvent::new(now_ms(), &batch, EventKind::EmergencyStop, message.clone());
            self.write_event(&event);
        }
    }

    /// Why the batch must not run now, read fresh at each fire so that a
    /// pause from the CLI or dashboard counts without a restart.
    fn paused(&self, batch: &str) -> anyhow::Result<Option<String>> {
        if let Some(file) = &self.emergency {
            return Ok(Some(format!(
                "the emergency stop file {} exists",
                file.display()
            )));
        }
        let pause = tokio::task::block_in_place(|| self.store.pause(batch))?;
        Ok(pause.map(|p| format!("paused by {}: {}", p.by, p.reason)))
    }

    fn step(&mut self, i: usize, now: DateTime<Utc>) {
        let batch = self.targets[i].plan.batch.clone();
        let running = self.running.contains_key(&batch);
        if !self.targets[i].plan.is_due(now, running) {
            return;
        }
        let paused = match self.paused(&batch) {
            Ok(p) => p,
            Err(e) => {
                // Not stepped: the fire stays due and is tried again.
                warn(&format!("{batch}: cannot read the pause flag: {e:#}"));
                return;
            }
        };
        let before = self.targets[i].plan.next();
        let step = self.targets[i].plan.step(&Observed {
            now,
            paused,
            running,
        });
        for decision in &step.decisions {
            self.apply(i, decision);
        }
        if step.wait_until != before {
            let next = step.wait_until.map(|n| n.timestamp_millis());
            if let Err(e) =
                tokio::task::block_in_place(|| self.store.set_next_fire(&batch, next, now_ms()))
            {
                warn(&format!("{batch}: cannot store the next fire time: {e}"));
            }
        }
    }

    fn apply(&mut self, i: usize, decision: &Decision) {
        let plan = &self.targets[i].plan;
        let batch = plan.batch.clone();
        let at = decision.at();
        let reason = plan.reason(decision);
        self.record(
            &batch,
            &Fire {
                at: at.timestamp_millis(),
                outcome: decision.outcome().as_str().to_string(),
                reason: reason.clone(),
                run_id: None,
            },
        );
        if let Decision::Fire { .. } = decision {
            self.start_cycle(i, at, reason);
        }
    }

    fn start_cycle(&mut self, i: usize, at: DateTime<Utc>, note: Option<String>) {
        let opts = self.targets[i].opts.clone();
        let batch = opts.batch.clone();
        let (tx, rx) = watch::channel(Signal::Run);
        let db = self.db.clone();
        let task = self
            .cycles
            .spawn(async move {
                let (result, alert) = match runner::released(&db, opts, rx).await {
                    Ok(r) => (Ok(r.report), r.alert),
                    Err(e) => (Err(e), None),
                };
                Finished {
                    batch,
                    at,
                    note,
                    result,
                    alert,
                }
            })
            .id();
        self.running.insert(
            self.targets[i].plan.batch.clone(),
            Running { stop: tx, task, at },
        );
    }

    /// Records how a cycle started by a fire ended.
    fn finish(&mut self, done: Result<Finished, tokio::task::JoinError>) {
        let done = match done {
            Ok(d) => d,
            Err(e) => {
                // The cycle task panicked: its fire still gets a record.
                let Some(batch) = self
                    .running
                    .iter()
                    .find(|(_, r)| r.task == e.id())
                    .map(|(b, _)| b.clone())
                else {
                    return;
                };
                let at = self
                    .running
                    .remove(&batch)
                    .map_or_else(crate::util::time::now, |r| r.at);
                Finished {
                    batch,
                    at,
                    note: None,
                    result: Err(anyhow::anyhow!("the cycle task failed: {e}")),
                    alert: None,
                }
            }
        };
        let stop = self.running.remove(&done.batch).map(|r| r.stop);
        let fire = match &done.result {
            Ok(report) => ended(report, done.at, done.note.clone(), &done.batch),
            Err(e) => Fire {
                at: done.at.timestamp_millis(),
                outcome: Outcome::Error.as_str().to_string(),
                reason: Some(format!("the cycle could not run: {e:#}")),
                run_id: None,
            },
        };
        self.record(&done.batch, &fire);
        if let Ok(report) = &done.result {
            say(&report.line());
            for failure in &report.hooks_failed {
                say(&format!("{}: {failure}", done.batch));
            }
        }
        // The batch's next fire runs while it alerts; a stop still ends it.
        if let (Some(alert), Some(stop)) = (done.alert, stop) {
            let batch = done.batch;
            let task = self
                .alerts
                .spawn(async move { (batch, alert.run().await) })
                .id();
            self.alert_stops.insert(task, stop);
        }
    }

    /// The stop channels of every cycle running and every alert a cycle
    /// that ended still runs.
    fn stops(&self) -> impl Iterator<Item = &watch::Sender<Signal>> {
        self.running
            .values()
            .map(|r| &r.stop)
            .chain(self.alert_stops.values())
    }

    /// Says how an alert failed, in the journal.
    fn alerted(&mut self, done: Result<(tokio::task::Id, AlertDone), tokio::task::JoinError>) {
        let (task, failure) = match done {
            Ok((task, (batch, failure))) => (task, failure.map(|f| format!("{batch}: {f}"))),
            Err(e) => (e.id(), Some(format!("an alert task failed: {e}"))),
        };
        self.alert_stops.remove(&task);
        if let Some(line) = failure {
            say(&line);
        }
    }

    /// Writes a fire record and its event, and prints it.
    fn record(&mut self, batch: &str, fire: &Fire) {
        let written = tokio::task::block_in_place(|| self.store.record_fire(batch, fire, now_ms()));
        match written {
            Ok(event) => self.emit(&event),
            Err(e) => warn(&format!("{batch}: cannot record a fire: {e}")),
        }
        let local = self
            .targets
            .iter()
            .find(|t| t.plan.batch == batch)
            .map_or_else(
                || rfc3339(fire.at),
                |t| t.plan.local(time::to_datetime(fire.at)),
            );
        let run = fire
            .run_id
            .map(|r| format!(" (run {r})"))
            .unwrap_or_default();
        say(&format!(
            "{batch}: fire {local}: {}{run}",
            describe(&fire.outcome, fire.reason.as_deref())
        ));
    }

    /// A warning about every batch: once on stderr, and as a `daemon`
    /// event in each one's log.
    fn warn_all(&mut self, message: String) {
        warn(&message);
        for batch in self.batches() {
            self.write_event(&NewEvent::new(
                now_ms(),
                &batch,
                EventKind::Daemon,
                message.clone(),
            ));
        }
    }

    /// A warning about one batch: on stderr, and as a `daemon` event in
    /// its log.
    fn warn_of(&mut self, batch: &str, message: String) {
        warn(&format!("{batch}: {message}"));
        self.write_event(&NewEvent::new(now_ms(), batch, EventKind::Daemon, message));
    }

    fn write_event(&mut self, event: &NewEvent) {
        match tokio::task::block_in_place(|| self.store.log_event(event)) {
            Ok(_) => self.emit(event),
            Err(e) => warn(&format!("cannot record an event: {e}")),
        }
    }

    /// To the rolling log file, and to stdout for the journal.
    fn emit(&self, event: &NewEvent) {
        self.log.emit(event);
        if event.kind != "fire" {
            say(&format!(
                "{}: {}",
                event.batch.as_deref().unwrap_or("-"),
                event.message
            ));
        }
    }

    /// Stops firing; running cycles stop gracefully (a second request stops
    /// their workers at once) and their fires are recorded.
    async fn shutdown(&mut self, stop: &mut StopCount) {
        let mut sent = 0;
        let mut requests = (*stop.borrow()).max(1);
        // Said at once: views stop giving next fires that will not come.
        self.me.stopping_at = Some(now_ms());
        self.me.beat_at = 0;
        self.beat();
        if !self.running.is_empty() {
            say("stopping: no new fires; running cycles finish their in-flight items");
        }
        loop {
            let signal = if requests >= 2 {
                Signal::Immediate
            } else {
                Signal::Graceful
            };
            if requests != sent {
                for stop in self.stops() {
                    let _ = stop.send(signal);
                }
                sent = requests;
            }
            if self.cycles.is_empty() && self.alerts.is_empty() {
                break;
            }
            tokio::select! {
                // Its alert still runs: a stop asked before it began was
                // the cycle's (as for `nightshift run`).
                Some(done) = self.cycles.join_next() => self.finish(done),
                Some(done) = self.alerts.join_next_with_id() => self.alerted(done),
                // Still alive while the cycles finish.
                () = tokio::time::sleep(POLL) => self.beat(),
                changed = stop.changed() => match changed {
                    Ok(()) => requests = *stop.borrow(),
                    // Nobody can ask again: wait for the cycles as they are.
                    Err(_) => {
                        while let Some(done) = self.cycles.join_next().await {
                            self.finish(done);
                        }
                        while let Some(done) = self.alerts.join_next_with_id().await {
                            self.alerted(done);
                        }
                    }
                },
            }
        }
        let batches: Vec<String> = self.targets.iter().map(|t| t.plan.batch.clone()).collect();
        for batch in batches {
            let event = NewEvent::new(now_ms(), &batch, EventKind::Daemon, "daemon stopped");
            self.write_event(&event);
        }
        self.me.beat_at = now_ms();
        self.me.stopped_at = Some(self.me.beat_at);
        let now = self.me.beat_at;
        if let Err(e) = tokio::task::block_in_place(|| self.store.daemon_beat(&self.me, now)) {
            warn(&format!("cannot record the stop: {e}"));
        }
    }
}

/// The fire record of a finished cycle: it ran, or it stepped down.
fn ended(report: &RunReport, at: DateTime<Utc>, note: Option<String>, batch: &str) -> Fire {
    // `BATCH: STATE: why` is how the runner words a cycle that stepped down.
    let why = || {
        let prefix = format!("{batch}: {}: ", report.state);
        report
            .summary
            .strip_prefix(&prefix)
            .unwrap_or(&report.summary)
            .to_string()
    };
    let (outcome, reason) = match report.state {
        // Paused before it began; a cycle paused midway ran.
        RunState::Paused if report.stopped.is_none() => (Outcome::SkippedPaused, Some(why())),
        RunState::LockHeld => (Outcome::LockHeld, Some(why())),
        _ => {
            let stopped = report
                .stopped
                .as_ref()
                .map(|s| format!("stopped early: {s}"));
            let reason = match (note, stopped) {
                (Some(n), Some(s)) => Some(format!("{n}; {s}")),
                (n, s) => n.or(s),
            };
            (Outcome::Ran, reason)
        }
    };
    Fire {
        at: at.timestamp_millis(),
        outcome: outcome.as_str().to_string(),
        reason,
        run_id: report.run_id,
    }
}

/// A line of the journal. Best effort: with its stdout gone (a closed pipe
/// or terminal) the daemon goes on, and says so once in the store.
fn say(line: &str) {
    stdio::out_line(&format!("{} {}", rfc3339(now_ms()), sanitize::line(line)));
}

fn warn(line: &str) {
    stdio::err_line(&format!(
        "nightshift daemon: warning: {}",
        sanitize::line(line)
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunCounts;
    use crate::runner::StopReason;

    fn report(state: RunState, summary: &str, stopped: Option<StopReason>) -> RunReport {
        RunReport {
            run_id: Some(7),
            state,
            counts: RunCounts::default(),
            summary: summary.to_string(),
            stopped,
            hooks_failed: Vec::new(),
            waiting: Vec::new(),
        }
    }

    fn at() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    #[test]
    fn a_finished_cycle_becomes_a_fire_record() {
        let held = report(
            RunState::LockHeld,
            "b: lock-held: lock held by db1:42 (run 6), stepped down",
            None,
        );
        let fire = ended(&held, at(), None, "b");
        assert_eq!(
            (fire.outcome.as_str(), fire.reason.as_deref(), fire.run_id),
            (
                "lock-held",
                Some("lock held by db1:42 (run 6), stepped down"),
                Some(7)
            )
        );
        // Paused between the decision and the cycle's own check.
        let paused = report(RunState::Paused, "b: paused: maintenance", None);
        let fire = ended(&paused, at(), None, "b");
        assert_eq!(
            (fire.outcome.as_str(), fire.reason.as_deref()),
            ("skipped-paused", Some("maintenance"))
        );
        // Paused midway, or stopped by max_duration: it ran, and says why it
        // stopped, after the note it started with.
        let midway = report(
            RunState::Paused,
            "b: 3 done, ...",
            Some(StopReason::Paused("maintenance".into())),
        );
        assert_eq!(ended(&midway, at(), None, "b").outcome, "ran");
        let capped = report(
            RunState::Ok,
            "b: 9 done, ...",
            Some(StopReason::MaxDuration),
        );
        let fire = ended(&capped, at(), Some("catch-up: x".into()), "b");
        assert_eq!(
            (fire.outcome.as_str(), fire.reason.as_deref(), fire.at),
            (
                "ran",
                Some("catch-up: x; stopped early: max_duration reached"),
                at().timestamp_millis()
            )
        );
        let ok = report(RunState::Ok, "b: 1 done", None);
        assert_eq!(ended(&ok, at(), None, "b").reason, None);
    }
}
