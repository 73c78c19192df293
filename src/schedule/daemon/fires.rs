//! A due fire decided and recorded: the plan stepped with what is
//! observed now (paused, running), its decisions applied, and the
//! crashed fires of the last daemon recorded at start.

use chrono::{DateTime, Utc};

use super::Daemon;
use super::journal::{say, warn};
use crate::model::{EventKind, Fire, NewEvent};
use crate::runner;
use crate::schedule::outcome::{Outcome, describe};
use crate::schedule::plan::{Decision, Observed};
use crate::util::time;
use crate::util::time::{now_ms, rfc3339};

impl Daemon {
    /// Records the fires whose cycles the last daemon left unfinished as
    /// crashed, whatever fires it recorded after them: it stopped
    /// mid-cycle, so no outcome was ever written (a second daemon
    /// of these batches is refused, so none of them runs now). Each is run
    /// again at the first step if `catch_up` covers it.
    pub(super) fn record_crashes(&mut self) {
        let cut: Vec<(String, DateTime<Utc>)> = self
            .targets
            .iter()
            .filter_map(|t| Some((t.plan.batch.clone(), t.plan.unrecorded_crash()?)))
            .collect();
        for (batch, at) in cut {
            let fire = Fire {
                at: at.timestamp_millis(),
                outcome: Outcome::Crashed.as_str().to_string(),
                reason: Some(
                    "its cycle never ended: the daemon stopped mid-cycle (killed, or the machine went down)"
                        .to_string(),
                ),
                run_id: None,
            };
            self.record(&batch, &fire);
        }
    }

    /// Notices the emergency stop file appearing or going away, and says so
    /// (cycles that run stop by themselves: the runner watches it too).
    pub(super) fn watch_emergency_file(&mut self) {
        let now_file = runner::paused_file(&self.db);
        if now_file == self.emergency {
            return;
        }
        let message = match &now_file {
            Some(f) => format!(
                "emergency stop: {} exists; every fire is skipped until it is removed",
                f.display()
            ),
            None => "emergency stop file removed; fires run again".to_string(),
        };
        self.emergency = now_file;
        let batches: Vec<String> = self.targets.iter().map(|t| t.plan.batch.clone()).collect();
        for batch in batches {
            let event = NewEvent::new(now_ms(), &batch, EventKind::EmergencyStop, message.clone());
            self.write_event(&event);
        }
    }

    /// Why the batch must not run now, read fresh at each fire so that a
    /// pause from the CLI or dashboard counts without a restart.
    fn paused(&self, batch: &str) -> anyhow::Result<Option<String>> {
        if let Some(file) = &self.emergency {
            return Ok(Some(format!(
                "the emergency stop file {} exists",
                file.display()
            )));
        }
        let pause = tokio::task::block_in_place(|| self.store.pause(batch))?;
        Ok(pause.map(|p| format!("paused by {}: {}", p.by, p.reason)))
    }

    pub(super) fn step(&mut self, i: usize, now: DateTime<Utc>) {
        let batch = self.targets[i].plan.batch.clone();
        let running = self.running.contains_key(&batch);
        if !self.targets[i].plan.is_due(now, running) {
            return;
        }
        let paused = match self.paused(&batch) {
            Ok(p) => p,
            Err(e) => {
                // Not stepped: the fire stays due and is tried again.
                warn(&format!("{batch}: cannot read the pause flag: {e:#}"));
                return;
            }
        };
        let before = self.targets[i].plan.next();
        let step = self.targets[i].plan.step(&Observed {
            now,
            paused,
            running,
        });
        for decision in &step.decisions {
            self.apply(i, decision);
        }
        if step.wait_until != before {
            let next = step.wait_until.map(|n| n.timestamp_millis());
            if let Err(e) =
                tokio::task::block_in_place(|| self.store.set_next_fire(&batch, next, now_ms()))
            {
                warn(&format!("{batch}: cannot store the next fire time: {e}"));
            }
        }
    }

    fn apply(&mut self, i: usize, decision: &Decision) {
        let plan = &self.targets[i].plan;
        let batch = plan.batch.clone();
        let at = decision.at();
        let reason = plan.reason(decision);
        self.record(
            &batch,
            &Fire {
                at: at.timestamp_millis(),
                outcome: decision.outcome().as_str().to_string(),
                reason: reason.clone(),
                run_id: None,
            },
        );
        if let Decision::Fire { .. } = decision {
            self.start_cycle(i, at, reason);
        }
    }

    /// Writes a fire record and its event, and prints it.
    pub(super) fn record(&mut self, batch: &str, fire: &Fire) {
        let written = tokio::task::block_in_place(|| self.store.record_fire(batch, fire, now_ms()));
        match written {
            Ok(event) => self.emit(&event),
            Err(e) => warn(&format!("{batch}: cannot record a fire: {e}")),
        }
        let local = self
            .targets
            .iter()
            .find(|t| t.plan.batch == batch)
            .map_or_else(
                || rfc3339(fire.at),
                |t| t.plan.local(time::to_datetime(fire.at)),
            );
        let run = fire
            .run_id
            .map(|r| format!(" (run {r})"))
            .unwrap_or_default();
        say(&format!(
            "{batch}: fire {local}: {}{run}",
            describe(&fire.outcome, fire.reason.as_deref())
        ));
    }
}
