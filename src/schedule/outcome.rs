//! How a fire ended, as stored with the batch, and in plain words for
//! `status` and the dashboard.

use std::fmt;

use crate::model::{
    BatchInfo, DaemonInfo, DaemonState, Fire, Millis, RunSeen, RunState, Trigger, daemon_for,
};
use crate::util::time::{relative, rfc3339};

/// How a fire ended, as stored in `batches.last_fire_outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A cycle is running for it.
    Running,
    Ran,
    SkippedPaused,
    SkippedOverlap,
    Queued,
    Missed,
    /// Another runner (a manual `run`, another daemon) held the batch lock.
    LockHeld,
    /// The cycle could not run (e.g. the store failed).
    Error,
    /// Its run crashed (the daemon died mid-cycle): stored when a later
    /// run records the crash, said before that by [`fire_seen`].
    Crashed,
    /// Its cycle was stopped with its daemon (SIGTERM or SIGINT: a restart,
    /// an orderly shutdown): still owed, as a crashed one is.
    Stopped,
}

impl Outcome {
    pub const ALL: &[Outcome] = &[
        Outcome::Running,
        Outcome::Ran,
        Outcome::SkippedPaused,
        Outcome::SkippedOverlap,
        Outcome::Queued,
        Outcome::Missed,
        Outcome::LockHeld,
        Outcome::Error,
        Outcome::Crashed,
        Outcome::Stopped,
    ];

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Running => "running",
            Outcome::Ran => "ran",
            Outcome::SkippedPaused => "skipped-paused",
            Outcome::SkippedOverlap => "skipped-overlap",
            Outcome::Queued => "queued",
            Outcome::Missed => "missed",
            Outcome::LockHeld => "lock-held",
            Outcome::Error => "error",
            Outcome::Crashed => "crashed",
            Outcome::Stopped => "stopped",
        }
    }

    #[must_use]
    pub fn parse(s: &str) -> Option<Outcome> {
        Outcome::ALL.iter().copied().find(|o| o.as_str() == s)
    }

    /// The outcome in plain words, for `status` and the dashboard.
    #[must_use]
    pub fn plain(self) -> &'static str {
        match self {
            Outcome::Running => "running now",
            Outcome::Ran => "ran",
            Outcome::SkippedPaused => "did not run: the batch was paused",
            Outcome::SkippedOverlap => "did not run: the previous cycle was still running",
            Outcome::Queued => "queued behind the previous cycle",
            Outcome::Missed => "did not run: the daemon was not running (or the machine slept)",
            Outcome::LockHeld => "did not run: another runner held the batch lock",
            Outcome::Error => "did not run: the cycle failed",
            Outcome::Crashed => "its run crashed",
            Outcome::Stopped => {
                "its cycle was stopped with the daemon (a signal) before its work was done: a \
                 daemon starting resumes it once within catch_up, else the next fire does"
            }
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fire outcome as stored, in plain words: `did not run: the batch was
/// paused — paused by ops@db1: migration` (unknown outcomes shown as stored).
#[must_use]
pub fn describe(outcome: &str, reason: Option<&str>) -> String {
    let head =
        Outcome::parse(outcome).map_or_else(|| outcome.to_string(), |o| o.plain().to_string());
    match reason {
        Some(r) if !r.is_empty() => format!("{head} — {r}"),
        _ => head.to_string(),
    }
}

/// The last fire as it is, for every view: a fire stored `running` whose
/// cycle is not running any more is said as that cycle is — `crashed`
/// (with why, before a run or a daemon records it and the store says so
/// too), or `ran` when it ended before its daemon wrote so. The daemon
/// writes `running` when it fires and the outcome when the cycle ends, so
/// a daemon killed mid-cycle left `running` until the next one started. A
/// fire skipped or queued behind that cycle no longer says the cycle picks
/// up its work. Whether a cycle lives is `cycle_now`'s one rule.
#[must_use]
pub fn fire_seen(info: &BatchInfo, daemons: &[DaemonInfo], now: Millis) -> Option<Fire> {
    let mut fire = info.last_fire.clone()?;
    match Outcome::parse(&fire.outcome) {
        Some(Outcome::Running) => {
            if let Some(cycle) = cycle_now(info, daemons, fire.at, fire.run_id, now) {
                fire.run_id = cycle.run_id.or(fire.run_id);
                fire.outcome = cycle.outcome.as_str().to_string();
                fire.reason = cycle.why.or(fire.reason.take());
            }
        }
        Some(o @ (Outcome::SkippedOverlap | Outcome::Queued)) => {
            if let Some(ended) = cycle_dead(info, daemons, fire.at, now) {
                fire.reason = Some(match o {
                    Outcome::Queued => format!(
                        "the cycle it waited for {ended}; a daemon starting runs \
                         it once within catch_up, else records it missed"
                    ),
                    _ => format!(
                        "the cycle it left the work to {ended}; a daemon starting \
                         resumes that work once within catch_up, else the next fire does"
                    ),
                });
            }
        }
        _ => {}
    }
    Some(fire)
}

/// A fire's cycle as it is now: `Running` (with why, when its runner or
/// daemon went silent), `Ran`, or `Crashed`.
struct CycleNow {
    outcome: Outcome,
    /// Its run, once one started.
    run_id: Option<i64>,
    /// Why it is not as stored, when it is not.
    why: Option<String>,
}

/// The cycle the fire at `at` started, as it is now; `None` when nothing
/// tells. Once its run started, it is as that run is (the one named, else
/// the scheduled run started at or after the fire time); before that, it
/// lives with the daemon that fired it: a daemon whose process is gone
/// took the cycle with it, at once, as a run's runner would.
fn cycle_now(
    info: &BatchInfo,
    daemons: &[DaemonInfo],
    at: Millis,
    named: Option<i64>,
    now: Millis,
) -> Option<CycleNow> {
    let its_run = info.last_run.as_ref().filter(|run| match named {
        Some(id) => id == run.id,
        None => run.trigger == Trigger::Schedule && run.started_at >= at,
    });
    if let Some(run) = its_run {
        let seen = info.last_run_seen()?;
        let outcome = match seen {
            RunSeen::Stored(RunState::Running) | RunSeen::Silent { .. } => Outcome::Running,
            RunSeen::Stored(RunState::Crashed) | RunSeen::Crashed { .. } => Outcome::Crashed,
            RunSeen::Stored(_) => Outcome::Ran,
        };
        return Some(CycleNow {
            outcome,
            run_id: Some(run.id),
            why: seen.why(now),
        });
    }
    let daemon = daemon_for(daemons, &info.name)?;
    let d = &daemon.daemon;
    let (outcome, why) = match daemon.state {
        DaemonState::Live => return None,
        DaemonState::Silent => (
            Outcome::Running,
            format!(
                "its daemon {} has been silent since {} ({}), before its run started",
                d.holder,
                rfc3339(d.beat_at),
                relative(d.beat_at, now)
            ),
        ),
        DaemonState::Crashed => (
            Outcome::Crashed,
            format!(
                "its daemon {} is gone (killed, or crashed) before its run started; not yet recorded",
                d.holder
            ),
        ),
        DaemonState::Stopped => (
            Outcome::Crashed,
            format!(
                "its daemon {} stopped before its run started; not yet recorded",
                d.holder
            ),
        ),
    };
    Some(CycleNow {
        outcome,
        run_id: None,
        why: Some(why),
    })
}

/// How the cycle still open before a fire at `later` (the one it was
/// skipped or queued behind) ended, if it did before its work was done:
/// `crashed since (why)` (its crash recorded, or its cycle crashed,
/// [`cycle_now`]), or `was stopped with its daemon` (its run ended, its
/// stop recorded).
fn cycle_dead(
    info: &BatchInfo,
    daemons: &[DaemonInfo],
    later: Millis,
    now: Millis,
) -> Option<String> {
    let cycle = info.owed.cycle.filter(|c| *c < later)?;
    let why = match cycle_now(info, daemons, cycle, None, now) {
        Some(c) if c.outcome == Outcome::Crashed => c.why.unwrap_or_else(|| match c.run_id {
            Some(run) => format!("its run {run} crashed"),
            None => "its run crashed".to_string(),
        }),
        Some(c) if c.outcome == Outcome::Ran && info.owed.crashed => {
            return Some("was stopped with its daemon".to_string());
        }
        _ => info.owed.crashed.then(|| "its run crashed".to_string())?,
    };
    Some(format!("crashed since ({why})"))
}
