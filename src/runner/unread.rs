//! What a run's persistent workers write that it does not read, said once
//! a run and counted at its end ([`Notice`](super::notice::Notice)),
//! however many slots and workers: `stray-output` events both.
//!
//! - Process mode's `@nightshift` stderr lines (cost, usage, op ids): a
//!   persistent worker's stderr is not read (no line says which request
//!   it is about), so a cost there went uncounted in silence, `max_cost`
//!   and budgets never tripping. The first says the answer's fields to
//!   use instead.
//! - Stray stdout lines: a line that is no answer nor op id (a library's
//!   `{"log": ...}`, a print), ignored.
//!
//! And in process mode, where they are read: a `@nightshift` line the
//! runner does not understand (a word before the report, `cost:` for
//! `cost=`), whose cost went uncounted in silence.

use serde_json::json;

use super::notice::{Said, Wording};
use crate::model::EventKind;

/// A `@nightshift` line on a persistent worker's stderr (cut, inert).
pub(super) struct StderrReport;

impl Wording for StderrReport {
    type Example = String;
    const KIND: EventKind = EventKind::StrayOutput;

    fn first(&self, line: &String) -> Said {
        Said {
            message: format!(
                "the persistent worker printed `{line}` on stderr, which is not read in \
                 persistent mode (not counted): report cost, usage and op ids in the answer \
                 (\"cost\", \"usage\", \"op_id\")"
            ),
            fields: json!({"count": 1, "stderr": line}),
            key: None,
        }
    }

    fn count(&self, count: u64, first: &String) -> Said {
        Said {
            message: format!(
                "the persistent workers printed {count} `@nightshift` lines on stderr in this \
                 run, none read (not counted; the first: `{first}`)"
            ),
            fields: json!({"count": count, "stderr": first}),
            key: None,
        }
    }
}

/// A persistent worker's stdout line that is not part of the protocol
/// (its start, inert).
pub(super) struct StrayLine;

impl Wording for StrayLine {
    type Example = String;
    const KIND: EventKind = EventKind::StrayOutput;

    fn first(&self, line: &String) -> Said {
        Said {
            message: format!(
                "the persistent worker printed a stdout line that is not part of the protocol \
                 (ignored; log to stderr): {line}"
            ),
            fields: json!({"count": 1, "line": line}),
            key: None,
        }
    }

    fn count(&self, count: u64, first: &String) -> Said {
        Said {
            message: format!(
                "the persistent workers printed {count} stdout lines that are not part of the \
                 protocol in this run (ignored; the first: {first})"
            ),
            fields: json!({"count": count, "line": first}),
            key: None,
        }
    }
}

/// A process-mode worker's `@nightshift` line the runner could not read:
/// the item's key and the line (inert, bounded).
pub(super) struct UnreadMarker;

/// What the runner reads, said beside a line it did not.
const MARKERS_READ: &str = "`@nightshift cost=<n>`, `@nightshift usage input_tokens=N \
                            output_tokens=M` or `@nightshift op_id=<id>`";

impl Wording for UnreadMarker {
    type Example = (String, String);
    const KIND: EventKind = EventKind::StrayOutput;

    fn first(&self, (key, line): &(String, String)) -> Said {
        Said {
            message: format!(
                "the worker of {} printed `{line}` on stderr, which the runner does not read \
                 (nothing of it counted): it reads {MARKERS_READ}",
                crate::util::sanitize::line(key)
            ),
            fields: json!({"count": 1, "stderr": line}),
            key: Some(key.clone()),
        }
    }

    fn count(&self, count: u64, (key, line): &(String, String)) -> Said {
        Said {
            message: format!(
                "the workers printed {count} `@nightshift` lines on stderr in this run that the \
                 runner does not read (nothing of them counted; the first, of {}: `{line}`)",
                crate::util::sanitize::line(key)
            ),
            fields: json!({"count": count, "stderr": line}),
            key: None,
        }
    }
}
