//! A runner killed outright (SIGKILL, the OOM killer) cannot stop its
//! workers: each leads its own process group, so they ran on, calling a
//! paid API, until a later run on this host stopped them; and a runner on
//! another host, taking the dead run's claims back once its lock lapsed,
//! ran their items a second time beside them.
//!
//! So a process that runs workers first starts a guard ([`start`]): this
//! program again (`--guard-runner ID`), in its own process group, with
//! its stdin a pipe only we hold. The runner tells it each worker group it
//! records (`Cycle::record_worker`) and each run that ended. The kernel
//! closes the pipe when we exit, however we exit; the guard then stops
//! those groups (`groups::stop`, which checks each is still the one
//! recorded) and every process whose environment names us as its runner
//! (`orphans::reap_matching`), and exits. After an orderly end there is
//! nothing left to find (each cycle stopped its own), so it finds nothing.
//!
//! The guard ignores the signals a terminal or `pkill` sends, so that one
//! sent to everything of ours still leaves it to stop the workers once its
//! runner is gone. Only a SIGKILL of the guard as well leaves them running
//! (the next run on this host stops them then). Linux only.
//!
//! A runner stopped (SIGSTOP, a debugger) is not gone, but it renews
//! nothing: once its seat lapses, a runner on another host, which cannot
//! see it, takes its items over. So the runner also tells the guard each
//! renewal of its seat ([`renewed`]); while the runner is stopped, the
//! guard stops the workers of each run whose seat is about to lapse, so
//! that no item runs twice at once. Resumed, the runner finds its lock
//! taken and records nothing of them (or, not taken, retries the items).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

/// The argument that makes this program a guard: `--guard-runner ID`.
pub const GUARD_ARG: &str = "--guard-runner";

/// The pipe to our guard, and what it was told, to tell a new one should
/// it die: the groups recorded by (run, slot).
struct Watched {
    guard: Option<Guard>,
    groups: HashMap<(i64, u32), (u32, u64)>,
    runner: String,
}

static GUARD: Mutex<Option<Watched>> = Mutex::new(None);

fn guard() -> std::sync::MutexGuard<'static, Option<Watched>> {
    GUARD.lock().unwrap_or_else(|p| p.into_inner())
}

/// Starts this process's guard, once. False where it could not be started
/// (or on a system without one): the workers are then stopped by the next
/// run on this host, as before.
pub fn start() -> bool {
    let mut watched = guard();
    if watched.is_some() {
        return true;
    }
    let me = std::process::id();
    let runner = super::orphans::runner_id(me, crate::util::identity::pid_start(me));
    let guard = spawn(&runner);
    let started = guard.is_some();
    *watched = Some(Watched {
        guard,
        groups: HashMap::new(),
        runner,
    });
    started
}

/// A guard running, and the pipe it reads.
struct Guard {
    child: std::process::Child,
    pipe: std::process::ChildStdin,
}

