//! Keys a command named that it will not act on (`requeue B K...`, `skip
//! B K...`). Every key named is judged before anything changes, and all
//! the refused ones are said in one refusal, grouped by why: one refusal
//! at a time made a user fixing the command meet the next only on the
//! next try.

use serde::Serialize;

use super::{Refusal, Result, StoreError};
use crate::util::time::rfc3339;

/// Keys a group names in words before it counts the rest (`--json` has
/// every one): a refusal of 300 keys stays a message one can read.
const SAID_KEYS: usize = 20;

/// Why a named key is refused; the groups are said in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// No item of the batch has the key.
    Unknown,
    /// Its item was done and pruned: only the key is kept.
    Pruned,
    /// A requeue (without `--outcome`) of an item that is not failed.
    NotFailed,
    /// A requeue with `--outcome` of an item not done with that outcome.
    NotOfOutcome,
    /// Failed, but the requeue's `--class` or `--tier` leave it out.
    LeftOut,
    /// A skip of an item a live run is working.
    InFlight,
    /// A skip of an item a live run holds while it waits (to retry after a
    /// failed attempt, or for a place in its pool): not in flight, but
    /// that run runs it when the wait ends.
    Waiting,
}

/// One key refused, with the state that refused it ("done", "manual tier").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedKey {
    pub key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// The keys refused for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedGroup {
    pub why: Why,
    /// The reason in words: "not failed", "left out by --tier retry".
    pub says: String,
    pub keys: Vec<RefusedKey>,
    /// What to do about them, said once after the groups.
    #[serde(skip)]
    pub hint: Option<String>,
}

/// Every key named that a command refused, by reason; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedKeys {
    pub batch: String,
    /// What did not happen to any item: "requeued", "skipped".
    pub verb: &'static str,
    pub groups: Vec<RefusedGroup>,
}

impl std::fmt::Display for RefusedKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "nothing was {} in batch {:?}: ", self.verb, self.batch)?;
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|g| {
                let mut keys: Vec<String> = g
                    .keys
                    .iter()
                    .take(SAID_KEYS)
                    .map(|k| match &k.state {
                        Some(state) => format!("{} ({state})", k.key),
                        None => k.key.clone(),
                    })
                    .collect();
                if g.keys.len() > SAID_KEYS {
                    keys.push(format!("and {} more", g.keys.len() - SAID_KEYS));
                }
                format!("{}: {}", g.says, keys.join(", "))
            })
            .collect();
        f.write_str(&groups.join("; "))?;
        let mut hints: Vec<&str> = Vec::new();
        for hint in self.groups.iter().filter_map(|g| g.hint.as_deref()) {
            // Two groups may want the same thing done (a skip of items in
            // flight and of items waiting): said once.
            if !hints.contains(&hint) {
                hints.push(hint);
            }
        }
        if !hints.is_empty() {
            write!(f, " ({})", hints.join("; "))?;
        }
        Ok(())
    }
}

/// The refusal of one key no item has, as a group (`--json` says it so
/// when it is the only key refused, whose error is the store's own):
/// `None` for any other error.
#[must_use]
pub fn missing_group(err: &StoreError) -> Option<RefusedGroup> {
    let (why, says, key, state) = match err {
        StoreError::UnknownKey { key, .. } => (Why::Unknown, "no such item", key.clone(), None),
        StoreError::Pruned { tombstone, .. } => (
            Why::Pruned,
            "pruned",
            tombstone.key.clone(),
            Some(format!("on {}", rfc3339(tombstone.pruned_at))),
        ),
        _ => return None,
    };
    Some(RefusedGroup {
        why,
        says: says.into(),
        keys: vec![RefusedKey { key, state }],
        hint: None,
    })
}

/// The verdicts on the keys a command named, gathered before it changes
/// anything; [`finish`](Self::finish) refuses them all at once.
pub(crate) struct KeyVerdicts {
    refused: RefusedKeys,
    /// The store's own error for a key no item has: said as it is when it
    /// is the only key refused (a pruned key's error says what became of it).
    lone: Option<StoreError>,
}

impl KeyVerdicts {
    pub(crate) fn new(batch: &str, verb: &'static str) -> Self {
        KeyVerdicts {
            refused: RefusedKeys {
                batch: batch.to_string(),
                verb,
                groups: Vec::new(),
            },
            lone: None,
        }
    }

    /// Refuses `key` for `why`; `says` and `hint` are the group's, taken
    /// from its first key.
    pub(crate) fn refuse(
        &mut self,
        why: Why,
        says: impl FnOnce() -> String,
        hint: Option<String>,
        key: &str,
        state: Option<String>,
    ) {
        let key = RefusedKey {
            key: key.to_string(),
            state,
        };
        match self.refused.groups.iter_mut().find(|g| g.why == why) {
            Some(group) => group.keys.push(key),
            None => self.refused.groups.push(RefusedGroup {
                why,
                says: says(),
                keys: vec![key],
                hint,
            }),
        }
    }

    /// A key the store found no item of (`UnknownKey`, or `Pruned`), as
    /// `ops::items::missing` says it; any other error is returned.
    pub(crate) fn missing(&mut self, err: StoreError) -> Result<()> {
        let Some(group) = missing_group(&err) else {
            return Err(err);
        };
        let RefusedKey { key, state } = group.keys.into_iter().next().expect("one key");
        self.refuse(group.why, || group.says, None, &key, state);
        self.lone.get_or_insert(err);
        Ok(())
    }

    /// Nothing refused: go ahead. Else one refusal naming every key
    /// refused, grouped by why (one key no item has: the store's own error).
    pub(crate) fn finish(mut self) -> Result<()> {
        let count: usize = self.refused.groups.iter().map(|g| g.keys.len()).sum();
        match (count, self.lone.take()) {
            (0, _) => Ok(()),
            (1, Some(lone)) => Err(lone),
            _ => {
                self.refused.groups.sort_by_key(|g| g.why);
                Err(Refusal::Keys(self.refused).into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_names_twenty_keys_then_counts_the_rest() {
        let mut v = KeyVerdicts::new("b", "requeued");
        for n in 0..25 {
            v.refuse(
                Why::NotFailed,
                || "not failed".into(),
                None,
                &format!("k{n}"),
                None,
            );
        }
        v.refuse(
            Why::LeftOut,
            || "left out by --tier retry".into(),
            None,
            "m",
            None,
        );
        let Err(StoreError::Refused(Refusal::Keys(refused))) = v.finish() else {
            panic!("refused")
        };
        let said = refused.to_string();
        assert!(
            said.contains("k18, k19, and 5 more; left out by --tier retry: m"),
            "{said}"
        );
        assert!(!said.contains("k20"), "{said}");
        assert_eq!(refused.groups[0].keys.len(), 25, "--json has every one");
    }

    /// Items in flight and items waiting want the same thing done: the
    /// hint is said once.
    #[test]
    fn a_hint_two_groups_share_is_said_once() {
        let mut v = KeyVerdicts::new("b", "skipped");
        let hint = || Some("stop the run or `cancel` first, then skip again".to_string());
        v.refuse(Why::InFlight, || "in flight".into(), hint(), "a", None);
        v.refuse(Why::Waiting, || "waiting".into(), hint(), "c", None);
        let Err(StoreError::Refused(Refusal::Keys(refused))) = v.finish() else {
            panic!("refused")
        };
        let said = refused.to_string();
        assert_eq!(said.matches("then skip again").count(), 1, "{said}");
    }
}
