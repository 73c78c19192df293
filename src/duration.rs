//! Human durations as written in `nightshift.toml` and shown on screen.
//!
//! Input: `500ms`, `30s`, `10m`, `2h`, `7d`, compounds such as `1h30m`, and
//! `0`. A bare number other than 0 is refused: `--older-than 30` read as
//! seconds would prune what a reader of "30" meant as days. (The config's
//! TOML integers are seconds by their type: `config::convert::duration`.)
//! Output: the two most significant units
//! (`2m14s`, `3h12m`, `1d4h`), compact enough for a dashboard column.

use std::time::Duration;

use thiserror::Error;

/// Why a duration string was refused. Each message quotes the input (with
/// control characters escaped, so a hostile value cannot move the cursor).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DurationError {
    #[error("invalid duration {0:?}: expected a number with a unit, e.g. 30s, 10m, 2h, 7d")]
    Malformed(String),
    #[error("invalid duration {0:?}: must not be negative")]
    Negative(String),
    #[error("invalid duration {0:?}: a number needs its unit: {1}s, {1}m, {1}h or {1}d")]
    NoUnit(String, u64),
    #[error("invalid duration {0:?}: too large (at most 100 years)")]
    Overflow(String),
}

const MS_PER_SECOND: u64 = 1_000;
const MS_PER_MINUTE: u64 = 60 * MS_PER_SECOND;
const MS_PER_HOUR: u64 = 60 * MS_PER_MINUTE;
const MS_PER_DAY: u64 = 24 * MS_PER_HOUR;

/// The longest duration taken: far past any wait, and a time that long
/// from now still fits every sum the store makes of it (milliseconds).
pub const MAX: Duration = Duration::from_millis(100 * 365 * MS_PER_DAY);

/// Milliseconds in one of the accepted units.
fn unit_ms(unit: &str) -> Option<u64> {
    match unit {
        "ms" => Some(1),
        "s" => Some(MS_PER_SECOND),
        "m" => Some(MS_PER_MINUTE),
        "h" => Some(MS_PER_HOUR),
        "d" => Some(MS_PER_DAY),
        _ => None,
    }
}

/// Parses `500ms`, `30s`, `10m`, `2h`, `7d`, `1h30m` or `0`. Whitespace
/// around the value and between parts is allowed.
///
/// # Errors
///
/// Empty input, a sign, a fraction, an unknown unit, a number without its
/// unit (but 0), or a total that does not fit in a `u64` of milliseconds.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let malformed = || DurationError::Malformed(s.to_string());
    let text = s.trim();
    if text.is_empty() {
        return Err(malformed());
    }
    if text.starts_with('-') {
        return Err(DurationError::Negative(s.to_string()));
    }

    // A bare number is refused, but none at all: its unit is a guess.
    if text.bytes().all(|b| b.is_ascii_digit()) {
        return match parse_digits(text, s)? {
            0 => Ok(Duration::ZERO),
            n => Err(DurationError::NoUnit(s.to_string(), n)),
        };
    }

    let mut total_ms: u64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits_end == 0 {
            return Err(malformed());
        }
        let (digits, after) = rest.split_at(digits_end);
        let unit_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after_unit) = after.split_at(unit_end);
        let per_unit = unit_ms(unit).ok_or_else(malformed)?;
        let part = parse_digits(digits, s)?
            .checked_mul(per_unit)
            .ok_or_else(|| DurationError::Overflow(s.to_string()))?;
        total_ms = total_ms
            .checked_add(part)
            .ok_or_else(|| DurationError::Overflow(s.to_string()))?;
        rest = after_unit.trim_start();
    }
    let total = Duration::from_millis(total_ms);
    if total > MAX {
        return Err(DurationError::Overflow(s.to_string()));
    }
    Ok(total)
}

/// Parses a run of ASCII digits; only overflow can fail here.
fn parse_digits(digits: &str, whole: &str) -> Result<u64, DurationError> {
    digits
        .parse::<u64>()
        .map_err(|_| DurationError::Overflow(whole.to_string()))
}

