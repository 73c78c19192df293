//! Converters from a spanned TOML value to a setting's type, each failure
//! saying what was wrong and where ([`Bad`]); and back, a setting's value
//! written as TOML (`toml_*`, for the example and the docs).

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::time::Duration;

use chrono_tz::Tz;
use toml::Spanned;
use toml::de::DeValue;

use super::suggest::closest;
use crate::duration::{format_duration, parse_duration};

/// A value that failed a conversion: where, and why. `index` is set for an
/// array element, so the field reads `worker[1]`.
pub(super) struct Bad {
    pub(super) span: Range<usize>,
    pub(super) index: Option<usize>,
    pub(super) message: String,
}

pub(super) type Conv<T> = Result<T, Bad>;

pub(super) fn bad(value: &Spanned<DeValue<'_>>, message: impl Into<String>) -> Bad {
    Bad {
        span: value.span(),
        index: None,
        message: message.into(),
    }
}

/// A short description of a value for "expected X, found Y" messages.
pub(super) fn describe(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => {
            format!("string {:?}", crate::util::text::cut(s, 40))
        }
        DeValue::Integer(i) => format!("integer {i}"),
        DeValue::Float(x) => format!("float {x}"),
        DeValue::Boolean(b) => format!("boolean {b}"),
        DeValue::Datetime(d) => format!("datetime {d}"),
        DeValue::Array(_) => "an array".to_string(),
        DeValue::Table(_) => "a table".to_string(),
    }
}

pub(super) fn string<'v>(value: &'v Spanned<DeValue<'_>>) -> Conv<&'v str> {
    match value.get_ref() {
        DeValue::String(s) => Ok(s.as_ref()),
        other => Err(bad(
            value,
            format!("expected a string, found {}", describe(other)),
        )),
    }
}

pub(super) fn integer(value: &Spanned<DeValue<'_>>) -> Conv<i64> {
    match value.get_ref() {
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .map_err(|_| bad(value, format!("integer {i} is out of range"))),
        other => Err(bad(
            value,
            format!("expected an integer, found {}", describe(other)),
        )),
    }
}

/// An integer from `min` to `max`, as the setting's type (which holds them all).
pub(super) fn int_in<T: TryFrom<i64>>(value: &Spanned<DeValue<'_>>, min: i64, max: i64) -> Conv<T> {
    let n = integer(value)?;
    match T::try_from(n) {
        Ok(t) if (min..=max).contains(&n) => Ok(t),
        _ => Err(bad(
            value,
            format!("must be between {min} and {max}, found {n}"),
        )),
    }
}

/// One of `choices`, by the word each is written as.
pub(super) fn choice<T: Copy>(
    value: &Spanned<DeValue<'_>>,
    choices: &[T],
    word: fn(T) -> &'static str,
) -> Conv<T> {
    let given = string(value)?;
    if let Some(t) = choices.iter().find(|t| word(**t) == given) {
        return Ok(*t);
    }
    let mut words: Vec<String> = choices.iter().map(|t| format!("{:?}", word(*t))).collect();
    let last = words.pop().unwrap_or_default();
    let expected = match words.is_empty() {
        true => last,
        false => format!("{} or {last}", words.join(", ")),
    };
    Err(bad(value, format!("expected {expected}, found {given:?}")))
}

/// A string in the setting's own syntax (a rate, a cron expression).
pub(super) fn parsed<T>(value: &Spanned<DeValue<'_>>) -> Conv<T>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    string(value)?
        .parse()
        .map_err(|e: T::Err| bad(value, e.to_string()))
}

pub(super) fn path_value(value: &Spanned<DeValue<'_>>) -> Conv<String> {
    let s = string(value)?;
    if s.is_empty() {
        return Err(bad(value, "must not be empty"));
    }
    if s.contains('\0') {
        return Err(bad(value, "must not contain a NUL byte"));
    }
    Ok(s.to_string())
}

/// A duration string (`"10m"`), or an integer number of seconds.
pub(super) fn duration(value: &Spanned<DeValue<'_>>) -> Conv<Duration> {
    match value.get_ref() {
        DeValue::String(s) => parse_duration(s).map_err(|e| bad(value, e.to_string())),
        DeValue::Integer(_) => {
            let secs = integer(value)?;
            let d = u64::try_from(secs)
                .map(Duration::from_secs)
                .map_err(|_| bad(value, format!("must not be negative, found {secs}")))?;
            if d > crate::duration::MAX {
                return Err(bad(
                    value,
                    format!("{secs} seconds is too large (at most 100 years)"),
                ));
            }
            Ok(d)
        }
        other => Err(bad(
            value,
            format!(
                "expected a duration such as \"30s\" or \"10m\", found {}",
                describe(other)
            ),
        )),
    }
}

pub(super) fn positive_duration(value: &Spanned<DeValue<'_>>) -> Conv<Duration> {
    let d = duration(value)?;
    if d.is_zero() {
        return Err(bad(value, "must be longer than zero"));
    }
    Ok(d)
}

/// The array elements, or an error naming what was found instead.
pub(super) fn array<'v, 'i>(
    value: &'v Spanned<DeValue<'i>>,
    expected: &str,
) -> Conv<&'v [Spanned<DeValue<'i>>]> {
    match value.get_ref() {
        DeValue::Array(items) => Ok(items),
        other => Err(bad(
            value,
            format!("expected {expected}, found {}", describe(other)),
        )),
    }
}

/// An element's failure, with its index for the field name.
pub(super) fn at(index: usize, mut b: Bad) -> Bad {
    b.index = Some(index);
    b
}

