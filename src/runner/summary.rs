//! The end of a cycle: the one-line summary, the alert hook, the live
//! progress line, and the record of a cycle that stepped down at once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;

use super::cycle::{Claims, Cycle, HeldNow, StopReason};
use super::hook::{Hook, HookFailure};
use super::{EventLog, RunOptions, RunReport};
use crate::duration::format_duration;
use crate::model::waiting::{WaitReason, claim_wait_said, held_words};
use crate::model::{EventKind, Holder, NewEvent, RunCounts, RunState};
use crate::store::{RunEnd, Store};
use crate::util::live::Live;
use crate::util::time::{moment, now_ms};
use crate::util::{sanitize, text};

/// `articles: 190 done, 4 empty, 3 failed (2 retry, 1 manual), 12 retried,
/// 3 skipped-done, 2m14s`, plus spend and why it stopped early.
pub fn line(
    batch: &str,
    c: &RunCounts,
    elapsed: Duration,
    stopped: Option<&StopReason>,
    source_failed: Option<&HookFailure>,
) -> String {
    let mut s = format!(
        "{batch}: {} done, {} empty, {} failed ({} retry, {} manual), {} retried, {} skipped-done",
        c.done, c.empty, c.failed, c.retry, c.manual, c.retried, c.skipped_done
    );
    if c.redriven > 0 {
        s.push_str(&format!(", {} redriven", c.redriven));
    }
    if c.released > 0 {
        s.push_str(&format!(", {} released", c.released));
    }
    if c.cancelled > 0 {
        s.push_str(&format!(", {} cancelled", c.cancelled));
    }
    if c.cost > 0.0 {
        s.push_str(&format!(", spent {}", crate::util::money::money(c.cost)));
    }
    s.push_str(&format!(
        ", {}",
        format_duration(Duration::from_secs(elapsed.as_secs()))
    ));
    if let Some(reason) = stopped {
        s.push_str(&format!("; stopped: {reason}"));
    }
    if let Some(f) = source_failed {
        s.push_str(&format!(
            "; the source command failed ({}), nothing added from it",
            f.problem
        ));
    }
    s
}

/// Records a cycle that did nothing (paused, lock held, stopped while it
/// waited for the lock: `stopped`) as a run.
pub fn record_skip(
    store: &mut Store,
    opts: &RunOptions,
    holder: &Holder,
    (state, stopped): (RunState, Option<StopReason>),
    reason: &str,
    log: &EventLog,
) -> anyhow::Result<RunReport> {
    let now = now_ms();
    let summary = format!("{}: {state}: {reason}", opts.batch);
    // One transaction: a run that never held a seat is never seen open
    // (a runner taking over would take it for dead and mark it crashed).
    let (run_id, event) = store.group(|s| {
        let run_id = s.start_run(
            &opts.batch,
            opts.trigger,
            opts.actor.as_deref(),
            holder,
            now,
            None,
        )?;
        let end = RunEnd {
            stopped: stopped.as_ref().map(StopReason::cause),
            ..RunEnd::new(state, &summary)
        };
        s.finish_run(run_id, &end, now)?;
        let kind = match state {
            RunState::Paused => EventKind::Paused,
            RunState::LockHeld => EventKind::LockHeld,
            RunState::Aborted => EventKind::Aborted,
            _ => EventKind::RunFinished,
        };
        let event = NewEvent::new(now, &opts.batch, kind, summary.clone()).run(run_id);
        s.log_event(&event)?;
        Ok::<_, crate::store::StoreError>((run_id, event))
    })??;
    log.emit(&event);
    Ok(RunReport {
        run_id: Some(run_id),
        state,
        counts: RunCounts::default(),
        summary,
        stopped,
        hooks_failed: Vec::new(),
        waiting: Vec::new(),
    })
}

/// The live line on stderr: done/failed/remaining, rate and ETA.
pub async fn progress(cycle: Arc<Cycle>, started: Instant) {
    let live = Live::stderr();
    if !live.on() {
        return;
    }
    let batch = cycle.batch.clone();
    let total = match cycle.writer.call(move |s| s.counts(&batch)).await {
        Ok(c) => c.to_do(),
        Err(_) => return,
    };
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let c = cycle.tally.counts(0);
        let processed = cycle.tally.processed();
        let secs = started.elapsed().as_secs_f64().max(0.001);
        // Redriven retries join what is left to do.
        let redriven = cycle
            .tally
            .redriven
            .load(std::sync::atomic::Ordering::Relaxed);
        let now = now_ms();
        let line = progress_line(
            &cycle.batch,
            &Progress {
                done: c.done,
                empty: c.empty,
                failed: c.failed,
                claims: cycle.claims_now(now),
                remaining: (total + redriven - processed).max(0),
                processed,
                secs,
                held: cycle.held_now(now),
            },
            now,
            live.room(),
        );
        live.show(&line);
    }
}

