//! Running one worker process for one item: payload on stdin, bounded
//! capture of stdout and stderr, the operation-id channel, timeouts that
//! kill the whole process group, and nothing left behind.
//!
//! The op-id channel: a worker prints a line `@nightshift op_id=<id>` on
//! stderr as soon as it has started a remote operation; the runner stores
//! it at once, and a later attempt of the item gets it in
//! `NIGHTSHIFT_OP_ID`. `@nightshift cost=<number>` reports the cost of the
//! call the same way (for workers that cannot put it in their result); the
//! lines of one attempt add up, and the total follows the rule of `cost`.
//! An op id is at most 1024 bytes with no control characters (it goes back
//! to the worker in an environment variable); one attempt may report at
//! most [`MAX_OP_IDS`] of them (each is a store write), later ones and
//! repeats of the last one are ignored.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot, watch};

use crate::runner::classify::{ErrorLine, parse_error_line};
use crate::runner::cost::Cost;

/// Most stdout kept as the result; the rest is read and dropped.
pub const MAX_STDOUT: usize = 1 << 20;
/// Longest stderr line looked at (a longer one is cut).
const MAX_LINE: usize = 64 * 1024;
/// Bytes read from a worker's pipe at a time. The buffer is not zeroed
/// (`read_buf` into spare capacity): zeroing 64 KiB per pipe per worker was
/// a quarter of the runner's CPU with a no-op worker.
const READ_CHUNK: usize = 8 * 1024;
/// How long the worker's pipes may stay open once its process group is
/// gone. A process that left the group (a daemon that called `setsid`)
/// and kept them would otherwise hold the item, and the run, as long as it
/// lives; past this it is found by its environment and killed.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// The worker variables that single out one item's processes in this run.
const ITEM_VARS: [&str; 4] = [
    "NIGHTSHIFT_BATCH",
    "NIGHTSHIFT_KEY",
    "NIGHTSHIFT_RUN_ID",
    super::orphans::RUNNER_VAR,
];
/// Prefix of the lines a worker uses to talk to the runner.
pub const MARKER: &str = "@nightshift ";
/// Most op ids one attempt may report.
pub const MAX_OP_IDS: usize = 100;

/// One stderr line, as the runner reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum StderrLine<'a> {
    OpId(&'a str),
    /// A cost report (a refused one fails the attempt).
    Cost(Cost),
    /// A marker line the runner does not understand (or an invalid op
    /// id): ignored, and not taken as the last error line either.
    BadMarker,
    /// Anything else (blank lines included).
    Text,
}

/// Whether `op` can be stored and handed back in `NIGHTSHIFT_OP_ID`.
pub fn valid_op_id(op: &str) -> bool {
    !op.is_empty() && op.len() <= 1024 && !op.chars().any(char::is_control)
}

/// Reads one stderr line (without its newline).
pub fn parse_stderr_line(text: &str) -> StderrLine<'_> {
    let text = text.trim_end_matches('\r');
    let Some(rest) = text.strip_prefix(MARKER) else {
        return StderrLine::Text;
    };
    if let Some(op) = rest.trim().strip_prefix("op_id=") {
        let op = op.trim();
        if valid_op_id(op) {
            return StderrLine::OpId(op);
        }
    } else if let Some(cost) = rest.trim().strip_prefix("cost=") {
        return StderrLine::Cost(Cost::from_text(cost));
    }
    StderrLine::BadMarker
}

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
}

#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stdout_truncated: bool,
    /// The last non-empty stderr line that was not a marker line.
    pub stderr_last_line: Option<String>,
    pub error_line: Option<ErrorLine>,
    /// What the `@nightshift cost=` lines added up to.
    pub reported_cost: Cost,
    pub op_ids: Vec<String>,
}

/// Messages a running worker sends while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    OpId(String),
}

pub struct Job<'a> {
    pub argv: &'a [String],
    /// `argv[0]` found in `PATH` once per cycle (see `resolve`); the worker
    /// still sees `argv[0]` as written.
    pub program: Option<&'a Path>,
    pub dir: Option<&'a Path>,
    pub env: Vec<(&'static str, String)>,
    pub payload: &'a str,
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL when the runner stops a worker.
    pub kill_grace: Duration,
    /// Told the worker's pid (its process group's id) once it is spawned.
    pub spawned: Option<Box<dyn FnOnce(u32) + Send + 'a>>,
}

