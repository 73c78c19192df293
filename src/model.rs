//! Domain types shared by the store, the runner, the dashboard and the CLI.
//!
//! These speak the product's words (item, claim, lease, tier, outcome, dead
//! letter) and know nothing of SQL: a PostgreSQL store returns the same types.

/// Milliseconds since the Unix epoch, UTC. Every time in the store is one.
pub type Millis = i64;

macro_rules! str_enum {
    ($ty:ident { $($variant:ident => $s:literal),+ $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$variant => $s),+ }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($s => Ok($ty::$variant),)+
                    _ => Err(format!(
                        "unknown {} {s:?} (expected one of: {})",
                        stringify!($ty).to_lowercase(),
                        [$($s),+].join(", ")
                    )),
                }
            }
        }
    };
}

// After `str_enum!`, which they use.
mod adds;
mod batch_info;
pub mod claim_view;
mod dead_letters;
mod event_kind;
mod events;
mod items;
mod liveness;
mod locks;
mod owed;
pub mod pace;
mod runs;
pub mod waiting;

pub use adds::{AddOrder, AddReport, SkipReport, Tombstone};
pub use batch_info::{BatchInfo, Fire, FireRule, Hold, Pause, asked_by};
pub use dead_letters::{DeadLetter, DlqGroup, FailedAttempt};
pub use event_kind::EventKind;
pub use events::{Event, NewEvent};
pub use items::{
    Claim, Counts, Item, NewItem, Outcome, Status, Tier, attempts_said, attempts_used,
    attempts_used_up, state_word,
};
pub use liveness::{
    DAEMON_BEAT, DAEMON_SILENT, Daemon, DaemonInfo, DaemonState, RunSeen, Runners, Seat, Taken,
    daemon_for,
};
pub use locks::{Holder, LockInfo, WorkerGroup, all_stopping};
pub use owed::Owed;
pub use runs::{Run, RunCounts, RunState, StopCause, Trigger};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_round_trip_through_their_names() {
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>().unwrap(), *s);
        }
        for s in RunState::ALL {
            assert_eq!(s.as_str().parse::<RunState>().unwrap(), *s);
        }
        for c in StopCause::ALL {
            assert_eq!(c.as_str().parse::<StopCause>().unwrap(), *c);
            assert_eq!(serde_json::json!(c), c.as_str());
        }
        let err = "bogus".parse::<Tier>().unwrap_err();
        assert!(err.contains("retry, manual"), "{err}");
    }
}