/// What the live line tells.
struct Progress {
    done: i64,
    empty: i64,
    failed: i64,
    /// The claims: in flight, or waiting (a backoff, a place in the pool).
    claims: Claims,
    /// Not yet processed: the claimed ones and those not started.
    remaining: i64,
    processed: i64,
    /// The run's age.
    secs: f64,
    held: Option<HeldNow>,
}

/// Cells the batch's name keeps on a narrow terminal, where the counts
/// after it take the rest.
const NAME_LEAST: usize = 10;

/// `b: 3 done, 0 empty, 1 failed, 2 running, 4 left · 12/min · ETA 30s`,
/// with `, 1 waiting to retry` (and for a place in the pool) after
/// `running` when a claim waits: `left` are those not started (the
/// claimed ones are said apart); the ETA is for every one not processed.
/// In `room` cells the name is cut first (to no less than `NAME_LEAST`),
/// so the counts and the rate stay in view; then the line's end (`Live`).
fn progress_line(
    batch: &str,
    p: &Progress,
    now: crate::model::Millis,
    room: Option<usize>,
) -> String {
    // Over the run's age; nothing said in its first seconds (as the
    // dashboard: `model::pace`).
    let known = p.secs * 1000.0 >= crate::model::pace::MIN_WINDOW_MS as f64;
    let rate = if known {
        format!("{:.0}/min", p.processed as f64 * 60.0 / p.secs)
    } else {
        "—/min".into()
    };
    // No ETA while held, as the dashboard (`model::pace`).
    let eta = if known && p.processed > 0 && p.remaining > 0 && p.held.is_none() {
        format!(
            " · ETA {}",
            format_duration(Duration::from_secs_f64(
                p.remaining as f64 * p.secs / p.processed as f64
            ))
        )
    } else {
        String::new()
    };
    // In the words of every view, the pool named when it is its hold.
    let held = p.held.as_ref().map_or_else(String::new, |h| {
        let words = if h.budget {
            // As every view says a budget's wait.
            format!("budget reached, resets {}", moment(h.until, now))
        } else {
            held_words(Some(h.until), h.pool.as_deref(), now)
        };
        format!(" · {}", sanitize::line(&words))
    });
    let Claims {
        in_flight,
        retrying,
        pool_waits,
        held: pool_held,
    } = p.claims;
    let mut counts = format!(
        "{} done, {} empty, {} failed, {in_flight} running",
        p.done, p.empty, p.failed
    );
    for (n, wait) in [
        (retrying, WaitReason::Backoff),
        (pool_held, WaitReason::Hold),
        (pool_waits, WaitReason::PoolPlace),
    ] {
        if n > 0 {
            counts.push_str(&format!(", {n} {}", claim_wait_said(wait)));
        }
    }
    let left = (p.remaining - in_flight - retrying - pool_held - pool_waits).max(0);
    counts.push_str(&format!(", {left} left"));
    let kept = format!("{counts} · {rate}");
    let name = sanitize::line(batch);
    let name = match room {
        Some(room) => {
            let name_room = room.saturating_sub(text::width(&kept) + 2);
            text::cut(&name, name_room.max(NAME_LEAST))
        }
        None => name,
    };
    format!("{name}: {kept}{eta}{held}")
}

pub fn clear_progress() {
    Live::stderr().clear();
}

/// How long the alert command may take.
const ALERT_TIMEOUT: Duration = Duration::from_secs(60);
/// After it exited, how long to go on reading its stderr (a process it left
/// in the background may hold the pipe open).
const ALERT_STDERR_GRACE: Duration = Duration::from_millis(500);
/// The end of its stderr kept.
const ALERT_STDERR_TAIL: usize = 64 << 10;

/// How the alert command's run ended.
enum AlertEnd {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    /// A signal to the run came while it ran.
    Stopped,
}

