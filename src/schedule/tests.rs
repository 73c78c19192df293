//! Scheduler-level tests: a [`Plan`] driven by a fake clock, the way the
//! daemon loop drives it with the real one. No sleeping.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, TimeZone, Utc};

use super::plan::{MAX_COUNTED, ON_TIME};
use super::*;
use crate::config::{BatchConfig, Overlap};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .single()
        .expect("valid test time")
}

fn secs(n: i64) -> TimeDelta {
    TimeDelta::seconds(n)
}

fn cfg(expr: &str, zone: &str) -> BatchConfig {
    let mut c = BatchConfig::defaults("b");
    c.schedule = Some(Schedule::parse(expr).expect("valid test schedule"));
    c.timezone = zone.parse().expect("known zone");
    c
}

/// A daemon with a fake clock: it wakes exactly when the plan asks, and a
/// cycle it starts runs until the test says it ended.
struct Sim {
    plan: Plan,
    now: DateTime<Utc>,
    paused: Option<String>,
    running: bool,
    /// Cycles end as soon as they start (the loop sees them finished).
    instant_cycles: bool,
}

impl Sim {
    fn start(cfg: &BatchConfig, stored: Stored, now: DateTime<Utc>) -> Sim {
        Sim {
            plan: Plan::new(cfg, stored, now).expect("scheduled"),
            now,
            paused: None,
            running: false,
            instant_cycles: true,
        }
    }

    fn fresh(cfg: &BatchConfig, now: DateTime<Utc>) -> Sim {
        Sim::start(cfg, Stored::default(), now)
    }

    /// One pass of the loop at the current time.
    fn step(&mut self) -> Vec<Decision> {
        let step = self.plan.step(&Observed {
            now: self.now,
            paused: self.paused.clone(),
            running: self.running,
        });
        assert_eq!(step.wait_until, self.plan.next());
        if let Some(next) = step.wait_until {
            assert!(next > self.now, "the plan must wait for the future");
        }
        if step
            .decisions
            .iter()
            .any(|d| matches!(d, Decision::Fire { .. }))
        {
            self.running = !self.instant_cycles;
        }
        step.decisions
    }

    fn at(&mut self, now: DateTime<Utc>) -> Vec<Decision> {
        self.now = now;
        self.step()
    }

    /// Wakes at every fire time up to `end`; all decisions, in order.
    fn until(&mut self, end: DateTime<Utc>) -> Vec<Decision> {
        let mut out = Vec::new();
        while let Some(next) = self.plan.next().filter(|n| *n <= end) {
            out.extend(self.at(next));
        }
        out
    }
}

fn fire_times(decisions: &[Decision]) -> Vec<DateTime<Utc>> {
    decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Fire { at, .. } => Some(*at),
            _ => None,
        })
        .collect()
}

fn on_time(at: DateTime<Utc>) -> Decision {
    Decision::Fire {
        at,
        why: RunWhy::OnTime,
        folded: 0,
    }
}

#[test]
fn new_york_spring_forward_fires_every_day_once() {
    // 2026-03-08 02:00 EST jumps to 03:00 EDT: 02:30 does not exist that day.
    let c = cfg("30 2 * * *", "America/New_York");
    let mut sim = Sim::fresh(&c, utc(2026, 3, 6, 12, 0));
    let decisions = sim.until(utc(2026, 3, 10, 0, 0));
    assert_eq!(
        fire_times(&decisions),
        vec![
            utc(2026, 3, 7, 7, 30), // 02:30 EST
            utc(2026, 3, 8, 7, 0),  // 03:00 EDT, the moment the gap ends
            utc(2026, 3, 9, 6, 30), // 02:30 EDT
        ]
    );
    assert_eq!(decisions.len(), 3, "nothing but fires: {decisions:?}");
    assert_eq!(
        sim.plan.local(utc(2026, 3, 8, 7, 0)),
        "2026-03-08 03:00:00 EDT"
    );
}

#[test]
fn new_york_fall_back_fires_the_repeated_hour_once() {
    // 2026-11-01: 01:00-01:59 happens twice, first EDT then EST.
    let c = cfg("30 1 * * *", "America/New_York");
    let mut sim = Sim::fresh(&c, utc(2026, 10, 31, 0, 0));
    let decisions = sim.until(utc(2026, 11, 3, 0, 0));
    assert_eq!(
        fire_times(&decisions),
        vec![
            utc(2026, 10, 31, 5, 30),
            utc(2026, 11, 1, 5, 30), // 01:30 EDT; not again at 01:30 EST
            utc(2026, 11, 2, 6, 30),
        ]
    );
    // Every 20 minutes through the night: the repeated hour is not fired
    // twice; the clock's second pass through 01:xx is quiet.
    let c = cfg("*/20 * * * *", "America/New_York");
    let mut sim = Sim::fresh(&c, utc(2026, 11, 1, 4, 50));
    let fires = fire_times(&sim.until(utc(2026, 11, 1, 7, 30)));
    assert_eq!(
        fires,
        vec![
            utc(2026, 11, 1, 5, 0), // 01:00 EDT
            utc(2026, 11, 1, 5, 20),
            utc(2026, 11, 1, 5, 40),
            utc(2026, 11, 1, 7, 0), // 02:00 EST
            utc(2026, 11, 1, 7, 20),
        ]
    );
    let mut local: Vec<String> = fires.iter().map(|f| sim.plan.local(*f)).collect();
    local.dedup();
    assert_eq!(local.len(), fires.len(), "a wall-clock time fired twice");
}

