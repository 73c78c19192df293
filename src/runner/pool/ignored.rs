//! The items whose `estimate_field` holds no token estimate, and the
//! notice a run gives of them: the first at once, their count at its end.

use serde_json::json;

use crate::config::BatchConfig;
use crate::model::EventKind;
use crate::runner::notice::{Said, Wording};

/// An item whose `estimate_field` holds no token estimate (stored before
/// the field was set, so `add` never checked it): its call reserves
/// `token_estimate` instead, and the run says so once
/// (`IgnoredEstimate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ignored {
    pub item: i64,
    pub key: String,
    /// The field's value as JSON text.
    pub value: String,
}

/// The notice of the items whose estimates a run ignored: the first such
/// item at once, how many there were at its end.
pub(in crate::runner) struct IgnoredEstimate {
    /// The batch's `estimate_field` and `token_estimate`.
    pub field: String,
    pub estimate: Option<u64>,
}

impl IgnoredEstimate {
    pub(in crate::runner) fn of(cfg: &BatchConfig) -> IgnoredEstimate {
        IgnoredEstimate {
            field: cfg.estimate_field.clone().unwrap_or_default(),
            estimate: cfg.token_estimate,
        }
    }

    /// What `calls` whose items' estimates were ignored reserved.
    fn instead(&self, calls: &str) -> String {
        self.estimate.map_or_else(
            || format!("no token_estimate is set, so {calls} reserved none"),
            |n| format!("{calls} reserved token_estimate ({n}) instead"),
        )
    }
}

impl Wording for IgnoredEstimate {
    type Example = Ignored;
    const KIND: EventKind = EventKind::EstimateIgnored;

    fn first(&self, ignored: &Ignored) -> Said {
        let field = &self.field;
        let value = crate::util::text::cut_chars(&ignored.value, IGNORED_SHOWN);
        let message = format!(
            "item {}: its estimate_field {field:?} is {value}, not a token estimate (a whole \
             number from 0 to {}): {}; said once a run, for the first such item (the run's end \
             counts them when there are more)",
            ignored.key,
            crate::config::fields::MAX_TOKEN_ESTIMATE,
            self.instead("it"),
        );
        Said {
            message,
            fields: json!({
                "field": field,
                "value": value,
                "token_estimate": self.estimate,
            }),
            key: Some(ignored.key.clone()),
        }
    }

    fn count(&self, items: u64, first: &Ignored) -> Said {
        let field = &self.field;
        let message = format!(
            "estimate ignored for {} (first: {}): their estimate_field {field:?} held no token \
             estimate; {}",
            crate::util::noun::count(items, "item"),
            first.key,
            self.instead("each"),
        );
        Said {
            message,
            fields: json!({
                "field": field,
                "items": items,
                "first": first.key,
                "token_estimate": self.estimate,
            }),
            key: None,
        }
    }
}

/// How much of an ignored estimate's value the run log quotes.
const IGNORED_SHOWN: usize = 80;