/// The `alert` a finished run owes: run once its batch lock is released
/// (a hung alert held the lock, and so the batch, for its whole timeout).
pub struct Alert {
    argv: Vec<String>,
    body: String,
    batch: String,
    run_id: i64,
    work_dir: Option<std::path::PathBuf>,
}

/// The alert `report` calls for, if the batch has one.
pub fn alert_due(cycle: &Cycle, report: &RunReport) -> Option<Alert> {
    let argv = cycle.cfg.alert.clone()?;
    let body = serde_json::json!({
        "batch": cycle.batch,
        "run_id": report.run_id,
        "state": report.state,
        "summary": report.summary,
        "counts": report.counts,
    })
    .to_string();
    Some(Alert {
        argv,
        body,
        batch: cycle.batch.clone(),
        run_id: cycle.run_id,
        work_dir: cycle.work_dir.clone(),
    })
}

impl Alert {
    /// Runs the command, in a process group of its own, with the summary as
    /// JSON on stdin; logs how it went (an `alert` event, to the store and
    /// the log files), and returns its failure, if any. Stopped, with what
    /// it started, at its timeout or at a signal that stops the run
    /// (`signals`).
    pub async fn run(
        self,
        store: Option<&mut Store>,
        log: &EventLog,
        mut signals: tokio::sync::watch::Receiver<super::Signal>,
    ) -> Option<HookFailure> {
        let argv = &self.argv;
        let mut cmd = tokio::process::Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .env("NIGHTSHIFT_BATCH", &self.batch)
            .env("NIGHTSHIFT_RUN_ID", self.run_id.to_string())
            .kill_on_drop(true);
        #[cfg(unix)]
        cmd.process_group(0);
        if let Some(dir) = &self.work_dir {
            cmd.current_dir(dir);
        }
        let fail = |problem: String, stderr: &[u8]| {
            HookFailure::new(Hook::Alert, &argv[0], problem, stderr)
        };
        let failure = match super::child::subreaper::spawn(&mut cmd) {
            Err(e) => {
                let why = super::child::startable::start_failure(
                    &argv[0],
                    None,
                    self.work_dir.as_deref(),
                    &e,
                );
                Some(fail(format!("could not start: {why}"), b""))
            }
            Ok(mut child) => {
                let group = child.id();
                let tail = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
                let reader = child
                    .stderr
                    .take()
                    .map(|err| tokio::spawn(read_tail(err, tail.clone())));
                if let Some(mut stdin) = child.stdin.take() {
                    let _ = stdin.write_all(self.body.as_bytes()).await;
                    let _ = stdin.write_all(b"\n").await;
                }
                // A signal that comes while it runs (one before it is the
                // run's, which still alerts).
                signals.borrow_and_update();
                let stopped = async {
                    if signals.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                let ended = tokio::select! {
                    w = tokio::time::timeout(ALERT_TIMEOUT, child.wait()) => match w {
                        Ok(exited) => AlertEnd::Exited(exited),
                        Err(_) => AlertEnd::TimedOut,
                    },
                    () = stopped => AlertEnd::Stopped,
                };
                // What it started goes with it (`sleep 300 &`).
                if !matches!(ended, AlertEnd::Exited(_)) {
                    super::child::kill_group(group);
                    let _ = child.kill().await;
                }
                if let Some(reader) = reader {
                    let abort = reader.abort_handle();
                    if tokio::time::timeout(ALERT_STDERR_GRACE, reader)
                        .await
                        .is_err()
                    {
                        abort.abort();
                    }
                }
                let stderr = std::mem::take(
                    &mut *tail
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner),
                );
                match ended {
                    AlertEnd::Exited(Ok(status)) if status.success() => None,
                    AlertEnd::Exited(Ok(status)) => Some(fail(status.to_string(), &stderr)),
                    AlertEnd::Exited(Err(e)) => {
                        Some(fail(format!("could not be waited for: {e}"), &stderr))
                    }
                    AlertEnd::TimedOut => Some(fail(
                        format!("timed out after {}", format_duration(ALERT_TIMEOUT)),
                        &stderr,
                    )),
                    AlertEnd::Stopped => Some(fail("stopped by a signal".into(), &stderr)),
                }
            }
        };
        let message = match &failure {
            None => format!(
                "alert `{}` ran: exit status: 0",
                crate::util::sanitize::line(&argv[0])
            ),
            Some(f) => f.to_string(),
        };
        let mut event = NewEvent::new(
            now_ms(),
            &self.batch,
            EventKind::Alert,
            super::classify::bound_message(&message),
        )
        .run(self.run_id);
        if let Some(f) = &failure {
            event = event.fields(serde_json::json!(f));
        }
        if let Some(s) = store
            && let Err(e) = s.log_event(&event)
        {
            tracing::warn!("recording the alert of run {}: {e}", self.run_id);
        }
        log.emit(&event);
        failure
    }
}

