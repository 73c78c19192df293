//! Workers left behind by a runner that died (SIGKILL, OOM killer). Each
//! worker runs in its own process group, so nothing stopped them when their
//! runner went; a re-run that took the dead run's items back would run them
//! a second time *at the same moment*. Before taking items back, a run
//! stops the workers of dead runs on this host.
//!
//! Workers are recognised by their environment (`/proc/PID/environ`): the
//! batch, the run id and the runner's identity (pid and start time, so a
//! reused pid does not match), which no other store's workers share.
//! Processes of other users cannot be read and are left alone.

use std::time::{Duration, Instant};

/// The worker environment variable naming the runner process.
pub const RUNNER_VAR: &str = "NIGHTSHIFT_RUNNER";

/// The value of `NIGHTSHIFT_RUNNER`: `PID` or, where the start time is
/// known, `PID-START` (clock ticks since boot).
pub fn runner_id(pid: u32, start: Option<u64>) -> String {
    match start {
        Some(start) => format!("{pid}-{start}"),
        None => pid.to_string(),
    }
}

/// `1 process`, `3 processes`: for the `orphans-stopped` events.
pub fn processes(n: usize) -> String {
    if n == 1 {
        "1 process".to_string()
    } else {
        format!("{n} processes")
    }
}

/// A dead run whose workers may still be running on this host.
#[derive(Debug, Clone)]
pub struct DeadRun {
    pub run_id: i64,
    /// Its runner's `runner_id`.
    pub runner: String,
}

/// Kills the process groups of every process left by `runs` of `batch`, and
/// waits (briefly) for them to be gone. Returns how many processes matched.
pub fn reap(batch: &str, runs: &[DeadRun]) -> usize {
    if runs.is_empty() {
        return 0;
    }
    let wanted: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            vec![
                format!("NIGHTSHIFT_BATCH={}", batch.replace('\0', "\\x00")),
                format!("NIGHTSHIFT_RUN_ID={}", r.run_id),
                format!("{RUNNER_VAR}={}", r.runner),
            ]
        })
        .collect();
    reap_matching(&wanted)
}

/// Kills (with their groups) the processes, other than this one, whose
/// environment holds every `NAME=value` of one of the `wanted` sets, and
/// waits (briefly) for them to be gone. Returns how many matched.
#[cfg(target_os = "linux")]
pub fn reap_matching(wanted: &[Vec<String>]) -> usize {
    if wanted.is_empty() {
        return 0;
    }
    let me = std::process::id();
    let found: Vec<i32> = proc_pids()
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
            wanted
                .iter()
                .any(|want| want.iter().all(|w| vars.contains(&w.as_bytes())))
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect();
    for pid in &found {
        kill(*pid);
    }
    // SIGKILL cannot be refused, but the exit takes a moment; the items must
    // not run again before it.
    let deadline = Instant::now() + Duration::from_secs(2);
    while found.iter().any(|pid| alive(*pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    found.len()
}

#[cfg(not(target_os = "linux"))]
pub fn reap_matching(_wanted: &[Vec<String>]) -> usize {
    0
}

#[cfg(target_os = "linux")]
fn proc_pids() -> impl Iterator<Item = u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
}

/// SIGKILL to the process's group (a worker leads its own) and to itself.
#[cfg(target_os = "linux")]
fn kill(pid: i32) {
    use nix::sys::signal::{Signal, kill, killpg};
    use nix::unistd::{Pid, getpgid, getpgrp};
    let target = Pid::from_raw(pid);
    if let Ok(group) = getpgid(Some(target))
        && group.as_raw() > 1
        && group != getpgrp()
    {
        let _ = killpg(group, Signal::SIGKILL);
    }
    let _ = kill(target, Signal::SIGKILL);
}

#[cfg(target_os = "linux")]
fn alive(pid: i32) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    crate::util::identity::process_alive(pid, None)
}
