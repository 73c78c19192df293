//! Cron expressions matched on the wall clock of a time zone: [`Schedule`].

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use thiserror::Error;

/// A cron `schedule`: 5 fields (minute hour day-of-month month day-of-week),
/// or 6 with a leading seconds field; `@daily`-style nicknames also work.
///
/// # Fire times and daylight saving time
///
/// The expression is matched against the wall clock of the batch's time zone,
/// and every matching wall-clock time fires exactly once:
///
/// - **Gap** (spring forward; in America/New_York on 2026-03-08 the clock
///   jumps from 02:00 EST to 03:00 EDT): a time inside the gap, such as the
///   02:30 of `30 2 * * *`, fires once at the first instant after the gap
///   (03:00 EDT). Several matches inside one gap, and a match at the gap's
///   end, collapse into that one fire. No scheduled day is lost.
/// - **Fold** (fall back; on 2026-11-01 01:00–01:59 happens twice): a time in
///   the repeated hour, such as the 01:30 of `30 1 * * *`, fires only on its
///   first occurrence (01:30 EDT), never again an hour later.
///
/// The same rule holds for schedules that fire several times an hour, so an
/// every-10-minutes schedule pauses for the repeated hour on fall-back night.
/// A batch that must run at strictly regular intervals should use
/// `timezone = "UTC"`, which has no DST.
///
/// croner is used only to match wall-clock (naive) times; resolving them to
/// instants is done here, because croner's own zoned search treats
/// multi-value schedules such as `30 2,14 * * *` as intervals and drops the
/// 02:30 fire on spring-forward day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub expr: String,
    cron: Cron,
}

/// A cron expression croner refuses, or one that never fires.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid cron expression {expr:?}: {reason}")]
pub struct ScheduleError {
    pub expr: String,
    pub reason: String,
}

/// Bounds the walk over wall-clock matches in one search. Matches are only
/// skipped inside a fold or gap (at most a few hours), so even a per-second
/// schedule stays far below this.
const MAX_SCHEDULE_STEPS: usize = 100_000;

impl Schedule {
    /// Parses and checks a cron expression, including that it can fire at
    /// all (`0 0 31 2 *` cannot).
    ///
    /// # Errors
    ///
    /// Wrong field count, a field croner refuses, or a date that never exists.
    pub fn parse(expr: &str) -> Result<Schedule, ScheduleError> {
        let fail = |reason: String| ScheduleError {
            expr: expr.to_string(),
            reason,
        };
        let trimmed = expr.trim();
        let fields = trimmed.split_whitespace().count();
        const NICKNAMES: &[&str] = &[
            "@yearly",
            "@annually",
            "@monthly",
            "@weekly",
            "@daily",
            "@hourly",
        ];
        if trimmed.starts_with('@') && !NICKNAMES.contains(&trimmed.to_lowercase().as_str()) {
            return Err(fail(format!(
                "unknown nickname; use one of {}",
                NICKNAMES.join(", ")
            )));
        }
        if !trimmed.starts_with('@') && fields != 5 && fields != 6 {
            return Err(fail(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week) \
                 or 6 with leading seconds, found {fields}"
            )));
        }
        let cron = parser().parse(trimmed).map_err(|e| {
            let reason = cron_reason(e);
            fail(match faulty_field(trimmed) {
                Some(field) => format!("{field}: {}", reason.to_lowercase()),
                None => reason,
            })
        })?;
        // Any fixed start works: a pattern that matches some real date does
        // so within croner's search limit of it.
        let start = NaiveDate::from_ymd_opt(2000, 1, 1)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .ok_or_else(|| fail("internal date error".to_string()))?;
        if cron.find_next_occurrence(&start, false).is_err() {
            return Err(fail("it never fires (no date matches)".to_string()));
        }
        Ok(Schedule {
            expr: trimmed.to_string(),
            cron,
        })
    }

    /// The first fire time strictly after `after`, computed on the wall clock
    /// of `tz` with the DST rule described on [`Schedule`]. `None` only at the
    /// far end of the calendar.
    #[must_use]
    pub fn next_after(&self, after: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
        let mut cursor = after.with_timezone(&tz).naive_local();
        for _ in 0..MAX_SCHEDULE_STEPS {
            let wall = self.cron.find_next_occurrence(&cursor, false).ok()?;
            // Fire instants never decrease as wall-clock matches increase, so
            // the first one past `after` is the answer.
            if let Some(fire) = fire_instant(wall, tz)
                && fire > after
            {
                return Some(fire);
            }
            cursor = wall;
        }
        None
    }

    /// The next `n` fire times after `after` (fewer only at the calendar's end).
    #[must_use]
    pub fn upcoming(&self, after: DateTime<Utc>, tz: Tz, n: usize) -> Vec<DateTime<Utc>> {
        let mut out = Vec::with_capacity(n.min(1024));
        let mut at = after;
        while out.len() < n {
            let Some(next) = self.next_after(at, tz) else {
                break;
            };
            out.push(next);
            at = next;
        }
        out
    }
}

