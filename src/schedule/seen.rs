//! A batch's schedule as it is now, for every view (`status`, `--short`,
//! `--prometheus`, `schedule`, the dashboard): whether a live daemon fires
//! it, by which rule (the daemon's own, stored when it read its config: a
//! file edited since is said to differ), and, when none does, the fire
//! times that passed unfired. Read-only: the daemon records those fires
//! itself when it starts again.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::Schedule;
use super::plan::{Late, Overdue, Plan, Stored, Unfired};
use crate::config::Overlap;
use crate::model::{BatchInfo, DaemonInfo, FireRule, Millis, daemon_for};
use crate::util::time::to_datetime;

/// A schedule and the zone whose wall clock it is matched on.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub schedule: Schedule,
    pub tz: Tz,
}

impl Rule {
    /// The rule a daemon stored (`model::FireRule`), if this build reads
    /// it.
    #[must_use]
    pub fn of(stored: &FireRule) -> Option<Rule> {
        Some(Rule {
            schedule: Schedule::parse(&stored.schedule).ok()?,
            tz: stored.timezone.parse().ok()?,
        })
    }

    /// What a daemon stores of it.
    #[must_use]
    pub fn stored(&self) -> FireRule {
        FireRule {
            schedule: self.schedule.expr.clone(),
            timezone: self.tz.name().to_string(),
        }
    }
}

/// A batch's schedule as its config gives it.
#[derive(Debug, Clone, Copy)]
pub struct Configured<'c> {
    pub schedule: &'c Schedule,
    pub tz: Tz,
    pub catch_up: Option<Duration>,
}

impl Configured<'_> {
    /// The schedule of a batch's config, if it has one.
    #[must_use]
    pub fn of(cfg: &crate::config::BatchConfig) -> Option<Configured<'_>> {
        Some(Configured {
            schedule: cfg.schedule.as_ref()?,
            tz: cfg.timezone,
            catch_up: cfg.catch_up,
        })
    }
}

/// What a view says of a scheduled batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleSeen<'a> {
    /// The daemon that schedules it: a live one, else the last heard of.
    pub daemon: Option<&'a DaemonInfo>,
    /// A live daemon fires it (not one that is stopping).
    pub live: bool,
    /// When none fires or stops it: a live daemon that fires others and
    /// leaves this one out (it read the file before this schedule was
    /// added, or its `--batch` names others). A SIGHUP has it take the
    /// file's schedules.
    pub leaves_out: Option<&'a DaemonInfo>,
    /// The rule its fires come by: the one the live daemon read (its
    /// config when it started, or at its last reload), else the config's.
    pub rule: Rule,
    /// The schedule's next fire time (it fires only if `live`): the one
    /// the live daemon planned, else the rule's.
    pub next: Option<DateTime<Utc>>,
    /// A live daemon fires another rule than this config's schedule (a
    /// file edited since it read it, not reloaded with SIGHUP): `rule` is
    /// the daemon's.
    pub config_differs: bool,
    /// With no live daemon: the fire times passed since the stored next
    /// fire, which nobody fired, more than `ON_TIME` ago: missed.
    pub overdue: Option<Overdue>,
    /// With no live daemon: those passed unfired within `ON_TIME`, which
    /// a daemon there now runs once (late, not missed).
    pub late: Option<Late>,
}

