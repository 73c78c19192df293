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
//! after the machine slept). Every [`DAEMON_BEAT`](crate::model::DAEMON_BEAT)
//! it records a heartbeat, so that views can say when no daemon fires a
//! schedule.

mod cycles;
mod fires;
mod journal;
mod presence;
mod reload;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::plan::Plan;
use crate::model::{EventKind, Holder, NewEvent};
use crate::runner::{EventLog, RunOptions, Signal};
use crate::store::{Access, Store, StoreIdentity, Verdict};
use crate::util::time::now_ms;
use crate::util::{identity, stdio};
use cycles::{AlertDone, Finished, Running};
use journal::{say, warn};

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

/// What the daemon takes from its config: the batches it fires, and the
/// name of every batch the config schedules (those left to other daemons
/// by `--batch` too). The stored plan of any other batch is forgotten
/// (see [`Plan::resume`]).
pub struct Setup {
    pub targets: Vec<Target>,
    pub scheduled: Vec<String>,
}

/// What the stop channel carries: how many stop requests came (0 = run).
/// The first lets running cycles stop gracefully, the next stops them now.
pub type StopCount = watch::Receiver<u32>;

/// Builds the targets again from the config as it is now, or says why it
/// cannot (the daemon then keeps the ones it has).
pub type Load<'a> = Box<dyn FnMut() -> anyhow::Result<Setup> + Send + 'a>;

/// How the daemon is asked to reload its config (SIGHUP: `asked` counts
/// the requests) and how it does (`load`).
pub struct Reload<'a> {
    pub asked: watch::Receiver<u64>,
    pub load: Load<'a>,
}

struct Daemon {
    db: PathBuf,
    store: Store,
    targets: Vec<Target>,
    /// Every batch the config schedules ([`Setup::scheduled`]).
    scheduled: Vec<String>,
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
    setup: Setup,
    mut stop: StopCount,
    mut reload: Reload<'_>,
) -> anyhow::Result<()> {
    let Setup { targets, scheduled } = setup;
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
        scheduled,
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
        d.forget_unscheduled();
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

    fn batches(&self) -> Vec<String> {
        self.targets.iter().map(|t| t.plan.batch.clone()).collect()
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
