//! The fire times that passed with no daemon to fire them, as views say
//! them: decided by the plan's own step, on a copy.

use chrono::{DateTime, Utc};

use super::{Decision, Observed, Plan, RunWhy};

/// Fire times that passed with no daemon to fire them (see
/// [`Plan::overdue`]).
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

impl Plan {
    /// What a daemon starting at `now` would find passed since this plan
    /// was resumed from the store: the fire times nobody fired, and the
    /// one it would catch up. Decided by [`Plan::step`] itself (on a
    /// copy), so a view that says "missed" says what the daemon will
    /// record; `None` when nothing passed.
    #[must_use]
    pub fn overdue(&self, now: DateTime<Utc>) -> Option<Overdue> {
        let mut plan = self.clone();
        plan.started = plan.started.min(now);
        let step = plan.step(&Observed {
            now,
            paused: None,
            running: false,
        });
        let mut out: Option<Overdue> = None;
        for d in &step.decisions {
            match *d {
                Decision::Missed {
                    first,
                    last,
                    count,
                    more,
                    ..
                } => {
                    out = Some(Overdue {
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
                    let o = out.get_or_insert(Overdue {
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
                _ => {}
            }
        }
        out
    }
}
