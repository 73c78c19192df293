//! What a prune deleted, and how its event says so.

use std::collections::BTreeMap;

use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Done items deleted: each leaves its tombstone (unless forgotten).
    pub done_items: i64,
    pub events: i64,
    /// Attempts' kept stderr (`AttemptLog`), older than the cutoff.
    pub attempt_logs: i64,
    pub runs: i64,
    pub failed_items: i64,
    pub dead_letters: i64,
    /// Old failed items and dead letters left in place (no `include_failed`).
    pub failed_items_kept: i64,
    pub dead_letters_kept: i64,
    /// With `forget_keys`: tombstones dropped, by batch (keys of items done
    /// before the cutoff, the done items deleted now included).
    pub forgotten_keys: BTreeMap<String, i64>,
}

impl PruneReport {
    pub fn forgotten_total(&self) -> i64 {
        self.forgotten_keys.values().sum()
    }

    /// The `pruned` event's message.
    pub(crate) fn message(&self) -> String {
        let keys = if self.forgotten_keys.is_empty() {
            " (their keys kept)"
        } else {
            ""
        };
        let mut m = format!(
            "pruned {} done items{keys}, {} events, {} attempts' stderr, {} runs, {} failed items, {} dead letters",
            self.done_items,
            self.events,
            self.attempt_logs,
            self.runs,
            self.failed_items,
            self.dead_letters
        );
        if !self.forgotten_keys.is_empty() {
            m.push_str(&format!(
                "; forgot {} keys (adding one again runs it again)",
                self.forgotten_total()
            ));
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::PruneReport;

    /// The `pruned` event says the keys were kept only when they were.
    #[test]
    fn a_prune_that_forgot_keys_does_not_say_it_kept_them() {
        let mut report = PruneReport {
            done_items: 5,
            ..PruneReport::default()
        };
        assert!(
            report
                .message()
                .starts_with("pruned 5 done items (their keys kept), ")
        );
        report.forgotten_keys.insert("b".into(), 8);
        let said = report.message();
        assert!(said.starts_with("pruned 5 done items, 0 events"), "{said}");
        assert!(
            said.ends_with("; forgot 8 keys (adding one again runs it again)"),
            "{said}"
        );
    }
}
