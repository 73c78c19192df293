//! Who and where we are: host name, `user@host` for operator events, and
//! whether a process recorded in a lock is still the same live process.

use std::sync::OnceLock;

use crate::model::Holder;

/// Host identity. `NIGHTSHIFT_HOST` overrides it so tests (and containers
/// sharing a hostname) can act as distinct hosts.
pub fn host() -> String {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        std::env::var("NIGHTSHIFT_HOST")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                nix::unistd::gethostname()
                    .ok()
                    .and_then(|h| h.into_string().ok())
            })
            .unwrap_or_else(|| "localhost".to_string())
    })
    .clone()
}

/// This program's path, to start another of it. A binary replaced since
/// it started (an upgrade, a rebuild) reads on Linux as "PATH (deleted)":
/// the program now at PATH is the one to start.
pub fn this_program() -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    if exe.exists() {
        return Ok(exe);
    }
    let replaced = exe
        .to_str()
        .and_then(|p| p.strip_suffix(" (deleted)"))
        .map(std::path::PathBuf::from)
        .filter(|p| p.exists());
    replaced.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "{} is gone (removed since this program started)",
                exe.display()
            ),
        )
    })
}

/// `user@host`, recorded with every operator action.
pub fn actor() -> String {
    let user = std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            nix::unistd::User::from_uid(nix::unistd::getuid())
                .ok()
                .flatten()
                .map(|u| u.name)
        })
        .unwrap_or_else(|| format!("uid{}", nix::unistd::getuid()));
    format!("{user}@{}", host())
}

/// The fields of `/proc/PID/stat` the runner reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `D`, `T` stopped, `t` traced, `Z` zombie, ...
    pub state: char,
    pub ppid: u32,
    pub pgid: u32,
    pub session: u32,
    /// Clock ticks since boot.
    pub start: u64,
}

/// Reads `/proc/PID/stat` (Linux); `None` when there is no such process.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    use std::io::Read;
    // Read in whole-buffer steps: `read_to_string` first asks `statx` for
    // a size (procfs says 0) and then grows from 32 bytes, nine syscalls
    // a look where this takes three or four (a look per worker spawned).
    let mut file = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut stat = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => stat.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    parse_stat(std::str::from_utf8(&stat).ok()?)
}

/// The fields of one `/proc/PID/stat` line. Read once per worker spawned
/// (see `subreaper`), so the fields are taken as they come, not collected.
fn parse_stat(stat: &str) -> Option<ProcStat> {
    // The command name (field 2) may contain spaces and parentheses: parse
    // from the last ')'. `rest` starts at field 3 (state).
    let mut rest = stat.get(stat.rfind(')')? + 2..)?.split_ascii_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgid = rest.next()?.parse().ok()?;
    let session = rest.next()?.parse().ok()?;
    // Field 22, the start time: 16 fields after the session (field 6).
    let start = rest.nth(15)?.parse().ok()?;
    Some(ProcStat {
        state,
        ppid,
        pgid,
        session,
        start,
    })
}

/// Start time of a process in clock ticks since boot (Linux `/proc`), used to
/// tell a live holder from a reused pid.
pub fn pid_start(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|s| s.start)
}

/// Now in clock ticks since boot, the unit of a process's start time in
/// `/proc` (Linux; `None` elsewhere). A process started between two
/// readings that give the same tick started in that tick.
#[cfg(target_os = "linux")]
pub fn boot_ticks() -> Option<u64> {
    use nix::time::{ClockId, clock_gettime};
    use nix::unistd::{SysconfVar, sysconf};
    static NANOS_PER_TICK: OnceLock<Option<u64>> = OnceLock::new();
    let per_tick = (*NANOS_PER_TICK.get_or_init(|| {
        let hz = sysconf(SysconfVar::CLK_TCK).ok().flatten()?;
        u64::try_from(hz)
            .ok()
            .filter(|hz| *hz > 0)
            .map(|hz| 1_000_000_000 / hz)
    }))?;
    let now = clock_gettime(ClockId::CLOCK_BOOTTIME).ok()?;
    let nanos =
        u64::try_from(now.tv_sec()).ok()? * 1_000_000_000 + u64::try_from(now.tv_nsec()).ok()?;
    Some(nanos / per_tick)
}

#[cfg(not(target_os = "linux"))]
pub fn boot_ticks() -> Option<u64> {
    None
}

/// The kernel's boot id (Linux), empty where there is none: start times
/// count from boot, so a recorded one means something only in the same boot.
pub fn boot_id() -> String {
    static BOOT: OnceLock<String> = OnceLock::new();
    BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
    .clone()
}

