//! The cycles a fire starts and the alerts they owe: started as tasks,
//! each with its stop channel, and recorded as fires when they end.

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use super::Daemon;
use super::journal::say;
use crate::model::{Fire, RunState};
use crate::runner::{self, HookFailure, PendingAlert, RunReport, Signal, StopReason};
use crate::schedule::outcome::Outcome;

pub(super) struct Running {
    stop: watch::Sender<Signal>,
    task: tokio::task::Id,
    at: DateTime<Utc>,
}

pub(super) struct Finished {
    batch: String,
    at: DateTime<Utc>,
    /// The reason recorded when the cycle started (catch-up, queued, ...).
    note: Option<String>,
    result: anyhow::Result<RunReport>,
    /// The alert the cycle owes, run once its fire is recorded.
    alert: Option<PendingAlert>,
}

/// How a cycle's alert ended: its batch, and its failure if it failed.
pub(super) type AlertDone = (String, Option<HookFailure>);

impl Daemon {
    pub(super) fn start_cycle(&mut self, i: usize, at: DateTime<Utc>, note: Option<String>) {
        let opts = self.targets[i].opts.clone();
        let batch = opts.batch.clone();
        let (tx, rx) = watch::channel(Signal::Run);
        let db = self.db.clone();
        let task = self
            .cycles
            .spawn(async move {
                let (result, alert) = match runner::released(&db, opts, rx).await {
                    Ok(r) => (Ok(r.report), r.alert),
                    Err(e) => (Err(e), None),
                };
                Finished {
                    batch,
                    at,
                    note,
                    result,
                    alert,
                }
            })
            .id();
        self.running.insert(
            self.targets[i].plan.batch.clone(),
            Running { stop: tx, task, at },
        );
    }

    /// Records how a cycle started by a fire ended.
    pub(super) fn finish(&mut self, done: Result<Finished, tokio::task::JoinError>) {
        let done = match done {
            Ok(d) => d,
            Err(e) => {
                // The cycle task panicked: its fire still gets a record.
                let Some(batch) = self
                    .running
                    .iter()
                    .find(|(_, r)| r.task == e.id())
                    .map(|(b, _)| b.clone())
                else {
                    return;
                };
                let at = self
                    .running
                    .remove(&batch)
                    .map_or_else(crate::util::time::now, |r| r.at);
                Finished {
                    batch,
                    at,
                    note: None,
                    result: Err(anyhow::anyhow!("the cycle task failed: {e}")),
                    alert: None,
                }
            }
        };
        let stop = self.running.remove(&done.batch).map(|r| r.stop);
        let fire = match &done.result {
            Ok(report) => ended(report, done.at, done.note.clone(), &done.batch),
            Err(e) => Fire {
                at: done.at.timestamp_millis(),
                outcome: Outcome::Error.as_str().to_string(),
                reason: Some(format!("the cycle could not run: {e:#}")),
                run_id: None,
            },
        };
        self.record(&done.batch, &fire);
        if let Ok(report) = &done.result {
            say(&report.line());
            for failure in &report.hooks_failed {
                say(&format!("{}: {failure}", done.batch));
            }
        }
        // The batch's next fire runs while it alerts; a stop still ends it.
        if let (Some(alert), Some(stop)) = (done.alert, stop) {
            let batch = done.batch;
            let task = self
                .alerts
                .spawn(async move { (batch, alert.run().await) })
                .id();
            self.alert_stops.insert(task, stop);
        }
    }

    /// The stop channels of every cycle running and every alert a cycle
    /// that ended still runs.
    pub(super) fn stops(&self) -> impl Iterator<Item = &watch::Sender<Signal>> {
        self.running
            .values()
            .map(|r| &r.stop)
            .chain(self.alert_stops.values())
    }

