//! What the scheduler does about one batch, as a pure state machine.
//!
//! [`Plan::step`] is given the time, whether the batch is paused and whether
//! its cycle is running, and answers with [`Decision`]s plus the time to wake
//! up again. It reads no clock, touches no store and never sleeps: the daemon
//! loop feeds it the real clock and carries out what it says, and the tests
//! feed it a fake one.
//!
//! The rules, in the order they apply to each fire time that has come:
//!
//! - A fire time noticed more than [`ON_TIME`] late was missed, whatever
//!   kept the daemon from it (the machine asleep, the process stopped, no
//!   daemon running). The latest missed one still runs once if it lies
//!   within the batch's `catch_up` window and no on-time fire is due
//!   anyway; the other missed fire times are recorded as missed, in one
//!   record.
//! - A fire time noticed less late than that is on time, also just after
//!   a daemon starts (a restart a second after a fire time misses
//!   nothing). Several noticed at once (the loop woke late, the process
//!   was stopped for seconds) count as one fire, the latest.
//! - A paused batch runs nothing: the fire is recorded as skipped.
//! - While the batch's cycle runs, a fire is skipped (`overlap = "skip"`),
//!   or remembered and run once right after the cycle (`overlap = "queue"`;
//!   further fires during the same cycle are skipped).
//! - Otherwise the fire starts a cycle.
//!
//! On start, what the last daemon left owed: a fire it queued and never
//! ran runs at once within `catch_up` (else it is recorded dropped); a fire
//! whose cycle it left unfinished (killed mid-cycle) runs again once within
//! `catch_up`, unless a fire run now (that queued one, a catch-up, an
//! on-time fire) does the same work.

mod decision;
mod overdue;
mod stored;

pub use decision::{Decision, MissedWhy, RunWhy};
pub use overdue::{Late, Overdue, Unfired};
pub use stored::{Cut, Stored};

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use chrono_tz::Tz;

use super::Schedule;
use crate::config::{BatchConfig, Overlap};

/// How late a fire time may be noticed and still count as on time: the
/// daemon loop can be held up by a busy store or a slow machine, its
/// process stopped for seconds, or restarted. Later than this, the fire
/// was missed (and only `catch_up` can bring it back).
pub const ON_TIME: Duration = Duration::from_secs(60);

/// Missed fire times are counted up to this many; beyond it the record says
/// "more than". Keeps a per-second schedule after a week off cheap.
pub const MAX_COUNTED: usize = 10_000;

/// The world as the daemon sees it at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub now: DateTime<Utc>,
    /// Why the batch is paused (the pause flag or the `PAUSED` file), if it is.
    pub paused: Option<String>,
    /// Whether a cycle of this batch started by the daemon is running.
    pub running: bool,
}

/// What a [`Plan::step`] says: records and cycles, then when to look again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub decisions: Vec<Decision>,
    /// The next fire time; `None` when the schedule never fires again.
    pub wait_until: Option<DateTime<Utc>>,
}

/// The scheduler's state for one batch.
#[derive(Debug, Clone)]
pub struct Plan {
    pub batch: String,
    pub schedule: Schedule,
    pub tz: Tz,
    catch_up: Option<Duration>,
    overlap: Overlap,
    /// The first fire time not yet handled.
    next: Option<DateTime<Utc>>,
    /// A fire waiting for the running cycle (`overlap = "queue"`).
    queued: Option<DateTime<Utc>>,
    /// The fire whose cycle the last daemon left unfinished (see
    /// [`Stored::cut_short`]), until the first step has handled it.
    cut_short: Option<(DateTime<Utc>, Cut)>,
    /// The fire the last daemon queued and never ran (see
    /// [`Stored::queued`]), until the first step has handled it.
    left_queued: Option<DateTime<Utc>>,
}

impl Plan {
    /// Whether `other` fires by the same rule (schedule, zone, catch-up,
    /// overlap): a reloaded config that keeps it keeps this plan's state
    /// (the next fire, a queued one).
    #[must_use]
    pub fn same_rule(&self, other: &Plan) -> bool {
        self.batch == other.batch
            && self.schedule == other.schedule
            && self.tz == other.tz
            && self.catch_up == other.catch_up
            && self.overlap == other.overlap
    }