impl ScheduleSeen<'_> {
    /// The next fire, if a live daemon fires it.
    #[must_use]
    pub fn live_fire(&self) -> Option<crate::model::Millis> {
        self.next
            .filter(|_| self.live)
            .map(|t| t.timestamp_millis())
    }

    /// The next `n` fire times by [`ScheduleSeen::rule`], from
    /// [`ScheduleSeen::next`]: what every list of next fires gives.
    #[must_use]
    pub fn upcoming(&self, n: usize) -> Vec<DateTime<Utc>> {
        let Some(first) = self.next.filter(|_| n > 0) else {
            return Vec::new();
        };
        let mut fires = vec![first];
        fires.extend(self.rule.schedule.upcoming(first, self.rule.tz, n - 1));
        fires
    }

    /// Missed fire times so far (0 while a daemon is live).
    #[must_use]
    pub fn missed(&self) -> usize {
        self.overdue.map_or(0, |o| o.count)
    }

    /// The fire times that passed unfired, in words (missed, then late),
    /// times as `local` writes them: what every text view says of them.
    #[must_use]
    pub fn unfired_text(&self, local: impl Fn(DateTime<Utc>) -> String) -> Vec<String> {
        let missed = self.overdue.map(|o| overdue_text(&o, &local));
        let late = self.late.map(|l| late_text(&l, &local));
        missed.into_iter().chain(late).collect()
    }

    /// `daemon not running (last seen …)`, or `None` when one fires it.
    #[must_use]
    pub fn no_daemon(&self, now: Millis) -> Option<String> {
        if self.live {
            return None;
        }
        if let Some(other) = self.leaves_out {
            return Some(format!(
                "no daemon schedules it: the live daemon on {} leaves it out (it read its config \
                 before this schedule was added, or its --batch names others); SIGHUP it \
                 (`systemctl reload nightshift`) to take the file's schedules",
                other.daemon.holder
            ));
        }
        Some(match self.daemon {
            Some(d) => format!("daemon {}", d.describe(now)),
            None => "daemon not running (never started for this batch)".to_string(),
        })
    }

    /// What to say when the config differs from the rule the live daemon
    /// fires: `the file's schedule differs (`*/5 * * * * *` in UTC): the
    /// daemon fires these until it reloads; SIGHUP it …`.
    #[must_use]
    pub fn config_note(&self, config: Option<Configured<'_>>) -> Option<String> {
        if !self.config_differs {
            return None;
        }
        let file = match config {
            Some(c) => format!(
                "the file's schedule differs (`{}` in {})",
                c.schedule.expr,
                c.tz.name()
            ),
            None => "the file no longer schedules this batch".to_string(),
        };
        Some(format!(
            "{file}: the live daemon fires the schedule it read until it reloads its config; \
             SIGHUP it (`systemctl reload nightshift`) or restart it to apply the file"
        ))
    }
}

/// The schedule of `info` as it is at `now`, given its config's schedule
/// and the daemons recorded: `None` when neither the config nor a live
/// daemon schedules it.
#[must_use]
pub fn seen<'a>(
    info: &BatchInfo,
    config: Option<Configured<'_>>,
    daemons: &'a [DaemonInfo],
    now: Millis,
) -> Option<ScheduleSeen<'a>> {
    let daemon = daemon_for(daemons, &info.name);
    let live = daemon.is_some_and(DaemonInfo::fires);
    let leaves_out = daemon
        .is_none_or(|d| !d.live())
        .then(|| daemons.iter().find(|d| d.fires()))
        .flatten();
    let at = to_datetime(now);
    // What the live daemon stored is what fires (`daemon::announce`), not
    // what the file says now.
    let fired = info.fire_rule.as_ref().filter(|_| live).and_then(Rule::of);
    let configured = config.map(|c| Rule {
        schedule: c.schedule.clone(),
        tz: c.tz,
    });
    let stored = Stored::of(info);
    let unfired = match config.filter(|_| !live) {
        // Nothing stored: no daemon ever planned a fire, none was missed.
        Some(c) if stored != Stored::default() => Plan::resume(
            &info.name,
            c.schedule.clone(),
            c.tz,
            c.catch_up,
            Overlap::Skip,
            stored,
            at,
        )
        .unfired(at),
        _ => Unfired::default(),
    };
    let planned = info.next_fire.filter(|t| live && *t > now).map(to_datetime);
    let config_differs = match (&fired, &configured) {
        (Some(f), Some(c)) => f != c,
        (Some(_), None) => true,
        // A daemon that stored no rule (an older build): by its next fire.
        (None, Some(c)) => planned.is_some() && planned != c.schedule.next_after(at, c.tz),
        (None, None) => false,
    };
    let rule = fired.or(configured)?;
    Some(ScheduleSeen {
        daemon,
        live,
        leaves_out,
        next: planned.or_else(|| rule.schedule.next_after(at, rule.tz)),
        rule,
        config_differs,
        overdue: unfired.missed,
        late: unfired.late,
    })
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

/// `late: 3 fire times, from … to …, have not run: a daemon back now runs
/// the latest once for them (…)`, times as `local` writes them: fire
/// times not yet missed, which a daemon there now (back from a stop, just
/// restarted) runs once.
#[must_use]
pub fn late_text(l: &Late, local: impl Fn(DateTime<Utc>) -> String) -> String {
    let older = format!(
        "a fire time more than {} old by then is missed",
        crate::util::time::compact(super::plan::ON_TIME.as_secs())
    );
    if l.count == 1 {
        format!(
            "late: the fire at {} has not run: a daemon back now runs it ({older})",
            local(l.last)
        )
    } else {
        format!(
            "late: {} fire times, from {} to {}, have not run: a daemon back now runs the \
             latest once for them ({older})",
            l.count,
            local(l.first),
            local(l.last)
        )
    }
}
