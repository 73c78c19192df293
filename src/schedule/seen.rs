//! A batch's schedule as it is now, for every view (`status`, `--short`,
//! `--prometheus`, the dashboard): whether a live daemon fires it and,
//! when none does, the fire times that passed unfired. Read-only: the
//! daemon records those fires itself when it starts again.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::Schedule;
use super::plan::{Overdue, Plan, Stored};
use crate::config::Overlap;
use crate::model::{BatchInfo, DaemonInfo, Millis, daemon_for};
use crate::util::time::to_datetime;

/// What a view says of a scheduled batch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleSeen<'a> {
    /// The daemon that schedules it: a live one, else the last heard of.
    pub daemon: Option<&'a DaemonInfo>,
    /// A live daemon fires it (not one that is stopping).
    pub live: bool,
    /// The schedule's next fire time (it fires only if `live`): the one
    /// the live daemon planned, else the config's.
    pub next: Option<DateTime<Utc>>,
    /// A live daemon plans another next fire than this config's schedule
    /// gives: it fires the config it read (a file edited since, not
    /// reloaded with SIGHUP).
    pub config_differs: bool,
    /// With no live daemon: the fire times passed since the stored next
    /// fire, which nobody fired.
    pub overdue: Option<Overdue>,
}

impl ScheduleSeen<'_> {
    /// The next fire, if a live daemon fires it.
    #[must_use]
    pub fn live_fire(&self) -> Option<crate::model::Millis> {
        self.next
            .filter(|_| self.live)
            .map(|t| t.timestamp_millis())
    }

    /// Missed fire times so far (0 while a daemon is live).
    #[must_use]
    pub fn missed(&self) -> usize {
        self.overdue.map_or(0, |o| o.count)
    }

    /// `daemon not running (last seen …)`, or `None` when one fires it.
    #[must_use]
    pub fn no_daemon(&self, now: Millis) -> Option<String> {
        if self.live {
            return None;
        }
        Some(match self.daemon {
            Some(d) => format!("daemon {}", d.describe(now)),
            None => "daemon not running (never started for this batch)".to_string(),
        })
    }
}

/// The schedule of `info` as it is at `now`, given the daemons recorded.
#[must_use]
pub fn seen<'a>(
    info: &BatchInfo,
    schedule: &Schedule,
    tz: Tz,
    catch_up: Option<Duration>,
    daemons: &'a [DaemonInfo],
    now: Millis,
) -> ScheduleSeen<'a> {
    let daemon = daemon_for(daemons, &info.name);
    let live = daemon.is_some_and(DaemonInfo::fires);
    let at = to_datetime(now);
    let overdue = if live {
        None
    } else {
        let stored = Stored::of(info);
        // Nothing stored: no daemon ever planned a fire, none was missed.
        (stored != Stored::default())
            .then(|| {
                Plan::resume(
                    &info.name,
                    schedule.clone(),
                    tz,
                    catch_up,
                    Overlap::Skip,
                    stored,
                    at,
                )
                .overdue(at)
            })
            .flatten()
    };
    let from_config = schedule.next_after(at, tz);
    // What the live daemon stored is what fires (`daemon::announce`), not
    // what the file says now.
    let planned = info.next_fire.filter(|t| live && *t > now).map(to_datetime);
    ScheduleSeen {
        daemon,
        live,
        next: planned.or(from_config),
        config_differs: planned.is_some() && planned != from_config,
        overdue,
    }
}

/// `missed: 3 fire times, from … to …; when the daemon starts it runs the
/// latest once (catch_up) and records the rest as missed`, times as
/// `local` writes them.
#[must_use]
pub fn overdue_text(o: &Overdue, local: impl Fn(DateTime<Utc>) -> String) -> String {
    let what = if o.count == 1 && !o.more {
        format!("missed: the fire at {}", local(o.last))
    } else {
        format!(
            "missed: {}{} fire times, from {} to {}",
            if o.more { "more than " } else { "" },
            o.count,
            local(o.first),
            local(o.last)
        )
    };
    let then = match (o.catch_up, o.count) {
        (Some(_), 1) => "when the daemon starts it catches it up (catch_up)",
        (Some(_), _) => {
            "when the daemon starts it runs the latest once (catch_up) and records the rest as missed"
        }
        (None, _) => "when the daemon starts it records them as missed",
    };
    format!("{what}; {then}")
}