#[test]
fn tokyo_fires_at_two_every_night() {
    let c = cfg("0 2 * * *", "Asia/Tokyo");
    let mut sim = Sim::fresh(&c, utc(2026, 3, 1, 0, 0));
    let fires = fire_times(&sim.until(utc(2026, 3, 4, 0, 0)));
    assert_eq!(
        fires,
        vec![
            utc(2026, 3, 1, 17, 0),
            utc(2026, 3, 2, 17, 0),
            utc(2026, 3, 3, 17, 0)
        ]
    );
    assert_eq!(sim.plan.local(fires[0]), "2026-03-02 02:00:00 JST");
}

#[test]
fn a_paused_batch_skips_and_says_why() {
    let c = cfg("0 * * * *", "UTC");
    let mut sim = Sim::fresh(&c, utc(2026, 5, 1, 0, 30));
    sim.paused = Some("paused by ops@db1: migrating".into());
    let decisions = sim.until(utc(2026, 5, 1, 2, 0));
    assert_eq!(
        decisions,
        vec![
            Decision::SkipPaused {
                at: utc(2026, 5, 1, 1, 0),
                reason: "paused by ops@db1: migrating".into()
            },
            Decision::SkipPaused {
                at: utc(2026, 5, 1, 2, 0),
                reason: "paused by ops@db1: migrating".into()
            },
        ]
    );
    assert_eq!(decisions[0].outcome(), Outcome::SkippedPaused);
    assert_eq!(
        sim.plan.reason(&decisions[0]).as_deref(),
        Some("paused by ops@db1: migrating")
    );
    // Unpaused: the next fire runs, without any restart.
    sim.paused = None;
    assert_eq!(
        sim.until(utc(2026, 5, 1, 3, 0)),
        vec![on_time(utc(2026, 5, 1, 3, 0))]
    );
}

#[test]
fn overlap_skip_records_each_fire_while_the_cycle_runs() {
    let c = cfg("*/10 * * * *", "UTC");
    let mut sim = Sim::fresh(&c, utc(2026, 5, 1, 0, 5));
    sim.instant_cycles = false;
    let decisions = sim.until(utc(2026, 5, 1, 0, 30));
    assert_eq!(
        decisions,
        vec![
            on_time(utc(2026, 5, 1, 0, 10)),
            Decision::SkipOverlap {
                at: utc(2026, 5, 1, 0, 20),
                already_queued: false
            },
            Decision::SkipOverlap {
                at: utc(2026, 5, 1, 0, 30),
                already_queued: false
            },
        ]
    );
    assert_eq!(
        sim.plan.reason(&decisions[1]).as_deref(),
        Some("overlap = \"skip\": the running cycle picks up the work")
    );
    // The cycle ends between fires: nothing is owed, the next fire runs.
    sim.running = false;
    assert!(!sim.plan.is_due(utc(2026, 5, 1, 0, 35), false));
    assert_eq!(
        sim.until(utc(2026, 5, 1, 0, 40)),
        vec![on_time(utc(2026, 5, 1, 0, 40))]
    );
}

#[test]
fn overlap_queue_runs_once_right_after_the_cycle() {
    let mut c = cfg("*/10 * * * *", "UTC");
    c.overlap = Overlap::Queue;
    let mut sim = Sim::fresh(&c, utc(2026, 5, 1, 0, 5));
    sim.instant_cycles = false;
    let decisions = sim.until(utc(2026, 5, 1, 0, 30));
    assert_eq!(
        decisions,
        vec![
            on_time(utc(2026, 5, 1, 0, 10)),
            Decision::Queue {
                at: utc(2026, 5, 1, 0, 20)
            },
            Decision::SkipOverlap {
                at: utc(2026, 5, 1, 0, 30),
                already_queued: true
            },
        ]
    );
    assert_eq!(decisions[1].outcome(), Outcome::Queued);
    // The cycle ends at 00:34: the queued fire runs at once, only once.
    sim.running = false;
    let end = utc(2026, 5, 1, 0, 34);
    assert!(sim.plan.is_due(end, false));
    assert_eq!(
        sim.at(end),
        vec![Decision::Fire {
            at: utc(2026, 5, 1, 0, 20),
            why: RunWhy::Queued,
            folded: 0
        }]
    );
    assert!(!sim.plan.is_due(utc(2026, 5, 1, 0, 35), false));
    // Paused by the time the cycle ends: the queued fire is skipped instead.
    let mut sim = Sim::fresh(&c, utc(2026, 5, 1, 0, 5));
    sim.instant_cycles = false;
    sim.until(utc(2026, 5, 1, 0, 20));
    sim.running = false;
    sim.paused = Some("paused".into());
    assert_eq!(
        sim.at(utc(2026, 5, 1, 0, 21)),
        vec![Decision::SkipPaused {
            at: utc(2026, 5, 1, 0, 20),
            reason: "paused".into()
        }]
    );
}

