//! Marks (k9s `space`): items picked by hand in an item list, kept by key,
//! so a poll, scrolling or a filter does not lose them; `R` and `x` then
//! act on the marked set, after a question that names the exact count.
//! Marks belong to one batch: choosing another clears them. To add an
//! action on the marked set: a `Write` taking its keys, asked here.

use std::collections::BTreeMap;

use super::App;
use crate::model::{Status, Tier};
use crate::tui::action::{Effect, Write};

/// A marked item as last seen (its status decides what an action does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    pub label: String,
    pub status: Status,
    /// A failed item's tier: a cancel leaves one in manual as it is.
    pub tier: Option<Tier>,
}

impl Mark {
    /// Where a cancel would send it already: done, or quarantined.
    fn past_cancel(&self) -> bool {
        self.status == Status::Done
            || (self.status == Status::Failed && self.tier == Some(Tier::Manual))
    }
}

/// Marked items by key.
pub type Marks = BTreeMap<String, Mark>;

impl App {
    /// Marks the selected item, or unmarks it.
    pub(super) fn toggle_mark(&mut self) {
        let Some((key, label, status)) = self.target_item() else {
            self.warn("select an item first");
            return;
        };
        if self.marks.remove(&key).is_none() {
            let tier = self.target_tier();
            self.marks.insert(
                key,
                Mark {
                    label,
                    status,
                    tier,
                },
            );
        }
    }

    /// Takes the status of marked items the poll read.
    pub(super) fn refresh_marks(&mut self) {
        if self.marks.is_empty() {
            return;
        }
        let pages = [self.data.items.as_ref(), self.data.class_items.as_ref()];
        for row in pages.into_iter().flatten().flat_map(|p| &p.rows) {
            if let Some(m) = self.marks.get_mut(&row.key) {
                m.status = row.status;
                m.tier = row.tier;
                m.label.clone_from(&row.label);
            }
        }
    }

    /// `R` with marks: the marked failed items, after asking.
    pub(super) fn requeue_marked(&mut self, batch: String) -> Vec<Effect> {
        let n = self.marks.len();
        let keys: Vec<String> = self
            .marks
            .iter()
            .filter(|(_, m)| m.status == Status::Failed)
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            self.warn(format!(
                "none of the {n} marked items is failed: nothing to requeue"
            ));
            return Vec::new();
        }
        let what = if keys.len() == n {
            format!("the {n} marked")
        } else {
            format!(
                "{} of the {n} marked ({} not failed, left alone)",
                keys.len(),
                n - keys.len()
            )
        };
        self.ask(Write::Requeue { batch, keys, what });
        Vec::new()
    }

    /// `x` with marks: the marked items not done yet, after asking; none
    /// while one of them is in flight.
    pub(super) fn skip_marked(&mut self, batch: String) -> Vec<Effect> {
        if let Some((key, m)) = self.marks.iter().find(|(_, m)| m.status == Status::Claimed) {
            self.warn(format!(
                "{} (marked) is in flight; it cannot be skipped now",
                crate::tui::format::item_in_sentence(key, &m.label)
            ));
            return Vec::new();
        }
        let keys: Vec<String> = self
            .marks
            .iter()
            .filter(|(_, m)| m.status != Status::Done)
            .map(|(k, _)| k.clone())
            .collect();
        let done = self.marks.len() - keys.len();
        if keys.is_empty() {
            self.warn(format!("the {done} marked items are done already"));
            return Vec::new();
        }
        self.ask(Write::SkipMarked { batch, keys, done });
        Vec::new()
    }

    /// `c` with marks: the marked items not done nor quarantined yet,
    /// after asking (the running ones have their workers stopped by their
    /// runners); the others are where a cancel sends them already.
    pub(super) fn cancel_marked(&mut self, batch: String) -> Vec<Effect> {
        let keys: Vec<String> = self
            .marks
            .iter()
            .filter(|(_, m)| !m.past_cancel())
            .map(|(k, _)| k.clone())
            .collect();
        let left = self.marks.len() - keys.len();
        if keys.is_empty() {
            self.warn(if left == 1 {
                "the marked item is done or failed/manual already: nothing to cancel".to_string()
            } else {
                format!(
                    "the {left} marked items are done or failed/manual already: nothing to cancel"
                )
            });
            return Vec::new();
        }
        self.ask(Write::CancelMarked { batch, keys, left });
        Vec::new()
    }

    /// A confirmed write on the marked set clears the marks.
    pub(super) fn acted_on_marks(&mut self, write: &Write) {
        let keys = match write {
            Write::Requeue { keys, .. }
            | Write::SkipMarked { keys, .. }
            | Write::CancelMarked { keys, .. } => keys,
            _ => return,
        };
        if !self.marks.is_empty() && keys.iter().all(|k| self.marks.contains_key(k)) {
            self.marks.clear();
        }
    }
}
