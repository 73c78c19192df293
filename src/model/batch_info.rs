//! A batch's state beside its items, as every view reads it: `BatchInfo`
//! and its parts kept per batch (the pause flag, a retry-after hold, the
//! schedule's fires).

use serde::Serialize;

#[cfg(test)]
use super::Holder;
use super::{
    Counts, LockInfo, Millis, Owed, Run, RunSeen, Runners, Seat, StopCause, all_stopping, pace,
};

/// Pause flag of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pause {
    pub reason: String,
    pub by: String,
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
}

/// `KEY (LABEL)`: the item whose answer asked for a hold, a batch's or
/// its pool's (its label when it has one of its own). Not made inert.
#[must_use]
pub fn asked_by(key: Option<&str>, label: Option<&str>) -> Option<String> {
    let key = key?;
    Some(match label.filter(|l| !l.is_empty() && *l != key) {
        Some(label) => format!("{key} ({label})"),
        None => key.to_string(),
    })
}

/// A retry-after hold on a batch: no worker call of the batch starts before
/// `until` (see `runner::gate`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hold {
    #[serde(serialize_with = "crate::util::time::json")]
    pub until: Millis,
    /// The item whose answer asked for it.
    pub key: Option<String>,
    /// That item's label, while the item is kept.
    pub label: Option<String>,
}

impl Hold {
    /// Is the hold still on at `now`?
    #[must_use]
    pub fn active(&self, now: Millis) -> bool {
        self.until > now
    }

    /// `KEY (LABEL)`: the item whose answer asked for the hold (its label
    /// when it has one of its own). Not made inert.
    #[must_use]
    pub fn source(&self) -> Option<String> {
        asked_by(self.key.as_deref(), self.label.as_deref())
    }

    /// `held until 15:20:00Z by a retry-after from KEY (LABEL)`: the same
    /// words in every view. Not made inert.
    #[must_use]
    pub fn describe(&self, now: Millis) -> String {
        let until = crate::util::time::utc_clock(self.until, now);
        match self.source() {
            Some(from) => format!("held until {until} by a retry-after from {from}"),
            None => format!("held until {until} by a retry-after"),
        }
    }
}

/// The outcome of a schedule fire, kept so "why did it not run" has an answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fire {
    #[serde(serialize_with = "crate::util::time::json")]
    pub at: Millis,
    pub outcome: String,
    pub reason: Option<String>,
    pub run_id: Option<i64>,
}

/// The rule a daemon fires a batch by, as it read its config: stored with
/// the next fire it plans (`BatchInfo::next_fire`), so that the views give
/// the live daemon's fires rather than the file's (edited since, and not
/// reloaded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FireRule {
    /// The cron expression, as written.
    pub schedule: String,
    /// The time zone's name.
    pub timezone: String,
}

/// Per-batch state kept beside the items: pause flag and schedule state.
/// (`Default`: a batch with nothing recorded yet.)
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BatchInfo {
    pub name: String,
    pub counts: Counts,
    pub pause: Option<Pause>,
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub next_fire: Option<Millis>,
    pub last_fire: Option<Fire>,
    /// The rule of the daemon that planned `next_fire`.
    pub fire_rule: Option<FireRule>,
    /// The fires still owed a cycle (one cut short, one queued).
    pub owed: Owed,
    /// The seats of the batch lock, oldest first (expired ones included).
    pub locks: Vec<LockInfo>,
    /// The newest run that did work, or is doing it: never one that
    /// stepped down ([`Run::stepped_down`]), which is `stepped_down`.
    pub last_run: Option<Run>,
    /// The newest run, when it stepped down (newer than `last_run`).
    pub stepped_down: Option<Run>,
    /// The last retry-after hold (over once `until` has passed).
    pub hold: Option<Hold>,
    /// How its items were keyed, as its first add recorded it.
    #[serde(skip)]
    pub keyed_by: Option<crate::key::KeySpec>,
    /// Who is alive among them, as of the read (derived, not stored).
    #[serde(skip)]
    pub runners: Runners,
}

impl BatchInfo {
    /// A batch with no rows yet (only configured so far).
    #[must_use]
    pub fn empty(name: &str) -> BatchInfo {
        BatchInfo {
            name: name.to_string(),
            ..BatchInfo::default()
        }
    }

    /// A batch whose run `run` holds a live seat (host `h`, pid 7) from a
    /// minute before `now` to a minute after: for the views' tests.
    #[cfg(test)]
    pub fn live_for_test(name: &str, run: i64, now: Millis) -> BatchInfo {
        let mut info = BatchInfo::empty(name);
        info.locks.push(LockInfo {
            batch: name.into(),
            token: "t".into(),
            holder: Holder {
                host: "h".into(),
                pid: 7,
                pid_start: None,
            },
            run_id: Some(run),
            acquired_at: now - 60_000,
            expires_at: now + 60_000,
            renewed_at: now - 1_000,
            stop_by: None,
        });
        info.runners.seats.push(Seat::Live);
        info
    }

    /// The retry-after hold still on at `now`.
    #[must_use]
    pub fn held(&self, now: Millis) -> Option<&Hold> {
        self.hold.as_ref().filter(|h| h.active(now))
    }

