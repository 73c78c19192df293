//! The fire times that passed with no daemon to fire them, as views say
//! them: decided by the plan's own step, on a copy.

use chrono::{DateTime, Utc};

use super::{Decision, Observed, Plan, RunWhy};

/// Fire times that passed unfired, more than [`ON_TIME`](super::ON_TIME)
/// ago: missed (see [`Plan::unfired`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overdue {
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    /// How many (at most [`MAX_COUNTED`](super::MAX_COUNTED) and one; `more` says there were
    /// more).
    pub count: usize,
    pub more: bool,
    /// The latest, which a daemon starting now runs once (`catch_up`).
    pub catch_up: Option<DateTime<Utc>>,
}

/// Fire times that passed unfired within [`ON_TIME`](super::ON_TIME):
/// late, not missed. A daemon there now (started, or back from a stop)
/// runs the latest once for them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Late {
    pub first: DateTime<Utc>,
    /// The one that runs.
    pub last: DateTime<Utc>,
    pub count: usize,
}

/// What passed unfired since a plan was resumed from the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unfired {
    pub missed: Option<Overdue>,
    pub late: Option<Late>,
}

impl Plan {
    /// What a daemon there at `now` (starting, or back from a stop) would
    /// find passed since this plan was resumed from the store: the fire
    /// times missed, the one it would catch up, and those only late, which
    /// it runs once. Decided by [`Plan::step`] itself (on a copy), so a
    /// view says what the daemon will record.
    #[must_use]
    pub fn unfired(&self, now: DateTime<Utc>) -> Unfired {
        let mut plan = self.clone();
        let first = plan.next;
        let step = plan.step(&Observed {
            now,
            paused: None,
            running: false,
        });
        let mut out = Unfired::default();
        for d in &step.decisions {
            match *d {
                Decision::Missed {
                    first,
                    last,
                    count,
                    more,
                    ..
                } => {
                    out.missed = Some(Overdue {
                        first,
                        last,
                        count,
                        more,
                        catch_up: None,
                    });
                }
                Decision::Fire {
                    at,
                    why: RunWhy::CatchUp,
                    ..
                } => {
                    let o = out.missed.get_or_insert(Overdue {
                        first: at,
                        last: at,
                        count: 0,
                        more: false,
                        catch_up: None,
                    });
                    o.last = at;
                    o.count += 1;
                    o.catch_up = Some(at);
                }
                Decision::Fire {
                    at,
                    why: RunWhy::OnTime,
                    folded,
                } => {
                    let after_missed = out
                        .missed
                        .and_then(|m| self.schedule.next_after(m.last, self.tz));
                    out.late = Some(Late {
                        first: after_missed.or(first).unwrap_or(at),
                        last: at,
                        count: folded + 1,
                    });
                }
                _ => {}
            }
        }
        out
    }
}
