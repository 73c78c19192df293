//! How fast a batch moves and when it will be through: rates over the
//! window that really elapsed, and an ETA only while a run is claiming.
//! Pure (the clock is an argument), so the rules are tested with a fake one.

use super::Millis;

/// A rate over less time than this says nothing yet: it shows as `—`.
pub const MIN_WINDOW_MS: Millis = 10_000;
const MINUTE_MS: Millis = 60_000;
const HOUR_MS: Millis = 60 * MINUTE_MS;

/// What a batch is doing, as far as its ETA is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// A live run, started then, is claiming; it has completed `done`
    /// items (done, empty or failed) so far.
    Running { since: Millis, done: i64 },
    /// Paused (by a person or the emergency-stop file): nothing is claimed.
    Paused,
    /// A live run waits out a rate limit's retry-after until then.
    Held { until: Millis },
    /// A live run, started then, was asked to stop (a signal, `nightshift
    /// stop`): it finishes what is in flight and claims nothing more.
    Stopping { since: Millis, done: i64 },
    /// No live run (none started, it ended, or it crashed).
    Idle,
}

/// When the items to do will be through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Eta {
    /// In this many milliseconds, at the last minute's rate.
    In(Millis),
    /// A run is claiming, but its rate is not known yet (its first
    /// seconds) or nothing completed in the window.
    Unknown,
    Paused,
    Held {
        until: Millis,
    },
    /// The live run stops: what is left waits for another.
    Stopping,
    /// No run is live: nothing will move until one starts.
    NotRunning,
    /// Nothing is pending or in flight.
    NothingLeft,
}

/// Completions (done or failed) per minute, and the ETA.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pace {
    /// Over the last minute, or since the live run started when that is
    /// later; `None` while that window is under [`MIN_WINDOW_MS`].
    pub last_minute: Option<f64>,
    /// How long `last_minute` is over (a minute, or less for a young run
    /// or batch).
    pub minute_window: Millis,
    /// Over the last hour, or since the batch was created when later.
    pub last_hour: Option<f64>,
    /// How long `last_hour` is over (an hour, or less for a young batch).
    pub hour_window: Millis,
    pub eta: Eta,
}

impl Pace {
    /// `last minute`, or `so far` for a younger run or batch: its rate is
    /// per minute, measured over all of its life yet (with no figure yet,
    /// the minute it waits for). Not `last 20s`: that label ticked every
    /// second of a young batch's first minute, and an idle dashboard with
    /// it, where nothing changed.
    pub fn minute_label(&self) -> &'static str {
        if self.minute_window >= MINUTE_MS || self.last_minute.is_none() {
            "last minute"
        } else {
            "so far"
        }
    }

    /// `last hour`, or `last 12 min` for a younger batch; `None` for a
    /// batch younger than a minute, whose hour figure is the minute's again.
    pub fn hour_label(&self) -> Option<String> {
        if self.hour_window >= HOUR_MS {
            Some("last hour".into())
        } else if self.hour_window <= MINUTE_MS {
            None
        } else {
            let minutes = (self.hour_window + MINUTE_MS - 1) / MINUTE_MS;
            Some(format!("last {minutes} min"))
        }
    }
}

/// `minutes`: completions per minute as the store reads them, oldest first,
/// the last one the minute of `now`; none from before the batch was
/// `created`. `to_do`: items pending or in flight.
pub fn pace(
    minutes: &[(i64, i64)],
    now: Millis,
    created: Millis,
    activity: Activity,
    to_do: i64,
) -> Pace {
    let (run_start, run_done) = match activity {
        Activity::Running { since, done } | Activity::Stopping { since, done } => {
            (since, Some(done))
        }
        _ => (Millis::MIN, None),
    };
    let minute_from = (now - MINUTE_MS).max(created).max(run_start);
    let hour_from = (now - HOUR_MS).max(created);
    // Nothing completes before the batch existed or, in the minute the
    // live run started, before it did.
    let quiet_until = created.max(run_start);
    let last_minute = match run_done {
        // A run younger than a minute is measured by its own count: the
        // minute it started holds the previous run's completions too.
        Some(done) if minute_from == run_start && run_start > created => {
            let window = now - run_start;
            (window >= MIN_WINDOW_MS).then(|| done as f64 * MINUTE_MS as f64 / window as f64)
        }
        _ => per_minute(minutes, now, minute_from, quiet_until),
    };
    let last_hour = per_minute(minutes, now, hour_from, quiet_until);
    let eta = if to_do <= 0 {
        Eta::NothingLeft
    } else {
        match activity {
            Activity::Paused => Eta::Paused,
            Activity::Idle => Eta::NotRunning,
            Activity::Held { until } => Eta::Held { until },
            Activity::Stopping { .. } => Eta::Stopping,
            Activity::Running { .. } => match last_minute {
                Some(rate) if rate > 0.0 => Eta::In((to_do as f64 / rate * 60_000.0) as Millis),
                _ => Eta::Unknown,
            },
        }
    };
    Pace {
        last_minute,
        minute_window: (now - minute_from).max(0),
        last_hour,
        hour_window: (now - hour_from).max(0),
        eta,
    }
}

