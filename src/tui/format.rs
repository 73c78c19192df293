//! How the dashboard writes what it shows, for the state and the panes
//! alike: untrusted text made inert and cut or wrapped by display width,
//! and times.

use std::borrow::Cow;

use crate::model::Millis;
use crate::util::{sanitize, text};

/// Untrusted text as the dashboard draws it: every control, escape or
/// bidi character shown as a visible escape, and drawable by ratatui as
/// the terminal draws it (`text::drawable`). Every text the dashboard
/// shows or measures goes through here.
pub fn inert(s: &str) -> Cow<'_, str> {
    match sanitize::line(s) {
        Cow::Borrowed(b) => text::drawable(b),
        Cow::Owned(o) => Cow::Owned(text::drawable(&o).into_owned()),
    }
}

/// Untrusted text for one cell: inert ([`inert`]), then cut to `max`
/// cells (with `…`).
pub fn clean(s: &str, max: usize) -> String {
    text::cut(&inert(s), max).into_owned()
}

/// Cells of an item's label, and of its key, where a sentence names the
/// item (a footer's answer): enough to know it by, few enough that what
/// the sentence says of it still fits 80 columns.
const LABEL_IN_SENTENCE: usize = 24;
const KEY_IN_SENTENCE: usize = 20;

/// An item as a sentence names it, inert: its label and key, each cut
/// with `…` (`東京の天気予報 第1回 🌸 とても長… (記事-0001-🍣)`). Named
/// whole, a long label pushed what the footer said of it (`is already
/// done`) off the line.
pub fn item_in_sentence(key: &str, label: &str) -> String {
    if label.is_empty() || label == key {
        return clean(key, LABEL_IN_SENTENCE + KEY_IN_SENTENCE);
    }
    crate::key::named(
        &clean(key, KEY_IN_SENTENCE),
        &clean(label, LABEL_IN_SENTENCE),
    )
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
    let mut lines = text::wrap(&inert(&head), width);
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

/// Untrusted text made inert and wrapped into lines of at most `width`
/// cells, at most `max_lines` of them (at least one): where it needs more,
/// the last line ends in `…`.
pub fn wrap_cut(s: &str, width: usize, max_lines: usize) -> Vec<String> {
    let mut lines = text::wrap(&inert(s), width);
    if lines.len() > max_lines.max(1) {
        lines.truncate(max_lines.max(1));
        if let Some(last) = lines.last_mut() {
            // More lines follow: the `…` is kept even where the last fits.
            *last = text::cut(&format!("{last}{}", text::ELLIPSIS), width).into_owned();
        }
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

/// How long ago (or until) `ms`, as the dashboard says it: `status`'s
/// age as at the middle of the current minute, seconds left out past the
/// first minute, so all step at the turn of the minute and an idle
/// dashboard changes the terminal at most once a minute.
pub use crate::util::time::relative_by_minute as ago;

#[cfg(test)]
mod tests {
    use super::wrap_cut;
    use crate::util::text::width;

    /// Wrapped by display width (a CJK character takes two cells); past
    /// the last line there is room for, the last ends in `…`.
    #[test]
    fn wrap_cut_wraps_by_width_and_cuts_only_past_its_lines() {
        let s = "5 pending: waiting for pool 本番アカウント, tokens/min";
        let all = wrap_cut(s, 20, 9);
        assert_eq!(all.concat().replace(' ', ""), s.replace(' ', ""));
        assert!(all.iter().all(|l| width(l) <= 20), "{all:?}");
        let two = wrap_cut(s, 20, 2);
        assert_eq!(two.len(), 2, "{two:?}");
        assert_eq!(two[0], all[0]);
        assert!(two[1].ends_with('…') && width(&two[1]) <= 20, "{two:?}");
        // No row to spare still shows one, cut.
        let one = wrap_cut(s, 20, 0);
        assert_eq!(one.len(), 1);
        assert!(one[0].ends_with('…'), "{one:?}");
        assert_eq!(wrap_cut("\u{1b}[2J短い", 20, 1), ["\\x1b[2J短い"]);
    }
}

#[cfg(test)]
mod sentence_tests {
    use super::item_in_sentence;
    use crate::util::text::width;

    /// The footer at 80 columns kept the label and lost the verdict:
    /// named in a sentence, an item takes at most 47 cells, each part cut
    /// with `…`, and a short name is whole.
    #[test]
    fn an_item_in_a_sentence_leaves_room_for_what_is_said_of_it() {
        let label = "東京の天気予報 第1回 🌸 とても長いラベルの記事タイトルです";
        let named = item_in_sentence("記事-0001-🍣", label);
        assert!(
            named.starts_with("東京の天気予報 第1回 🌸") && named.contains("… (記事-0001-🍣)"),
            "{named}"
        );
        assert!(width(&named) <= 47, "{named}");
        assert_eq!(item_in_sentence("k1", "hello"), "hello (k1)");
        assert_eq!(item_in_sentence("k1", ""), "k1");
        assert_eq!(item_in_sentence("a\u{1b}[2Jb", ""), "a\\x1b[2Jb");
    }
}
