//! Every process the runner starts (workers, source and alert commands)
//! goes through [`spawn`], which notes it, so the runner can tell its own
//! children from orphans it adopted.
//!
//! A `nightshift run` process is a child subreaper (`adopt_orphans`,
//! Linux `PR_SET_CHILD_SUBREAPER`): a process a worker left behind when it
//! exited (a daemon that called `setsid`, with its environment cleared,
//! escapes the worker's group and the environment scan of `orphans`)
//! becomes the runner's child instead of init's, so the cycle finds it by
//! its parent and stops it when it ends ([`reap_adopted`]). Adopted
//! children that exit are reaped as the cycle goes (their zombies would
//! otherwise fill the process table). The daemon is not a subreaper: its
//! cycles run side by side, and an adopted process does not say whose
//! worker left it.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::util::identity;

/// Our own children: pid → start time. Entries of children already reaped
/// are dropped as scans find them gone.
static SPAWNED: Mutex<Option<HashMap<u32, u64>>> = Mutex::new(None);
/// Children we reap ourselves (`posix`), from their spawn until [`reaped`]
/// says they were: a pid is nobody else's while it is unreaped, so no
/// start time (a read of `/proc` per worker) is needed to know them. Its
/// own lock, not `SPAWNED`'s: a reap must not wait for a scan or for a
/// spawn in progress (its vfork holds that lock until the child execs).
static UNREAPED: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// This process adopts orphaned descendants.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// Makes this process a child subreaper. For a process that runs one cycle
/// (`nightshift run`). False where the system has no such thing.
#[cfg(target_os = "linux")]
pub fn adopt_orphans() -> bool {
    let on = nix::sys::prctl::set_child_subreaper(true).is_ok();
    ADOPTING.store(on, Ordering::SeqCst);
    on
}

#[cfg(not(target_os = "linux"))]
pub fn adopt_orphans() -> bool {
    false
}

/// Starts `cmd`, noting the child as ours (see [`noted`]).
pub fn spawn(cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    noted(|| cmd.spawn(), tokio::process::Child::id)
}

/// Runs `start`, which starts one child, noting the child (its pid given
/// by `pid`) as ours with its start time. A scan for adopted children
/// takes the same lock, so it never sees one of ours before it is noted.
pub fn noted<T>(
    start: impl FnOnce() -> std::io::Result<T>,
    pid: impl FnOnce(&T) -> Option<u32>,
) -> std::io::Result<T> {
    if !ADOPTING.load(Ordering::SeqCst) {
        return start();
    }
    let mut spawned = SPAWNED.lock().unwrap_or_else(|p| p.into_inner());
    let child = start()?;
    if let Some((pid, start)) = pid(&child).and_then(|p| identity::pid_start(p).map(|s| (p, s))) {
        spawned.get_or_insert_with(HashMap::new).insert(pid, start);
    }
    Ok(child)
}

/// Runs `start`, which starts one child that the caller will reap itself
/// (through [`reaped`]), noting it as ours until then; under the lock a
/// scan takes, so that no scan sees it before it is noted.
pub fn noted_until_reaped<T>(
    start: impl FnOnce() -> std::io::Result<T>,
    pid: impl FnOnce(&T) -> Option<u32>,
) -> std::io::Result<T> {
    if !ADOPTING.load(Ordering::SeqCst) {
        return start();
    }
    let _scan = SPAWNED.lock().unwrap_or_else(|p| p.into_inner());
    let child = start()?;
    if let Some(pid) = pid(&child) {
        unreaped().get_or_insert_with(HashSet::new).insert(pid);
    }
    Ok(child)
}

fn unreaped() -> std::sync::MutexGuard<'static, Option<HashSet<u32>>> {
    UNREAPED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs `wait`, a wait for the child `pid` noted by [`noted_until_reaped`],
/// and forgets the child if `wait` says it reaped it. Not under the scan's
/// lock: a child is in the set for as long as it is unreaped, so a scan
/// never takes a live one of ours for adopted; one reaped during a scan
/// may be (its wait or kill then finds no such process).
pub fn reaped<T>(pid: u32, wait: impl FnOnce() -> (T, bool)) -> T {
    let (out, gone) = wait();
    if gone
        && ADOPTING.load(Ordering::SeqCst)
        && let Some(set) = unreaped().as_mut()
    {
        set.remove(&pid);
    }
    out
}

/// Children of this process that it did not start: adopted orphans.
#[cfg(target_os = "linux")]
fn adopted(spawned: &mut HashMap<u32, u64>) -> Vec<(u32, identity::ProcStat)> {
    let me = std::process::id();
    let children: Vec<(u32, identity::ProcStat)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter_map(|pid| identity::proc_stat(pid).map(|s| (pid, s)))
        .filter(|(_, s)| s.ppid == me)
        .collect();
    spawned.retain(|pid, start| children.iter().any(|(p, s)| p == pid && s.start == *start));
    let unreaped = unreaped();
    children
        .into_iter()
        .filter(|(pid, s)| {
            spawned.get(pid) != Some(&s.start)
                && !unreaped.as_ref().is_some_and(|u| u.contains(pid))
        })
        .collect()
}

/// Reaps adopted children that have exited; with `kill`, kills the others
/// (and the groups they lead) and waits (briefly) until they and what
/// their deaths orphaned are gone. Returns how many were killed. A no-op
/// unless `adopt_orphans` is on.
#[cfg(target_os = "linux")]
pub fn reap_adopted(kill: bool) -> usize {
    use nix::sys::signal::{Signal, killpg};
    use nix::sys::wait::{WaitPidFlag, waitpid};
    use nix::unistd::Pid;

    if !ADOPTING.load(Ordering::SeqCst) {
        return 0;
    }
    let mut killed = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let found = {
            let mut spawned = SPAWNED.lock().unwrap_or_else(|p| p.into_inner());
            adopted(spawned.get_or_insert_with(HashMap::new))
        };
        let mut running = false;
        for (pid, stat) in found {
            let target = Pid::from_raw(pid as i32);
            if stat.state != 'Z' {
                if !kill {
                    continue;
                }
                if killed.insert((pid, stat.start)) {
                    // One that leads its group (a daemon that called
                    // `setsid`) takes the group with it.
                    if stat.pgid == pid {
                        let _ = killpg(target, Signal::SIGKILL);
                    }
                    let _ = nix::sys::signal::kill(target, Signal::SIGKILL);
                }
                running = true;
            }
            // Adopted children only: never one tokio waits for.
            let _ = waitpid(target, Some(WaitPidFlag::WNOHANG));
        }
        if !running || Instant::now() > deadline {
            return killed.len();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(not(target_os = "linux"))]
pub fn reap_adopted(_kill: bool) -> usize {
    0
}