#[test]
fn catch_up_runs_the_latest_missed_fire_once_within_the_window() {
    // Hourly; the daemon stopped before 10:00 and starts again at 13:20.
    let mut c = cfg("0 * * * *", "UTC");
    c.catch_up = Some(Duration::from_mins(90));
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 10, 0)),
        last_fire_at: Some(utc(2026, 5, 1, 9, 0)),
        cut_short: None,
        queued: None,
    };
    let start = utc(2026, 5, 1, 13, 20);
    let mut sim = Sim::start(&c, stored, start);
    assert!(sim.plan.is_due(start, false));
    let decisions = sim.step();
    assert_eq!(
        decisions,
        vec![
            Decision::Missed {
                first: utc(2026, 5, 1, 10, 0),
                last: utc(2026, 5, 1, 12, 0),
                count: 3,
                more: false,
                why: MissedWhy::CaughtUpLater(utc(2026, 5, 1, 13, 0)),
            },
            Decision::Fire {
                at: utc(2026, 5, 1, 13, 0),
                why: RunWhy::CatchUp,
                folded: 0
            },
        ]
    );
    assert_eq!(
        sim.plan.reason(&decisions[0]).as_deref(),
        Some(
            "3 fire times, from 2026-05-01 10:00:00 UTC to 2026-05-01 12:00:00 UTC; \
             catch-up runs once, for the latest missed fire time (2026-05-01 13:00:00 UTC)"
        )
    );
    // Once: the next thing is the 14:00 fire.
    assert_eq!(sim.plan.next(), Some(utc(2026, 5, 1, 14, 0)));
    assert!(sim.at(utc(2026, 5, 1, 13, 59)).is_empty());

    // A daily batch down from 01:00 to 05:00 catches up its 02:00 run and
    // nothing is missed.
    let mut c = cfg("0 2 * * *", "Asia/Tokyo");
    c.catch_up = Some(Duration::from_hours(6));
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 17, 0)),
        last_fire_at: Some(utc(2026, 4, 30, 17, 0)),
        cut_short: None,
        queued: None,
    };
    let mut sim = Sim::start(&c, stored, utc(2026, 5, 1, 20, 0));
    assert_eq!(
        sim.step(),
        vec![Decision::Fire {
            at: utc(2026, 5, 1, 17, 0),
            why: RunWhy::CatchUp,
            folded: 0
        }]
    );
}

/// A missed fire time inside the catch_up window that is not run says why:
/// an on-time fire came with it and does the work (a machine that slept).
#[test]
fn a_miss_inside_the_window_says_why_it_was_not_caught_up() {
    let mut c = cfg("0 * * * *", "UTC");
    c.catch_up = Some(Duration::from_hours(2));
    let mut sim = Sim::fresh(&c, utc(2026, 5, 1, 11, 30));
    let decisions = sim.at(utc(2026, 5, 1, 13, 0) + secs(30));
    assert_eq!(
        decisions,
        vec![
            Decision::Missed {
                first: utc(2026, 5, 1, 12, 0),
                last: utc(2026, 5, 1, 12, 0),
                count: 1,
                more: false,
                why: MissedWhy::OnTimeInstead(utc(2026, 5, 1, 13, 0)),
            },
            on_time(utc(2026, 5, 1, 13, 0)),
        ]
    );
    assert_eq!(
        sim.plan.reason(&decisions[0]).as_deref(),
        Some(
            "the fire at 2026-05-01 12:00:00 UTC; \
             not caught up: the fire at 2026-05-01 13:00:00 UTC runs on time"
        )
    );
}

#[test]
fn misses_older_than_the_window_are_recorded_not_run() {
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 10, 0)),
        last_fire_at: None,
        cut_short: None,
        queued: None,
    };
    let start = utc(2026, 5, 1, 13, 20);
    let missed = |why| {
        vec![Decision::Missed {
            first: utc(2026, 5, 1, 10, 0),
            last: utc(2026, 5, 1, 13, 0),
            count: 4,
            more: false,
            why,
        }]
    };
    // The newest miss is 20 minutes old: outside a 15-minute window.
    let mut c = cfg("0 * * * *", "UTC");
    c.catch_up = Some(Duration::from_mins(15));
    let mut sim = Sim::start(&c, stored, start);
    let expected = missed(MissedWhy::TooOld);
    assert_eq!(sim.step(), expected);
    assert!(
        sim.plan
            .reason(&expected[0])
            .is_some_and(|r| r.ends_with("older than the catch_up window (15m0s)"))
    );
    // No window at all.
    c.catch_up = None;
    let mut sim = Sim::start(&c, stored, start);
    let expected = missed(MissedWhy::NoWindow);
    assert_eq!(sim.step(), expected);
    assert!(
        sim.plan
            .reason(&expected[0])
            .is_some_and(|r| r.ends_with("no catch_up window is set"))
    );
}

/// A daemon restarted a second after a fire time recorded it missed (no
/// `catch_up`), though it was not late by any human measure. Noticed
/// within `ON_TIME`, it is on time whoever notices it: a daemon just
/// started, or one that was running.
#[test]
fn a_fire_noticed_on_time_just_after_a_start_runs() {
    let c = cfg("0 * * * *", "UTC");
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 13, 0)),
        last_fire_at: Some(utc(2026, 5, 1, 12, 0)),
        cut_short: None,
        queued: None,
    };
    let tolerance = TimeDelta::from_std(ON_TIME).unwrap();
    for late in [secs(1), tolerance] {
        let start = utc(2026, 5, 1, 13, 0) + late;
        let mut sim = Sim::start(&c, stored, start);
        assert_eq!(sim.step(), vec![on_time(utc(2026, 5, 1, 13, 0))], "{late}");
        // The view of a store with no daemon says the same beforehand.
        let plan = Plan::new(&c, stored, start).unwrap();
        assert_eq!(
            plan.unfired(start),
            Unfired {
                missed: None,
                late: Some(Late {
                    first: utc(2026, 5, 1, 13, 0),
                    last: utc(2026, 5, 1, 13, 0),
                    count: 1
                }),
            }
        );
    }
    // A second later than that, it was missed: only catch_up brings it back.
    let start = utc(2026, 5, 1, 13, 0) + tolerance + secs(1);
    let mut sim = Sim::start(&c, stored, start);
    assert!(matches!(
        sim.step()[..],
        [Decision::Missed {
            count: 1,
            why: MissedWhy::NoWindow,
            ..
        }]
    ));
}

