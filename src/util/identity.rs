//! Who and where we are: host name, `user@host` for operator events, and
//! whether a process recorded in a lock is still the same live process.

use std::sync::OnceLock;

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

/// Start time of a process in clock ticks since boot (Linux `/proc`), used to
/// tell a live holder from a reused pid.
pub fn pid_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses: parse
    // from the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    // rest starts at field 3 (state); starttime is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let rest = stat.get(stat.rfind(')')? + 2..)?.to_string();
            rest.chars().next()
        })
        .is_some_and(|state| state == 'Z' || state == 'X')
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
    fn own_process_is_alive_and_reuse_is_detected() {
        let me = std::process::id();
        let start = pid_start(me);
        assert!(start.is_some());
        assert!(process_alive(me, start));
        assert!(!process_alive(me, start.map(|s| s + 1)));
        assert!(!process_alive(0, None));
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