/// Strings, each non-empty; `require_some` refuses `[]`.
pub(super) fn string_list(value: &Spanned<DeValue<'_>>, require_some: bool) -> Conv<Vec<String>> {
    let items = array(value, "an array of strings")?;
    if require_some && items.is_empty() {
        return Err(bad(value, "must list at least one entry"));
    }
    strings(items, |_, s| {
        s.is_empty().then_some("must not be an empty string")
    })
}

/// The elements as strings, each free of NUL bytes and passing `check`,
/// which says what is wrong with element `i`.
fn strings(
    items: &[Spanned<DeValue<'_>>],
    check: impl Fn(usize, &str) -> Option<&'static str>,
) -> Conv<Vec<String>> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let s = string(item).map_err(|b| at(i, b))?;
        let wrong = check(i, s).or(s.contains('\0').then_some("must not contain a NUL byte"));
        if let Some(message) = wrong {
            return Err(at(i, bad(item, message)));
        }
        out.push(s.to_string());
    }
    Ok(out)
}

/// A program and its arguments, run without a shell.
pub(super) fn argv(value: &Spanned<DeValue<'_>>) -> Conv<Vec<String>> {
    if let DeValue::String(s) = value.get_ref() {
        return Err(bad(
            value,
            format!(
                "expected an argv array such as [\"python3\", \"worker.py\"] (no shell), found string {s:?}"
            ),
        ));
    }
    let items = array(value, "an argv array such as [\"python3\", \"worker.py\"]")?;
    if items.is_empty() {
        return Err(bad(
            value,
            "must name a program, e.g. [\"python3\", \"worker.py\"]",
        ));
    }
    strings(items, |i, s| {
        (i == 0 && s.trim().is_empty()).then_some("the program name must not be empty")
    })
}

pub(super) fn key_fields(value: &Spanned<DeValue<'_>>) -> Conv<Vec<String>> {
    let fields = string_list(value, true)?;
    match crate::key::KeySpec::fields_problem(&fields) {
        Some(problem) => Err(bad(value, problem)),
        None => Ok(fields),
    }
}

pub(super) fn exit_codes(value: &Spanned<DeValue<'_>>) -> Conv<Vec<i32>> {
    let items = array(value, "an array of exit codes such as [75]")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        // 0 is success, and a process cannot exit with more than 255.
        out.push(int_in(item, 1, 255).map_err(|b| at(i, b))?);
    }
    Ok(out)
}

pub(super) fn max_cost(value: &Spanned<DeValue<'_>>) -> Conv<f64> {
    let cost = match value.get_ref() {
        // Integers are exact below 2^53, far beyond any real budget.
        DeValue::Integer(_) => integer(value)? as f64,
        DeValue::Float(x) => x
            .as_str()
            .parse::<f64>()
            .map_err(|_| bad(value, format!("not a number: {x}")))?,
        other => {
            return Err(bad(
                value,
                format!("expected a number, found {}", describe(other)),
            ));
        }
    };
    if !cost.is_finite() || cost < 0.0 {
        return Err(bad(
            value,
            format!("must be a finite number >= 0, found {cost}"),
        ));
    }
    Ok(cost)
}

/// A batch `version`: any text a line can show, so every view can print it
/// and a store can keep it as given.
pub(super) fn version(value: &Spanned<DeValue<'_>>) -> Conv<String> {
    const MAX: usize = 200;
    let v = string(value)?;
    if v.trim().is_empty() {
        return Err(bad(value, "must not be empty (leave the key out for none)"));
    }
    if v.chars().any(char::is_control) {
        return Err(bad(value, "must not contain control characters"));
    }
    if v.chars().count() > MAX {
        return Err(bad(value, format!("must be at most {MAX} characters")));
    }
    Ok(v.to_string())
}

pub(super) fn timezone(value: &Spanned<DeValue<'_>>) -> Conv<Tz> {
    let name = string(value)?;
    name.parse::<Tz>().map_err(|_| {
        let hint = match zone_of_abbreviation(name) {
            Some(zone) => {
                format!(" ({name} is an abbreviation, not a zone: did you mean {zone:?}?)")
            }
            None => closest(name, chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()))
                .map(|c| format!(" (did you mean {c:?}?)"))
                .unwrap_or_default(),
        };
        bad(value, format!("unknown time zone {name:?}{hint}"))
    })
}

/// The zone a common abbreviation that is no zone name stands for, where
/// every place using it keeps one zone's rules: the nearest name by
/// spelling would mislead (`JST` is one letter from `EST`). Those shared
/// by zones with other rules (`CST`, `IST`, `BST`, `AEST`, `CEST`) are
/// left out.
fn zone_of_abbreviation(name: &str) -> Option<&'static str> {
    const ZONES: [(&str, &str); 9] = [
        ("JST", "Asia/Tokyo"),
        ("KST", "Asia/Seoul"),
        ("HKT", "Asia/Hong_Kong"),
        ("SGT", "Asia/Singapore"),
        ("PST", "America/Los_Angeles"),
        ("PDT", "America/Los_Angeles"),
        ("EDT", "America/New_York"),
        ("AEDT", "Australia/Sydney"),
        ("NZST", "Pacific/Auckland"),
    ];
    ZONES
        .iter()
        .find(|(abbr, _)| abbr.eq_ignore_ascii_case(name))
        .map(|(_, zone)| *zone)
}

/// A string as TOML writes it (quoted, escaped).
pub(super) fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// Strings as a TOML array: `["python3", "worker.py"]`.
pub(super) fn toml_strings(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| toml_string(s)).collect();
    format!("[{}]", items.join(", "))
}

/// A duration as the config writes it: `"10m"`.
pub(super) fn toml_duration(d: Duration) -> String {
    toml_string(&format_duration(d))
}