/// A daemon stopped (SIGSTOP) for 40 s with a per-2-second schedule: the
/// fire times it did not see are late, not missed; the latest runs once
/// for them, and the view of a store whose daemon is silent says so
/// beforehand, with the same count.
#[test]
fn fires_a_stopped_daemon_comes_back_to_within_on_time_run_once() {
    let c = cfg("*/2 * * * * *", "Asia/Tokyo");
    let t0 = utc(2026, 5, 1, 0, 0);
    let mut sim = Sim::fresh(&c, t0);
    assert_eq!(sim.at(t0 + secs(2)), vec![on_time(t0 + secs(2))]);
    let stored = Stored {
        next_fire: sim.plan.next(),
        last_fire_at: Some(t0 + secs(2)),
        cut_short: None,
        queued: None,
    };
    let back = t0 + secs(42) + TimeDelta::milliseconds(300);
    let view = Plan::new(&c, stored, back).unwrap().unfired(back);
    assert_eq!(
        view,
        Unfired {
            missed: None,
            late: Some(Late {
                first: t0 + secs(4),
                last: t0 + secs(42),
                count: 20
            }),
        }
    );
    let decisions = sim.at(back);
    assert_eq!(
        decisions,
        vec![Decision::Fire {
            at: t0 + secs(42),
            why: RunWhy::OnTime,
            folded: 19
        }]
    );
    assert_eq!(
        sim.plan.reason(&decisions[0]).as_deref(),
        Some(
            "19 earlier fire times came late (under 1m0s: the daemon was held up, stopped or \
             restarting) and were not run apart: this fire runs once for them"
        )
    );
    // Stopped for 90 s: the fire times more than a minute old are missed,
    // the rest late, and the view counts them as the daemon records them.
    let back = t0 + secs(92);
    let view = Plan::new(&c, stored, back).unwrap().unfired(back);
    let mut sim = Sim::start(&c, stored, back);
    let decisions = sim.step();
    assert_eq!(
        decisions,
        vec![
            Decision::Missed {
                first: t0 + secs(4),
                last: t0 + secs(30),
                count: 14,
                more: false,
                why: MissedWhy::NoWindow,
            },
            Decision::Fire {
                at: t0 + secs(92),
                why: RunWhy::OnTime,
                folded: 30
            },
        ]
    );
    assert_eq!(
        (view.missed.map(|m| (m.first, m.last, m.count)), view.late),
        (
            Some((t0 + secs(4), t0 + secs(30), 14)),
            Some(Late {
                first: t0 + secs(32),
                last: t0 + secs(92),
                count: 31
            })
        )
    );
}

#[test]
fn a_missed_fire_of_a_paused_batch_is_not_caught_up() {
    let mut c = cfg("0 * * * *", "UTC");
    c.catch_up = Some(Duration::from_hours(2));
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 13, 0)),
        last_fire_at: None,
        cut_short: None,
        queued: None,
    };
    let mut sim = Sim::start(&c, stored, utc(2026, 5, 1, 13, 30));
    sim.paused = Some("emergency stop file /srv/PAUSED exists".into());
    assert_eq!(
        sim.step(),
        vec![Decision::SkipPaused {
            at: utc(2026, 5, 1, 13, 0),
            reason: "emergency stop file /srv/PAUSED exists".into()
        }]
    );
}

#[test]
fn first_start_and_edited_schedules_miss_nothing() {
    // Never scheduled before: nothing was missed.
    let c = cfg("0 * * * *", "UTC");
    let mut sim = Sim::fresh(&c, utc(2026, 5, 1, 13, 30));
    assert!(sim.step().is_empty());
    assert_eq!(sim.plan.next(), Some(utc(2026, 5, 1, 14, 0)));
    // The stored next fire is tomorrow's 02:00, but the schedule now fires
    // hourly: the next hour counts, not the stored time.
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 2, 2, 0)),
        last_fire_at: Some(utc(2026, 5, 1, 2, 0)),
        cut_short: None,
        queued: None,
    };
    let sim = Sim::start(&c, stored, utc(2026, 5, 1, 13, 30));
    assert_eq!(sim.plan.next(), Some(utc(2026, 5, 1, 14, 0)));
    // Only a last fire stored: no daemon has planned a fire since (the
    // config stopped scheduling the batch), so nothing was missed.
    let stored = Stored {
        next_fire: None,
        last_fire_at: Some(utc(2026, 5, 1, 11, 0)),
        cut_short: None,
        queued: None,
    };
    let mut sim = Sim::start(&c, stored, utc(2026, 5, 1, 13, 30));
    assert!(sim.step().is_empty());
    assert_eq!(sim.plan.next(), Some(utc(2026, 5, 1, 14, 0)));
}

#[test]
fn on_time_fires_noticed_together_count_once() {
    // A per-second schedule and a loop that woke 3 s late: one cycle, the
    // latest fire, and the reason says so.
    let c = cfg("* * * * * *", "UTC");
    let t0 = utc(2026, 5, 1, 0, 0);
    let mut sim = Sim::fresh(&c, t0);
    assert_eq!(sim.plan.next(), Some(t0 + secs(1)));
    let decisions = sim.at(t0 + secs(3) + TimeDelta::milliseconds(400));
    assert_eq!(
        decisions,
        vec![Decision::Fire {
            at: t0 + secs(3),
            why: RunWhy::OnTime,
            folded: 2
        }]
    );
    assert_eq!(
        sim.plan.reason(&decisions[0]).as_deref(),
        Some(
            "2 earlier fire times came late (under 1m0s: the daemon was held up, stopped or \
             restarting) and were not run apart: this fire runs once for them"
        )
    );
    assert_eq!(sim.plan.next(), Some(t0 + secs(4)));
}