/// Formats a duration with its two most significant units, truncating the
/// rest: `2m14s`, `3h12m`, `45s`, `1d4h`, `850ms`. A zero second unit is
/// dropped (`2h`, not `2h0m`). Sub-second precision is shown only below one
/// second, where it is all there is.
#[must_use]
pub fn format_duration(d: Duration) -> String {
    let total_ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if total_ms == 0 {
        return "0s".to_string();
    }
    if total_ms < MS_PER_SECOND {
        return format!("{total_ms}ms");
    }
    let units = [
        (MS_PER_DAY, "d"),
        (MS_PER_HOUR, "h"),
        (MS_PER_MINUTE, "m"),
        (MS_PER_SECOND, "s"),
    ];
    let Some(first) = units.iter().position(|(ms, _)| total_ms >= *ms) else {
        return format!("{total_ms}ms");
    };
    let (big_ms, big_name) = units[first];
    let mut out = format!("{}{big_name}", total_ms / big_ms);
    if let Some(&(small_ms, small_name)) = units.get(first + 1) {
        let small = (total_ms % big_ms) / small_ms;
        if small > 0 {
            out = format!("{out}{small}{small_name}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn parses_each_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("30s"), Ok(secs(30)));
        assert_eq!(parse_duration("10m"), Ok(secs(600)));
        assert_eq!(parse_duration("2h"), Ok(secs(7200)));
        assert_eq!(parse_duration("7d"), Ok(secs(7 * 86_400)));
    }

    #[test]
    fn parses_compounds_bare_numbers_and_whitespace() {
        assert_eq!(parse_duration("1h30m"), Ok(secs(5400)));
        assert_eq!(parse_duration(" 1h 30m "), Ok(secs(5400)));
        assert_eq!(parse_duration("1m500ms"), Ok(Duration::from_millis(60_500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(" 0\t"), Ok(Duration::ZERO));
    }

    /// `--older-than 30` meant as days would prune a month's items as
    /// seconds: a number needs its unit, and the message offers them.
    #[test]
    fn a_number_without_its_unit_is_refused() {
        assert_eq!(
            parse_duration("30").unwrap_err().to_string(),
            r#"invalid duration "30": a number needs its unit: 30s, 30m, 30h or 30d"#
        );
        assert!(matches!(
            parse_duration("  90\t"),
            Err(DurationError::NoUnit(_, 90))
        ));
    }

    #[test]
    fn rejects_bad_input_with_the_documented_message() {
        let err = parse_duration("10x").unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"invalid duration "10x": expected a number with a unit, e.g. 30s, 10m, 2h, 7d"#
        );
        for bad in [
            "", "   ", "s", "1.5h", "1h30", "h1", "10 x", "1e3s", "+5s", "1hh", "10M",
        ] {
            assert!(
                matches!(parse_duration(bad), Err(DurationError::Malformed(_))),
                "{bad:?} should be malformed"
            );
        }
    }

    #[test]
    fn rejects_negative_and_overflow() {
        assert_eq!(
            parse_duration("-5s").unwrap_err().to_string(),
            r#"invalid duration "-5s": must not be negative"#
        );
        assert!(matches!(
            parse_duration("99999999999999999999s"),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            parse_duration("18446744073709551615s"),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            parse_duration("300000000000d"),
            Err(DurationError::Overflow(_))
        ));
        // In range of a u64 of milliseconds, past what a store's sum of
        // now and it holds (a lock's expiry was stored as a float).
        assert_eq!(
            parse_duration("106751991167d").unwrap_err().to_string(),
            r#"invalid duration "106751991167d": too large (at most 100 years)"#
        );
        assert_eq!(parse_duration("36500d"), Ok(MAX));
        assert!(parse_duration("36501d").is_err());
    }

    #[test]
    fn escapes_control_characters_in_messages() {
        let err = parse_duration("1\u{1b}[2J").unwrap_err().to_string();
        assert!(!err.contains('\u{1b}'), "{err}");
    }

    #[test]
    fn formats_two_most_significant_units() {
        assert_eq!(format_duration(secs(134)), "2m14s");
        assert_eq!(format_duration(secs(3 * 3600 + 12 * 60 + 59)), "3h12m");
        assert_eq!(format_duration(secs(45)), "45s");
        assert_eq!(format_duration(Duration::from_millis(45_900)), "45s");
        assert_eq!(format_duration(secs(86_400 + 4 * 3600 + 120)), "1d4h");
        assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(format_duration(Duration::ZERO), "0s");
        assert_eq!(format_duration(secs(7200)), "2h");
        assert_eq!(format_duration(secs(86_400 + 60)), "1d");
        assert!(format_duration(Duration::MAX).ends_with('h'));
    }

    #[test]
    fn format_then_parse_round_trips_whole_values() {
        for d in [secs(1), secs(59), secs(90), secs(3600), secs(86_400 * 3)] {
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = parse_duration(&s);
        }

        #[test]
        fn never_panics_on_duration_like_text(s in "[0-9hmsd\\- ]{0,24}") {
            let _ = parse_duration(&s);
        }
    }
}
