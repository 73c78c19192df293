//! The processes the runner starts: a command in its own process group
//! ([`command`]), noted as ours when spawned ([`spawn`], see `subreaper`),
//! its group killed whole ([`Group`], [`kill_group`]) or stopped with a
//! grace period ([`stop`]). The only code that signals a process group it
//! started.
//!
//! - `output`: what a worker printed, read bounded (stdout, the stderr
//!   summary: op-id and cost lines, the last line);
//! - `tail`: the last 16 KiB of an attempt's stderr;
//! - `worker`: a process-mode worker run to its end;
//! - `persistent`: the long-lived worker and its JSON-lines protocol;
//! - `groups`, `orphans`, `subreaper`: finding and stopping what workers
//!   of a dead runner, or our own, left running.

pub mod groups;
pub mod orphans;
pub mod output;
pub mod persistent;
pub mod subreaper;
pub mod tail;
pub mod worker;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

pub use subreaper::{adopt_orphans, spawn};

/// How the worker ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    Timeout(Duration),
    SpawnFailed(String),
}

/// Why the runner itself stopped a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    /// Shutdown grace period over: the item goes back to pending.
    Shutdown,
    /// Another runner holds the item now: our result would be rejected.
    LeaseLost,
    /// Someone cancelled the item (`nightshift cancel`, the dashboard): it
    /// goes where the cancel said, never done from this attempt.
    Cancelled,
}

/// `argv` as a command leading its own process group, with its three
/// pipes, killed if dropped, in `dir` with `env` added. `program` is
/// `argv[0]` found in `PATH` (see [`resolve`]); the process still sees
/// `argv[0]` as written.
pub fn command(
    argv: &[String],
    program: Option<&Path>,
    dir: Option<&Path>,
    env: &[(&'static str, String)],
) -> Command {
    let mut cmd = match program {
        Some(path) => Command::new(path),
        None => Command::new(&argv[0]),
    };
    #[cfg(unix)]
    if program.is_some() {
        cmd.arg0(&argv[0]);
    }
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    // Its own group, so that it and whatever it starts are stopped whole.
    #[cfg(unix)]
    cmd.process_group(0);
    cmd
}

/// A process group we started, SIGKILLed when this is dropped: at the end,
/// on a timeout (the future holding it is dropped) or when given up on.
pub struct Group(Option<u32>);

impl Group {
    /// The group `child` leads (see [`command`]).
    pub fn of(child: &Child) -> Group {
        Group(child.id())
    }

    /// SIGKILLs the group now (it may be killed again on drop: harmless).
    pub fn kill(&self) {
        kill_group(self.0);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// SIGTERM to the group, then SIGKILL after `grace` if its leader lives on.
pub async fn stop(child: &mut Child, pgid: Option<u32>, grace: Duration) {
    signal_group(pgid, Sig::Term);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_group(pgid, Sig::Kill);
        let _ = child.wait().await;
    }
}

/// SIGKILLs a process group (a worker's, a source command's).
pub fn kill_group(pgid: Option<u32>) {
    signal_group(pgid, Sig::Kill);
}

enum Sig {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pgid: Option<u32>, sig: Sig) {
    use nix::sys::signal::{Signal as S, killpg};
    use nix::unistd::Pid;
    let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) else {
        return;
    };
    let sig = match sig {
        Sig::Term => S::SIGTERM,
        Sig::Kill => S::SIGKILL,
    };
    // ESRCH (the group is already gone) is the normal case.
    let _ = killpg(Pid::from_raw(pgid), sig);
}

#[cfg(not(unix))]
fn signal_group(_pgid: Option<u32>, _sig: Sig) {}

/// Where `PATH` finds a bare program name (`None` for a path, or when not
/// found: the spawn then reports it). Searched once per cycle rather than
/// by every spawn, which tried each `PATH` entry in turn (eight failed
/// `execve` calls per worker on a typical `PATH`).
#[cfg(unix)]
pub fn resolve(program: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return None;
    }
    let paths = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&paths) {
        // A relative entry depends on the worker's directory: leave the
        // search to the spawn.
        if !dir.is_absolute() {
            return None;
        }
        let path = dir.join(program);
        if std::fs::metadata(&path)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        {
            return Some(path);
        }
    }
    None
}

#[cfg(not(unix))]
pub fn resolve(_program: &str) -> Option<std::path::PathBuf> {
    None
}

/// How a process that ended, ended.
#[cfg(unix)]
pub fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Code(-1),
    }
}

#[cfg(not(unix))]
pub fn exit_of(status: std::process::ExitStatus) -> Exit {
    Exit::Code(status.code().unwrap_or(-1))
}