#[test]
fn a_sleeping_machine_misses_what_it_slept_through() {
    // Awake at 00:00, asleep until 00:10: the on-time window is only the
    // last ON_TIME; the rest was missed.
    let c = cfg("0 * * * * *", "UTC");
    let t0 = utc(2026, 5, 1, 0, 0);
    let mut sim = Sim::fresh(&c, t0);
    let woke = t0 + TimeDelta::minutes(10) + secs(5);
    let decisions = sim.at(woke);
    assert_eq!(
        decisions,
        vec![
            Decision::Missed {
                first: t0 + TimeDelta::minutes(1),
                last: t0 + TimeDelta::minutes(9),
                count: 9,
                more: false,
                why: MissedWhy::NoWindow,
            },
            on_time(t0 + TimeDelta::minutes(10)),
        ]
    );
    assert!(ON_TIME >= Duration::from_secs(5));
}

#[test]
fn a_long_outage_of_a_per_second_schedule_is_counted_cheaply() {
    let mut c = cfg("* * * * * *", "UTC");
    let stored = Stored {
        next_fire: Some(utc(2026, 4, 1, 0, 0)),
        last_fire_at: None,
        cut_short: None,
        queued: None,
    };
    let start = utc(2026, 4, 8, 0, 0) + TimeDelta::milliseconds(500);
    c.catch_up = Some(Duration::from_hours(1));
    let mut sim = Sim::start(&c, stored, start);
    let decisions = sim.step();
    let [
        Decision::Missed {
            first,
            last,
            count,
            more,
            ..
        },
        Decision::Fire { at, why, folded },
    ] = &decisions[..]
    else {
        panic!("{decisions:?}");
    };
    assert_eq!(*first, utc(2026, 4, 1, 0, 0));
    assert_eq!((*count, *more), (MAX_COUNTED, true));
    // The last minute's seconds are on time: the latest runs for them, and
    // the missed ones end a minute before the start.
    assert_eq!(
        (*last, *at, *why, *folded),
        (
            utc(2026, 4, 7, 23, 59),
            utc(2026, 4, 8, 0, 0),
            RunWhy::OnTime,
            59
        )
    );
    assert!(
        sim.plan
            .reason(&decisions[0])
            .is_some_and(|r| r.starts_with("more than 10000 fire times"))
    );
}

#[test]
fn outcomes_read_as_plain_words() {
    for o in Outcome::ALL {
        assert_eq!(Outcome::parse(o.as_str()), Some(*o));
    }
    assert_eq!(
        describe("skipped-paused", Some("paused by ops@db1: migrating")),
        "did not run: the batch was paused — paused by ops@db1: migrating"
    );
    assert_eq!(describe("ran", None), "ran");
    assert_eq!(describe("mystery", None), "mystery");
}

/// A view with no daemon says what a daemon starting now would find: the
/// fire times nobody fired since the stored next fire, and the one it
/// would catch up; nothing before the stored next fire has come.
#[test]
fn overdue_says_what_a_daemon_starting_now_would_find() {
    let mut c = cfg("0 * * * *", "UTC");
    c.catch_up = Some(Duration::from_mins(90));
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 10, 0)),
        last_fire_at: Some(utc(2026, 5, 1, 9, 0)),
        cut_short: None,
        queued: None,
    };
    let now = utc(2026, 5, 1, 13, 20);
    let plan = Plan::new(&c, stored, now).unwrap();
    assert_eq!(
        plan.unfired(now),
        Unfired {
            missed: Some(Overdue {
                first: utc(2026, 5, 1, 10, 0),
                last: utc(2026, 5, 1, 13, 0),
                count: 4,
                more: false,
                catch_up: Some(utc(2026, 5, 1, 13, 0)),
            }),
            late: None,
        }
    );
    // What the daemon then does agrees: three recorded missed, one run.
    let mut sim = Sim::start(&c, stored, now);
    let d = sim.step();
    assert!(matches!(
        d[..],
        [Decision::Missed { count: 3, .. }, Decision::Fire { .. }]
    ));

    c.catch_up = None;
    let plan = Plan::new(&c, stored, now).unwrap();
    let o = plan.unfired(now).missed.unwrap();
    assert_eq!((o.count, o.catch_up), (4, None));
    // Only the stored next fire's own time has not come yet: nothing.
    let plan = Plan::new(&c, stored, utc(2026, 5, 1, 9, 59)).unwrap();
    assert_eq!(plan.unfired(utc(2026, 5, 1, 9, 59)), Unfired::default());
    // A plan that is stepped does not change by being asked.
    assert_eq!(plan.next(), Some(utc(2026, 5, 1, 10, 0)));
}

