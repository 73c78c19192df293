//! Side effects off the UI thread: store writes (requeue, skip, pause,
//! unpause), counting what a "requeue all" would move, and starting a
//! runner. Results come back as arrivals. Every write is recorded by the
//! store as an event with `user@host`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::Msg;
use super::action::{Arrival, Write};
use crate::model::Pause;
use crate::store::{Access, CancelOutcome, CancelTo, ItemsQuery, Selection, Store};
use crate::util::files;
use crate::util::identity::actor;
use crate::util::noun;
use crate::util::time::now_ms;

/// Recorded with a skip made from the dashboard.
const SKIP_REASON: &str = "skipped from the dashboard";
const CANCEL_REASON: &str = "cancelled from the dashboard";

pub enum Job {
    Write(Write),
    Prepare {
        batch: String,
        query: ItemsQuery,
        what: String,
    },
}

/// How to start a runner that outlives the dashboard.
#[derive(Debug, Clone)]
pub struct RunnerSpawn {
    pub db: PathBuf,
    pub config: Option<PathBuf>,
    /// Where the runner's stdout/stderr go (else /dev/null).
    pub log: Option<PathBuf>,
    /// Keeps track of the runners started, for a host that stops them when
    /// it ends (the demo); `None` lets them outlive the dashboard.
    pub runners: Option<Runners>,
}

/// Runners the dashboard started that have not been reaped yet. A pid is
/// removed only once its process has been waited for, so a pid in here is
/// never a reused one.
#[derive(Debug, Clone, Default)]
pub struct Runners(Arc<Mutex<BTreeSet<u32>>>);

impl Runners {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn add(&self, pid: u32) {
        self.lock().insert(pid);
    }

    fn reaped(&self, pid: u32) {
        self.lock().remove(&pid);
    }

    /// Pids of the runners still alive (or not yet reaped).
    pub fn live(&self) -> Vec<u32> {
        self.lock().iter().copied().collect()
    }

    /// SIGTERM to every runner still alive, `grace` for them to end (they
    /// let in-flight items finish and release the rest), then SIGKILL.
    #[cfg(unix)]
    pub fn stop_all(&self, grace: Duration) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let signal = |sig: Signal| {
            for pid in self.live() {
                if let Ok(raw) = i32::try_from(pid) {
                    let _ = kill(Pid::from_raw(raw), sig);
                }
            }
        };
        signal(Signal::SIGTERM);
        let deadline = std::time::Instant::now() + grace;
        while !self.live().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        signal(Signal::SIGKILL);
        // Their reaper threads remove them once waited for.
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !self.live().is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[cfg(not(unix))]
    pub fn stop_all(&self, _grace: Duration) {}
}

pub struct Effects {
    tx: Sender<Job>,
    /// Says the thread has closed its connection.
    done: Receiver<()>,
}

impl Effects {
    pub fn spawn(spawn: RunnerSpawn, out: Sender<Msg>) -> Effects {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("nightshift-effects".into())
            .spawn(move || {
                work(&spawn, &rx, &out);
                let _ = done_tx.send(());
            })
            .expect("spawning the effects thread");
        Effects { tx, done }
    }

    /// Stops the thread once its current job is done, waiting at most
    /// `wait` for it to close its connection (see `Poller::stop`).
    pub fn stop(self, wait: Duration) {
        let Effects { tx, done } = self;
        drop(tx);
        let _ = done.recv_timeout(wait);
    }

    pub fn send(&self, job: Job) {
        let _ = self.tx.send(job);
    }
}

fn work(spawn: &RunnerSpawn, rx: &Receiver<Job>, out: &Sender<Msg>) {
    let mut store: Option<Store> = None;
    for job in rx {
        let arrival = match job {
            Job::Prepare { batch, query, what } => match open(&spawn.db, &mut store)
                .and_then(|s| s.failed_keys(&batch, &query).map_err(|e| e.to_string()))
            {
                Ok(keys) => Arrival::Prepared(Write::Requeue { batch, keys, what }),
                Err(e) => Arrival::Done {
                    ok: false,
                    message: format!("cannot count the failed items: {e}"),
                },
            },
            Job::Write(Write::Resume { batch }) => start_runner(spawn, &batch, out),
            Job::Write(write) => match open(&spawn.db, &mut store).and_then(|s| apply(s, &write)) {
                Ok(message) => Arrival::Done { ok: true, message },
                Err(e) => {
                    store = None;
                    Arrival::Done {
                        ok: false,
                        message: format!("nothing changed: {e}"),
                    }
                }
            },
        };
        if out.send(Msg::Arrival(arrival)).is_err() {
            return;
        }
    }
}

