//! What the daemon says: journal lines on stdout, warnings on stderr,
//! and `daemon` events in the batches' logs.

use super::Daemon;
use crate::model::{EventKind, NewEvent};
use crate::util::time::{now_ms, rfc3339};
use crate::util::{sanitize, stdio};

impl Daemon {
    /// Says once, in the log of each batch it schedules, that the daemon's
    /// stdout or stderr stopped taking lines (a closed pipe, a closed
    /// terminal): it goes on, and what it does is in the store.
    pub(super) fn said_output_lost(&mut self) {
        for (stream, why) in stdio::newly_failing() {
            let message = format!(
                "the daemon's {} is gone ({why}): it goes on scheduling; its fires and events are in the store (`nightshift log`)",
                stream.name()
            );
            self.warn_all(message);
        }
    }

    /// A warning about every batch: once on stderr, and as a `daemon`
    /// event in each one's log.
    pub(super) fn warn_all(&mut self, message: String) {
        warn(&message);
        for batch in self.batches() {
            self.write_event(&NewEvent::new(
                now_ms(),
                &batch,
                EventKind::Daemon,
                message.clone(),
            ));
        }
    }

    /// A warning about one batch: on stderr, and as a `daemon` event in
    /// its log.
    pub(super) fn warn_of(&mut self, batch: &str, message: String) {
        warn(&format!("{batch}: {message}"));
        self.write_event(&NewEvent::new(now_ms(), batch, EventKind::Daemon, message));
    }

    pub(super) fn write_event(&mut self, event: &NewEvent) {
        match tokio::task::block_in_place(|| self.store.log_event(event)) {
            Ok(_) => self.emit(event),
            Err(e) => warn(&format!("cannot record an event: {e}")),
        }
    }

    /// To the rolling log file, and to stdout for the journal.
    pub(super) fn emit(&self, event: &NewEvent) {
        self.log.emit(event);
        if event.kind != "fire" {
            say(&format!(
                "{}: {}",
                event.batch.as_deref().unwrap_or("-"),
                event.message
            ));
        }
    }
}

/// A line of the journal. Best effort: with its stdout gone (a closed pipe
/// or terminal) the daemon goes on, and says so once in the store.
pub(super) fn say(line: &str) {
    stdio::out_line(&format!("{} {}", rfc3339(now_ms()), sanitize::line(line)));
}

pub(super) fn warn(line: &str) {
    stdio::err_line(&format!(
        "nightshift daemon: warning: {}",
        sanitize::line(line)
    ));
}