/// A fire stored `running` is said as its run is: the scheduled run
/// started at or after it (or the one it names); any other run leaves it
/// as stored.
#[test]
fn a_running_fire_is_said_as_its_run_is() {
    use crate::model::{BatchInfo, Fire, Run, RunCounts, RunSeen, RunState, Trigger};
    let fire = |run_id| Fire {
        at: 1_000,
        outcome: "running".into(),
        reason: None,
        run_id,
    };
    let run = |id, trigger, started_at, state| Run {
        id,
        batch: "b".into(),
        trigger,
        actor: None,
        host: "h".into(),
        pid: 1,
        started_at,
        ended_at: None,
        state,
        stopped: None,
        counts: RunCounts::default(),
        summary: None,
    };
    let said = |fire: Fire, run: Run, seen: Option<RunSeen>| {
        let mut info = BatchInfo {
            last_fire: Some(fire),
            last_run: Some(run),
            ..BatchInfo::default()
        };
        info.runners.last_run = seen;
        let f = fire_seen(&info, &[], 5_000).unwrap();
        (f.outcome, f.reason, f.run_id)
    };
    let crashed = Some(RunSeen::Crashed { pid: 42 });
    let why = Some("runner pid 42 is gone; not yet recorded".to_string());
    assert_eq!(
        said(
            fire(None),
            run(7, Trigger::Schedule, 1_010, RunState::Running),
            crashed
        ),
        ("crashed".into(), why, Some(7))
    );
    assert_eq!(
        said(
            fire(Some(7)),
            run(7, Trigger::Schedule, 1_010, RunState::Crashed),
            None
        ),
        ("crashed".into(), None, Some(7))
    );
    assert_eq!(
        said(
            fire(None),
            run(7, Trigger::Schedule, 1_010, RunState::Ok),
            None
        ),
        ("ran".into(), None, Some(7))
    );
    assert_eq!(
        said(
            fire(None),
            run(7, Trigger::Schedule, 1_010, RunState::Running),
            None
        ),
        ("running".into(), None, Some(7))
    );
    // A manual run, or one started before the fire, is not the fire's.
    for other in [
        run(8, Trigger::Manual, 1_010, RunState::Crashed),
        run(6, Trigger::Schedule, 900, RunState::Crashed),
    ] {
        assert_eq!(
            said(fire(None), other, None),
            ("running".into(), None, None)
        );
    }
    assert_eq!(describe("crashed", None), "its run crashed");
}

/// A fire stored `running` before its run started lives with the daemon
/// that fired it: crashed at once when that daemon's process is gone,
/// still running (saying so) while it is silent, as stored while it runs.
#[test]
fn a_running_fire_with_no_run_yet_is_said_as_its_daemon_is() {
    use crate::model::{BatchInfo, Daemon, DaemonInfo, DaemonState, Fire, Holder};
    let info = BatchInfo {
        last_fire: Some(Fire {
            at: 1_000,
            outcome: "running".into(),
            reason: None,
            run_id: None,
        }),
        ..BatchInfo::empty("b")
    };
    let daemon = |state| DaemonInfo {
        daemon: Daemon {
            token: "t".into(),
            holder: Holder {
                host: "h".into(),
                pid: 42,
                pid_start: None,
            },
            started_at: 0,
            beat_at: 900,
            stopped_at: None,
            batches: vec!["b".into()],
            stopping_at: None,
        },
        state,
    };
    let said = |daemons: &[DaemonInfo]| {
        let f = fire_seen(&info, daemons, 5_000).unwrap();
        (f.outcome, f.reason)
    };
    assert_eq!(said(&[]), ("running".into(), None));
    assert_eq!(said(&[daemon(DaemonState::Live)]), ("running".into(), None));
    let (outcome, why) = said(&[daemon(DaemonState::Crashed)]);
    assert_eq!(outcome, "crashed");
    assert_eq!(
        why.as_deref(),
        Some(
            "its daemon h:42 is gone (killed, or crashed) before its run started; not yet recorded"
        )
    );
    let (outcome, why) = said(&[daemon(DaemonState::Silent)]);
    assert_eq!(outcome, "running");
    assert!(
        why.unwrap()
            .starts_with("its daemon h:42 has been silent since ")
    );
}

/// A daemon killed mid-cycle left its fire `running`: the next daemon
/// runs it again once, on start, when `catch_up` covers it, and records
/// the crash first; without a window, or past it, the next fire does the
/// work and nothing runs at start.
#[test]
fn a_fire_cut_short_by_the_daemon_s_end_runs_again_once_within_catch_up() {
    let mut c = cfg("0 2 * * *", "Asia/Tokyo");
    c.catch_up = Some(Duration::from_hours(6));
    // 02:00 JST fired and its cycle ran until the machine went down.
    let fired = utc(2026, 5, 1, 17, 0);
    let stored = |cut: Option<Cut>| Stored {
        next_fire: Some(utc(2026, 5, 2, 17, 0)),
        last_fire_at: Some(fired),
        cut_short: cut.map(|c| (fired, c)),
        queued: None,
    };
    let start = utc(2026, 5, 1, 17, 40);
    let mut sim = Sim::start(&c, stored(Some(Cut::Unrecorded)), start);
    assert_eq!(sim.plan.unrecorded_crash(), Some(fired));
    assert!(sim.plan.is_due(start, false));
    let decisions = sim.step();
    assert_eq!(
        decisions,
        vec![Decision::Fire {
            at: start,
            why: RunWhy::Resume(fired),
            folded: 0
        }]
    );
    assert_eq!(
        sim.plan.reason(&decisions[0]).as_deref(),
        Some(
            "catch-up: resumes the fire at 2026-05-02 02:00:00 JST, whose cycle was cut short \
             when the daemon stopped"
        )
    );
    // Once.
    assert!(!sim.plan.is_due(utc(2026, 5, 1, 17, 41), false));
    assert!(sim.at(utc(2026, 5, 1, 17, 41)).is_empty());

    // Recorded crashed by a run since: resumed all the same, nothing more
    // to record.
    let mut sim = Sim::start(&c, stored(Some(Cut::Recorded)), start);
    assert_eq!(sim.plan.unrecorded_crash(), None);
    assert_eq!(fire_times(&sim.step()), vec![start]);

    // Paused: skipped, and said so.
    let mut sim = Sim::start(&c, stored(Some(Cut::Unrecorded)), start);
    sim.paused = Some("paused by ops: maintenance".into());
    assert_eq!(
        sim.step(),
        vec![Decision::SkipPaused {
            at: start,
            reason: "paused by ops: maintenance".into()
        }]
    );

    // Past the window, or with none: nothing at start.
    let mut sim = Sim::start(&c, stored(Some(Cut::Unrecorded)), utc(2026, 5, 2, 0, 0));
    assert!(sim.step().is_empty());
    let mut none = c.clone();
    none.catch_up = None;
    let mut sim = Sim::start(&none, stored(Some(Cut::Unrecorded)), start);
    assert!(sim.step().is_empty());
    // A fire that ended is not run again.
    let sim = Sim::start(&c, stored(None), start);
    assert!(!sim.plan.is_due(start, false));
}