impl FromStr for Schedule {
    type Err = ScheduleError;

    fn from_str(s: &str) -> Result<Schedule, ScheduleError> {
        Schedule::parse(s)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.expr)
    }
}

/// croner's message without its type prefix ("Component error: ").
fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
}

/// The field of a refused expression croner's message does not name
/// (`Number out of bounds`): the first that is refused alone, among
/// wildcards, with its name and the values it takes.
fn faulty_field(expr: &str) -> Option<String> {
    const FIELDS: [(&str, &str); 6] = [
        ("second", "0-59"),
        ("minute", "0-59"),
        ("hour", "0-23"),
        ("day-of-month", "1-31"),
        ("month", "1-12 or JAN-DEC"),
        ("day-of-week", "0-7 or SUN-SAT"),
    ];
    let parts: Vec<&str> = expr.split_whitespace().collect();
    let names = &FIELDS[FIELDS.len() - parts.len()..];
    let parser = parser();
    parts.iter().enumerate().find_map(|(i, part)| {
        let mut alone = vec!["*"; parts.len()];
        alone[i] = part;
        parser.parse(&alone.join(" ")).is_err().then(|| {
            let (name, values) = names[i];
            format!("the {name} field {part:?} (takes {values})")
        })
    })
}

fn cron_reason(e: croner::errors::CronError) -> String {
    use croner::errors::CronError;
    match e {
        CronError::ComponentError(m)
        | CronError::InvalidPattern(m)
        | CronError::IllegalCharacters(m) => m.trim_end_matches('.').to_string(),
        CronError::EmptyPattern => "it is empty".to_string(),
        other => other.to_string(),
    }
}

/// The instant at which a wall-clock match fires: itself, the earlier of two
/// in a fold, or the end of the gap it falls in.
fn fire_instant(wall: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    match tz.from_local_datetime(&wall) {
        LocalResult::Single(t) => Some(t.with_timezone(&Utc)),
        LocalResult::Ambiguous(earlier, _) => Some(earlier.with_timezone(&Utc)),
        LocalResult::None => gap_end(wall, tz),
    }
}

