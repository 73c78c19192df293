//! How a fire ended, as stored with the batch, and in plain words for
//! `status` and the dashboard.

use std::fmt;

use crate::model::{BatchInfo, Fire, Millis, RunSeen, RunState, Trigger};

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
/// run is not running any more is said as that run is — `crashed` (with
/// why, before a run records it and the store says so too), or `ran` when
/// it ended before its daemon wrote so. The daemon writes `running` when
/// it fires and the outcome when the cycle ends, so a daemon killed
/// mid-cycle left `running` until its next fire. A fire skipped or queued
/// behind that cycle no longer says the cycle picks up its work.
#[must_use]
pub fn fire_seen(info: &BatchInfo, now: Millis) -> Option<Fire> {
    let mut fire = info.last_fire.clone()?;
    match Outcome::parse(&fire.outcome) {
        Some(Outcome::Running) => running_seen(info, &mut fire, now),
        Some(o @ (Outcome::SkippedOverlap | Outcome::Queued)) => {
            if let Some(why) = cycle_dead(info, fire.at, now) {
                fire.reason = Some(match o {
                    Outcome::Queued => format!(
                        "the cycle it waited for crashed since ({why}); a daemon starting runs \
                         it once within catch_up, else records it missed"
                    ),
                    _ => format!(
                        "the cycle it left the work to crashed since ({why}); a daemon starting \
                         resumes that work once within catch_up, else the next fire does"
                    ),
                });
            }
        }
        _ => {}
    }
    Some(fire)
}

/// A fire still stored `running`, said as its run is.
fn running_seen(info: &BatchInfo, fire: &mut Fire, now: Millis) {
    // The daemon names the run when the cycle ends; until then it is the
    // scheduled run started at or after the fire time.
    let its_run = info.last_run.as_ref().filter(|run| match fire.run_id {
        Some(id) => id == run.id,
        None => run.trigger == Trigger::Schedule && run.started_at >= fire.at,
    });
    let (Some(run), Some(seen)) = (its_run, info.last_run_seen()) else {
        return;
    };
    fire.run_id = Some(run.id);
    let outcome = match seen {
        RunSeen::Stored(RunState::Running) | RunSeen::Silent { .. } => Outcome::Running,
        RunSeen::Stored(RunState::Crashed) | RunSeen::Crashed { .. } => Outcome::Crashed,
        RunSeen::Stored(_) => Outcome::Ran,
    };
    fire.outcome = outcome.as_str().to_string();
    fire.reason = seen.why(now).or(fire.reason.take());
}

/// Why the cycle still open before a fire at `later` (the one it was
/// skipped or queued behind) is dead, if it is: its crash recorded, or
/// its run crashed.
fn cycle_dead(info: &BatchInfo, later: Millis, now: Millis) -> Option<String> {
    let cycle = info.owed.cycle.filter(|c| *c < later)?;
    let its_run = info
        .last_run
        .as_ref()
        .filter(|run| run.trigger == Trigger::Schedule && run.started_at >= cycle);
    match its_run.and_then(|_| info.last_run_seen()) {
        Some(seen @ RunSeen::Crashed { .. }) => seen.why(now),
        Some(RunSeen::Stored(RunState::Crashed)) => {
            its_run.map(|run| format!("its run {} crashed", run.id))
        }
        _ => info.owed.crashed.then(|| "its run crashed".to_string()),
    }
}
