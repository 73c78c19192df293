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
use crate::util::time::now_ms;

/// Most of a source's stdout read: about two million items of 100 bytes.
const MAX_OUTPUT: usize = 256 << 20;
/// The end of its stderr kept, for the failure message.
const STDERR_TAIL: usize = 64 << 10;

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
    let stdout = async {
        let mut buf = Vec::new();
        let _ = (&mut out)
            .take(MAX_OUTPUT as u64 + 1)
            .read_to_end(&mut buf)
            .await;
        if buf.len() > MAX_OUTPUT {
            // It would block on a full pipe: stop it rather than wait.
            group.kill();
        }
        buf
    };
    let stderr = async {
        let (mut tail, mut chunk) = (Vec::new(), vec![0u8; 8192]);
        while let Ok(n) = err.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > 2 * STDERR_TAIL {
                tail.drain(..tail.len() - STDERR_TAIL);
            }
        }
        tail
    };
    let (stdout, stderr) = tokio::join!(stdout, stderr);
    let status = child.wait().await.map_err(Failure::Start)?;
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
    let mut cmd = child::command(argv, None, cycle.work_dir.as_deref(), &[]);
    cmd.stdin(std::process::Stdio::null());
    let fail =
        |problem: String, stderr: &[u8]| HookFailure::new(Hook::Source, &argv[0], problem, stderr);
    let output = match tokio::time::timeout(cycle.cfg.item_timeout, read(cmd)).await {
        Ok(Ok(out)) => out,
        Ok(Err(Failure::Start(e))) => {
            return failed(cycle, fail(format!("could not start: {e}"), b"")).await;
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
    let spec = KeySpec::from_fields(cycle.cfg.key_fields.as_deref());
    let priority = key::Priority {
        field: cycle.cfg.priority_field.clone(),
        default: 0,
    };
    let mut items = Vec::new();
    let mut bad = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let stdout = String::from_utf8_lossy(key::without_bom(&output.stdout));
    for (n, line) in stdout.lines().enumerate() {
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
        let problem = format!(
            "its output was rejected, nothing added: {}",
            bad.iter().take(5).cloned().collect::<Vec<_>>().join("; ")
        );
        return failed(cycle, fail(problem, b"")).await;
    }
    let batch = cycle.batch.clone();
    match cycle
        .writer
        .call(move |s| s.add_items(&batch, &items, now_ms(), |_| {}))
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
        Err(e) => failed(cycle, fail(format!("adding its items failed: {e}"), b"")).await,
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
