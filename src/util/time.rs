//! The clock. Everything stored is UTC milliseconds; display converts.
//!
//! Read only here: `chrono::Utc::now` panics when the system clock reads
//! before 1970, so the clock is read through `SystemTime`, checked once
//! when a command starts ([`check`]), and never panics after (a clock
//! set back under a long run gives times before 1970, which are valid).

use std::time::{SystemTime, UNIX_EPOCH};

use chrono::{DateTime, SecondsFormat, TimeZone, Timelike, Utc};

use crate::model::Millis;

/// The system clock reads before 1970: nothing nightshift stores (leases,
/// locks, schedules, dead letters) can be trusted with it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the system clock reads {at}, before 1970: nightshift cannot time leases, locks or \
     schedules by it; set the clock (e.g. enable NTP) and try again"
)]
pub struct ClockError {
    at: String,
}

/// The runtime's instant at the wall-clock time `at` (now if it has
/// passed): what a wait until a stored time sleeps until.
pub fn instant_at(at: Millis) -> tokio::time::Instant {
    let left = at.saturating_sub(now_ms()).max(0).unsigned_abs();
    tokio::time::Instant::now() + std::time::Duration::from_millis(left)
}

/// Milliseconds since 1970 (negative before).
pub fn now_ms() -> Millis {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX),
        Err(before) => {
            Millis::try_from(before.duration().as_millis()).map_or(Millis::MIN, |ms| -ms)
        }
    }
}

/// Milliseconds on a clock nobody sets: since boot, suspended time
/// included (Linux `CLOCK_BOOTTIME`; elsewhere since this process first
/// asked). Beside [`now_ms`] it tells a step of the system clock (NTP
/// correcting it, `date -s`) from time passing.
pub fn steady_ms() -> Millis {
    #[cfg(target_os = "linux")]
    if let Ok(t) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME) {
        return t.tv_sec() * 1000 + t.tv_nsec() / 1_000_000;
    }
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    Millis::try_from(
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_millis(),
    )
    .unwrap_or(Millis::MAX)
}

/// The current time as a date.
pub fn now() -> DateTime<Utc> {
    to_datetime(now_ms())
}

/// Refuses a clock before 1970 (every command checks it first).
pub fn check() -> Result<(), ClockError> {
    let now = now_ms();
    if now >= 0 {
        return Ok(());
    }
    let at = Utc.timestamp_millis_opt(now).single().map_or_else(
        || format!("{now} ms"),
        |t| t.to_rfc3339_opts(SecondsFormat::Secs, true),
    );
    Err(ClockError { at })
}

pub fn to_datetime(ms: Millis) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .unwrap_or(DateTime::<Utc>::UNIX_EPOCH)
}

/// A moment given on the command line (`--not-before`): a time in RFC
/// 3339, or a duration from when the command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    At(Millis),
    In(std::time::Duration),
}

impl When {
    /// The moment, for a command that runs at `now`.
    #[must_use]
    pub fn at(self, now: Millis) -> Millis {
        match self {
            When::At(t) => t,
            When::In(d) => {
                now.saturating_add(Millis::try_from(d.as_millis()).unwrap_or(Millis::MAX))
            }
        }
    }
}

/// The furthest a moment given as a duration from now may be: a time the
/// views can still write (RFC 3339 has four-digit years), with room to
/// spare.
const FURTHEST: std::time::Duration = std::time::Duration::from_secs(100 * 366 * 86_400);

/// Parses `2026-12-02T07:00:00+09:00` (RFC 3339, with its offset) or a
/// duration from now (`30m`, `2h`, `1d`), at most a hundred years.
pub fn parse_when(s: &str) -> Result<When, String> {
    let text = s.trim();
    match crate::duration::parse_duration(text) {
        Ok(d) if d > FURTHEST => {
            return Err(format!(
                "{s:?} is more than a hundred years from now: give a nearer time"
            ));
        }
        Ok(d) => return Ok(When::In(d)),
        // Every RFC 3339 time has a ':'; without one, the duration's own
        // error says what is wrong with it.
        Err(e) if !text.contains(':') && text.starts_with(|c: char| c.is_ascii_digit()) => {
            return Err(format!(
                "{e} (or give an RFC 3339 time: 2026-12-02T07:00:00Z)"
            ));
        }
        Err(_) => {}
    }
    match DateTime::parse_from_rfc3339(text) {
        Ok(t) => Ok(When::At(t.timestamp_millis())),
        Err(e) => Err(format!(
            "{s:?} is neither an RFC 3339 time (2026-12-02T07:00:00Z, or with an offset \
             such as +09:00) nor a duration from now (30m, 2h, 1d): {e}"
        )),
    }
}