    /// The plan of a scheduled batch (`None` without a `schedule`), resuming
    /// from what an earlier daemon stored: fire times after the last one
    /// handled and up to `now` are due at once (missed, or caught up).
    /// With no fire planned (never scheduled, or no longer: a daemon that
    /// found its config no longer schedules the batch forgot its plan),
    /// nothing before `now` is owed: the time it was not scheduled is no
    /// missed fire.
    #[must_use]
    pub fn new(cfg: &BatchConfig, stored: Stored, now: DateTime<Utc>) -> Option<Plan> {
        let schedule = cfg.schedule.clone()?;
        Some(Plan::resume(
            &cfg.name,
            schedule,
            cfg.timezone,
            cfg.catch_up,
            cfg.overlap,
            stored,
            now,
        ))
    }

    /// [`Plan::new`] from the parts of a batch's config it uses.
    #[must_use]
    pub fn resume(
        batch: &str,
        schedule: Schedule,
        tz: Tz,
        catch_up: Option<Duration>,
        overlap: Overlap,
        stored: Stored,
        now: DateTime<Utc>,
    ) -> Plan {
        // The stored next fire itself has not happened yet, hence 1 ms before.
        let from = match stored.next_fire.map(|n| n - TimeDelta::milliseconds(1)) {
            Some(planned) => stored.last_fire_at.map_or(planned, |l| planned.max(l)),
            None => now,
        };
        // Never later than now: a schedule edited to fire sooner than the
        // stored next fire must not wait for it.
        let next = schedule.next_after(from.min(now), tz);
        Plan {
            batch: batch.to_string(),
            schedule,
            tz,
            catch_up,
            overlap,
            next,
            queued: None,
            cut_short: stored.cut_short,
            left_queued: stored.queued,
        }
    }

    /// Takes what this plan was doing that a new rule (a reloaded config)
    /// must not lose: a fire queued behind the running cycle still runs
    /// once it has ended, whatever `overlap` now says, as its record
    /// (`queued`) promised.
    pub fn carry_over(&mut self, before: Plan) {
        self.queued = before.queued;
        self.cut_short = None;
        self.left_queued = None;
    }

    /// The fire the last daemon left running (its record still says
    /// `running`): a daemon starting records it crashed before anything
    /// else.
    #[must_use]
    pub fn unrecorded_crash(&self) -> Option<DateTime<Utc>> {
        self.cut_short
            .and_then(|(at, cut)| (cut == Cut::Unrecorded).then_some(at))
    }

    /// The first fire time not yet handled.
    #[must_use]
    pub fn next(&self) -> Option<DateTime<Utc>> {
        self.next
    }

    /// Whether [`Plan::step`] has anything to do at `now`; when not, the
    /// daemon need not even read the pause flag.
    #[must_use]
    pub fn is_due(&self, now: DateTime<Utc>, running: bool) -> bool {
        self.next.is_some_and(|n| n <= now)
            || (self.queued.is_some() && !running)
            || self.cut_short.is_some()
            || self.left_queued.is_some()
    }

    /// Handles every fire time up to `obs.now`.
    pub fn step(&mut self, obs: &Observed) -> Step {
        let mut decisions = Vec::new();
        let mut running = obs.running;
        // A fire the last daemon queued runs now, as it would have once the
        // cycle it waited for ended, if `catch_up` covers it; else it is
        // said dropped.
        if let Some(at) = self.left_queued.take() {
            match self.window_missed(at, obs.now) {
                None => self.queued = self.queued.or(Some(at)),
                Some(why) => decisions.push(Decision::Dropped { at, why }),
            }
        }
        // A queued fire runs as soon as the cycle it waited for has ended.
        if !running && let Some(at) = self.queued.take() {
            decisions.push(self.decide(at, RunWhy::Queued, 0, obs, &mut running));
        }
        if let Some(next) = self.next.filter(|n| *n <= obs.now) {
            let late_before = obs.now - delta(ON_TIME);
            let on_time = self.last_in(next.max(late_before), obs.now + TimeDelta::milliseconds(1));
            if next < late_before {
                let last_late = self.last_in(next, late_before).unwrap_or(next);
                let in_window = self
                    .catch_up
                    .is_some_and(|w| obs.now - last_late <= delta(w));
                let catch_up = (on_time.is_none() && in_window).then_some(last_late);
                let missed_last = match catch_up {
                    Some(c) => self.last_in(next, c),
                    None => Some(last_late),
                };
                let why = match (self.catch_up, catch_up, on_time) {
                    (None, _, _) => MissedWhy::NoWindow,
                    (Some(_), Some(c), _) => MissedWhy::CaughtUpLater(c),
                    (Some(_), None, Some(t)) if in_window => MissedWhy::OnTimeInstead(t),
                    (Some(_), None, _) => MissedWhy::TooOld,
                };
                if let Some(last) = missed_last {
                    let (count, more) = self.count_between(next, last);
                    decisions.push(Decision::Missed {
                        first: next,
                        last,
                        count,
                        more,
                        why,
                    });
                }
                if let Some(at) = catch_up {
                    decisions.push(self.decide(at, RunWhy::CatchUp, 0, obs, &mut running));
                }
            }
            if let Some(at) = on_time {
                let (count, _) = self.count_between(next.max(late_before), at);
                let folded = count.saturating_sub(1);
                decisions.push(self.decide(at, RunWhy::OnTime, folded, obs, &mut running));
            }
            self.next = self.schedule.next_after(obs.now, self.tz);
        }
        // A fire cut short by the last daemon's end runs again, once, unless
        // a fire handled now (queued, caught up, on time) does the same work.
        if let Some((cut, _)) = self.cut_short.take() {
            let handled = decisions
                .iter()
                .any(|d| !matches!(d, Decision::Missed { .. } | Decision::Dropped { .. }));
            if !handled && self.window_missed(cut, obs.now).is_none() {
                decisions.push(self.decide(obs.now, RunWhy::Resume(cut), 0, obs, &mut running));
            }
        }
        Step {
            decisions,
            wait_until: self.next,
        }
    }

