//! The run log's records: an event as read back, and one to append.

use serde::Serialize;

use super::{EventKind, Millis};

/// A structured run-log record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    pub id: i64,
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
    pub batch: Option<String>,
    pub run_id: Option<i64>,
    pub key: Option<String>,
    /// The item's label, read with the event (none once the item is
    /// pruned).
    pub label: Option<String>,
    pub kind: String,
    pub actor: Option<String>,
    pub message: String,
    pub fields: serde_json::Value,
}

impl Event {
    /// Who did it, for a view to add to the message: none when the
    /// message already says `by` them (`requeued from manual by alice`).
    #[must_use]
    pub fn named_actor(&self) -> Option<&str> {
        self.actor
            .as_deref()
            .filter(|a| !self.message.contains(&format!("by {a}")))
    }
}

/// An event to append (the store assigns id).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NewEvent {
    pub at: Millis,
    pub batch: Option<String>,
    pub run_id: Option<i64>,
    pub key: Option<String>,
    pub kind: String,
    pub actor: Option<String>,
    pub message: String,
    pub fields: Option<serde_json::Value>,
}

impl NewEvent {
    /// The fields as stored and logged: compact JSON, as `Display` writes
    /// it, but into a buffer directly (`Display` goes through a formatter
    /// per token, which cost twice as much; two events per item).
    pub fn fields_text(&self) -> Option<String> {
        self.fields
            .as_ref()
            .map(|f| serde_json::to_string(f).unwrap_or_else(|_| f.to_string()))
    }

    /// An event of `batch`. Its kind is typed, so every kind written is in
    /// the one list (`EventKind`); what is read back stays text
    /// (`Event::kind`), as a store may hold kinds of another version.
    pub fn new(at: Millis, batch: &str, kind: EventKind, message: impl Into<String>) -> NewEvent {
        NewEvent {
            at,
            batch: Some(batch.to_string()),
            kind: kind.as_str().to_string(),
            message: message.into(),
            ..NewEvent::default()
        }
    }
    pub fn run(mut self, run_id: i64) -> Self {
        self.run_id = Some(run_id);
        self
    }
    pub fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_string());
        self
    }
    pub fn actor(mut self, actor: &str) -> Self {
        self.actor = Some(actor.to_string());
        self
    }
    pub fn fields(mut self, fields: serde_json::Value) -> Self {
        self.fields = Some(fields);
        self
    }
}

#[cfg(test)]
mod named_actor_tests {
    use super::Event;

    fn event(message: &str, actor: Option<&str>) -> Event {
        Event {
            id: 1,
            at: 0,
            batch: None,
            run_id: None,
            key: None,
            label: None,
            kind: "requeued".into(),
            actor: actor.map(Into::into),
            message: message.into(),
            fields: serde_json::Value::Null,
        }
    }

    #[test]
    fn an_actor_is_named_unless_the_message_says_by_them() {
        assert_eq!(
            event("requeued from manual by 山田@host", Some("山田@host")).named_actor(),
            None
        );
        assert_eq!(
            event("hold lifted", Some("山田@host")).named_actor(),
            Some("山田@host")
        );
        // Another's name in the message is not theirs.
        assert_eq!(
            event("requeued from manual by 山田@host", Some("alice@host")).named_actor(),
            Some("alice@host")
        );
        assert_eq!(event("done", None).named_actor(), None);
    }
}