/// RFC 3339 in UTC with a `Z`, second precision: what `jq` and humans read.
pub fn rfc3339(ms: Millis) -> String {
    to_datetime(ms).to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A time as JSON: [`rfc3339`] text, never the stored milliseconds, so
/// every `--json` view agrees with `status` (and `jq`'s `fromdateiso8601`
/// reads it). For `#[serde(serialize_with = "crate::util::time::json")]`.
pub fn json<S: serde::Serializer>(ms: &Millis, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&rfc3339(*ms))
}

/// [`json`] for a time that may be absent: `null` stays `null`.
pub fn json_opt<S: serde::Serializer>(ms: &Option<Millis>, s: S) -> Result<S::Ok, S::Error> {
    match ms {
        Some(ms) => json(ms, s),
        None => s.serialize_none(),
    }
}

/// A span of two times as JSON gives it: `[first, last]` in RFC 3339.
pub fn span_rfc3339(span: Option<(Millis, Millis)>) -> Option<[String; 2]> {
    span.map(|(first, last)| [rfc3339(first), rfc3339(last)])
}

/// [`span_rfc3339`] as a serde helper: `null` stays `null`.
pub fn json_span_opt<S: serde::Serializer>(
    span: &Option<(Millis, Millis)>,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&span_rfc3339(*span), s)
}

/// `07:16Z` (UTC) for a time within a day of `now`, else
/// `2026-01-02 07:16Z`: a moment a person waits for, at a glance.
pub fn hhmm(ms: Millis, now: Millis) -> String {
    let t = to_datetime(ms);
    if (ms - now).abs() < 86_400_000 {
        t.format("%H:%MZ").to_string()
    } else {
        t.format("%Y-%m-%d %H:%MZ").to_string()
    }
}

/// How a moment's time of day is written: `%H:%M` on the minute, else
/// `%H:%M:%S`. A fire time (or a window's end) said as it is: to the
/// second only when it has seconds (a six-field schedule), and never a
/// minute it is not at. `status`, `show` and the dashboard say every
/// next fire by it.
#[must_use]
pub fn clock_format(second: u32) -> &'static str {
    if second == 0 { "%H:%M" } else { "%H:%M:%S" }
}

/// `07:16Z`, or `07:16:05Z` for a moment with seconds ([`clock_format`]),
/// with the date when it is not within a day of `now`:
/// `2026-01-02 07:16Z`.
#[must_use]
pub fn moment(ms: Millis, now: Millis) -> String {
    let t = to_datetime(ms);
    let clock = clock_format(t.second());
    if (ms - now).abs() < 86_400_000 {
        t.format(&format!("{clock}Z")).to_string()
    } else {
        t.format(&format!("%Y-%m-%d {clock}Z")).to_string()
    }
}

/// `15:20:05Z`: a time of day in UTC, with the date when it is not on
/// `now`'s (UTC) day: `2026-06-03 15:20:05Z`.
pub fn utc_clock(ms: Millis, now: Millis) -> String {
    let t = to_datetime(ms);
    if ms.div_euclid(86_400_000) == now.div_euclid(86_400_000) {
        t.format("%H:%M:%SZ").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%SZ").to_string()
    }
}

/// `3m ago`, `in 2h5m`: relative to `now`, two units at most. One rule
/// for every view: a time to come is rounded up at the unit shown, a time
/// gone by down, so neither is ever said as nearer than it is: `in 0s` is
/// never shown before the moment (it was, for up to a second), nor `in
/// 2h5m` while 2h5m30s are left. The moment itself is `0s ago`.
pub fn relative(ms: Millis, now: Millis) -> String {
    let delta = ms - now;
    if delta > 0 {
        format!("in {}", compact(up_to_shown(delta.unsigned_abs())))
    } else {
        format!("{} ago", compact(delta.unsigned_abs() / 1000))
    }
}

/// `ms` milliseconds in whole seconds, rounded up to the last unit
/// [`compact`] shows of them (a second, a minute past an hour, an hour
/// past a day).
fn up_to_shown(ms: u64) -> u64 {
    let secs = ms.div_ceil(1000);
    let unit = match secs {
        s if s >= 86_400 => 3600,
        s if s >= 3600 => 60,
        _ => 1,
    };
    secs.div_ceil(unit) * unit
}