/// A later fire caught up on start does the cut fire's work too: one
/// cycle, not two.
#[test]
fn a_cut_fire_is_not_resumed_beside_a_catch_up() {
    let mut c = cfg("0 * * * *", "UTC");
    c.catch_up = Some(Duration::from_hours(3));
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 11, 0)),
        last_fire_at: Some(utc(2026, 5, 1, 10, 0)),
        cut_short: Some((utc(2026, 5, 1, 10, 0), Cut::Unrecorded)),
        queued: None,
    };
    let mut sim = Sim::start(&c, stored, utc(2026, 5, 1, 11, 30));
    assert_eq!(
        sim.step(),
        vec![Decision::Fire {
            at: utc(2026, 5, 1, 11, 0),
            why: RunWhy::CatchUp,
            folded: 0
        }]
    );
}

/// A reload that changes the rule keeps a fire queued behind the running
/// cycle (its record said `queued`), even when the new rule is `skip`.
#[test]
fn a_queued_fire_survives_a_reload_that_changes_the_rule() {
    let mut c = cfg("*/10 * * * *", "UTC");
    c.overlap = Overlap::Queue;
    let mut sim = Sim::fresh(&c, utc(2026, 5, 1, 0, 5));
    sim.instant_cycles = false;
    sim.until(utc(2026, 5, 1, 0, 20));
    let mut skip = c.clone();
    skip.overlap = Overlap::Skip;
    let mut reloaded = Plan::new(&skip, Stored::default(), utc(2026, 5, 1, 0, 21)).unwrap();
    assert!(!reloaded.same_rule(&sim.plan));
    reloaded.carry_over(sim.plan.clone());
    sim.plan = reloaded;
    sim.running = false;
    assert_eq!(
        sim.at(utc(2026, 5, 1, 0, 24)),
        vec![Decision::Fire {
            at: utc(2026, 5, 1, 0, 20),
            why: RunWhy::Queued,
            folded: 0
        }]
    );
}

/// The fire cut short is the one whose cycle never ended, whatever fires
/// were recorded after it: a later fire skipped (or queued) while the
/// cycle ran became the last fire, and the next daemon found nothing to
/// record crashed or resume.
#[test]
fn a_cut_fire_is_found_behind_later_fires() {
    use crate::model::{BatchInfo, Fire, Owed};
    let at = |t: DateTime<Utc>| t.timestamp_millis();
    let info = BatchInfo {
        next_fire: Some(at(utc(2026, 5, 1, 12, 0))),
        last_fire: Some(Fire {
            at: at(utc(2026, 5, 1, 11, 0)),
            outcome: "skipped-overlap".into(),
            reason: None,
            run_id: None,
        }),
        owed: Owed {
            cycle: Some(at(utc(2026, 5, 1, 10, 0))),
            crashed: false,
            queued: None,
        },
        ..BatchInfo::default()
    };
    let stored = Stored::of(&info);
    assert_eq!(
        stored.cut_short,
        Some((utc(2026, 5, 1, 10, 0), Cut::Unrecorded))
    );
    let mut c = cfg("0 * * * *", "UTC");
    c.catch_up = Some(Duration::from_hours(3));
    let start = utc(2026, 5, 1, 11, 0) + secs(40);
    let mut sim = Sim::start(&c, stored, start);
    assert_eq!(sim.plan.unrecorded_crash(), Some(utc(2026, 5, 1, 10, 0)));
    assert_eq!(
        sim.step(),
        vec![Decision::Fire {
            at: start,
            why: RunWhy::Resume(utc(2026, 5, 1, 10, 0)),
            folded: 0
        }]
    );
}

/// A fire queued behind the cycle cut short runs on start, once, within
/// `catch_up`, and does the cut fire's work too; past the window, or with
/// none, it is recorded dropped, saying why.
#[test]
fn a_fire_queued_behind_a_cut_cycle_runs_on_start_or_is_said_dropped() {
    let mut c = cfg("0 * * * *", "UTC");
    c.overlap = Overlap::Queue;
    c.catch_up = Some(Duration::from_hours(3));
    let cut = utc(2026, 5, 1, 10, 0);
    let queued = utc(2026, 5, 1, 11, 0);
    let stored = Stored {
        next_fire: Some(utc(2026, 5, 1, 12, 0)),
        last_fire_at: Some(queued),
        cut_short: Some((cut, Cut::Unrecorded)),
        queued: Some(queued),
    };
    let start = queued + secs(40);
    let mut sim = Sim::start(&c, stored, start);
    sim.instant_cycles = false;
    assert!(sim.plan.is_due(start, false));
    assert_eq!(
        sim.step(),
        vec![Decision::Fire {
            at: queued,
            why: RunWhy::Queued,
            folded: 0
        }]
    );
    // Once: not again when its cycle ends.
    sim.running = false;
    assert!(sim.at(start + secs(5)).is_empty());

    // Paused: skipped, and said so.
    let mut sim = Sim::start(&c, stored, start);
    sim.paused = Some("paused by ops: maintenance".into());
    assert_eq!(
        sim.step(),
        vec![Decision::SkipPaused {
            at: queued,
            reason: "paused by ops: maintenance".into()
        }]
    );

    // Past the window: dropped, and the cut fire is not resumed either.
    let late = utc(2026, 5, 1, 11, 50);
    let mut short = c.clone();
    short.catch_up = Some(Duration::from_mins(30));
    let mut sim = Sim::start(&short, stored, late);
    let decisions = sim.step();
    assert_eq!(
        decisions,
        vec![Decision::Dropped {
            at: queued,
            why: MissedWhy::TooOld
        }]
    );
    assert_eq!(decisions[0].outcome(), Outcome::Missed);
    assert_eq!(
        sim.plan.reason(&decisions[0]).as_deref(),
        Some(
            "queued, but the daemon stopped before running it; older than the catch_up \
             window (30m0s)"
        )
    );
    let mut none = c.clone();
    none.catch_up = None;
    let mut sim = Sim::start(&none, stored, start);
    assert_eq!(
        sim.step(),
        vec![Decision::Dropped {
            at: queued,
            why: MissedWhy::NoWindow
        }]
    );
}