/// Runs the worker to its end. `Err(reason)` if the runner killed it.
pub async fn run(
    mut job: Job<'_>,
    reports: mpsc::UnboundedSender<Report>,
    kill: oneshot::Receiver<KillReason>,
) -> Result<Output, KillReason> {
    let mut cmd = match job.program {
        Some(path) => Command::new(path),
        None => Command::new(&job.argv[0]),
    };
    #[cfg(unix)]
    if job.program.is_some() {
        cmd.arg0(&job.argv[0]);
    }
    cmd.args(&job.argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in &job.env {
        cmd.env(k, v);
    }
    if let Some(dir) = job.dir {
        cmd.current_dir(dir);
    }
    #[cfg(unix)]
    cmd.process_group(0);
    let mut child = match super::subreaper::spawn(&mut cmd) {
        Ok(child) => child,
        Err(e) => {
            return Ok(Output {
                exit: Exit::SpawnFailed(format!("{}: {e}", job.argv[0])),
                stdout: Vec::new(),
                stdout_truncated: false,
                stderr_last_line: None,
                error_line: None,
                reported_cost: Cost::Absent,
                op_ids: Vec::new(),
            });
        }
    };
    let pgid = child.id();
    if let (Some(told), Some(pid)) = (job.spawned.take(), pgid) {
        told(pid);
    }

    // Feed stdin from a task: a worker that never reads it must not block us,
    // and a broken pipe is not a failure.
    if let Some(mut stdin) = child.stdin.take() {
        let mut payload = job.payload.as_bytes().to_vec();
        payload.push(b'\n');
        tokio::spawn(async move {
            let _ = stdin.write_all(&payload).await;
            let _ = stdin.shutdown().await;
        });
    }
    // Tells the readers to stop waiting for the end of their pipe.
    let (give_up, given_up) = watch::channel(false);
    let stdout = child
        .stdout
        .take()
        .map(|s| tokio::spawn(read_bounded(s, MAX_STDOUT, given_up.clone())));
    let stderr = child
        .stderr
        .take()
        .map(|s| tokio::spawn(read_stderr(s, reports, given_up)));

    // A dropped sender means nobody will ask us to stop.
    let killed = async {
        match kill.await {
            Ok(reason) => reason,
            Err(_) => std::future::pending().await,
        }
    };
    let status = tokio::select! {
        status = child.wait() => Ok(status),
        () = tokio::time::sleep(job.timeout) => Err(None),
        reason = killed => Err(Some(reason)),
    };
    let exit = match status {
        Ok(Ok(status)) => exit_of(status),
        Ok(Err(e)) => Exit::SpawnFailed(format!("waiting for the worker: {e}")),
        Err(reason) => {
            stop_group(&mut child, pgid, job.kill_grace).await;
            match reason {
                None => Exit::Timeout(job.timeout),
                Some(reason) => {
                    kill_group(pgid);
                    return Err(reason);
                }
            }
        }
    };
    // Whatever the worker left running in its group (daemons it forked)
    // goes too; it would otherwise hold our pipes open.
    kill_group(pgid);

    let readers = async {
        let out = match stdout {
            Some(task) => task.await.unwrap_or_default(),
            None => (Vec::new(), false),
        };
        let err = match stderr {
            Some(task) => task.await.unwrap_or_default(),
            None => StderrSummary::default(),
        };
        (out, err)
    };
    tokio::pin!(readers);
    let ((stdout, stdout_truncated), err) = match tokio::time::timeout(DRAIN_GRACE, &mut readers)
        .await
    {
        Ok(done) => done,
        Err(_) => {
            // Something outside the group still holds the pipes.
            let wanted: Vec<String> = job
                .env
                .iter()
                .filter(|(k, _)| ITEM_VARS.contains(k))
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            let _ =
                tokio::task::spawn_blocking(move || super::orphans::reap_matching(&[wanted])).await;
            let _ = give_up.send(true);
            readers.await
        }
    };
    Ok(Output {
        exit,
        stdout,
        stdout_truncated,
        error_line: err.last_line.as_deref().and_then(parse_error_line),
        stderr_last_line: err.last_line,
        reported_cost: err.cost,
        op_ids: err.op_ids,
    })
}

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

#[cfg(unix)]
fn exit_of(status: std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Code(-1),
    }
}