fn open<'a>(db: &std::path::Path, store: &'a mut Option<Store>) -> Result<&'a mut Store, String> {
    if store.is_none() {
        *store = Some(Store::open(db, Access::ReadWrite).map_err(|e| e.to_string())?);
    }
    store.as_mut().ok_or_else(|| "store not open".to_string())
}

fn apply(store: &mut Store, write: &Write) -> Result<String, String> {
    let who = actor();
    let now = now_ms();
    let name = |b: &str| crate::tui::format::inert(b).into_owned();
    let err = |e: crate::store::StoreError| e.to_string();
    match write {
        Write::Requeue { batch, keys, what } => {
            // Items that left `failed` since the dialog (a runner redrove
            // them) are left alone.
            let still = store.failed_among(batch, keys).map_err(err)?;
            let moved = if still.is_empty() {
                0
            } else {
                let sel = Selection {
                    keys: still,
                    ..Selection::default()
                };
                store
                    .requeue_counted(batch, &sel, false, &who, now)
                    .map_err(err)?
            };
            let mut msg = format!(
                "requeued {}: {}",
                noun::count(moved, "item"),
                crate::tui::format::inert(what)
            );
            if moved < keys.len() {
                msg.push_str(&format!(
                    "; {} had changed meanwhile and were left alone",
                    keys.len() - moved
                ));
            }
            Ok(msg)
        }
        Write::Skip { batch, key, label } => {
            let report = store
                .skip(batch, std::slice::from_ref(key), SKIP_REASON, &who, now)
                .map_err(err)?;
            let item = crate::tui::format::item_in_sentence(key, label);
            Ok(if report.skipped.len() == 1 {
                format!("skipped {item} (marked done without running)")
            } else {
                format!("{item} was already done")
            })
        }
        Write::SkipMarked { batch, keys, .. } => {
            let report = store
                .skip(batch, keys, SKIP_REASON, &who, now)
                .map_err(err)?;
            let n = report.skipped.len();
            let mut msg = format!(
                "skipped {} (done without running)",
                noun::count(n, "marked item")
            );
            if !report.already_done.is_empty() {
                msg.push_str(&format!(
                    "; {} had been done meanwhile and were left alone",
                    report.already_done.len()
                ));
            }
            Ok(msg)
        }
        Write::Pause { batch, reason } => {
            let pause = Pause {
                reason: reason.clone(),
                by: who,
                at: now,
            };
            store.pause_batch(batch, &pause).map_err(err)?;
            Ok(format!("paused {}: {}", name(batch), name(reason)))
        }
        Write::Unpause { batch } => {
            let done = store.unpause_batch(batch, &who, now).map_err(err)?;
            Ok(match (done.was_paused, done.lifted.is_some()) {
                (true, false) => format!("unpaused {}", name(batch)),
                (true, true) => format!("unpaused {} and lifted its retry-after hold", name(batch)),
                (false, true) => format!("lifted the retry-after hold of {}", name(batch)),
                (false, false) => format!("{} was not paused", name(batch)),
            })
        }
        Write::Resume { batch } => Err(format!("internal: resume of {batch} reached the store")),
        Write::Cancel {
            batch, key, label, ..
        } => {
            let item = crate::tui::format::item_in_sentence(key, label);
            let done = store
                .cancel_item(batch, key, CancelTo::Manual, &who, CANCEL_REASON, now)
                .map_err(err)?;
            Ok(match done {
                CancelOutcome::Asked { waiting: None, .. } => {
                    format!("asked the runner of {item} to stop its worker; it goes to manual")
                }
                CancelOutcome::Asked {
                    waiting: Some(wait),
                    ..
                } => format!(
                    "asked the runner of {item} to drop it (not started: {}); it goes to manual",
                    crate::model::waiting::claim_wait_said(wait)
                ),
                CancelOutcome::Moved { from } => {
                    format!("cancelled {item} (it was {from}): now manual")
                }
                CancelOutcome::Already { at } => format!("{item} is already {at}; nothing changed"),
                CancelOutcome::Orphaned { .. } => {
                    format!("cancelled {item} (its runner is gone): now manual")
                }
            })
        }
        Write::CancelMarked { batch, keys, .. } => {
            let (mut asked, mut moved, mut already, mut done) = (0, 0, 0, 0);
            for key in keys {
                match store.cancel_item(batch, key, CancelTo::Manual, &who, CANCEL_REASON, now) {
                    Ok(CancelOutcome::Asked { .. }) => asked += 1,
                    Ok(CancelOutcome::Moved { .. } | CancelOutcome::Orphaned { .. }) => moved += 1,
                    Ok(CancelOutcome::Already { .. }) => already += 1,
                    // Done meanwhile: a done item is never cancelled.
                    Err(crate::store::StoreError::Refused(_)) => done += 1,
                    Err(e) => return Err(err(e)),
                }
            }
            let mut msg = format!(
                "cancelled {}: {moved} moved to manual, {asked} asked of their runners",
                noun::count(keys.len() - done, "marked item")
            );
            if already > 0 {
                msg.push_str(&format!(", {already} already there"));
            }
            if done > 0 {
                msg.push_str(&format!(
                    "; {done} had been done meanwhile and {} left alone",
                    if done == 1 { "was" } else { "were" }
                ));
            }
            Ok(msg)
        }
        Write::Stop { batch } => {
            let asked = store.ask_stop(batch, false, &who, now).map_err(err)?;
            Ok(if asked.is_empty() {
                format!("no runner holds {}; nothing to stop", name(batch))
            } else {
                let runners: Vec<String> = asked.iter().map(|a| a.said(now)).collect();
                format!(
                    "asked {} to stop {} (no new items; in-flight ones get the grace period)",
                    name(&runners.join(", ")),
                    name(batch)
                )
            })
        }
    }
}

