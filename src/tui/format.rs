//! How the dashboard writes what it shows, for the state and the panes
//! alike: untrusted text made inert and cut or wrapped by display width,
//! and times.

use crate::model::Millis;
use crate::util::{sanitize, text};

/// Untrusted text for one cell: every control, escape or bidi character
/// shown as a visible escape, then cut to `max` cells (with `…`).
pub fn clean(s: &str, max: usize) -> String {
    text::cut(&sanitize::line(s), max).into_owned()
}

/// Untrusted text made inert and wrapped into lines of at most `width`
/// cells, at most `max_lines` of them (then a last line says how much was
/// left out).
pub fn wrap(s: &str, width: usize, max_lines: usize) -> Vec<String> {
    let width = width.max(10);
    // No more than this can show (a cell takes at least one character,
    // combining marks aside): the rest of a huge text is only counted.
    let mut chars = s.chars();
    let head: String = chars.by_ref().take(width * max_lines * 2).collect();
    let rest = chars.count();
    let mut lines = text::wrap(&sanitize::line(&head), width);
    let mut hidden = rest;
    if lines.len() > max_lines {
        hidden += lines[max_lines..]
            .iter()
            .map(|l| l.chars().count())
            .sum::<usize>();
        lines.truncate(max_lines);
    }
    if hidden > 0 {
        lines.push(format!("… ({hidden} more characters)"));
    }
    lines
}

/// `HH:MM:SS` (UTC) today, `MM-DD HH:MM` on other days.
pub fn clock(ms: Millis, now: Millis) -> String {
    let t = crate::util::time::to_datetime(ms);
    if ms / 86_400_000 == now / 86_400_000 {
        t.format("%H:%M:%S").to_string()
    } else {
        t.format("%m-%d %H:%M").to_string()
    }
}

pub fn ago(ms: Millis, now: Millis) -> String {
    crate::util::time::relative(ms, now)
}
