//! A claimed item's claim as `show` tells it: in flight in a live run, or
//! orphaned by a run whose runner crashed or went silent (taken back by
//! the next run), by the rule `status` counts `orphaned` with.

use serde_json::{Value, json};

use crate::model::{BatchInfo, Item, Millis, Seat, Status};
use crate::util::sanitize;
use crate::util::time::{relative, rfc3339};

/// How the run holding a claim is, as of the read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Live,
    Crashed,
    Silent {
        since: Millis,
    },
    /// Its run holds no seat of the lock (it lost it, or ended without
    /// releasing the claim): nothing works the item.
    Seatless,
}

pub struct Claim {
    run_id: Option<i64>,
    /// `host:pid` of the seat's holder.
    runner: Option<String>,
    state: State,
}

/// The claim of `item`, if it is claimed.
pub fn of(info: &BatchInfo, item: &Item) -> Option<Claim> {
    if item.status != Status::Claimed {
        return None;
    }
    let seat = info.claim_seat(item.lease_run);
    let state = match seat.map(|(_, s)| s) {
        Some(Seat::Live) => State::Live,
        Some(Seat::Crashed) => State::Crashed,
        Some(Seat::Silent { since }) => State::Silent { since },
        None => State::Seatless,
    };
    Some(Claim {
        run_id: item.lease_run,
        runner: seat.map(|(l, _)| l.holder.to_string()),
        state,
    })
}

impl Claim {
    fn state_word(&self) -> &'static str {
        match self.state {
            State::Live => "live",
            State::Crashed => "crashed",
            State::Silent { .. } => "silent",
            State::Seatless => "no-seat",
        }
    }

    /// The `claim:` line of `show`.
    pub fn line(&self, now: Millis) -> String {
        let run = match (self.run_id, &self.runner) {
            (Some(id), Some(r)) => format!("run #{id} ({})", sanitize::line(r)),
            (Some(id), None) => format!("run #{id}"),
            (None, _) => "a run".to_string(),
        };
        let back = "the next run takes this item back";
        match self.state {
            State::Live => format!("in flight in {run}"),
            State::Crashed => format!("{run} crashed: its runner is gone; {back}"),
            State::Silent { since } => format!(
                "{run} silent since {} ({}): its lock expired; {back}",
                rfc3339(since),
                relative(since, now)
            ),
            State::Seatless => format!("{run} holds no seat of the lock; {back}"),
        }
    }

    /// `show --json`'s `claim`.
    pub fn json(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "runner": self.runner,
            "state": self.state_word(),
            "orphaned": self.state != State::Live,
            "silent_since": match self.state {
                State::Silent { since } => Some(rfc3339(since)),
                _ => None,
            },
        })
    }
}
