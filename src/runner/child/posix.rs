//! A process-mode worker started by `posix_spawn` with an environment
//! prepared once per slot ([`Prepared`]), waited for through a pidfd.
//!
//! `Command::spawn` copies the whole environment into a map and back for
//! every child (a fifth of the runner's instructions per item in process
//! mode); here the runner's environment is turned into C strings once and
//! each spawn passes pointers to them beside the item's own variables.
//! Linux only: elsewhere, and for a worker that runs in another directory
//! (`posix_spawn` has no portable chdir), `Command` is used.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Mutex;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::spawn::{
    PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn, posix_spawnp,
};
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, pipe2};
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

use super::Exit;
use crate::util::identity;

/// The runner's environment as C strings, made once, without the
/// variables every item sets itself (a runner started by another
/// nightshift must not pass its own item's values on).
pub struct Prepared {
    pub(super) base: Vec<CString>,
}

impl Prepared {
    pub fn new() -> Prepared {
        Prepared::from_vars(std::env::vars_os())
    }

    fn from_vars(vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>) -> Prepared {
        let base = vars
            .filter(|(k, _)| !ITEM_SET.iter().any(|v| v.as_bytes() == k.as_bytes()))
            .filter_map(|(k, v)| {
                let mut kv = k.as_bytes().to_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv).ok()
            })
            .collect();
        Prepared { base }
    }
}

impl Default for Prepared {
    fn default() -> Self {
        Prepared::new()
    }
}

/// The variables a process-mode worker is given per item (see
/// `slot::process::env`), left out of the inherited environment.
const ITEM_SET: [&str; 7] = [
    "NIGHTSHIFT_BATCH",
    "NIGHTSHIFT_KEY",
    "NIGHTSHIFT_LABEL",
    "NIGHTSHIFT_ATTEMPT",
    "NIGHTSHIFT_RUN_ID",
    super::orphans::RUNNER_VAR,
    "NIGHTSHIFT_OP_ID",
];

/// A worker started here: its pid (leader of its own group), its pipes
/// until taken, and a pidfd to wait on. Killed (SIGKILL) if dropped
/// before it was waited for.
pub struct Proc {
    pid: Pid,
    /// Its start time (`/proc`), read once at the spawn.
    start: Option<u64>,
    /// Not registered with the runtime: most payloads fit in the pipe and
    /// are written at once (see `Running::feed`).
    pub stdin: Option<OwnedFd>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    pidfd: Option<AsyncFd<OwnedFd>>,
    reaped: bool,
}

