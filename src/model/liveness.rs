//! Who is alive: what every view says of a batch's runners and of the
//! scheduler daemons. Nothing here is stored: the store derives it on each
//! read (`store::ops::liveness`'s `runners` and `daemon_state`) from the
//! seats, runs and heartbeats it holds, with the one rule for a holder's
//! liveness (`util::identity::holder_seen`). A read writes nothing: a run
//! found dead is shown crashed here, and recorded so by the next run.

use serde::Serialize;

use super::{Holder, Millis, RunState};

/// How often a daemon records its heartbeat.
pub const DAEMON_BEAT: Millis = 5_000;
/// A daemon elsewhere (another host, or stopped here) unheard for this
/// long is not running: four beats missed.
pub const DAEMON_SILENT: Millis = 4 * DAEMON_BEAT;

/// A seat of the batch lock as this host sees it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Seat {
    /// Its runner lives: on this host its process runs; elsewhere its seat
    /// has not expired.
    Live,
    /// On this host, and its process is gone: dead at once, whatever its
    /// expiry says. The next run takes the seat over.
    Crashed,
    /// Expired, and its holder is on another host (or stopped here):
    /// nothing heard from it since `since`, its last renewal.
    Silent {
        #[serde(serialize_with = "crate::util::time::json")]
        since: Millis,
    },
}

impl Seat {
    #[must_use]
    pub fn is_live(self) -> bool {
        self == Seat::Live
    }
}

/// The last run as it is, which may not be what the store says yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunSeen {
    /// As stored.
    Stored(RunState),
    /// Stored as running, but its runner's process (`pid`, on this host)
    /// is gone: crashed, not yet recorded.
    Crashed { pid: u32 },
    /// Stored as running, but its seat expired and its runner, elsewhere,
    /// has been silent since `since`.
    Silent { since: Millis },
}

impl RunSeen {
    /// `crashed`, `silent`, or the stored state.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            RunSeen::Stored(s) => s.as_str(),
            RunSeen::Crashed { .. } => "crashed",
            RunSeen::Silent { .. } => "silent",
        }
    }

    /// Whether the store says so too.
    #[must_use]
    pub fn recorded(self) -> bool {
        matches!(self, RunSeen::Stored(_))
    }

    #[must_use]
    pub fn is_running(self) -> bool {
        self == RunSeen::Stored(RunState::Running)
    }

    /// Why a run the store says is running is not, in plain words; `None`
    /// when it is as stored.
    #[must_use]
    pub fn why(self, now: Millis) -> Option<String> {
        self.why_aged(now, crate::util::time::relative)
    }

    /// [`RunSeen::why`], with ages as `ago` words them (the dashboard's
    /// whole minutes past the first, which do not tick every second).
    #[must_use]
    pub fn why_aged(self, now: Millis, ago: fn(Millis, Millis) -> String) -> Option<String> {
        match self {
            RunSeen::Stored(_) => None,
            RunSeen::Crashed { pid } => Some(format!("runner pid {pid} is gone; not yet recorded")),
            RunSeen::Silent { since } => Some(format!(
                "lock expired, holder silent since {} ({})",
                crate::util::time::rfc3339(since),
                ago(since, now)
            )),
        }
    }
}

/// What the views say of who runs a batch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Runners {
    /// One per seat of [`super::BatchInfo::locks`], in the same order.
    pub seats: Vec<Seat>,
    /// The last run as it is (`None`: never run).
    pub last_run: Option<RunSeen>,
    /// Claimed items whose runner crashed or went silent (the next run
    /// takes them back), by their attempts: `(attempts, how many)`. The
    /// next run quarantines the ones whose attempts are used up rather
    /// than run them again ([`Runners::orphans_used_up`]).
    pub orphan_attempts: Vec<(i64, i64)>,
}

impl Runners {
    /// Does a live runner hold a seat of the lock?
    #[must_use]
    pub fn held(&self) -> bool {
        self.seats.iter().any(|s| s.is_live())
    }

    /// Claimed items whose runner crashed or went silent: the next run
    /// takes them back.
    #[must_use]
    pub fn orphaned(&self) -> i64 {
        self.orphan_attempts.iter().map(|(_, n)| n).sum()
    }

    /// The orphaned claims the next run takes back only to quarantine
    /// them, under the batch's `max_attempts`.
    #[must_use]
    pub fn orphans_used_up(&self, max_attempts: u32) -> i64 {
        self.orphan_attempts
            .iter()
            .filter(|(attempts, _)| super::attempts_used_up(*attempts, max_attempts))
            .map(|(_, n)| n)
            .sum()
    }