/// [`relative`] in whole minutes past the first, for a view that redraws
/// only when what it shows changes (the dashboard): the age `relative`
/// gives at the middle of the minute `now` is in, without its seconds
/// (`2m ago` where it says `2m53s ago`). Every such age then steps at the
/// same instant, the turn of the minute, and none is more than half a
/// minute early or late in reaching a minute. (Counted from the minute's
/// start and cut to whole minutes again, `2m53s` was shown as `1m`.) A
/// time to come is rounded up instead, as by `relative`: `in 5m` while
/// more than 4m and at most 5m are left.
pub fn relative_by_minute(ms: Millis, now: Millis) -> String {
    const MINUTE: Millis = 60_000;
    let delta = ms - now;
    // A time to come past its last minute's seconds: whole minutes,
    // rounded up as `relative` rounds (a view drawn again later then
    // still says no less than is left).
    if delta > MINUTE - 1000 {
        let minutes = delta.unsigned_abs().div_ceil(60_000);
        return format!("in {}", units(up_to_shown(minutes * 60_000), false));
    }
    if delta.abs() < MINUTE {
        return relative(ms, now);
    }
    let middle = now.div_euclid(MINUTE) * MINUTE + MINUTE / 2;
    let minutes = ((ms - middle).unsigned_abs() / 60_000).max(1);
    format!("{} ago", units(minutes * 60, false))
}

/// Seconds as `2m14s`, `3h12m`, `1d4h`: the two most significant units.
pub fn compact(secs: u64) -> String {
    units(secs, true)
}