/// Starts `argv` in its own process group with three pipes and the
/// prepared environment plus `env`. `Ok(None)` when this spawn cannot
/// serve (a pipe end landed on 0–2: the caller uses `Command`).
pub async fn spawn(
    argv: &[String],
    program: Option<&Path>,
    prepared: &Prepared,
    env: &[(&'static str, String)],
) -> io::Result<Option<Proc>> {
    reap_dropped();
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // A path as written serves as well as one found in `PATH`.
    if let Some(path) = program.or_else(|| argv[0].contains('/').then(|| Path::new(&argv[0]))) {
        match cloned(argv, path, prepared, env).await {
            // A kernel before 5.2 has no `CLONE_PIDFD`: vfork as elsewhere.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            started => return started,
        }
    }
    let Some(started) = launch(argv, program, prepared, env)? else {
        return Ok(None);
    };
    let pidfd = pidfd(started.pid);
    proc_of(started, pidfd).map(Some)
}

/// A [`Proc`] of a worker just started, with its pipes made nonblocking.
fn proc_of(started: Launched, pidfd: Option<AsyncFd<OwnedFd>>) -> io::Result<Proc> {
    // A `Proc` first, so that it is killed should a step below fail.
    let mut proc = Proc {
        pid: started.pid,
        start: started.start,
        stdin: None,
        stdout: None,
        stderr: None,
        pidfd,
        reaped: false,
    };
    proc.stdin = Some(nonblocking(started.stdin)?);
    proc.stdout = Some(pipe::Receiver::from_owned_fd_unchecked(nonblocking(
        started.stdout,
    )?)?);
    proc.stderr = Some(pipe::Receiver::from_owned_fd_unchecked(nonblocking(
        started.stderr,
    )?)?);
    Ok(proc)
}

/// [`spawn`] of a program already found, by a clone the runtime's thread
/// does not wait in (see `clone`): the exec is awaited.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
async fn cloned(
    argv: &[String],
    path: &Path,
    prepared: &Prepared,
    env: &[(&'static str, String)],
) -> io::Result<Option<Proc>> {
    let (args, own) = c_strings(argv, env)?;
    let Some(pipes) = Pipes::new()? else {
        return Ok(None);
    };
    let before = identity::boot_ticks();
    let mut launching = super::subreaper::noted_until_reaped(
        || super::clone::Launching::start(path, args, &prepared.base, own, pipes.child_ends()),
        |l| u32::try_from(l.pid.as_raw()).ok(),
    )?;
    let pid = launching.pid;
    let start = started_at(before, pid);
    let (stdin, stdout, stderr) = pipes.ours();
    let pidfd = launching.pidfd.try_clone()?;
    #[allow(deprecated)]
    let pidfd = AsyncFd::new(pidfd).ok();
    // A `Proc` before the wait for the exec, so that a failure or a drop
    // from here on kills and reaps the child.
    let proc = proc_of(
        Launched {
            pid,
            start,
            stdin,
            stdout,
            stderr,
        },
        pidfd,
    )?;
    launching.done().await?;
    Ok(Some(proc))
}

/// A worker's three pipes, ours and its ends apart, none on 0–2.
struct Pipes {
    in_r: OwnedFd,
    in_w: OwnedFd,
    out_r: OwnedFd,
    out_w: OwnedFd,
    err_r: OwnedFd,
    err_w: OwnedFd,
}

impl Pipes {
    /// `None` when an end landed on 0–2 (the runner's own standard
    /// streams were closed): dup2 onto itself would keep CLOEXEC.
    fn new() -> io::Result<Option<Pipes>> {
        let (in_r, in_w) = pipe2(OFlag::O_CLOEXEC)?;
        let (out_r, out_w) = pipe2(OFlag::O_CLOEXEC)?;
        let (err_r, err_w) = pipe2(OFlag::O_CLOEXEC)?;
        let pipes = Pipes {
            in_r,
            in_w,
            out_r,
            out_w,
            err_r,
            err_w,
        };
        let low = [
            &pipes.in_r,
            &pipes.in_w,
            &pipes.out_r,
            &pipes.out_w,
            &pipes.err_r,
            &pipes.err_w,
        ]
        .iter()
        .any(|fd| fd.as_raw_fd() <= 2);
        Ok((!low).then_some(pipes))
    }

    fn child_ends(&self) -> [std::os::fd::RawFd; 3] {
        [
            self.in_r.as_raw_fd(),
            self.out_w.as_raw_fd(),
            self.err_w.as_raw_fd(),
        ]
    }

    /// Our ends; the child's are closed here.
    fn ours(self) -> (OwnedFd, OwnedFd, OwnedFd) {
        (self.in_w, self.out_r, self.err_r)
    }
}

/// A worker [`launch`] started: its pid, its start time and our (blocking)
/// ends of its three pipes. Nothing kills or reaps it: [`spawn`] makes a
/// [`Proc`] of it at once; a caller of its own must wait for it.
pub struct Launched {
    pub pid: Pid,
    pub start: Option<u64>,
    pub stdin: OwnedFd,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
}

/// The blocking part of [`spawn`]: starts `argv` in its own process group
/// with three pipes and the prepared environment plus `env`. Also the
/// start of `examples/spawn_floor.rs`, so that its floor starts workers
/// exactly as the runner does.
pub fn launch(
    argv: &[String],
    program: Option<&Path>,
    prepared: &Prepared,
    env: &[(&'static str, String)],
) -> io::Result<Option<Launched>> {
    let (args, own) = c_strings(argv, env)?;
    let envp: Vec<&CStr> = prepared
        .base
        .iter()
        .chain(own.iter())
        .map(CString::as_c_str)
        .collect();

    let Some(pipes) = Pipes::new()? else {
        return Ok(None);
    };
    let mut actions = PosixSpawnFileActions::init()?;
    for (target, fd) in pipes.child_ends().into_iter().enumerate() {
        actions.add_dup2(fd, target as i32)?;
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    // Its own group, so that it and whatever it starts are stopped whole.
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    // The Rust runtime ignores SIGPIPE; a worker gets the default back, as
    // `Command` gives it.
    let mut default = SigSet::empty();
    default.add(Signal::SIGPIPE);
    attr.set_sigdefault(&default)?;

    let before = identity::boot_ticks();
    let pid = super::subreaper::noted_until_reaped(
        || {
            match program {
                Some(path) => posix_spawn(path, &actions, &attr, &args, &envp),
                None => posix_spawnp(&args[0], &actions, &attr, &args, &envp),
            }
            .map_err(io::Error::from)
        },
        |pid| u32::try_from(pid.as_raw()).ok(),
    )?;
    let start = started_at(before, pid);
    let (stdin, stdout, stderr) = pipes.ours();
    Ok(Some(Launched {
        pid,
        start,
        stdin,
        stdout,
        stderr,
    }))
}

/// A worker's argv and its own variables (`KEY=value`) as C strings.
fn c_strings(
    argv: &[String],
    env: &[(&'static str, String)],
) -> io::Result<(Vec<CString>, Vec<CString>)> {
    let args = argv
        .iter()
        .map(|a| c_string(a.as_bytes()))
        .collect::<io::Result<_>>()?;
    let own = env
        .iter()
        .map(|(k, v)| c_string(format!("{k}={v}").as_bytes()))
        .collect::<io::Result<_>>()?;
    Ok((args, own))
}

/// When the child `pid`, started after the clock read `before`, started:
/// in that tick when the clock still reads it (most spawns take a fraction
/// of one), else as `/proc` says (it is unreaped, so the pid is still its
/// own).
fn started_at(before: Option<u64>, pid: Pid) -> Option<u64> {
    match (before, identity::boot_ticks()) {
        (Some(b), Some(a)) if a == b => Some(b),
        _ => identity::pid_start(pid.as_raw() as u32),
    }
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a NUL byte in an argument or variable",
        )
    })
}

fn nonblocking(fd: OwnedFd) -> io::Result<OwnedFd> {
    fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    Ok(fd)
}

/// A pidfd for `pid` registered with the runtime; `None` where the kernel
/// (or valgrind) has none: waiting then follows SIGCHLD.
fn pidfd(pid: Pid) -> Option<AsyncFd<OwnedFd>> {
    let raw = rustix::process::Pid::from_raw(pid.as_raw())?;
    let fd = rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::NONBLOCK).ok()?;
    // Deprecated because a `T` that only borrows its fd could close it
    // while registered; an `OwnedFd` moved in lives exactly as long as the
    // registration.
    #[allow(deprecated)]
    AsyncFd::new(fd).ok()
}

impl Proc {
    pub fn id(&self) -> u32 {
        self.pid.as_raw() as u32
    }

    /// Its start time in clock ticks since boot, if it could be read.
    pub fn start(&self) -> Option<u64> {
        self.start
    }

    /// Waits for the worker to end.
    pub async fn wait(&mut self) -> io::Result<Exit> {
        loop {
            if let Some(exit) = self.try_wait()? {
                return Ok(exit);
            }
            match &self.pidfd {
                Some(fd) => fd.readable().await?.clear_ready(),
                None => return self.wait_for_sigchld().await,
            }
        }
    }

    async fn wait_for_sigchld(&mut self) -> io::Result<Exit> {
        use tokio::signal::unix::{SignalKind, signal};
        // Listening before the first look: an exit in between still wakes us.
        let mut sigchld = signal(SignalKind::child())?;
        loop {
            if let Some(exit) = self.try_wait()? {
                return Ok(exit);
            }
            // Bounded, in case a signal was merged with one already taken.
            let _ =
                tokio::time::timeout(std::time::Duration::from_millis(100), sigchld.recv()).await;
        }
    }

    fn try_wait(&mut self) -> io::Result<Option<Exit>> {
        if self.reaped {
            return Err(io::Error::other("the worker was already waited for"));
        }
        let status = reap(self.pid);
        let exit = match status {
            Ok(WaitStatus::Exited(_, code)) => Exit::Code(code),
            Ok(WaitStatus::Signaled(_, sig, _)) => Exit::Signal(sig as i32),
            Ok(_) => return Ok(None),
            Err(Errno::EINTR) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        self.reaped = true;
        Ok(Some(exit))
    }
}

/// Workers killed on drop and not yet reaped: tried again at each spawn,
/// so none stays a zombie for long.
static DROPPED: Mutex<Vec<Pid>> = Mutex::new(Vec::new());

fn reap_dropped() {
    let mut dropped = DROPPED.lock().unwrap_or_else(|p| p.into_inner());
    dropped.retain(|pid| matches!(reap(*pid), Ok(WaitStatus::StillAlive)));
}

/// `waitpid(pid, WNOHANG)` for a worker spawned here, which is no longer
/// ours (`subreaper`) once reaped.
fn reap(pid: Pid) -> nix::Result<WaitStatus> {
    super::subreaper::reaped(pid.as_raw() as u32, || {
        let status = waitpid(pid, Some(WaitPidFlag::WNOHANG));
        let gone = matches!(
            status,
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD)
        );
        (status, gone)
    })
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        let _ = kill(self.pid, Signal::SIGKILL);
        if matches!(reap(self.pid), Ok(WaitStatus::StillAlive)) {
            DROPPED
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(self.pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Exit, Prepared, Running};
    use tokio::io::AsyncReadExt;

    /// Starts `argv` as the runner does: its program found first.
    async fn start(
        argv: &[String],
        env: &[(&'static str, String)],
        prepared: &Prepared,
    ) -> std::io::Result<Running> {
        let program = super::super::resolve(&argv[0]);
        Running::start(argv, program.as_deref(), None, env, prepared).await
    }

    async fn run(script: &str, env: &[(&'static str, String)], payload: &[u8]) -> (Exit, String) {
        let argv = ["sh".to_string(), "-c".to_string(), script.to_string()];
        let mut child = start(&argv, env, &Prepared::new()).await.unwrap();
        assert!(matches!(child, Running::Posix(_)), "not our own spawn");
        child.feed(payload.to_vec());
        let (out, _) = child.outputs();
        let mut text = String::new();
        out.unwrap().read_to_string(&mut text).await.unwrap();
        (child.wait().await.unwrap(), text)
    }

    #[tokio::test]
    async fn a_worker_leads_its_group_with_no_signal_ignored_or_blocked() {
        // Each read by the process itself, after `exec`: a shell blocks
        // signals around its forks, so a child reading the shell's status
        // would see that.
        let (exit, out) = run("exec cut -d' ' -f1,5 /proc/self/stat", &[], b"").await;
        assert_eq!(exit, Exit::Code(0));
        let ids: Vec<&str> = out.split_whitespace().collect();
        assert_eq!(ids[0], ids[1], "pgid is its pid: {out}");
        // As the binary does first (`nohup` may have run this test).
        crate::util::signals::catch_inherited_ignores();
        let (exit, out) = run("exec grep -E '^Sig(Ign|Blk)' /proc/self/status", &[], b"").await;
        assert_eq!(exit, Exit::Code(0));
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "SigBlk:\t0000000000000000", "{out}");
        let ignored = u64::from_str_radix(lines[1].trim_start_matches("SigIgn:\t"), 16).unwrap();
        // SIGPIPE, ignored by the Rust runtime, is back to its default, and
        // what this process inherited ignored is caught, which `exec` resets; glibc
        // itself ignores its two internal signals (32, 33) in every child.
        assert_eq!(ignored & !(0b11 << 31), 0, "{out}");
    }

    #[tokio::test]
    async fn the_item_variables_replace_inherited_ones_and_an_inherited_op_id_is_dropped() {
        let vars = [
            ("NIGHTSHIFT_KEY", "outer"),
            ("NIGHTSHIFT_OP_ID", "stale"),
            ("KEPT", "yes"),
        ];
        let filtered = Prepared::from_vars(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        let argv = [
            "sh".to_string(),
            "-c".to_string(),
            "echo \"$NIGHTSHIFT_KEY ${NIGHTSHIFT_OP_ID:-none} $KEPT\"".to_string(),
        ];
        let env = [("NIGHTSHIFT_KEY", "inner".to_string())];
        let mut child = start(&argv, &env, &filtered).await.unwrap();
        let (out, _) = child.outputs();
        let mut text = String::new();
        out.unwrap().read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "inner none yes\n");
    }

    #[tokio::test]
    async fn a_payload_larger_than_the_pipe_reaches_the_worker_whole() {
        let payload = vec![b'x'; 1 << 20];
        let (exit, out) = run("wc -c", &[], &payload).await;
        assert_eq!(exit, Exit::Code(0));
        assert_eq!(out.trim(), (1 << 20).to_string());
    }

    /// The start time the spawn read (once, for the subreaper's note and
    /// the group's record alike) is the worker's own.
    #[tokio::test]
    async fn the_spawn_gives_the_workers_start_time() {
        let argv = ["sleep".to_string(), "30".to_string()];
        let child = start(&argv, &[], &Prepared::new()).await.unwrap();
        let pid = child.id().unwrap();
        let start = crate::util::identity::pid_start(pid);
        assert!(start.is_some());
        assert_eq!(child.started_at(), start);
    }

    #[tokio::test]
    async fn exits_and_signals_are_told_apart() {
        assert_eq!(run("exit 7", &[], b"").await.0, Exit::Code(7));
        assert_eq!(run("kill -9 $$", &[], b"").await.0, Exit::Signal(9));
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error_naming_why() {
        let argv = ["/nonexistent/worker".to_string()];
        let err = start(&argv, &[], &Prepared::new())
            .await
            .err()
            .expect("no such program");
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
        assert!(
            err.to_string().contains("No such file or directory"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_dropped_worker_is_killed_and_reaped() {
        let argv = ["sleep".to_string(), "30".to_string()];
        let child = start(&argv, &[], &Prepared::new()).await.unwrap();
        let pid = child.id().unwrap();
        drop(child);
        // Reaped at the latest by the next spawn.
        let mut next = start(&["true".to_string()], &[], &Prepared::new())
            .await
            .unwrap();
        next.wait().await.unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "pid {pid} still there"
            );
            let mut again = start(&["true".to_string()], &[], &Prepared::new())
                .await
                .unwrap();
            again.wait().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}
