//! Running one worker process for one item: payload on stdin, bounded
//! capture of stdout and stderr (`output`), the operation-id channel,
//! timeouts that kill the whole process group, and nothing left behind.

use std::path::Path;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use super::output::{MAX_STDOUT, Output, Report, StderrSummary, read_bounded, read_stderr};
use super::{Exit, KillReason, Prepared, Running, kill_group, stop};
use crate::runner::classify::parse_error_line;
use crate::runner::cost::Cost;

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
pub struct Job<'a> {
    pub argv: &'a [String],
    /// `argv[0]` found in `PATH` once per cycle (see `resolve`); the worker
    /// still sees `argv[0]` as written.
    pub program: Option<&'a Path>,
    pub dir: Option<&'a Path>,
    pub env: Vec<(&'static str, String)>,
    /// The runner's environment, made ready once per slot.
    pub prepared: &'a Prepared,
    pub payload: &'a str,
    pub timeout: Duration,
    /// Between SIGTERM and SIGKILL when the runner stops a worker.
    pub kill_grace: Duration,
    pub spawned: Option<Spawned<'a>>,
}

/// Told the worker's pid (its process group's id) once it is spawned, and
/// its start time when the spawn read it.
pub type Spawned<'a> = Box<dyn FnOnce(u32, Option<u64>) + Send + 'a>;

/// A worker the runner stopped (`reason`), with what it printed until
/// then: a cost or usage it reported was paid for all the same.
#[derive(Debug)]
pub struct Killed {
    pub reason: KillReason,
    pub output: Output,
}

/// Runs the worker to its end. `Err` if the runner killed it.
pub async fn run(
    mut job: Job<'_>,
    reports: mpsc::UnboundedSender<Report>,
    kill: oneshot::Receiver<KillReason>,
) -> Result<Output, Killed> {
    let started = Running::start(job.argv, job.program, job.dir, &job.env, job.prepared).await;
    let mut child = match started {
        Ok(child) => child,
        Err(e) => {
            return Ok(Output {
                exit: if super::cannot_start(&e) {
                    Exit::CannotStart(super::startable::spawn_error(
                        &job.argv[0],
                        job.program,
                        job.dir,
                        &e,
                    ))
                } else {
                    Exit::SpawnFailed(format!("{}: {e}", job.argv[0]))
                },
                stdout: Vec::new(),
                stdout_cut: None,
                stderr_last_line: None,
                stderr_tail: None,
                error_line: None,
                reported_cost: Cost::Absent,
                reported_usage: crate::runner::usage::Usage::Absent,
                op_ids: Vec::new(),
                unread: super::output::Unread::default(),
            });
        }
    };
    let pgid = child.id();
    if let (Some(told), Some(pid)) = (job.spawned.take(), pgid) {
        told(pid, child.started_at());
    }

    let mut payload = Vec::with_capacity(job.payload.len() + 1);
    payload.extend_from_slice(job.payload.as_bytes());
    payload.push(b'\n');
    child.feed(payload);
    // Tells the readers to stop waiting for the end of their pipe.
    let (give_up, given_up) = watch::channel(false);
    let (stdout, stderr) = child.outputs();
    // Read in this task, beside the wait: a task of their own each cost a
    // spawn and a hand-off between the runtime's threads per worker.
    let out_given_up = given_up.clone();
    let out = async {
        match stdout {
            Some(s) => read_bounded(s, MAX_STDOUT, out_given_up).await,
            None => (Vec::new(), None),
        }
    };
    let err = async {
        match stderr {
            Some(s) => read_stderr(s, reports, given_up).await,
            None => StderrSummary::default(),
        }
    };
    let readers = async { tokio::join!(out, err) };
    tokio::pin!(readers);
    let mut read = None;

    // A dropped sender means nobody will ask us to stop.
    let killed = async {
        match kill.await {
            Ok(reason) => reason,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::pin!(killed);
    let timeout = tokio::time::sleep(job.timeout);
    tokio::pin!(timeout);
    let status = loop {
        tokio::select! {
            r = &mut readers, if read.is_none() => read = Some(r),
            status = child.wait() => break Ok(status),
            () = &mut timeout => break Err(None),
            reason = &mut killed => break Err(Some(reason)),
        }
    };
    let mut killed = None;
    let exit = match status {
        Ok(Ok(exit)) => exit,
        Ok(Err(e)) => Exit::SpawnFailed(format!("waiting for the worker: {e}")),
        Err(reason) => {
            // Read on while it stops: a worker that prints much on SIGTERM
            // must not block on a full pipe until the SIGKILL.
            let stopping = stop(&mut child, pgid, job.kill_grace);
            tokio::pin!(stopping);
            loop {
                tokio::select! {
                    () = &mut stopping => break,
                    r = &mut readers, if read.is_none() => read = Some(r),
                }
            }
            killed = reason;
            match killed {
                None => Exit::Timeout(job.timeout),
                // Ours: SIGTERM, then SIGKILL past the grace.
                Some(_) => Exit::Signal(15),
            }
        }
    };
    // Whatever the worker left running in its group (daemons it forked)
    // goes too; it would otherwise hold our pipes open.
    kill_group(pgid);

    let ((stdout, stdout_cut), err) = match read {
        Some(done) => done,
        None => match tokio::time::timeout(DRAIN_GRACE, &mut readers).await {
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
                    tokio::task::spawn_blocking(move || super::orphans::reap_matching(&[wanted]))
                        .await;
                let _ = give_up.send(true);
                readers.await
            }
        },
    };
    let output = Output {
        exit,
        stdout,
        stdout_cut,
        error_line: err.last_line.as_deref().and_then(parse_error_line),
        stderr_last_line: err.last_line,
        stderr_tail: err.tail,
        reported_cost: err.cost,
        reported_usage: err.usage,
        op_ids: err.op_ids,
        unread: err.unread,
    };
    match killed {
        Some(reason) => Err(Killed { reason, output }),
        None => Ok(output),
    }
}