/// The two most significant units of `secs`, down to seconds, or (not
/// `seconds`) to minutes.
fn units(secs: u64, seconds: bool) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if !seconds {
        format!("{m}m")
    } else if m > 0 {
        format!("{m}m{s}s")
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(compact(134), "2m14s");
        assert_eq!(compact(3 * 3600 + 12 * 60 + 5), "3h12m");
        assert_eq!(relative(10_000, 0), "in 10s");
        assert_eq!(relative(0, 90_000), "1m30s ago");
        let t = 1_767_251_760_000; // 2026-01-01T07:16:00Z
        assert_eq!(hhmm(t, t - 3_600_000), "07:16Z");
        assert_eq!(hhmm(t, t - 2 * 86_400_000), "2026-01-01 07:16Z");
        assert_eq!(utc_clock(55_205_000, 1000), "15:20:05Z");
        // A moment is said as it is: on the minute, or to the second.
        assert_eq!(moment(t, t - 3_600_000), "07:16Z");
        assert_eq!(moment(t + 5_000, t), "07:16:05Z");
        assert_eq!(
            moment(t + 50_000, t - 2 * 86_400_000),
            "2026-01-01 07:16:50Z"
        );
        assert_eq!(utc_clock(86_400_000 + 5000, 1000), "1970-01-02 00:00:05Z");
    }

    /// One rule for relative times: a time to come rounds up at the unit
    /// shown, a time gone by down. `in 0s` was shown for the second before
    /// the moment, `in 2h5m` with 2h5m59s left.
    #[test]
    fn a_time_to_come_is_never_said_nearer_than_it_is() {
        let now = 1_767_251_760_000; // 2026-01-01T07:16:00Z
        for left in [1, 400, 999] {
            assert_eq!(relative(now + left, now), "in 1s", "{left} ms left");
        }
        assert_eq!(relative(now, now), "0s ago");
        assert_eq!(relative(now - 999, now), "0s ago");
        assert_eq!(relative(now - 1_000, now), "1s ago");
        assert_eq!(relative(now + 239_400, now), "in 4m0s");
        assert_eq!(relative(now - 239_400, now), "3m59s ago");
        assert_eq!(relative(now + 59_999, now), "in 1m0s");
        assert_eq!(
            relative(now + (2 * 3600 + 5 * 60 + 59) * 1000, now),
            "in 2h6m"
        );
        assert_eq!(relative(now + (2 * 3600 + 5 * 60) * 1000, now), "in 2h5m");
        assert_eq!(
            relative(now - (2 * 3600 + 5 * 60 + 59) * 1000, now),
            "2h5m ago"
        );
        assert_eq!(relative(now + 3_599_001, now), "in 1h0m");
        assert_eq!(relative(now + 86_400_000 + 1, now), "in 1d1h");
        // Every moment of the second before, and of the hour before: never
        // `in 0s`, and never less than is left.
        for left in (1..3_700_000).step_by(997) {
            let shown = relative(now + left, now);
            assert_ne!(shown, "in 0s");
            let (h, m, s) = parse_units(shown.trim_start_matches("in "));
            assert!(
                (h * 3600 + m * 60 + s) * 1000 >= left,
                "{shown} for {left} ms"
            );
        }
    }

    /// `1h2m`, `3m4s`, `5s` as hours, minutes, seconds.
    fn parse_units(text: &str) -> (i64, i64, i64) {
        let (mut h, mut m, mut s, mut n) = (0, 0, 0, 0);
        for c in text.chars() {
            match c {
                'h' => (h, n) = (n, 0),
                'm' => (m, n) = (n, 0),
                's' => (s, n) = (n, 0),
                d => n = n * 10 + i64::from(d.to_digit(10).unwrap()),
            }
        }
        (h, m, s)
    }

    /// Ages past a minute are whole minutes that step together at the
    /// turn of the minute: as `relative` says them at the middle of the
    /// minute, seconds left out.
    #[test]
    fn ages_by_minute_step_together_and_are_never_a_minute_off() {
        let ago = relative_by_minute;
        let now = 10 * 60_000 + 30_000; // 00:10:30
        assert_eq!(ago(now - 5_000, now), "5s ago");
        assert_eq!(ago(now + 59_000, now), "in 59s");
        // Read at 00:10:30 all through 00:10:xx.
        assert_eq!(ago(5 * 60_000, now), "5m ago");
        assert_eq!(ago(5 * 60_000 + 59_000, now), "4m ago");
        assert_eq!(ago(5 * 60_000 + 59_000, now - 30_000), "4m ago");
        assert_eq!(ago(5 * 60_000 + 59_000, now + 29_999), "4m ago");
        assert_eq!(ago(5 * 60_000, now + 30_000), "6m ago");
        assert_eq!(ago(now - 60_000, now), "1m ago");
        assert_eq!(ago(now - 3 * 3_600_000 - 30_000, now), "3h0m ago");
        // The defect: 2m53s ago (a pause at 00:00:02, `status` saying
        // `2m53s ago`) was `1m ago`, from 00:02:00 and cut twice.
        assert_eq!(relative(2_000, 175_000), "2m53s ago");
        assert_eq!(ago(2_000, 175_000), "2m ago");
        assert_eq!(ago(2_000, 120_000), "2m ago");
        // `Nm` shows from at most half a minute before N minutes have
        // passed until at most half a minute after N + 1 have.
        for t in (0..600_000).step_by(7_000) {
            for now in (t + 60_000..t + 900_000).step_by(3_000) {
                let shown = ago(t, now);
                let minutes: i64 = shown.trim_end_matches("m ago").parse().unwrap();
                let past = now - t - minutes * 60_000;
                assert!(
                    (-30_000..90_000).contains(&past),
                    "{shown} for {} ms",
                    now - t
                );
            }
        }
        // Until: rounded up, never said as nearer than it is (4m59.999s
        // left was `in 4m`).
        assert_eq!(ago(now + 4 * 60_000 + 59_999, now), "in 5m");
        assert_eq!(ago(now + 4 * 60_000 + 1, now), "in 5m");
        assert_eq!(ago(now + 4 * 60_000, now), "in 4m");
        assert_eq!(relative(now + 5 * 60_000, now + 10_000), "in 4m50s");
        assert_eq!(ago(now + 5 * 60_000, now + 10_000), "in 5m");
        assert_eq!(ago(now + 59_500, now), "in 1m");
        assert_eq!(ago(now + 58_500, now), "in 59s");
        assert_eq!(
            ago(now + 3 * 86_400_000 + 3_600_000 + 30_000, now),
            "in 3d2h"
        );
    }

    /// A moment the views cannot write (shown as 1970 before) is refused,
    /// and a duration's own fault is named, not an RFC 3339 parser's.
    #[test]
    fn a_moment_is_near_enough_to_write_and_its_fault_is_named() {
        assert_eq!(
            parse_when("30m"),
            Ok(When::In(std::time::Duration::from_secs(1800)))
        );
        assert_eq!(
            parse_when("2026-12-02T07:00:00+09:00"),
            Ok(When::At(1_796_162_400_000))
        );
        assert!(parse_when("36500d").is_ok());
        let far = parse_when("999999999d").unwrap_err();
        assert!(far.contains("at most 100 years"), "{far}");
        let bare = parse_when("30").unwrap_err();
        assert!(
            bare.contains("a number needs its unit: 30s, 30m, 30h or 30d"),
            "{bare}"
        );
        let huge = parse_when("9999999999999d").unwrap_err();
        assert!(huge.contains("too large"), "{huge}");
        let word = parse_when("yesterday").unwrap_err();
        assert!(word.contains("neither an RFC 3339 time"), "{word}");
    }

    #[test]
    fn json_times_are_rfc3339_text() {
        #[derive(serde::Serialize)]
        struct T {
            #[serde(serialize_with = "json")]
            at: Millis,
            #[serde(serialize_with = "json_opt")]
            due: Option<Millis>,
            #[serde(serialize_with = "json_opt")]
            never: Option<Millis>,
        }
        let t = T {
            at: 1_767_251_760_500,
            due: Some(0),
            never: None,
        };
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            r#"{"at":"2026-01-01T07:16:00Z","due":"1970-01-01T00:00:00Z","never":null}"#
        );
    }
}