/// A fire skipped or queued behind a cycle that has since crashed does not
/// say the cycle picks up its work, nor that it runs when the cycle ends.
#[test]
fn a_fire_behind_a_dead_cycle_says_so() {
    use crate::model::{BatchInfo, Fire, Owed, Run, RunCounts, RunSeen, RunState, Trigger};
    let said = |outcome: &str, reason: &str, seen: Option<RunSeen>, crashed: bool| {
        let mut info = BatchInfo {
            last_fire: Some(Fire {
                at: 2_000,
                outcome: outcome.into(),
                reason: Some(reason.into()),
                run_id: None,
            }),
            owed: Owed {
                cycle: Some(1_000),
                crashed,
                queued: None,
            },
            last_run: Some(Run {
                id: 7,
                batch: "b".into(),
                trigger: Trigger::Schedule,
                actor: None,
                host: "h".into(),
                pid: 42,
                started_at: 1_010,
                ended_at: None,
                state: RunState::Running,
                stopped: None,
                counts: RunCounts::default(),
                summary: None,
            }),
            ..BatchInfo::default()
        };
        info.runners.last_run = seen;
        let f = fire_seen(&info, &[], 5_000).unwrap();
        describe(&f.outcome, f.reason.as_deref())
    };
    let skip = "overlap = \"skip\": the running cycle picks up the work";
    let gone = Some(RunSeen::Crashed { pid: 42 });
    assert_eq!(
        said("skipped-overlap", skip, gone, false),
        "did not run: the previous cycle was still running — the cycle it left the work to \
         crashed since (runner pid 42 is gone; not yet recorded); a daemon starting resumes \
         that work once within catch_up, else the next fire does"
    );
    let queue = "overlap = \"queue\": it runs as soon as the previous cycle ends";
    assert_eq!(
        said("queued", queue, None, true),
        "queued behind the previous cycle — the cycle it waited for crashed since (its run \
         crashed); a daemon starting runs it once within catch_up, else records it missed"
    );
    // While the cycle runs, the record holds.
    assert_eq!(
        said("skipped-overlap", skip, None, false),
        format!("did not run: the previous cycle was still running — {skip}")
    );
    assert_eq!(
        said(
            "queued",
            queue,
            Some(RunSeen::Stored(RunState::Running)),
            false
        ),
        format!("queued behind the previous cycle — {queue}")
    );
}

/// A live daemon's schedule is what every view gives, by the rule it
/// stored: the file's, edited since, or no longer scheduling the batch,
/// is said to differ; a daemon gone gives the file's again.
#[test]
fn the_schedule_seen_is_the_live_daemons() {
    use super::seen::{Configured, seen};
    use crate::model::{BatchInfo, Daemon, DaemonInfo, DaemonState, FireRule, Holder};
    let now = utc(2026, 5, 1, 10, 0);
    let info = BatchInfo {
        next_fire: Some(utc(2027, 1, 1, 0, 0).timestamp_millis()),
        fire_rule: Some(FireRule {
            schedule: "0 0 1 1 *".into(),
            timezone: "UTC".into(),
        }),
        ..BatchInfo::empty("b")
    };
    let daemon = |state| DaemonInfo {
        daemon: Daemon {
            token: "t".into(),
            holder: Holder {
                host: "h".into(),
                pid: 42,
                pid_start: None,
            },
            started_at: 0,
            beat_at: now.timestamp_millis(),
            stopped_at: None,
            batches: vec!["b".into()],
            stopping_at: None,
        },
        state,
    };
    let edited = Schedule::parse("*/5 * * * * *").unwrap();
    let file = Some(Configured {
        schedule: &edited,
        tz: chrono_tz::UTC,
        catch_up: None,
    });
    let live = [daemon(DaemonState::Live)];
    let at = now.timestamp_millis();
    let s = seen(&info, file, &live, at).unwrap();
    assert_eq!(
        (s.rule.schedule.expr.as_str(), s.config_differs),
        ("0 0 1 1 *", true)
    );
    assert_eq!(
        s.upcoming(2),
        [utc(2027, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0)]
    );
    assert!(s.config_note(file).unwrap().contains("SIGHUP"));
    let s = seen(&info, None, &live, at).unwrap();
    assert!(s.config_differs, "the file no longer schedules it");
    assert!(
        s.config_note(None)
            .unwrap()
            .starts_with("the file no longer schedules")
    );
    // No live daemon: the file's schedule, and nothing differs.
    let gone = [daemon(DaemonState::Crashed)];
    let s = seen(&info, file, &gone, at).unwrap();
    assert_eq!(
        (s.rule.schedule.expr.as_str(), s.config_differs),
        ("*/5 * * * * *", false)
    );
    assert!(seen(&info, None, &gone, at).is_none());
}