/// The state letter of a process.
fn pid_state(pid: u32) -> Option<char> {
    proc_stat(pid).map(|s| s.state)
}

fn is_zombie(pid: u32) -> bool {
    pid_state(pid).is_some_and(|state| state == 'Z' || state == 'X')
}

/// What this host can tell of a lock holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// On this host, and its process is gone (or its pid is another
    /// process's now): stale at once.
    Gone,
    /// On this host, and its process runs: live whatever its expiry says
    /// (a clock that jumped, or one set ahead, cannot make it stale).
    Running,
    /// On another host, or stopped (`T`) or traced (`t`) here: a frozen
    /// holder may never renew, so its expiry decides.
    Unknown,
}

/// The one rule for a holder's liveness as this host sees it.
pub fn holder_seen(holder: &Holder) -> Seen {
    if holder.host != host() {
        return Seen::Unknown;
    }
    if !process_alive(holder.pid, holder.pid_start) {
        return Seen::Gone;
    }
    match pid_state(holder.pid) {
        Some('T' | 't') => Seen::Unknown,
        _ => Seen::Running,
    }
}

/// Is the process `pid` (started at `start`, if known) still alive on this host?
#[cfg(unix)]
pub fn process_alive(pid: u32, start: Option<u64>) -> bool {
    use nix::errno::Errno;
    use nix::sys::signal::kill;
    use nix::unistd::Pid;

    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    // EPERM means it exists but belongs to someone else: alive.
    if kill(Pid::from_raw(raw), None) == Err(Errno::ESRCH) {
        return false;
    }
    if is_zombie(pid) {
        return false;
    }
    match (start, pid_start(pid)) {
        (Some(recorded), Some(now)) => recorded == now,
        _ => true,
    }
}

#[cfg(not(unix))]
pub fn process_alive(_pid: u32, _start: Option<u64>) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let line =
            "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50";
        assert_eq!(
            parse_stat(line),
            Some(ProcStat {
                state: 'S',
                ppid: 1,
                pgid: 4242,
                session: 4242,
                start: 987654,
            })
        );
        assert_eq!(parse_stat("4242 (x) S 1 2"), None);
    }

    /// Read in whole-buffer steps, the line is the one the kernel gives.
    #[test]
    fn own_stat_line_is_read_whole() {
        let me = std::process::id();
        let whole = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let stat = proc_stat(me).unwrap();
        let kernel = parse_stat(&whole).unwrap();
        // Two reads, two moments: the run state of a process whose other
        // threads run may differ between them ('R', then 'S'); the rest
        // is the same line.
        assert!("RSD".contains(stat.state), "{stat:?}");
        assert_eq!(
            stat,
            ProcStat {
                state: stat.state,
                ..kernel
            }
        );
        assert_eq!(stat.ppid, nix::unistd::getppid().as_raw() as u32);
        assert_eq!(stat.pgid, nix::unistd::getpgrp().as_raw() as u32);
        assert_eq!(proc_stat(u32::MAX), None);
    }

    #[test]
    fn own_process_is_alive_and_reuse_is_detected() {
        let me = std::process::id();
        let start = pid_start(me);
        assert!(start.is_some());
        assert!(process_alive(me, start));
        assert!(!process_alive(me, start.map(|s| s + 1)));
        assert!(!process_alive(0, None));
    }

    #[test]
    fn a_running_holder_here_is_running_a_stopped_one_unknown() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let holder = |host: String| Holder {
            host,
            pid,
            pid_start: pid_start(pid),
        };
        assert_eq!(holder_seen(&holder(host())), Seen::Running);
        assert_eq!(holder_seen(&holder("elsewhere".into())), Seen::Unknown);
        let reused = Holder {
            pid_start: pid_start(pid).map(|s| s + 1),
            ..holder(host())
        };
        assert_eq!(holder_seen(&reused), Seen::Gone);
        let target = nix::unistd::Pid::from_raw(pid as i32);
        nix::sys::signal::kill(target, nix::sys::signal::Signal::SIGSTOP).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while pid_state(pid) != Some('T') && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(holder_seen(&holder(host())), Seen::Unknown);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(holder_seen(&holder(host())), Seen::Gone);
    }

    #[test]
    fn dead_and_zombie_children_are_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Not yet reaped: a zombie, which must count as dead.
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!process_alive(pid, None));
        child.wait().unwrap();
        assert!(!process_alive(pid, None));
    }
}