    /// Says how an alert failed, in the journal.
    pub(super) fn alerted(
        &mut self,
        done: Result<(tokio::task::Id, AlertDone), tokio::task::JoinError>,
    ) {
        let (task, failure) = match done {
            Ok((task, (batch, failure))) => (task, failure.map(|f| format!("{batch}: {f}"))),
            Err(e) => (e.id(), Some(format!("an alert task failed: {e}"))),
        };
        self.alert_stops.remove(&task);
        if let Some(line) = failure {
            say(&line);
        }
    }
}

/// The fire record of a finished cycle: it ran, or it stepped down.
fn ended(report: &RunReport, at: DateTime<Utc>, note: Option<String>, batch: &str) -> Fire {
    // `BATCH: STATE: why` is how the runner words a cycle that stepped down.
    let why = || {
        let prefix = format!("{batch}: {}: ", report.state);
        report
            .summary
            .strip_prefix(&prefix)
            .unwrap_or(&report.summary)
            .to_string()
    };
    let (outcome, reason) = match report.state {
        // Paused before it began; a cycle paused midway ran.
        RunState::Paused if report.stopped.is_none() => (Outcome::SkippedPaused, Some(why())),
        RunState::LockHeld => (Outcome::LockHeld, Some(why())),
        // Stopped with the daemon: the next one resumes it (`Owed`).
        _ if matches!(report.stopped, Some(StopReason::Interrupted)) => (Outcome::Stopped, note),
        _ => {
            let stopped = report
                .stopped
                .as_ref()
                .map(|s| format!("stopped early: {s}"));
            let reason = match (note, stopped) {
                (Some(n), Some(s)) => Some(format!("{n}; {s}")),
                (n, s) => n.or(s),
            };
            (Outcome::Ran, reason)
        }
    };
    Fire {
        at: at.timestamp_millis(),
        outcome: outcome.as_str().to_string(),
        reason,
        run_id: report.run_id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunCounts;
    use crate::runner::StopReason;

    fn report(state: RunState, summary: &str, stopped: Option<StopReason>) -> RunReport {
        RunReport {
            run_id: Some(7),
            state,
            counts: RunCounts::default(),
            summary: summary.to_string(),
            stopped,
            hooks_failed: Vec::new(),
            waiting: Vec::new(),
        }
    }

    fn at() -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap()
    }

    #[test]
    fn a_finished_cycle_becomes_a_fire_record() {
        let held = report(
            RunState::LockHeld,
            "b: lock-held: lock held by db1:42 (run 6), stepped down",
            None,
        );
        let fire = ended(&held, at(), None, "b");
        assert_eq!(
            (fire.outcome.as_str(), fire.reason.as_deref(), fire.run_id),
            (
                "lock-held",
                Some("lock held by db1:42 (run 6), stepped down"),
                Some(7)
            )
        );
        // Paused between the decision and the cycle's own check.
        let paused = report(RunState::Paused, "b: paused: maintenance", None);
        let fire = ended(&paused, at(), None, "b");
        assert_eq!(
            (fire.outcome.as_str(), fire.reason.as_deref()),
            ("skipped-paused", Some("maintenance"))
        );
        // Paused midway, or stopped by max_duration: it ran, and says why it
        // stopped, after the note it started with.
        let midway = report(
            RunState::Paused,
            "b: 3 done, ...",
            Some(StopReason::Paused("maintenance".into())),
        );
        assert_eq!(ended(&midway, at(), None, "b").outcome, "ran");
        let capped = report(
            RunState::Ok,
            "b: 9 done, ...",
            Some(StopReason::MaxDuration),
        );
        let fire = ended(&capped, at(), Some("catch-up: x".into()), "b");
        assert_eq!(
            (fire.outcome.as_str(), fire.reason.as_deref(), fire.at),
            (
                "ran",
                Some("catch-up: x; stopped early: max_duration reached"),
                at().timestamp_millis()
            )
        );
        let ok = report(RunState::Ok, "b: 1 done", None);
        assert_eq!(ended(&ok, at(), None, "b").reason, None);
    }
}