    /// The oldest seat of the batch lock: the runner, unless several share
    /// the batch.
    #[must_use]
    pub fn lock(&self) -> Option<&LockInfo> {
        self.locks.first()
    }

    /// Does a live runner hold a seat? A seat whose runner crashed here,
    /// or went silent elsewhere past its expiry, stays until a runner takes
    /// it over, but holds nothing.
    #[must_use]
    pub fn running(&self) -> bool {
        self.runners.held()
    }

    /// Who holds a claim of run `run_id` now: the seat of that run and
    /// how it is, by the rule that counts `runners.orphaned`. `None` for
    /// a run that holds no seat: its claim is orphaned unless a live
    /// runner is there to take it back.
    #[must_use]
    pub fn claim_seat(&self, run_id: Option<i64>) -> Option<(&LockInfo, Seat)> {
        let run_id = run_id?;
        self.locks
            .iter()
            .zip(&self.runners.seats)
            .find(|(l, _)| l.run_id == Some(run_id))
            .map(|(l, s)| (l, *s))
    }

    /// Whether the run `run_id` holding a claim has a live seat: its claim
    /// is worked (or waits in it), else orphaned (see `claim_view`).
    #[must_use]
    pub fn claim_is_live(&self, run_id: Option<i64>) -> bool {
        self.claim_seat(run_id).is_some_and(|(_, s)| s.is_live())
    }

    /// Who asked a live runner of the batch to stop: it claims nothing more
    /// and is finishing its in-flight items (within the batch's `grace`).
    #[must_use]
    pub fn stop_asked_by(&self) -> Option<&str> {
        self.locks
            .iter()
            .zip(&self.runners.seats)
            .filter(|(_, s)| s.is_live())
            .find_map(|(l, _)| l.stop_by.as_deref())
    }

    /// Whether the batch's live runners are all stopping (see
    /// [`all_stopping`]): they take nothing more.
    #[must_use]
    pub fn lock_stopping(&self) -> bool {
        all_stopping(&self.locks, &self.runners.seats)
    }

    /// `crashed` when a seat's runner, or the last run's, is gone from
    /// this host; `silent` when one elsewhere is unheard past its expiry.
    #[must_use]
    pub fn dead_runner(&self) -> Option<&'static str> {
        match (self.runners.dead(), self.last_run_seen()) {
            (Some(Seat::Crashed), _) | (_, Some(RunSeen::Crashed { .. })) => Some("crashed"),
            (Some(Seat::Silent { .. }), _) | (_, Some(RunSeen::Silent { .. })) => Some("silent"),
            _ => None,
        }
    }

    /// The limit (`max_duration`, `max_cost`) that stopped the last run
    /// that did work, while items it left wait and no runner is live: why
    /// they wait, though that run was `ok`.
    #[must_use]
    pub fn stopped_at_limit(&self) -> Option<StopCause> {
        let run = self.last_run.as_ref()?;
        let seen = self.last_run_seen()?;
        run.stopped
            .filter(|c| c.is_limit())
            .filter(|_| matches!(seen, RunSeen::Stored(_)))
            .filter(|_| !self.running() && self.counts.to_do() > 0)
    }

    /// The last run's state as it is (crashed when its runner is gone,
    /// even before a run records it).
    #[must_use]
    pub fn last_run_seen(&self) -> Option<RunSeen> {
        self.runners
            .last_run
            .or_else(|| self.last_run.as_ref().map(|r| RunSeen::Stored(r.state)))
    }

    /// The run that stepped down after `last_run`, if that was within the
    /// last hour: worth a word beside the run that did work.
    #[must_use]
    pub fn recent_step_down(&self, now: Millis) -> Option<&Run> {
        const RECENT_MS: Millis = 3_600_000;
        self.stepped_down
            .as_ref()
            .filter(|r| now - r.started_at < RECENT_MS)
    }

    /// What the batch is doing, for its ETA: claiming only with a live
    /// run (a live seat, and the last run running as it is: not crashed
    /// or silent), neither paused (by its flag or the emergency stop) nor
    /// held. `held` is until when no call may start, by every hold the
    /// caller knows of (the batch's retry-after, its pool's, a budget
    /// reached): a live run then claims nothing.
    #[must_use]
    pub fn activity(&self, emergency: bool, held: Option<Millis>) -> pace::Activity {
        let live = self.running() && self.last_run_seen().is_some_and(RunSeen::is_running);
        let run = self.last_run.as_ref().filter(|_| live);
        match (run, held) {
            _ if self.pause.is_some() || emergency => pace::Activity::Paused,
            (None, _) => pace::Activity::Idle,
            (Some(_), Some(until)) => pace::Activity::Held { until },
            (Some(r), _) if self.lock_stopping() => pace::Activity::Stopping {
                since: r.started_at,
                done: r.counts.done + r.counts.empty + r.counts.failed,
            },
            (Some(r), _) => pace::Activity::Running {
                since: r.started_at,
                done: r.counts.done + r.counts.empty + r.counts.failed,
            },
        }
    }
}
