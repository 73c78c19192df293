//! What a batch's scheduled fires still owe, kept beside its last fire:
//! the fire whose cycle started and whose end is not recorded, and a fire
//! queued behind it. The last fire alone could not say it: a fire skipped
//! or queued while the cycle ran becomes the last, and a daemon killed
//! mid-cycle left the next one no trace of the cycle it cut short.

use serde::Serialize;

use super::{Fire, Millis};

/// The fires a daemon stopping mid-cycle leaves for the next one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Owed {
    /// The fire time of the cycle started last, until its end is recorded.
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub cycle: Option<Millis>,
    /// That cycle's end before its work was done is recorded (a `fire
    /// crashed` record, or `stopped`: its daemon was stopped mid-cycle), so
    /// the next daemon resumes it without recording it again.
    pub crashed: bool,
    /// A fire queued behind a cycle (`overlap = "queue"`) that has not run.
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub queued: Option<Millis>,
}

impl Owed {
    /// What is owed once `fire` is recorded: a fire that starts a cycle
    /// opens it (and is no longer queued); a record of the open cycle's
    /// crash, or of its stop with its daemon, marks it (still owed), any
    /// other of its outcomes closes it; a queued fire
    /// waits until a record of its time says what became of it.
    #[must_use]
    pub fn after(self, fire: &Fire) -> Owed {
        let mine = |t: Option<Millis>| t.filter(|t| *t != fire.at);
        match fire.outcome.as_str() {
            "running" => Owed {
                cycle: Some(fire.at),
                crashed: false,
                queued: mine(self.queued),
            },
            "queued" => Owed {
                queued: Some(fire.at),
                ..self
            },
            "crashed" | "stopped" => Owed {
                crashed: self.crashed || self.cycle == Some(fire.at),
                ..self
            },
            _ => Owed {
                cycle: mine(self.cycle),
                crashed: self.crashed && mine(self.cycle).is_some(),
                queued: mine(self.queued),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fire(at: Millis, outcome: &str) -> Fire {
        Fire {
            at,
            outcome: outcome.into(),
            reason: None,
            run_id: None,
        }
    }

    fn after(owed: Owed, fires: &[(Millis, &str)]) -> Owed {
        fires
            .iter()
            .fold(owed, |o, (at, out)| o.after(&fire(*at, out)))
    }

    #[test]
    fn the_cycle_started_last_is_owed_until_its_end_is_recorded() {
        let none = Owed::default();
        // Later fires skipped while it ran leave it owed.
        let cut = after(none, &[(10, "running"), (20, "skipped-overlap")]);
        assert_eq!(cut.cycle, Some(10));
        assert_eq!(after(cut, &[(10, "ran")]), none);
        // A crash recorded keeps it owed (a daemon starting resumes it).
        let crashed = after(cut, &[(10, "crashed")]);
        assert_eq!((crashed.cycle, crashed.crashed), (Some(10), true));
        assert!(!after(crashed, &[(30, "running")]).crashed);
        // So does its stop with its daemon (a restart, a shutdown).
        let stopped = after(cut, &[(10, "stopped")]);
        assert_eq!((stopped.cycle, stopped.crashed), (Some(10), true));
        // A crash or end of another fire time changes nothing.
        assert_eq!(after(cut, &[(5, "crashed"), (5, "ran")]), cut);
    }

    #[test]
    fn a_queued_fire_is_owed_until_it_runs_or_is_said_dropped() {
        let queued = after(Owed::default(), &[(10, "running"), (20, "queued")]);
        assert_eq!((queued.cycle, queued.queued), (Some(10), Some(20)));
        let runs = after(queued, &[(10, "ran"), (20, "running")]);
        assert_eq!((runs.cycle, runs.queued), (Some(20), None));
        let dropped = after(queued, &[(10, "crashed"), (20, "missed")]);
        assert_eq!((dropped.cycle, dropped.queued), (Some(10), None));
    }
}