#[cfg(not(unix))]
fn exit_of(status: std::process::ExitStatus) -> Exit {
    Exit::Code(status.code().unwrap_or(-1))
}

/// SIGTERM to the group, then SIGKILL after `grace` if the worker lives on.
async fn stop_group(child: &mut tokio::process::Child, pgid: Option<u32>, grace: Duration) {
    signal_group(pgid, Signal::Term);
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        signal_group(pgid, Signal::Kill);
        let _ = child.wait().await;
    }
}

/// SIGKILLs a process group (a worker's, a source command's).
pub(crate) fn kill_group(pgid: Option<u32>) {
    signal_group(pgid, Signal::Kill);
}

enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pgid: Option<u32>, sig: Signal) {
    use nix::sys::signal::{Signal as S, killpg};
    use nix::unistd::Pid;
    let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) else {
        return;
    };
    let sig = match sig {
        Signal::Term => S::SIGTERM,
        Signal::Kill => S::SIGKILL,
    };
    // ESRCH (the group is already gone) is the normal case.
    let _ = killpg(Pid::from_raw(pgid), sig);
}

#[cfg(not(unix))]
fn signal_group(_pgid: Option<u32>, _sig: Signal) {}

/// Reads everything, keeping the first `limit` bytes.
/// Stops early (keeping what it has) when told to give up.
async fn read_bounded(
    mut r: impl AsyncRead + Unpin,
    limit: usize,
    mut give_up: watch::Receiver<bool>,
) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let mut truncated = false;
    loop {
        buf.clear();
        let read = tokio::select! {
            read = r.read_buf(&mut buf) => read,
            _ = give_up.wait_for(|g| *g) => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                if n > room {
                    truncated = true;
                }
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, truncated)
}

#[derive(Debug, Default)]
struct StderrSummary {
    last_line: Option<String>,
    cost: Cost,
    op_ids: Vec<String>,
}

/// Reads stderr line by line (each line bounded), acting on marker lines
/// as they arrive and keeping the last other line.
async fn read_stderr(
    mut r: impl AsyncRead + Unpin,
    reports: mpsc::UnboundedSender<Report>,
    mut give_up: watch::Receiver<bool>,
) -> StderrSummary {
    let mut summary = StderrSummary::default();
    let mut line: Vec<u8> = Vec::new();
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let handle = |line: &[u8], summary: &mut StderrSummary| {
        let text = String::from_utf8_lossy(line);
        match parse_stderr_line(&text) {
            StderrLine::OpId(op) => {
                if summary.op_ids.len() < MAX_OP_IDS
                    && summary.op_ids.last().is_none_or(|last| last != op)
                {
                    summary.op_ids.push(op.to_string());
                    let _ = reports.send(Report::OpId(op.to_string()));
                }
            }
            StderrLine::Cost(c) => summary.cost = std::mem::take(&mut summary.cost).plus(c),
            StderrLine::BadMarker => {}
            StderrLine::Text => {
                let text = text.trim_end_matches('\r');
                if !text.trim().is_empty() {
                    summary.last_line = Some(text.to_string());
                }
            }
        }
    };
    loop {
        buf.clear();
        let read = tokio::select! {
            read = r.read_buf(&mut buf) => read,
            _ = give_up.wait_for(|g| *g) => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                for chunk in buf[..n].split_inclusive(|b| *b == b'\n') {
                    let complete = chunk.last() == Some(&b'\n');
                    let body = if complete {
                        &chunk[..chunk.len() - 1]
                    } else {
                        chunk
                    };
                    let room = MAX_LINE.saturating_sub(line.len());
                    line.extend_from_slice(&body[..body.len().min(room)]);
                    if complete {
                        handle(&line, &mut summary);
                        line.clear();
                    }
                }
            }
        }
    }
    if !line.is_empty() {
        handle(&line, &mut summary);
    }
    summary
}
