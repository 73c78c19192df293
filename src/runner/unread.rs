//! Process mode's `@nightshift` stderr lines (cost, usage, op ids) written
//! by persistent workers, whose stderr is not read (no line says which
//! request it is about): a cost there went uncounted in silence, `max_cost`
//! and budgets never tripping. The run says the first at once, with the
//! answer's fields to use instead, and at its end how many there were:
//! once a run, however many slots and workers.

use serde_json::json;

use super::cycle::Cycle;
use crate::model::EventKind;

impl Cycle {
    /// Says the first `@nightshift` stderr line of the run's persistent
    /// workers, once a run.
    pub(super) async fn stderr_report(&self) {
        let line = {
            let mut r = self
                .stderr_reports
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if r.said {
                return;
            }
            let Some(line) = r.first.clone() else {
                return;
            };
            r.said = true;
            line
        };
        let message = format!(
            "the persistent worker printed `{line}` on stderr, which is not read in persistent \
             mode (not counted): report cost, usage and op ids in the answer (\"cost\", \
             \"usage\", \"op_id\")"
        );
        self.say(&message);
        let event = self
            .new_event(EventKind::StrayOutput, message)
            .fields(json!({"count": 1, "stderr": line}));
        self.event(event).await;
    }

    /// At the run's end, how many `@nightshift` stderr lines went unread,
    /// when more than the first (said at once).
    pub(super) async fn say_stderr_report_count(&self) {
        // One written after its slot's last answer was read.
        self.stderr_report().await;
        let (count, first) = {
            let r = self
                .stderr_reports
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            match &r.first {
                Some(first) if r.count > 1 => (r.count, first.clone()),
                _ => return,
            }
        };
        let message = format!(
            "the persistent workers printed {count} `@nightshift` lines on stderr in this run, \
             none read (not counted; the first: `{first}`)"
        );
        self.say(&message);
        let event = self
            .new_event(EventKind::StrayOutput, message)
            .fields(json!({"count": count, "stderr": first}));
        self.event(event).await;
    }
}