impl Guard {
    /// Writes `line` whole (it is under `PIPE_BUF`, so a write is all or
    /// nothing). False when the guard is gone. A guard that does not read
    /// (stopped) misses the line rather than stop us.
    fn write(&mut self, line: &str) -> bool {
        match self.pipe.write_all(line.as_bytes()) {
            Ok(()) => true,
            Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
}

#[cfg(target_os = "linux")]
fn spawn(runner: &str) -> Option<Guard> {
    let guard = try_spawn(runner);
    if let Err(e) = &guard {
        crate::util::stdio::err_line(&format!(
            "nightshift: warning: no guard for this runner's workers ({}): killed outright, it leaves them running until a later run on this host stops them",
            crate::util::sanitize::line(&e.to_string())
        ));
    }
    guard.ok()
}

#[cfg(target_os = "linux")]
fn try_spawn(runner: &str) -> std::io::Result<Guard> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    let exe = crate::util::identity::this_program()?;
    let mut cmd = Command::new(exe);
    cmd.arg(GUARD_ARG)
        .arg(runner)
        .stdin(Stdio::piped())
        // Not our output pipes: a reader of ours waits for their end.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .current_dir("/")
        // A Ctrl-C at the terminal goes to our group, not to it.
        .process_group(0);
    // Noted as ours: `subreaper` must not take it for an orphan we adopted.
    let mut child = super::subreaper::noted(|| cmd.spawn(), |c| Some(c.id()))?;
    let pipe = child
        .stdin
        .take()
        .ok_or_else(|| std::io::Error::other("no pipe"))?;
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    fcntl(&pipe, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    Ok(Guard { child, pipe })
}

#[cfg(not(target_os = "linux"))]
fn spawn(_runner: &str) -> Option<Guard> {
    None
}

/// Tells the guard the group of the worker just spawned for `slot` of
/// `run_id` (its leader's pid and start time).
pub fn worker(run_id: i64, slot: u32, pid: u32, start: u64) {
    tell(
        |w| {
            w.groups.insert((run_id, slot), (pid, start));
        },
        &worker_line(run_id, slot, pid, start),
    );
}

/// A worker group as the guard reads it (`serve`).
fn worker_line(run_id: i64, slot: u32, pid: u32, start: u64) -> String {
    format!("w {run_id} {slot} {pid} {start}\n")
}

/// Tells the guard that `run_id` ended: its groups are gone.
pub fn run_ended(run_id: i64) {
    tell(
        |w| w.groups.retain(|(run, _), _| *run != run_id),
        &format!("e {run_id}\n"),
    );
}

/// Tells the guard that `run_id` renewed its seat for `ttl`: should its
/// runner be stopped until the seat lapses, the guard stops its workers.
pub fn renewed(run_id: i64, ttl: std::time::Duration) {
    tell(|_| {}, &format!("r {run_id} {}\n", ttl.as_millis()));
}

/// Notes a change, and writes `line` to the guard. A guard gone (killed)
/// is started again and told every group it must know.
fn tell(change: impl FnOnce(&mut Watched), line: &str) {
    let mut watched = guard();
    let Some(w) = watched.as_mut() else {
        return;
    };
    change(w);
    let Some(guard) = w.guard.as_mut() else {
        return;
    };
    if guard.write(line) {
        return;
    }
    // Its zombie, reaped (it is gone: its end of the pipe closed).
    let _ = guard.child.try_wait();
    w.guard = spawn(&w.runner);
    if let Some(guard) = w.guard.as_mut() {
        for ((run, slot), (pid, start)) in &w.groups {
            guard.write(&worker_line(*run, *slot, *pid, *start));
        }
    }
}

/// Takes `--guard-runner ID` from the front of the arguments.
pub fn take_arg(args: &[std::ffi::OsString]) -> Option<String> {
    if args.get(1).is_some_and(|a| a == GUARD_ARG) {
        return args.get(2).and_then(|a| a.to_str()).map(str::to_string);
    }
    None
}

/// What a guard knows: the worker groups of each run, and when each run
/// last renewed its seat (and for how long).
#[derive(Default)]
struct Known {
    groups: HashMap<(i64, u32), (u32, u64)>,
    seats: HashMap<i64, (std::time::Instant, std::time::Duration)>,
}

impl Known {
    /// Takes one line its runner wrote.
    fn read(&mut self, line: &str) {
        let mut f = line.split(' ');
        match (f.next(), f.next().and_then(|r| r.parse::<i64>().ok())) {
            (Some("w"), Some(run)) => {
                let n: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
                if let [slot, pid, start] = n[..] {
                    self.groups.insert((run, slot as u32), (pid as u32, start));
                }
            }
            (Some("r"), Some(run)) => {
                if let Some(ms) = f.next().and_then(|x| x.parse().ok()) {
                    let ttl = std::time::Duration::from_millis(ms);
                    self.seats.insert(run, (std::time::Instant::now(), ttl));
                }
            }
            (Some("e"), Some(run)) => {
                self.groups.retain(|(r, _), _| *r != run);
                self.seats.remove(&run);
            }
            _ => {}
        }
    }

    /// Takes out the groups of the runs whose seat is about to lapse: a
    /// fifth of the TTL early, since the renewal was read after the
    /// runner timed it, and a takeover elsewhere may start its worker
    /// the moment it lapses.
    fn lapsing(&mut self) -> Vec<crate::model::WorkerGroup> {
        let runs: Vec<i64> = self
            .seats
            .iter()
            .filter(|(_, (at, ttl))| at.elapsed() >= *ttl - *ttl / 5)
            .map(|(run, _)| *run)
            .collect();
        let mut lapsing = Vec::new();
        for run in runs {
            self.seats.remove(&run);
            self.groups.retain(|&(r, slot), &mut (pid, start)| {
                if r == run {
                    lapsing.extend(super::groups::of(run, slot, pid, Some(start)));
                }
                r != run
            });
        }
        lapsing
    }
}

/// The guard itself: reads what its runner tells it until the pipe
/// closes, then stops what the runner left running. Meanwhile, while its
/// runner is stopped, stops the workers of each run whose seat lapses.
/// Returns the exit code.
#[cfg(target_os = "linux")]
pub fn serve(runner: &str) -> i32 {
    use std::io::BufRead;
    use std::sync::Arc;
    // Caught by a handler that does nothing: ignored, without `unsafe`.
    let unused = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [
        nix::libc::SIGINT,
        nix::libc::SIGTERM,
        nix::libc::SIGHUP,
        nix::libc::SIGQUIT,
    ] {
        let _ = signal_hook::flag::register(sig, Arc::clone(&unused));
    }
    let known = Arc::new(Mutex::new(Known::default()));
    let watched = Arc::clone(&known);
    let parent = std::os::unix::process::parent_id();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(std::time::Duration::from_millis(100));
            let stopped = crate::util::identity::proc_stat(parent)
                .is_some_and(|s| matches!(s.state, 'T' | 't'));
            if !stopped {
                continue;
            }
            let lapsing = watched.lock().unwrap_or_else(|p| p.into_inner()).lapsing();
            super::groups::stop(&lapsing);
        }
    });
    let stdin = std::io::stdin().lock();
    for line in stdin.split(b'\n') {
        let Ok(line) = line else { break };
        known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .read(&String::from_utf8_lossy(&line));
    }
    let groups = std::mem::take(&mut known.lock().unwrap_or_else(|p| p.into_inner()).groups);
    let recorded: Vec<crate::model::WorkerGroup> = groups
        .into_iter()
        .filter_map(|((run, slot), (pid, start))| super::groups::of(run, slot, pid, Some(start)))
        .collect();
    super::groups::stop(&recorded);
    super::orphans::reap_matching(&[vec![format!("{}={runner}", super::orphans::RUNNER_VAR)]]);
    0
}

#[cfg(not(target_os = "linux"))]
pub fn serve(_runner: &str) -> i32 {
    0
}
