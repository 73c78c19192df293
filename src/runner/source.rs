//! The batch's `source` command: run at the start of a cycle, its JSON
//! lines added as items (all or nothing). Its output is read bounded, so a
//! runaway source cannot exhaust the runner's memory.

use std::sync::Arc;

use serde_json::json;
use tokio::io::AsyncReadExt;

use super::child::{self, Group};
use super::classify::bound_message;
use super::cycle::Cycle;
use super::hook::{Hook, HookFailure};
use crate::key::{self, KeySpec};
use crate::model::EventKind;
use crate::store::StoreError;
use crate::util::time::now_ms;

/// Most of a source's stdout read: about two million items of 100 bytes.
const MAX_OUTPUT: usize = 256 << 20;
/// The end of its stderr kept, for the failure message.
const STDERR_TAIL: usize = 64 << 10;
/// Once the source has exited, how long its pipes may stay open (a
/// process it left behind holds them) before what was read is taken as
/// all: what it printed before exiting is in the pipe already.
const AFTER_EXIT: std::time::Duration = std::time::Duration::from_millis(500);

struct Output {
    status: std::process::ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

enum Failure {
    Start(std::io::Error),
    TooLarge,
}

/// Runs `cmd`, reading at most [`MAX_OUTPUT`] of its stdout (past that it
/// is killed) and the last [`STDERR_TAIL`] of its stderr.
async fn read(mut cmd: tokio::process::Command) -> Result<Output, Failure> {
    let mut child = child::spawn(&mut cmd).map_err(Failure::Start)?;
    // Its process group is killed whole when we are done with it (or give
    // up on it: a timeout drops this future): a pipeline's processes would
    // otherwise keep the pipes open.
    let group = Group::of(&child);
    let (Some(mut out), Some(mut err)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(Failure::Start(std::io::Error::other("no pipes")));
    };
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let status = {
        let reading_out = async {
            let _ = (&mut out)
                .take(MAX_OUTPUT as u64 + 1)
                .read_to_end(&mut stdout)
                .await;
            if stdout.len() > MAX_OUTPUT {
                // It would block on a full pipe: stop it rather than wait.
                group.kill();
            }
        };
        let reading_err = async {
            let mut chunk = vec![0u8; 8192];
            while let Ok(n) = err.read(&mut chunk).await {
                if n == 0 {
                    break;
                }
                stderr.extend_from_slice(&chunk[..n]);
                if stderr.len() > 2 * STDERR_TAIL {
                    stderr.drain(..stderr.len() - STDERR_TAIL);
                }
            }
        };
        let reading = async { tokio::join!(reading_out, reading_err) };
        tokio::pin!(reading);
        tokio::select! {
            _ = &mut reading => child.wait().await,
            status = child.wait() => {
                // Exited: a process it left behind (`cmd &`) may hold the
                // pipes open, and would have the cycle wait for it.
                if tokio::time::timeout(AFTER_EXIT, &mut reading).await.is_err() {
                    group.kill();
                    let _ = tokio::time::timeout(AFTER_EXIT, &mut reading).await;
                }
                status
            }
        }
        .map_err(Failure::Start)?
    };
    if stdout.len() > MAX_OUTPUT {
        return Err(Failure::TooLarge);
    }
    Ok(Output {
        status,
        stdout,
        stderr,
    })
}

/// Runs the batch's `source` command and adds its JSON lines. A failing
/// source is logged and returned; the cycle goes on with what is already
/// queued.
pub async fn enqueue(cycle: &Arc<Cycle>, argv: &[String]) -> Option<HookFailure> {
    // Marked as our workers are, so that our guard stops it should we be
    // killed outright (see `child::guard`).
    let runner = [(child::orphans::RUNNER_VAR, cycle.runner_id.clone())];
    let mut cmd = child::command(argv, None, cycle.work_dir.as_deref(), &runner);
    cmd.stdin(std::process::Stdio::null());
    let fail =
        |problem: String, stderr: &[u8]| HookFailure::new(Hook::Source, &argv[0], problem, stderr);
    // Keyed otherwise than the batch's items were (`key_fields` edited):
    // refused before the source runs, whose lines may not even have the
    // fields now asked. The add checks it again as it writes.
    let spec = KeySpec::from_fields(cycle.cfg.key_fields.as_deref());
    let batch = cycle.batch.clone();
    let keyed = spec.clone();
    if let Err(e) = cycle
        .writer
        .call(move |s| s.check_keyed(&batch, &keyed))
        .await
    {
        return failed(cycle, fail(refused(cycle, &e), b"")).await;
    }
    let mut stop = cycle.stop_tx.subscribe();
    let stopped = async {
        loop {
            if cycle.stopping().is_some() {
                return;
            }
            if stop.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let ran = tokio::select! {
        ran = tokio::time::timeout(cycle.cfg.item_timeout, read(cmd)) => ran,
        // Its group is killed as `read` is dropped.
        () = stopped => {
            let problem = "stopped by a signal before it finished, nothing added";
            return failed(cycle, fail(problem.into(), b"")).await;
        }
    };
    let output = match ran {
        Ok(Ok(out)) => out,
        Ok(Err(Failure::Start(e))) => {
            let why =
                child::startable::start_failure(&argv[0], None, cycle.work_dir.as_deref(), &e);
            return failed(cycle, fail(format!("could not start: {why}"), b"")).await;
        }
        Ok(Err(Failure::TooLarge)) => {
            let problem = format!(
                "printed more than {} MiB, nothing added: add the items with \
                 `nightshift add` instead",
                MAX_OUTPUT >> 20
            );
            return failed(cycle, fail(problem, b"")).await;
        }
        Err(_) => {
            let after = crate::duration::format_duration(cycle.cfg.item_timeout);
            return failed(
                cycle,
                fail(format!("timed out after {after} (item_timeout)"), b""),
            )
            .await;
        }
    };
    if !output.status.success() {
        return failed(cycle, fail(output.status.to_string(), &output.stderr)).await;
    }
    let priority = key::LineFields {
        field: cycle.cfg.priority_field.clone(),
        default: 0,
        estimate_field: cycle.cfg.estimate_field.clone(),
    };
    let mut items = Vec::new();
    let mut bad = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, line) in key::without_bom(&output.stdout)
        .split(|b| *b == b'\n')
        .enumerate()
    {
        // As `add` reads a file: a line that is not UTF-8 is refused, not
        // mended (two keys mended alike became one item).
        let line = match key::line_text(line.strip_suffix(b"\r").unwrap_or(line)) {
            Ok(line) => line,
            Err(e) => {
                bad.push(format!("line {}: {e}", n + 1));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        match key::derive_line_with(line, &spec, &priority) {
            Ok(item) if seen.insert(item.key.clone()) => items.push(item),
            Ok(item) => bad.push(format!("line {}: duplicate key {:?}", n + 1, item.label)),
            Err(e) => bad.push(format!("line {}: {e}", n + 1)),
        }
    }
    if !bad.is_empty() {
        let more = match bad.len() {
            n if n > 5 => format!("; and {} more", n - 5),
            _ => String::new(),
        };
        let problem = format!(
            "its output was rejected, nothing added: {}{more}",
            bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        );
        return failed(cycle, fail(problem, b"")).await;
    }
    let batch = cycle.batch.clone();
    let keyed = spec.clone();
    match cycle
        .writer
        .call(move |s| s.add_keyed((&batch, Some(&keyed)), &items, now_ms(), |_| {}))
        .await
    {
        Ok(report) => {
            cycle
                .event(
                    cycle
                        .new_event(EventKind::Source, format!("source {}", report.summary()))
                        .fields(json!(report)),
                )
                .await;
            None
        }
        Err(e) => failed(cycle, fail(refused(cycle, &e), b"")).await,
    }
}

/// Why the source's items were not added: an add keyed otherwise than the
/// batch's items were, with the config's line the keys now come from.
fn refused(cycle: &Cycle, e: &StoreError) -> String {
    if let StoreError::Refused(r) = e
        && r.is_keyed_otherwise()
    {
        let at = cycle
            .config_file
            .as_ref()
            .map(|f| format!("{}: ", cycle.cfg.key_fields_at(&f.path())));
        format!("its items were refused: {}{e}", at.unwrap_or_default())
    } else {
        format!("adding its items failed: {e}")
    }
}

/// Logs the failure (a `source-failed` event) and hands it on.
async fn failed(cycle: &Cycle, failure: HookFailure) -> Option<HookFailure> {
    cycle
        .event(
            cycle
                .new_event(EventKind::SourceFailed, bound_message(&failure.to_string()))
                .fields(json!(failure)),
        )
        .await;
    Some(failure)
}