/// The first instant whose wall clock in `tz` reads `wall` or later, for a
/// `wall` inside a DST gap: the moment the clock jumped over it.
fn gap_end(wall: NaiveDateTime, tz: Tz) -> Option<DateTime<Utc>> {
    // UTC offsets stay within ±26h, so the answer lies in this window; a
    // binary search on "wall clock has reached `wall`" finds it to the second.
    const WINDOW_SECS: i64 = 27 * 3600;
    let reached = |secs: i64| {
        DateTime::from_timestamp(secs, 0).is_none_or(|t| t.with_timezone(&tz).naive_local() >= wall)
    };
    let centre = wall.and_utc().timestamp();
    let mut lo = centre.checked_sub(WINDOW_SECS)?;
    let mut hi = centre.checked_add(WINDOW_SECS)?;
    if reached(lo) || !reached(hi) {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reached(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    DateTime::from_timestamp(hi, 0)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .expect("valid test time")
    }

    fn tz(name: &str) -> Tz {
        name.parse().expect("known zone")
    }

    fn schedule(expr: &str) -> Schedule {
        Schedule::parse(expr).expect("valid test schedule")
    }

    #[test]
    fn spring_forward_fires_once_when_the_clock_jumps() {
        let ny = tz("America/New_York");
        // 2026-03-08: 02:00 EST jumps to 03:00 EDT, so 02:30 does not exist.
        let fires = schedule("30 2 * * *").upcoming(utc(2026, 3, 7, 0, 0), ny, 3);
        assert_eq!(
            fires,
            vec![
                utc(2026, 3, 7, 7, 30), // 02:30 EST
                utc(2026, 3, 8, 7, 0),  // 03:00 EDT, the first instant after the gap
                utc(2026, 3, 9, 6, 30), // 02:30 EDT
            ]
        );
        // Several times of one gap collapse into that single fire, and other
        // hours of the day are unaffected.
        let fires = schedule("0,30 2 * * *").upcoming(utc(2026, 3, 8, 0, 0), ny, 2);
        assert_eq!(fires, vec![utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 0)]);
        let fires = schedule("30 2,14 * * *").upcoming(utc(2026, 3, 8, 0, 0), ny, 2);
        assert_eq!(fires, vec![utc(2026, 3, 8, 7, 0), utc(2026, 3, 8, 18, 30)]);
        // A date-specific job in the gap is not lost (croner's own zoned
        // search gets this one wrong), and the next fire is a year later.
        let fires = schedule("30 2 8 3 *").upcoming(utc(2026, 1, 1, 0, 0), ny, 2);
        assert_eq!(fires, vec![utc(2026, 3, 8, 7, 0), utc(2027, 3, 8, 7, 30)]);
    }

    #[test]
    fn fall_back_fires_the_first_occurrence_only() {
        let ny = tz("America/New_York");
        let daily = schedule("30 1 * * *");
        // 2026-11-01: 01:00-01:59 happens twice (EDT, then EST).
        let fires = daily.upcoming(utc(2026, 10, 31, 12, 0), ny, 2);
        assert_eq!(
            fires,
            vec![utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
        );
        // Asked from inside the repeated hour, the second 01:30 EST is skipped.
        assert_eq!(
            daily.next_after(utc(2026, 11, 1, 6, 10), ny),
            Some(utc(2026, 11, 2, 6, 30))
        );
        assert_eq!(
            daily.next_after(utc(2026, 11, 1, 5, 30), ny),
            Some(utc(2026, 11, 2, 6, 30))
        );
        // Sub-hourly schedules run through the first pass and pause in the second.
        let fires = schedule("*/30 * * * *").upcoming(utc(2026, 11, 1, 4, 45), ny, 4);
        assert_eq!(
            fires,
            vec![
                utc(2026, 11, 1, 5, 0),
                utc(2026, 11, 1, 5, 30),
                utc(2026, 11, 1, 7, 0),
                utc(2026, 11, 1, 7, 30)
            ]
        );
    }

    #[test]
    fn daily_times_fire_once_per_local_day_all_year() {
        // Every time of day around both 2026 transitions, in two zones.
        for zone in ["America/New_York", "Europe/Berlin"] {
            let zone = tz(zone);
            for (hour, minute) in [
                (0, 0),
                (1, 0),
                (1, 30),
                (2, 0),
                (2, 30),
                (2, 59),
                (3, 0),
                (23, 59),
            ] {
                let fires = schedule(&format!("{minute} {hour} * * *")).upcoming(
                    utc(2025, 12, 31, 12, 0),
                    zone,
                    366,
                );
                let days: Vec<_> = fires
                    .iter()
                    .map(|f| f.with_timezone(&zone).date_naive())
                    .collect();
                let last = NaiveDate::from_ymd_opt(2026, 12, 30).expect("valid date");
                assert!(days.last().is_some_and(|d| *d >= last), "{hour}:{minute}");
                for pair in days.windows(2) {
                    assert_eq!(
                        pair[1] - pair[0],
                        chrono::TimeDelta::days(1),
                        "{hour}:{minute} at {}",
                        pair[0]
                    );
                }
            }
        }
    }

    #[test]
    fn tokyo_has_no_dst_and_seconds_are_honoured() {
        let tokyo = tz("Asia/Tokyo");
        let fires = schedule("0 2 * * *").upcoming(utc(2026, 3, 1, 0, 0), tokyo, 2);
        assert_eq!(fires, vec![utc(2026, 3, 1, 17, 0), utc(2026, 3, 2, 17, 0)]);
        let fire = schedule("15 0 2 * * *").next_after(utc(2026, 3, 1, 0, 0), Tz::UTC);
        assert_eq!(
            fire,
            Some(utc(2026, 3, 1, 2, 0) + chrono::TimeDelta::seconds(15))
        );
        // Strictly after: a fire time itself is not returned again.
        let fire = schedule("0 2 * * *").next_after(utc(2026, 3, 1, 17, 0), tokyo);
        assert_eq!(fire, Some(utc(2026, 3, 2, 17, 0)));
        assert!(
            schedule("0 2 * * *")
                .upcoming(utc(2026, 3, 1, 0, 0), tokyo, 0)
                .is_empty()
        );
    }

    proptest! {
        #[test]
        fn schedules_never_panic(expr in "[0-9*/,LW#?+@a-zA-Z -]{0,30}") {
            let _ = Schedule::parse(&expr);
        }

        /// Cron-shaped input: parsing never panics, and a schedule that
        /// parses yields fire times strictly after the start, in order.
        #[test]
        fn fire_times_are_strictly_increasing(
            fields in proptest::collection::vec(
                prop_oneof![
                    Just("*".to_string()),
                    (1u32..40).prop_map(|n| format!("*/{n}")),
                    (0u32..62).prop_map(|n| n.to_string()),
                    (0u32..30, 0u32..30).prop_map(|(a, b)| format!("{a}-{b}")),
                    (0u32..30, 0u32..30).prop_map(|(a, b)| format!("{a},{b}")),
                    Just("L".to_string()),
                    (0u32..8, 1u32..6).prop_map(|(d, n)| format!("{d}#{n}")),
                ],
                4..8,
            ),
            start in 0i64..4_000_000_000,
            zone in proptest::sample::select(vec!["America/New_York", "Asia/Tokyo", "Australia/Lord_Howe", "UTC"]),
        ) {
            if let Ok(s) = Schedule::parse(&fields.join(" "))
                && let Some(after) = DateTime::from_timestamp(start, 0)
            {
                let fires = s.upcoming(after, tz(zone), 3);
                let mut previous = after;
                for fire in fires {
                    prop_assert!(fire > previous);
                    previous = fire;
                }
            }
        }
    }
}
