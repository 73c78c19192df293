//! What an add did (`AddReport`, with the order it gave its items), what
//! pruning keeps of a done item so an add does not run it again
//! (`Tombstone`), and what `skip` did.

use serde::Serialize;

use super::{Millis, NewItem, Outcome};

/// What `add` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AddReport {
    pub added: u64,
    /// Already in the batch: as an item, or as the tombstone of one that
    /// was done and pruned (its key is kept, so it is not run again).
    pub present: u64,
    /// Of `present`, the keys of pruned items.
    pub pruned: u64,
    /// When the first and the last of those were pruned: in JSON (a
    /// `source` event's fields) `pruned_between`, in RFC 3339, as `add
    /// --json` says it.
    #[serde(
        rename = "pruned_between",
        serialize_with = "crate::util::time::json_span_opt"
    )]
    pub pruned_span: Option<(Millis, Millis)>,
    /// The priorities and not-before times the add gave its items.
    #[serde(skip)]
    pub order: AddOrder,
}

/// The priorities (other than 0) and not-before times an add gave, as
/// their lowest and highest: what its `added` event records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddOrder {
    pub priority: Option<(i32, i32)>,
    pub not_before: Option<(Millis, Millis)>,
}

fn span<T: Ord + Copy>(a: Option<(T, T)>, b: Option<(T, T)>) -> Option<(T, T)> {
    match (a, b) {
        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
        (one, other) => one.or(other),
    }
}

impl AddOrder {
    /// What `items` were given.
    pub fn of(items: &[NewItem]) -> AddOrder {
        items.iter().fold(AddOrder::default(), |o, i| AddOrder {
            priority: span(
                o.priority,
                (i.priority != 0).then_some((i.priority, i.priority)),
            ),
            not_before: span(o.not_before, i.not_before.map(|t| (t, t))),
        })
    }

    /// The order of two parts of one add.
    #[must_use]
    pub fn then(self, more: AddOrder) -> AddOrder {
        AddOrder {
            priority: span(self.priority, more.priority),
            not_before: span(self.not_before, more.not_before),
        }
    }

    /// The priorities given, as the `added` event and `add --json` say
    /// them: `5`, or `[-1, 9]` for the lowest and the highest.
    pub fn priority_json(&self) -> Option<serde_json::Value> {
        self.priority
            .map(|(low, high)| one_or_span((low, high), |p| p.into()))
    }

    /// The not-before times given, as [`AddOrder::priority_json`], in RFC 3339.
    pub fn not_before_json(&self) -> Option<serde_json::Value> {
        self.not_before
            .map(|span| one_or_span(span, |t| crate::util::time::rfc3339(t).into()))
    }

    /// The priorities given in words: `priority 5`, `priorities -1 to 9`.
    pub fn priority_words(&self) -> Option<String> {
        self.priority.map(|(low, high)| {
            if low == high {
                format!("priority {low}")
            } else {
                format!("priorities {low} to {high}")
            }
        })
    }
}

fn one_or_span<T: PartialEq>(
    (low, high): (T, T),
    f: fn(T) -> serde_json::Value,
) -> serde_json::Value {
    if low == high {
        f(low)
    } else {
        serde_json::json!([f(low), f(high)])
    }
}

impl AddReport {
    /// Counts a key found as the tombstone of an item pruned at `at`.
    pub fn count_pruned(&mut self, at: Millis) {
        self.present += 1;
        self.pruned += 1;
        self.pruned_span = Some(match self.pruned_span {
            Some((first, last)) => (first.min(at), last.max(at)),
            None => (at, at),
        });
    }

    /// The report of this add followed by `more`.
    #[must_use]
    pub fn then(self, more: AddReport) -> AddReport {
        AddReport {
            added: self.added + more.added,
            present: self.present + more.present,
            pruned: self.pruned + more.pruned,
            pruned_span: span(self.pruned_span, more.pruned_span),
            order: self.order.then(more.order),
        }
    }

    /// `added 3, already present 2 (1 of them done and pruned on 2026-11-02)`.
    pub fn summary(&self) -> String {
        self.summary_as("added")
    }

    /// [`summary`](Self::summary) with another verb for `added` (a dry
    /// run's `would add`).
    pub fn summary_as(&self, added: &str) -> String {
        let mut s = format!("{added} {}, already present {}", self.added, self.present);
        if let Some((first, last)) = self.pruned_span {
            let day = |ms| {
                crate::util::time::to_datetime(ms)
                    .format("%Y-%m-%d")
                    .to_string()
            };
            let (first, last) = (day(first), day(last));
            let when = if first == last {
                format!("on {first}")
            } else {
                format!("between {first} and {last}")
            };
            s.push_str(&format!(
                " ({} of them done and pruned {when})",
                self.pruned
            ));
        }
        s
    }
}

/// What pruning keeps of a done item: its key, and when and how it was
/// done, so that adding the same input again does not run it again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tombstone {
    pub key: String,
    pub outcome: Outcome,
    #[serde(serialize_with = "crate::util::time::json")]
    pub done_at: Millis,
    #[serde(serialize_with = "crate::util::time::json")]
    pub pruned_at: Millis,
}

/// What `skip` did, key by key (in the order given, each key once).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SkipReport {
    /// Marked done (outcome `skipped`) now.
    pub skipped: Vec<String>,
    /// Done already: left as they were.
    pub already_done: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `source` event's fields give the pruned keys' span as every JSON
    /// time is given (and named as `add --json` names it), where they
    /// gave epoch milliseconds.
    #[test]
    fn an_add_report_gives_its_pruned_span_in_rfc3339() {
        let report = AddReport {
            present: 2,
            pruned: 2,
            pruned_span: Some((1_767_250_000_000, 1_767_251_760_000)),
            ..AddReport::default()
        };
        let json = serde_json::to_value(report).unwrap();
        assert_eq!(
            json["pruned_between"],
            serde_json::json!(["2026-01-01T06:46:40Z", "2026-01-01T07:16:00Z"])
        );
        assert!(json.get("pruned_span").is_none(), "{json}");
        let none = serde_json::to_value(AddReport::default()).unwrap();
        assert_eq!(none["pruned_between"], serde_json::Value::Null);
    }
}