/// Reads `err` to its end into `tail`, keeping the last
/// [`ALERT_STDERR_TAIL`] bytes.
async fn read_tail(
    mut err: tokio::process::ChildStderr,
    tail: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
) {
    use tokio::io::AsyncReadExt;
    let mut chunk = vec![0u8; 8192];
    while let Ok(n) = err.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        let mut t = tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.extend_from_slice(&chunk[..n]);
        if t.len() > 2 * ALERT_STDERR_TAIL {
            let cut = t.len() - ALERT_STDERR_TAIL;
            t.drain(..cut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(claims: Claims) -> Progress {
        Progress {
            done: 3,
            empty: 0,
            failed: 1,
            claims,
            remaining: 6,
            processed: 4,
            secs: 60.0,
            held: None,
        }
    }

    /// 10 to do, 4 processed, 2 running: 4 are left to start, and the
    /// ETA is for the 6 not processed.
    #[test]
    fn the_live_line_says_running_items_apart_from_those_left() {
        let running = Claims {
            in_flight: 2,
            ..Claims::default()
        };
        let line = progress_line("夜間", &progress(running), 0, None);
        assert_eq!(
            line,
            "夜間: 3 done, 0 empty, 1 failed, 2 running, 4 left · 4/min · ETA 1m30s"
        );
    }

    /// Claims waiting out a backoff or for a place in the pool are not
    /// running (every view's rule), nor left to start.
    #[test]
    fn the_live_line_says_waiting_claims_apart_from_running_ones() {
        let claims = Claims {
            in_flight: 1,
            retrying: 2,
            pool_waits: 1,
            held: 0,
        };
        let line = progress_line("b", &progress(claims), 0, None);
        assert_eq!(
            line,
            "b: 3 done, 0 empty, 1 failed, 1 running, 2 waiting to retry, \
             1 waiting for a place in its pool, 2 left · 4/min · ETA 1m30s"
        );
    }

    /// Claims a held pool defers are held, not waiting for a place, and
    /// the hold is said in every view's words, its pool named.
    #[test]
    fn the_live_line_says_a_pools_hold() {
        let claims = Claims {
            held: 2,
            ..Claims::default()
        };
        let p = Progress {
            held: Some(HeldNow {
                until: 1_767_251_760_000,
                pool: Some("本番アカウント".into()),
                budget: false,
            }),
            ..progress(claims)
        };
        let line = progress_line("b", &p, 1_767_250_000_000, None);
        assert_eq!(
            line,
            "b: 3 done, 0 empty, 1 failed, 0 running, 2 held, 4 left · 4/min \
             · held until 07:16:00Z (retry-after for pool 本番アカウント)"
        );
    }

    /// A reached budget holds the run too, but no retry-after asked it:
    /// the line said `held until T (retry-after)`.
    #[test]
    fn the_live_line_says_a_budgets_hold_as_a_budget() {
        let p = Progress {
            held: Some(HeldNow {
                until: 1_767_312_000_000,
                pool: None,
                budget: true,
            }),
            ..progress(Claims::default())
        };
        let line = progress_line("b", &p, 1_767_250_000_000, None);
        assert!(line.ends_with(" · budget reached, resets 00:00Z"), "{line}");
    }

    /// On a narrow terminal the name is cut first, so the counts stay.
    #[test]
    fn a_long_name_gives_way_to_the_counts() {
        let name = "夜間バッチ：ブログ記事の自動整形と投稿処理";
        let running = Claims {
            in_flight: 2,
            ..Claims::default()
        };
        let line = progress_line(name, &progress(running), 0, Some(79));
        assert!(
            line.starts_with(
                "夜間バッチ：ブログ記事の…: 3 done, 0 empty, 1 failed, 2 running, 4 left · 4/min"
            ),
            "{line}"
        );
        // Never below its least: the line's end is cut then (`Live`).
        let line = progress_line(name, &progress(running), 0, Some(40));
        assert!(line.starts_with("夜間バッ…: 3 done"), "{line}");
    }
}