    /// What follows "taken back by the next run" in every view: which of
    /// them it quarantines rather than runs (`" (1 to quarantine: its
    /// attempts are used)"`), or nothing.
    #[must_use]
    pub fn orphans_fate(&self, max_attempts: u32) -> String {
        match self.orphans_used_up(max_attempts) {
            0 => String::new(),
            1 => " (1 to quarantine: its attempts are used)".into(),
            n => format!(" ({n} to quarantine: their attempts are used)"),
        }
    }

    /// Is a seat held by a runner that crashed or went silent?
    #[must_use]
    pub fn dead(&self) -> Option<Seat> {
        self.seats.iter().copied().find(|s| !s.is_live())
    }
}

/// A scheduler daemon as it records itself: who, since when, its last
/// heartbeat, and the batches it schedules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Daemon {
    /// Made by the daemon at start: one row per daemon process.
    pub token: String,
    pub holder: Holder,
    #[serde(serialize_with = "crate::util::time::json")]
    pub started_at: Millis,
    #[serde(serialize_with = "crate::util::time::json")]
    pub beat_at: Millis,
    /// Set when it stopped cleanly.
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub stopped_at: Option<Millis>,
    pub batches: Vec<String>,
    /// Set when it was asked to stop (a signal): it fires nothing more
    /// while its running cycles finish.
    #[serde(serialize_with = "crate::util::time::json_opt")]
    pub stopping_at: Option<Millis>,
}

/// A batch a daemon may not schedule: another live daemon does (`by`, its
/// holder). One daemon a batch: a daemon starting is refused such a batch,
/// a reload leaves it out, and a daemon heard again after it went silent
/// and was replaced steps down from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    pub batch: String,
    pub by: Holder,
}

/// Whether a daemon runs, as this host sees it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DaemonState {
    /// On this host its process runs; elsewhere its heartbeat is recent.
    Live,
    /// It stopped cleanly.
    Stopped,
    /// On this host, and its process is gone without saying so.
    Crashed,
    /// Elsewhere, and unheard for longer than [`DAEMON_SILENT`].
    Silent,
}

impl DaemonState {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            DaemonState::Live => "live",
            DaemonState::Stopped => "stopped",
            DaemonState::Crashed => "crashed",
            DaemonState::Silent => "silent",
        }
    }
}

/// A daemon and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonInfo {
    pub daemon: Daemon,
    pub state: DaemonState,
}

impl DaemonInfo {
    #[must_use]
    pub fn live(&self) -> bool {
        self.state == DaemonState::Live
    }

    /// Live and not stopping: its schedules fire.
    #[must_use]
    pub fn fires(&self) -> bool {
        self.live() && self.daemon.stopping_at.is_none()
    }

    /// When it was last heard of: its clean stop, or its last beat.
    #[must_use]
    pub fn last_seen(&self) -> Millis {
        self.daemon.stopped_at.unwrap_or(self.daemon.beat_at)
    }

    /// `not running (last seen 2026-…Z, 5m ago; crashed)` or `running on
    /// host:pid since …`.
    #[must_use]
    pub fn describe(&self, now: Millis) -> String {
        use crate::util::time::{relative, rfc3339};
        let d = &self.daemon;
        if let Some(asked) = d.stopping_at.filter(|_| self.live()) {
            return format!(
                "stopping on {} (asked {}, {}): it fires nothing more while its running cycles finish",
                d.holder,
                rfc3339(asked),
                relative(asked, now)
            );
        }
        if self.live() {
            return format!(
                "running on {} since {} ({})",
                d.holder,
                rfc3339(d.started_at),
                relative(d.started_at, now)
            );
        }
        let how = match self.state {
            DaemonState::Stopped => "stopped",
            DaemonState::Crashed => "is gone (killed, or crashed)",
            _ => "went silent",
        };
        format!(
            "not running (last seen {}, {}: daemon {} {how})",
            rfc3339(self.last_seen()),
            relative(self.last_seen(), now),
            d.holder
        )
    }
}

/// The daemon that schedules `batch`: a live one, else the one last heard
/// of (`None`: no daemon ever scheduled it).
#[must_use]
pub fn daemon_for<'a>(daemons: &'a [DaemonInfo], batch: &str) -> Option<&'a DaemonInfo> {
    let mine = || {
        daemons
            .iter()
            .filter(|d| d.daemon.batches.iter().any(|b| b == batch))
    };
    mine()
        .find(|d| d.live())
        .or_else(|| mine().max_by_key(|d| d.last_seen()))
}
