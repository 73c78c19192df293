//! Worker process groups in the store. Each worker leads its own process
//! group; as soon as it is spawned, its slot's row in the store names the
//! group and its leader's start time (`Cycle::record_worker`). When a
//! runner dies (SIGKILL, OOM killer), the run that takes over on the same
//! host stops those groups before it takes the items back, whatever the
//! workers did to their environment (`env -i`, `sudo`, a container
//! runtime): the environment scan of `orphans` stays as the second net,
//! for a runner killed between a spawn and its record.
//!
//! A group is stopped only on the host and boot that recorded it, and only
//! while it is still that group: its leader lives with the recorded start
//! time, or (the leader gone) members that started no earlier than it
//! remain. Linux does not hand out a pid while a group of that id exists,
//! so a group whose leader is gone is still the recorded one. A process
//! that left the group (`setsid`) and cleared its environment is beyond
//! both nets once its runner is dead.

use std::time::{Duration, Instant};

use crate::model::WorkerGroup;
use crate::util::identity::{self, ProcStat};

/// The record of the group `pid` leads, for `slot` of `run_id`; `start`
/// is its leader's start time when the spawn read it already.
pub fn of(run_id: i64, slot: u32, pid: u32, start: Option<u64>) -> Option<WorkerGroup> {
    Some(WorkerGroup {
        run_id,
        slot,
        host: identity::host(),
        boot: identity::boot_id(),
        pgid: pid,
        started: start.or_else(|| identity::pid_start(pid))?,
    })
}

/// SIGKILLs those of `groups` that were recorded on this host in this boot
/// and still run, and waits (briefly) for their processes to be gone.
/// Returns how many processes were killed.
#[cfg(target_os = "linux")]
pub fn stop(groups: &[WorkerGroup]) -> usize {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::{Pid, getpgrp};

    let (host, boot) = (identity::host(), identity::boot_id());
    let here: Vec<&WorkerGroup> = groups
        .iter()
        .filter(|g| g.host == host && g.boot == boot && g.pgid > 1)
        .filter(|g| Pid::from_raw(g.pgid as i32) != getpgrp())
        .collect();
    if here.is_empty() {
        return 0;
    }
    let procs = processes();
    let mut members: Vec<u32> = Vec::new();
    for g in here {
        let group = members_of(&procs, g);
        if !group.is_empty() {
            let _ = killpg(Pid::from_raw(g.pgid as i32), Signal::SIGKILL);
            members.extend(group);
        }
    }
    // SIGKILL cannot be refused, but the exit takes a moment; the items must
    // not run again before it.
    let deadline = Instant::now() + Duration::from_secs(2);
    while members.iter().any(|p| identity::process_alive(*p, None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    members.len()
}

#[cfg(not(target_os = "linux"))]
pub fn stop(_groups: &[WorkerGroup]) -> usize {
    0
}

/// The live processes of the recorded group `g`, if it is still that group.
fn members_of(procs: &[(u32, ProcStat)], g: &WorkerGroup) -> Vec<u32> {
    let leader = procs.iter().find(|(pid, _)| *pid == g.pgid);
    if leader.is_some_and(|(_, s)| s.start != g.started) {
        // The pid is another process's now.
        return Vec::new();
    }
    procs
        .iter()
        .filter(|(_, s)| s.pgid == g.pgid && s.start >= g.started && s.state != 'Z')
        .map(|(pid, _)| *pid)
        .collect()
}

/// Every process, with its stat.
fn processes() -> Vec<(u32, ProcStat)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter_map(|pid| identity::proc_stat(pid).map(|s| (pid, s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pgid: u32, start: u64) -> ProcStat {
        ProcStat {
            state: 'S',
            ppid: 1,
            pgid,
            session: 1,
            start,
        }
    }

    fn group(pgid: u32, started: u64) -> WorkerGroup {
        WorkerGroup {
            run_id: 1,
            slot: 0,
            host: "h".into(),
            boot: "b".into(),
            pgid,
            started,
        }
    }

    #[test]
    fn a_group_is_the_recorded_one_only_while_its_start_times_fit() {
        let procs = vec![(100, stat(100, 50)), (101, stat(100, 60)), (7, stat(7, 1))];
        assert_eq!(members_of(&procs, &group(100, 50)), [100, 101]);
        // Pid 100 reused by a process that started later: not ours.
        assert!(members_of(&procs, &group(100, 40)).is_empty());
        // Leader gone, a member it left is still in the group.
        let orphaned = vec![(101, stat(100, 60))];
        assert_eq!(members_of(&orphaned, &group(100, 50)), [101]);
        // No such group at all.
        assert!(members_of(&procs, &group(200, 50)).is_empty());
    }
}