/// The arguments of the runner for `batch`: `[--config=FILE] run --trigger
/// dashboard --detached BATCH`. Nothing here can be read as another option:
/// the config path is joined to its flag, and the batch name must pass the
/// rule the command line applies (a store made before the rule may hold a
/// batch named `--config=x`), which refuses a leading `-`. (`--` cannot guard
/// the name: after `--`, `run` reads the worker's argv.)
fn runner_args(config: Option<&Path>, batch: &str) -> Result<Vec<OsString>, String> {
    crate::batch_name::check(batch).map_err(|e| {
        format!(
            "cannot start a run of {}: {e}",
            crate::batch_name::shown(batch)
        )
    })?;
    let mut args = Vec::with_capacity(6);
    if let Some(config) = config {
        let mut flag = OsString::from("--config=");
        flag.push(config);
        args.push(flag);
    }
    args.extend(["run", "--trigger", "dashboard", "--detached", batch].map(OsString::from));
    Ok(args)
}

/// Starts `nightshift run BATCH --trigger dashboard --detached` with the
/// same store and config. Not in a new process group, so that the runner's
/// own `setsid()` succeeds and it leaves this terminal's session: it keeps
/// running when the dashboard (or the SSH connection) goes away.
fn start_runner(spawn: &RunnerSpawn, batch: &str, out: &Sender<Msg>) -> Arrival {
    let fail = |message: String| Arrival::Done { ok: false, message };
    let exe = match crate::util::identity::this_program() {
        Ok(exe) => exe,
        Err(e) => return fail(format!("cannot find the nightshift executable: {e}")),
    };
    let args = match runner_args(spawn.config.as_deref(), batch) {
        Ok(args) => args,
        Err(message) => return fail(message),
    };
    let mut cmd = Command::new(exe);
    // In the environment, not the arguments: a database URL may hold a
    // password, and arguments are visible to every user (`ps`).
    cmd.env("NIGHTSHIFT_DB", &spawn.db);
    cmd.args(args).stdin(Stdio::null());
    // Private like the event log: run output may quote worker errors.
    let log = spawn.log.as_ref().and_then(|path| {
        files::private_dir(path.parent()?).ok()?;
        let file = files::open_append_private(path).ok()?;
        Some((file.try_clone().ok()?, file, path.clone()))
    });
    let log_path = match log {
        Some((a, b, path)) => {
            cmd.stdout(a).stderr(b);
            Some(path)
        }
        None => {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
            None
        }
    };
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return fail(format!("cannot start a runner: {e}")),
    };
    let pid = child.id();
    let runners = spawn.runners.clone();
    if let Some(r) = &runners {
        r.add(pid);
    }
    let batch_name = crate::tui::format::inert(batch).into_owned();
    let out = out.clone();
    let name = batch_name.clone();
    // Reap it (no zombie while the dashboard lives) and say how it ended.
    std::thread::spawn(move || {
        let waited = child.wait();
        if let Some(r) = &runners {
            r.reaped(pid);
        }
        let (ok, how) = match waited {
            Ok(status) => match status.code() {
                Some(0) => (true, "finished".to_string()),
                Some(1) => (true, "finished; some items failed".to_string()),
                Some(code) => (false, format!("exited with status {code}")),
                None => (false, format!("ended by {status}")),
            },
            Err(e) => (false, format!("could not be waited for: {e}")),
        };
        let mut message = format!("the run of {name} (pid {pid}) {how}");
        if let (false, Some(path)) = (ok, &log_path) {
            message.push_str(&format!("; see {}", path.display()));
        }
        let _ = out.send(Msg::Arrival(Arrival::RunnerExited { ok, message }));
    });
    let lasts = if spawn.runners.is_some() {
        "it stops when you quit"
    } else {
        "it keeps running if you quit"
    };
    Arrival::Done {
        ok: true,
        message: format!("started a run of {batch_name} (pid {pid}); {lasts}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    /// What the runner's command line parses to is the batch asked for, and
    /// the config given, whatever either is called.
    #[test]
    fn the_runner_reads_its_batch_and_config_back() {
        for batch in ["articles", "記事", "my batch", "a=b", "x--y"] {
            for config in [None, Some(Path::new("-odd dir/nightshift.toml"))] {
                let args = runner_args(config, batch).unwrap();
                let cli =
                    Cli::try_parse_from(std::iter::once(OsString::from("nightshift")).chain(args))
                        .unwrap_or_else(|e| panic!("{batch:?}: {e}"));
                assert_eq!(cli.config.as_deref(), config, "{batch:?}");
                let Some(Command::Run(run)) = cli.command else {
                    panic!("{batch:?}: not a run");
                };
                assert_eq!(run.batch, batch);
                assert!(run.detached && run.worker.is_empty());
            }
        }
    }

    /// A marked set cancelled on a real store: the items not running move
    /// to manual, a done one is left alone and said so.
    #[test]
    fn a_marked_set_is_cancelled_item_by_item() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = Store::create(&dir.path().join("n.db")).unwrap();
        let items: Vec<crate::model::NewItem> = ["a", "b", "c"]
            .iter()
            .map(|k| crate::model::NewItem {
                key: (*k).into(),
                label: (*k).into(),
                payload: "{}".into(),
                ..Default::default()
            })
            .collect();
        store.add_items("x", &items, now_ms(), |_| {}).unwrap();
        store
            .skip("x", &["c".to_string()], "done by hand", "t@h", now_ms())
            .unwrap();
        let write = Write::CancelMarked {
            batch: "x".into(),
            keys: vec!["a".into(), "b".into(), "c".into()],
            left: 0,
        };
        let msg = apply(&mut store, &write).unwrap();
        assert_eq!(
            msg,
            "cancelled 2 marked items: 2 moved to manual, 0 asked of their runners; \
             1 had been done meanwhile and was left alone"
        );
        for key in ["a", "b"] {
            let item = store.item("x", key).unwrap();
            assert_eq!(item.tier, Some(crate::model::Tier::Manual), "{key}");
        }
        assert_eq!(
            store.item("x", "c").unwrap().status,
            crate::model::Status::Done
        );
    }

    /// A name that would be read as an option is refused before anything
    /// starts, with the rule's reason.
    #[test]
    fn a_batch_that_looks_like_an_option_starts_nothing() {
        for batch in ["-x", "--config=/tmp/evil.toml", "--help"] {
            let err = runner_args(None, batch).unwrap_err();
            assert!(err.starts_with("cannot start a run of \""), "{err}");
            assert!(err.contains("must not start with '-'"), "{err}");
        }
    }
}