/// Completions per minute from `from` to `now`, or `None` for a window
/// under [`MIN_WINDOW_MS`]. A minute's completions are taken as spread
/// evenly over the part of it that has passed and lies after
/// `quiet_until` (all of it, for a minute wholly before).
fn per_minute(
    minutes: &[(i64, i64)],
    now: Millis,
    from: Millis,
    quiet_until: Millis,
) -> Option<f64> {
    let window = now - from;
    if window < MIN_WINDOW_MS {
        return None;
    }
    let current = now.div_euclid(MINUTE_MS);
    let n = minutes.len() as i64;
    let mut completions = 0.0;
    for (i, (done, failed)) in minutes.iter().enumerate() {
        let bucket = (current - (n - 1 - i as i64)) * MINUTE_MS;
        let end = (bucket + MINUTE_MS).min(now);
        let start = if quiet_until < end {
            bucket.max(quiet_until)
        } else {
            bucket
        };
        let overlap = (end - start.max(from)).max(0);
        if end > start && overlap > 0 {
            completions += (done + failed) as f64 * overlap as f64 / (end - start) as f64;
        }
    }
    Some(completions * MINUTE_MS as f64 / window as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Millis = 1_767_225_600_000; // 2026-01-01T00:00:00Z, a minute's start

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    #[test]
    fn a_run_three_seconds_old_has_no_rate_yet() {
        // 3 items done 3 s into a run of a new batch (the demo): not
        // "3 a minute" (and an ETA of 13 minutes), nor 60 an hour.
        let now = T0 + 33_000;
        let since = now - 3_000;
        let p = pace(
            &[(3, 0)],
            now,
            since,
            Activity::Running { since, done: 3 },
            40,
        );
        assert_eq!((p.last_minute, p.last_hour), (None, None));
        assert_eq!(p.eta, Eta::Unknown);
    }

    #[test]
    fn a_young_run_is_measured_over_its_own_age() {
        // 20 done in the 20 s the run has lived (the batch is older):
        // 60/min, not 20/min, and the ETA follows.
        let now = T0 + 50_000;
        let since = now - 20_000;
        let p = pace(
            &[(0, 0), (20, 0)],
            now,
            T0 - 60_000,
            Activity::Running { since, done: 20 },
            30,
        );
        assert!(close(p.last_minute, 60.0), "{p:?}");
        assert_eq!(p.minute_label(), "so far");
        assert_eq!(p.eta, Eta::In(30_000));
        // The hour is over the batch's age: 110 s.
        assert!(close(p.last_hour, 20.0 * 60.0 / 110.0), "{p:?}");
        assert_eq!(p.hour_label().as_deref(), Some("last 2 min"));
    }

    /// A run started again in the minute the last one did work: that
    /// minute's completions are the last run's, not this one's (it said
    /// `6.0/min so far · ETA 40s` for a run that had done nothing).
    #[test]
    fn a_new_run_is_not_credited_with_the_last_run_s_minute() {
        let now = T0 + 40_000;
        let since = now - 19_000;
        let p = pace(
            &[(0, 0), (2, 0)],
            now,
            T0 - HOUR_MS,
            Activity::Running { since, done: 0 },
            4,
        );
        assert!(close(p.last_minute, 0.0), "{p:?}");
        assert_eq!(p.eta, Eta::Unknown);
    }

    #[test]
    fn the_last_minute_slides_over_two_buckets() {
        // 15 s into the current minute: all 12 of it, three quarters of
        // the 60 before.
        let mut m = vec![(0, 0); 150];
        m[148] = (60, 0);
        m[149] = (10, 2);
        let now = T0 + 15_000;
        let p = pace(&m, now, T0 - 200 * MINUTE_MS, Activity::Idle, 5);
        assert!(close(p.last_minute, 57.0), "{p:?}");
        assert!(close(p.last_hour, 72.0 / 60.0), "{p:?}");
        assert_eq!(p.hour_label().as_deref(), Some("last hour"));
        assert_eq!(p.eta, Eta::NotRunning);
    }

    #[test]
    fn no_eta_unless_a_run_claims() {
        let m = [(30, 0)];
        let now = T0 + 40_000;
        let eta = |a| pace(&m, now, T0, a, 10).eta;
        assert_eq!(eta(Activity::Idle), Eta::NotRunning, "after a run");
        assert_eq!(eta(Activity::Paused), Eta::Paused);
        // Asked to stop, its run takes nothing more: no time to finish.
        assert_eq!(
            eta(Activity::Stopping {
                since: T0,
                done: 30
            }),
            Eta::Stopping
        );
        assert_eq!(
            eta(Activity::Held { until: now + 5_000 }),
            Eta::Held { until: now + 5_000 }
        );
        assert_eq!(
            eta(Activity::Running {
                since: T0,
                done: 30
            }),
            Eta::In(13_333)
        );
        assert_eq!(
            pace(
                &m,
                now,
                T0,
                Activity::Running {
                    since: T0,
                    done: 30
                },
                0
            )
            .eta,
            Eta::NothingLeft
        );
        // Running, but nothing completed in its minute: no guess.
        assert_eq!(
            pace(
                &[(0, 0)],
                now,
                T0,
                Activity::Running { since: T0, done: 0 },
                10
            )
            .eta,
            Eta::Unknown
        );
    }

    #[test]
    fn an_empty_batch_and_a_clock_behind_say_nothing() {
        assert_eq!(per_minute(&[], T0, T0 - MINUTE_MS, 0), Some(0.0));
        assert_eq!(per_minute(&[(5, 0)], T0, T0 + 1_000, 0), None);
    }
}
