//! What the store keeps of a batch's past fires, which a plan resumes
//! from.

use chrono::{DateTime, Utc};

/// What is stored about a batch's past fires (the `batches` table).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stored {
    /// The next fire time the last daemon planned.
    pub next_fire: Option<DateTime<Utc>>,
    /// The last fire time any daemon handled.
    pub last_fire_at: Option<DateTime<Utc>>,
    /// The fire whose cycle started and never ended, whatever fires were
    /// recorded after it: its daemon stopped mid-cycle (killed, or the
    /// machine went down).
    pub cut_short: Option<(DateTime<Utc>, Cut)>,
    /// A fire queued behind a cycle (`overlap = "queue"`) that never ran:
    /// its daemon stopped first.
    pub queued: Option<DateTime<Utc>>,
}

impl Stored {
    /// What `info` stores of its batch's fires.
    #[must_use]
    pub fn of(info: &crate::model::BatchInfo) -> Stored {
        use crate::util::time::to_datetime;
        let cut = if info.owed.crashed {
            Cut::Recorded
        } else {
            Cut::Unrecorded
        };
        Stored {
            next_fire: info.next_fire.map(to_datetime),
            last_fire_at: info.last_fire.as_ref().map(|f| to_datetime(f.at)),
            cut_short: info.owed.cycle.map(|at| (to_datetime(at), cut)),
            queued: info.owed.queued.map(to_datetime),
        }
    }
}

/// How a fire cut short is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Nobody has recorded the crash: its record still says `running`.
    Unrecorded,
    /// A later run found its run dead and recorded the fire `crashed`.
    Recorded,
}
