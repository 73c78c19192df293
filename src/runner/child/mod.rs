//! The processes the runner starts: a command in its own process group
//! ([`command`]), noted as ours when spawned ([`spawn`], see `subreaper`),
//! its group killed whole ([`Group`], [`kill_group`]) or stopped with a
//! grace period ([`stop`]). The only code that signals a process group it
//! started.
//!
//! - `output`: what a worker printed, read bounded (stdout, the stderr
//!   summary: op-id and cost lines, the last line);
//! - `tail`: the last 16 KiB of an attempt's stderr;
//! - `skim`: the key, cost and usage of an answer too long to keep;
//! - `startable`: whether a worker program can be started at all, and
//!   why a spawn failed (a script's `#!` line);
//! - `worker`: a process-mode worker run to its end, started by `posix`
//!   (Linux: cloned by `clone` where the program is known, else
//!   `posix_spawn`) or `Command` ([`Running`]);
//! - `persistent`: the long-lived worker and its JSON-lines protocol;
//! - `groups`, `orphans`, `subreaper`: finding and stopping what workers
//!   of a dead runner, or our own, left running;
//! - `guard`: the process that stops our workers when we die.

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod clone;
pub mod groups;
pub mod guard;
pub mod orphans;
pub mod output;
pub mod persistent;
#[cfg(target_os = "linux")]
pub mod posix;
pub mod skim;
pub mod startable;
pub mod subreaper;
pub mod tail;
pub mod worker;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::process::{Child, Command};

pub use subreaper::{adopt_orphans, spawn};

/// How the worker ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    Timeout(Duration),
    SpawnFailed(String),
    /// The spawn failed in a way no other item's would escape: the
    /// program is gone, not executable, or no program (`cannot_start`).
    CannotStart(String),
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

/// Would every spawn of this program fail as this one did? It is not
/// found, not executable, or not a program the kernel can start (a
/// script with no `#!` line); a lack of memory or processes passes.
pub fn cannot_start(err: &std::io::Error) -> bool {
    const ENOEXEC: i32 = 8;
    matches!(
        err.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
    ) || err.raw_os_error() == Some(ENOEXEC)
}

/// `argv` as a command leading its own process group, with its three
/// pipes, killed if dropped, in `dir` with `env` added (and no
/// `NIGHTSHIFT_OP_ID` but one `env` gives). `program` is
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
    // An op id the runner inherited is no item's.
    if !env.iter().any(|(k, _)| *k == "NIGHTSHIFT_OP_ID") {
        cmd.env_remove("NIGHTSHIFT_OP_ID");
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
pub async fn stop(child: &mut Running, pgid: Option<u32>, grace: Duration) {
    signal_group(pgid, Sig::Term);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_group(pgid, Sig::Kill);
        let _ = child.wait().await;
    }
}

/// Where there is no `posix` spawn, nothing is prepared.
#[cfg(not(target_os = "linux"))]
#[derive(Default)]
pub struct Prepared;

#[cfg(not(target_os = "linux"))]
impl Prepared {
    pub fn new() -> Prepared {
        Prepared
    }
}

#[cfg(target_os = "linux")]
pub use posix::Prepared;

/// A process-mode worker, started by our own `posix_spawn` where it can
/// be (Linux, in the runner's directory) or by `Command`.
pub enum Running {
    Command(Child),
    #[cfg(target_os = "linux")]
    Posix(posix::Proc),
}

type Reader = Box<dyn AsyncRead + Unpin + Send>;

impl Running {
    /// Starts `argv` as [`command`] would, with `env` added to the
    /// environment `prepared` holds.
    pub async fn start(
        argv: &[String],
        program: Option<&Path>,
        dir: Option<&Path>,
        env: &[(&'static str, String)],
        prepared: &Prepared,
    ) -> std::io::Result<Running> {
        #[cfg(target_os = "linux")]
        if dir.is_none()
            && let Some(proc) = posix::spawn(argv, program, prepared, env).await?
        {
            return Ok(Running::Posix(proc));
        }
        let _ = prepared;
        spawn(&mut command(argv, program, dir, env)).map(Running::Command)
    }

    /// The worker's pid, which is its process group's id.
    pub fn id(&self) -> Option<u32> {
        match self {
            Running::Command(child) => child.id(),
            #[cfg(target_os = "linux")]
            Running::Posix(proc) => Some(proc.id()),
        }
    }

    /// The worker's start time, when the spawn read it already.
    pub fn started_at(&self) -> Option<u64> {
        match self {
            Running::Command(_) => None,
            #[cfg(target_os = "linux")]
            Running::Posix(proc) => proc.start(),
        }
    }

    /// Writes `payload` to the worker's stdin and closes it, without
    /// waiting for a worker that does not read: what does not fit in the
    /// pipe at once is written by a task. A broken pipe is not a failure.
    pub fn feed(&mut self, payload: Vec<u8>) {
        let (mut stdin, rest): (Box<dyn AsyncWrite + Unpin + Send>, Vec<u8>) = match self {
            Running::Command(child) => match child.stdin.take() {
                Some(stdin) => (Box::new(stdin), payload),
                None => return,
            },
            #[cfg(target_os = "linux")]
            Running::Posix(proc) => {
                let Some(fd) = proc.stdin.take() else {
                    return;
                };
                // All of it (the usual case): closed here, never registered
                // with the runtime, no task.
                let rest = match nix::unistd::write(&fd, &payload) {
                    Ok(n) if n == payload.len() => return,
                    Ok(n) => payload[n..].to_vec(),
                    Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => payload,
                    Err(_) => return,
                };
                match tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(fd) {
                    Ok(stdin) => (Box::new(stdin), rest),
                    Err(_) => return,
                }
            }
        };
        tokio::spawn(async move {
            let _ = stdin.write_all(&rest).await;
            let _ = stdin.shutdown().await;
        });
    }

    /// Its stdout and stderr, once.
    pub fn outputs(&mut self) -> (Option<Reader>, Option<Reader>) {
        match self {
            Running::Command(child) => (
                child.stdout.take().map(|r| Box::new(r) as Reader),
                child.stderr.take().map(|r| Box::new(r) as Reader),
            ),
            #[cfg(target_os = "linux")]
            Running::Posix(proc) => (
                proc.stdout.take().map(|r| Box::new(r) as Reader),
                proc.stderr.take().map(|r| Box::new(r) as Reader),
            ),
        }
    }

    /// Waits for the worker to end.
    pub async fn wait(&mut self) -> std::io::Result<Exit> {
        match self {
            Running::Command(child) => child.wait().await.map(exit_of),
            #[cfg(target_os = "linux")]
            Running::Posix(proc) => proc.wait().await,
        }
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

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;

    /// Every command started through [`command`] (persistent workers,
    /// source and alert commands, a worker in another directory) leaves
    /// out an op id the runner inherited, and passes one its item gives.
    #[test]
    fn an_inherited_op_id_is_passed_on_only_when_the_item_gives_one() {
        let argv = ["true".to_string()];
        let op = |cmd: &tokio::process::Command| {
            cmd.as_std()
                .get_envs()
                .find(|(k, _)| *k == OsStr::new("NIGHTSHIFT_OP_ID"))
                .map(|(_, v)| v.map(OsStr::to_owned))
        };
        assert_eq!(op(&super::command(&argv, None, None, &[])), Some(None));
        let given = [("NIGHTSHIFT_OP_ID", "op-1".to_string())];
        assert_eq!(
            op(&super::command(&argv, None, None, &given)),
            Some(Some("op-1".into()))
        );
    }
}