    /// Why a fire at `at` is too late to run at `now`: `None` when the
    /// `catch_up` window covers it.
    fn window_missed(&self, at: DateTime<Utc>, now: DateTime<Utc>) -> Option<MissedWhy> {
        match self.catch_up {
            None => Some(MissedWhy::NoWindow),
            Some(w) if now - at > delta(w) => Some(MissedWhy::TooOld),
            Some(_) => None,
        }
    }

    fn decide(
        &mut self,
        at: DateTime<Utc>,
        why: RunWhy,
        folded: usize,
        obs: &Observed,
        running: &mut bool,
    ) -> Decision {
        if let Some(reason) = &obs.paused {
            return Decision::SkipPaused {
                at,
                reason: reason.clone(),
            };
        }
        if *running {
            return match (self.overlap, self.queued) {
                (Overlap::Queue, None) => {
                    self.queued = Some(at);
                    Decision::Queue { at }
                }
                (Overlap::Queue, Some(_)) => Decision::SkipOverlap {
                    at,
                    already_queued: true,
                },
                (Overlap::Skip, _) => Decision::SkipOverlap {
                    at,
                    already_queued: false,
                },
            };
        }
        *running = true;
        Decision::Fire { at, why, folded }
    }

    /// How many fire times lie in `[from, to]`, counting at most
    /// [`MAX_COUNTED`]; the flag says there were more.
    fn count_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> (usize, bool) {
        let mut count = 0;
        let mut cursor = self.schedule.next_after(before(from), self.tz);
        while let Some(at) = cursor.filter(|at| *at <= to) {
            if count == MAX_COUNTED {
                return (count, true);
            }
            count += 1;
            cursor = self.schedule.next_after(at, self.tz);
        }
        (count, false)
    }

    /// The last fire time in `[lo, hi)`. Searches backwards from `hi` in
    /// doubling windows, so the cost follows the gap before `hi`, not the
    /// length of the range (a week of per-second fires is not walked).
    fn last_in(&self, lo: DateTime<Utc>, hi: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut span = TimeDelta::seconds(1);
        loop {
            let start = (hi - span).max(lo);
            if let Some(mut last) = self
                .schedule
                .next_after(before(start), self.tz)
                .filter(|f| *f < hi)
            {
                while let Some(f) = self.schedule.next_after(last, self.tz).filter(|f| *f < hi) {
                    last = f;
                }
                return Some(last);
            }
            if start <= lo {
                return None;
            }
            span = span.checked_mul(2)?;
        }
    }

    /// `2026-03-08 03:00:00 EDT`: a time on the batch's wall clock.
    #[must_use]
    pub fn local(&self, at: DateTime<Utc>) -> String {
        at.with_timezone(&self.tz)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string()
    }
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// Just before `t`: `next_after(before(t))` is the first fire at or after
/// `t` (fire times are whole seconds).
fn before(t: DateTime<Utc>) -> DateTime<Utc> {
    t - TimeDelta::milliseconds(1)
}
