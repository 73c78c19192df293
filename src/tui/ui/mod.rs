//! Drawing: `render(&App, &mut Frame)` and one module per pane. Nothing
//! here changes the state. Every text that came from the store goes
//! through [`clean`] (control characters made inert, length cut) before it
//! reaches a cell. What the state needs as well (the text helpers, the
//! screen's geometry) lives beside it, in `tui::format` and `tui::layout`.

pub mod activity;
pub mod batches;
pub mod chrome;
pub mod detail;
pub mod dlq;
pub mod items;
pub mod log;
pub mod overlay;
pub mod pools;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::action::Pane;
use super::app::App;
pub use super::format::{ago, clean, clock, wrap, wrap_cut};
use super::keymap::Mode;
use super::layout::{self, Areas, MIN_HEIGHT, MIN_WIDTH};
use super::theme::Role;
pub use super::theme::state_role;
use crate::model::{Outcome, Status, Tier};
use crate::util::text;
/// `1,234,567`.
pub use crate::util::text::grouped as num;

pub fn render(app: &App, f: &mut Frame) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(app, f, area);
        return;
    }
    let Areas {
        header,
        tabs,
        main,
        footer,
    } = layout::areas((area.width, area.height));
    chrome::header(app, f, header);
    chrome::tabs(app, f, tabs);
    if app.open_detail().is_some() {
        detail::render(app, f, main);
    } else {
        match app.pane {
            Pane::Batches => batches::render(app, f, main),
            Pane::Activity => activity::render(app, f, main),
            Pane::Items => items::render(app, f, main),
            Pane::DeadLetters => dlq::render(app, f, main),
            Pane::Log => log::render(app, f, main),
            Pane::Pools => pools::render(app, f, main),
        }
    }
    chrome::footer(app, f, footer);
    match app.mode {
        Mode::Help => overlay::help(app, f, area),
        Mode::Confirm => overlay::confirm(app, f, area),
        Mode::Prompt => overlay::prompt(app, f, area),
        Mode::Notice => overlay::since(app, f, area),
        Mode::Normal | Mode::Filter => {}
    }
}

fn too_small(app: &App, f: &mut Frame, area: Rect) {
    let text = format!(
        "nightshift needs at least {MIN_WIDTH}×{MIN_HEIGHT}; this terminal is {}×{}. \
         Make it larger, or press q to quit.",
        area.width, area.height
    );
    f.render_widget(
        Paragraph::new(text)
            .style(app.setup.palette.style(Role::Warn))
            .wrap(Wrap { trim: true }),
        area,
    );
}

/// A line in at most `max` cells: the span at the edge is cut and ends in
/// `…`, the spans after it are left out.
pub fn fit_line(line: Line<'static>, max: usize) -> Line<'static> {
    let total: usize = line.spans.iter().map(|s| text::width(&s.content)).sum();
    if total <= max {
        return line;
    }
    let room = max.saturating_sub(1);
    let mut used = 0;
    let mut spans = Vec::new();
    for span in line.spans {
        let w = text::width(&span.content);
        if used + w <= room {
            used += w;
            spans.push(span);
            continue;
        }
        if max > 0 {
            // Spans after it are left out: the cut says so even where
            // this one would fit.
            let going_on = format!("{}{}", span.content, text::ELLIPSIS);
            spans.push(Span::styled(
                text::cut(&going_on, max - used).into_owned(),
                span.style,
            ));
        }
        break;
    }
    Line { spans, ..line }
}

/// Lines fitted to `max` cells each (see [`fit_line`]).
pub fn fit_lines(lines: Vec<Line<'static>>, max: usize) -> Vec<Line<'static>> {
    lines.into_iter().map(|l| fit_line(l, max)).collect()
}

/// Lines of at most `max` cells in at most `rows` rows: a line too long
/// is wrapped while rows are left, from the first line down, by the rule
/// every wrapped text follows ([`text::wrap_ranges`]: by display width,
/// whole graphemes, Japanese line breaking), each continuation after
/// `indent` blank cells, under its label, its styles kept; what still
/// does not fit is cut as [`fit_line`] cuts it. A pane with rows to spare
/// then shows a long line whole, where it was cut with rows free beneath
/// it.
pub fn wrap_lines(
    lines: Vec<Line<'static>>,
    max: usize,
    rows: usize,
    indent: usize,
) -> Vec<Line<'static>> {
    let mut out = Vec::with_capacity(lines.len());
    let mut lines = lines.into_iter();
    while let Some(line) = lines.next() {
        // Rows the lines after this one still need.
        let later = lines.len();
        let spare = rows.saturating_sub(out.len() + 1 + later);
        if spare == 0 || max <= indent + 1 {
            out.push(line);
            continue;
        }
        let (whole, styles) = styled_text(&line);
        let parts = text::wrap_ranges(&whole, max, max - indent);
        if parts.len() == 1 {
            out.push(line);
            continue;
        }
        // The last row it gets takes the rest of the text, cut with `…`.
        let shown = parts.len().min(spare + 1);
        for (i, part) in parts[..shown].iter().enumerate() {
            let range = if i + 1 == shown {
                part.start..whole.len()
            } else {
                part.clone()
            };
            let mut spans = Vec::new();
            if i > 0 {
                spans.push(Span::raw(" ".repeat(indent)));
            }
            spans.extend(styled_part(&whole, &styles, range));
            out.push(Line::from(spans));
        }
    }
    fit_lines(out, max)
}

/// A line's text, and where each of its spans starts in it, with its style.
fn styled_text(line: &Line<'static>) -> (String, Vec<(usize, ratatui::style::Style)>) {
    let mut whole = String::new();
    let mut styles = Vec::with_capacity(line.spans.len());
    for span in &line.spans {
        styles.push((whole.len(), line.style.patch(span.style)));
        whole.push_str(&span.content);
    }
    (whole, styles)
}

/// `range` of a line's text as spans, each part in its span's style.
fn styled_part(
    whole: &str,
    styles: &[(usize, ratatui::style::Style)],
    range: std::ops::Range<usize>,
) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    for (i, (from, style)) in styles.iter().enumerate() {
        let to = styles.get(i + 1).map_or(whole.len(), |(next, _)| *next);
        let (a, b) = (range.start.max(*from), range.end.min(to));
        if a < b {
            spans.push(Span::styled(whole[a..b].to_string(), *style));
        }
    }
    spans
}

/// Cells a key column may take in a pane this wide. Hashed keys are told
/// apart by a prefix, as git's short hashes are; the label beside the key
/// names the item, so it gets the room.
pub fn key_width(pane_width: u16) -> usize {
    match pane_width {
        160.. => 33,
        120.. => 13,
        _ => 9,
    }
}

/// The most of `rest` cells a label column takes beside a message or an
/// error column: it is the one column a person reads to know the item,
/// and the message still gets two fifths.
pub fn label_share(rest: usize) -> usize {
    rest * 3 / 5
}

/// An item's key in a key column of `max` cells: made inert, cut with `…`.
pub fn short_key(key: &str, max: usize) -> String {
    clean(key, max)
}

/// What a LABEL column beside a KEY column `key_cells` wide holds: the
/// label; nothing when it only repeats a key the KEY column shows whole
/// (as the CLI's tables, `key::label_column`); the whole key when the KEY
/// column shows it cut to a prefix, so the item is still named in full.
pub fn label_beside<'a>(key: &str, label: &'a str, key_cells: usize) -> &'a str {
    if text::width(&crate::tui::format::inert(key)) <= key_cells {
        crate::key::label_column(key, label)
    } else {
        label
    }
}

/// How an item is named in a title or a sentence: its label, with its key
/// beside it (the key alone when the label is the key). Inert; the key cut
/// to `key_cells`.
pub fn item_name(key: &str, label: &str, key_cells: usize) -> String {
    item_name_within(key, label, key_cells, usize::MAX)
}

/// The item whose answer asked for a hold, named as every item is (its
/// label, its key cut to `key_cells` beside it), with whose it is when its
/// batch is not `home` (the pane's own batch, if any): a batch's detail and
/// the Pools pane say it alike.
pub fn hold_asker(
    key: Option<&str>,
    label: Option<&str>,
    batch: &str,
    home: Option<&str>,
    key_cells: usize,
) -> String {
    let item = key.map(|key| item_name(key, label.unwrap_or_default(), key_cells));
    match item {
        Some(item) if home == Some(batch) => item,
        Some(item) => format!("{item} of {}", clean(batch, 40)),
        None if home == Some(batch) => "a worker".into(),
        None => clean(batch, 40),
    }
}

/// [`item_name`] in at most `max` cells: the label is cut (with `…`) to
/// leave the key whole, as a title needs room for what follows it.
pub fn item_name_within(key: &str, label: &str, key_cells: usize, max: usize) -> String {
    if label.is_empty() || label == key {
        return clean(key, key_cells.min(max));
    }
    let key = short_key(key, key_cells);
    let room = max.saturating_sub(text::width(&key) + 3).max(4);
    crate::key::named(&key, &clean(label, room))
}

/// A table of a text column then `N` columns of counts: the counts as
/// `cells` writes them with [`num`], each column at least as wide as
/// `least` says (so columns stay put while counts grow) and as its widest
/// cell; where that leaves the text column less than `min_text`, the counts
/// shortened by [`num_short`]. A count cut by its column would read as
/// another number (`100,005 (66` for 100,005 failed, 66,640 to retry); the
/// text column is cut, with `…`, before a count is. The text column's
/// width, each count column's, and the cells (each within its width).
pub fn count_columns<const N: usize>(
    room: usize,
    least: [usize; N],
    min_text: usize,
    cells: impl Fn(fn(i64) -> String) -> Vec<[String; N]>,
) -> (usize, [usize; N], Vec<[String; N]>) {
    let widths_of = |rows: &[[String; N]]| -> [usize; N] {
        std::array::from_fn(|i| {
            rows.iter()
                .map(|c| text::width(&c[i]))
                .chain([least[i]])
                .max()
                .unwrap_or(0)
        })
    };
    // N gaps between the N + 1 columns.
    let room = room.saturating_sub(N);
    let mut rows = cells(num);
    let mut widths = widths_of(&rows);
    if room.saturating_sub(widths.iter().sum()) < min_text {
        rows = cells(num_short);
        widths = widths_of(&rows);
    }
    for row in &mut rows {
        for (cell, &w) in row.iter_mut().zip(&widths) {
            *cell = text::cut(cell, w).into_owned();
        }
    }
    let first = room.saturating_sub(widths.iter().sum()).max(6);
    (first, widths, rows)
}

/// `n` in at most five columns where a table has no room for it whole:
/// `9,999`, `12.3k`, `999k`, `1.0M`, `12.3M`, `1.2G`; rounded down, so
/// a shortened count never says more than there is.
pub fn num_short(n: i64) -> String {
    let a = n.unsigned_abs();
    let sign = if n < 0 { "-" } else { "" };
    let tenths = |unit: u64| {
        let t = a / (unit / 10);
        format!("{}.{}", t / 10, t % 10)
    };
    let short = match a {
        0..10_000 => return num(n),
        10_000..100_000 => format!("{}k", tenths(1_000)),
        100_000..1_000_000 => format!("{}k", a / 1_000),
        1_000_000..100_000_000 => format!("{}M", tenths(1_000_000)),
        100_000_000..1_000_000_000 => format!("{}M", a / 1_000_000),
        _ => format!("{}G", tenths(1_000_000_000)),
    };
    format!("{sign}{short}")
}

/// A text progress bar that reads without colour.
pub fn bar(ratio: f64, width: usize) -> String {
    let ratio = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    // Down, as the percentage beside it: full only when all of it is (a
    // batch at 94 % drew a full bar).
    let filled = (ratio * width as f64).floor() as usize;
    format!(
        "{}{}",
        "█".repeat(filled),
        "░".repeat(width - filled.min(width))
    )
}

/// `failed/manual`, `done/empty`, `pending`.
pub fn state_word(status: Status, tier: Option<Tier>, outcome: Option<Outcome>) -> String {
    crate::model::state_word(status, tier, outcome)
}

/// A bordered pane with a title, the title cut (with `…`) to fit `area`.
pub fn pane_block(app: &App, area: Rect, title: Vec<Span<'static>>) -> Block<'static> {
    let room = (area.width as usize).saturating_sub(4);
    let mut spans = vec![Span::raw(" ")];
    spans.extend(fit_line(Line::from(title), room).spans);
    spans.push(Span::raw(" "));
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.setup.palette.style(Role::Dim))
        .title(Line::from(spans))
}

/// Text when a pane has nothing to show yet (wrapped to the pane).
pub fn placeholder(app: &App, f: &mut Frame, area: Rect, block: Block<'_>, what: &str) {
    let lines: Vec<Line> = text::wrap(what, (area.width as usize).saturating_sub(2))
        .into_iter()
        .map(Line::from)
        .collect();
    f.render_widget(
        Paragraph::new(lines)
            .style(app.setup.palette.style(Role::Dim))
            .block(block),
        area,
    );
}

/// What to say in an empty pane: still loading, or really empty.
pub fn empty_text(app: &App, what: &str) -> String {
    if !app.loaded {
        "loading…".to_string()
    } else if app.batch.is_none() {
        "no batches yet: add items with `nightshift add BATCH FILE`".to_string()
    } else {
        what.to_string()
    }
}

/// `app` given `data` by the poll it asked for last, at `at`.
#[cfg(test)]
pub(crate) fn answered(
    app: &mut App,
    at: crate::model::Millis,
    data: crate::store::Dashboard,
) -> Vec<crate::tui::action::Effect> {
    let asked = app.asked;
    app.update(crate::tui::action::Arrival::Polled {
        at,
        asked,
        result: Ok(Box::new(data)),
    })
}

/// The screen `app` draws, a string a row, each wide character once.
#[cfg(test)]
pub(crate) fn drawn_rows(app: &App) -> Vec<String> {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let (w, h) = app.size;
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| render(app, f)).unwrap();
    let buf = terminal.backend().buffer();
    (0..h)
        .map(|y| {
            let mut row = String::new();
            let mut skip = 0;
            for x in 0..w {
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                let sym = buf[(x, y)].symbol();
                skip = text::width(sym).saturating_sub(1);
                row.push_str(sym);
            }
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {

    /// A title names the item in the room it has: the label cut, the key
    /// kept (the item detail's title lost its place in the detail after a
    /// long label, with two `…` in a row).
    #[test]
    fn an_item_named_within_a_width_cuts_its_label_and_keeps_its_key() {
        let label = "東京の天気予報 第11回 🌸 とても長いラベルの記事タイトルです";
        let named = item_name_within("記事-0011", label, 9, 30);
        assert!(text::width(&named) <= 30, "{named}");
        assert!(named.ends_with("… (記事-0011)"), "{named}");
        assert_eq!(item_name_within("k1", "short", 9, 30), "short (k1)");
        assert_eq!(item_name("k1", "", 9), "k1");
    }

    /// A long line wraps under its label while rows are left (by the rule
    /// every wrapped text follows: a break after a space or between CJK
    /// characters, its styles kept, wide characters by display width);
    /// past the rows, it is cut with `…` as before.
    #[test]
    fn a_long_line_wraps_into_rows_left_and_is_cut_past_them() {
        use ratatui::style::{Modifier, Style};
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let line = || {
            Line::from(vec![
                Span::styled("paused    ", bold),
                Span::raw("メンテナンス中 データベース移行のため一時停止 (root@vm, 3m ago)"),
            ])
        };
        let wrapped = wrap_lines(vec![line()], 40, 3, 10);
        let rows: Vec<String> = wrapped.iter().map(line_text).collect();
        assert_eq!(
            rows,
            [
                "paused    メンテナンス中 データベース移",
                "          行のため一時停止 (root@vm, 3m ",
                "          ago)"
            ]
        );
        assert!(rows.iter().all(|r| text::width(r) <= 40), "{rows:?}");
        assert_eq!(wrapped[0].spans[0].style, bold, "styles kept");
        assert_eq!(wrapped[0].spans[1].style, Style::default());
        let cut: Vec<String> = wrap_lines(vec![line()], 40, 1, 10)
            .iter()
            .map(line_text)
            .collect();
        assert_eq!(cut.len(), 1);
        assert!(
            cut[0].ends_with('…') && text::width(&cut[0]) <= 40,
            "{cut:?}"
        );
        // Two rows for three rows' text: the second takes the rest, cut.
        let two: Vec<String> = wrap_lines(vec![line()], 40, 2, 10)
            .iter()
            .map(line_text)
            .collect();
        assert_eq!(two[1], "          行のため一時停止 (root@vm, 3m…");
    }

    fn line_text(l: &Line<'_>) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    /// The batch detail and the help overlay wrap as the item detail does
    /// (`text::wrap`): whole graphemes by display width, an emoji ZWJ
    /// sequence never split, no line starting with `ー`, `。` or a small
    /// kana (they split by code point: a family emoji across two rows,
    /// measured 6 cells, and `ー` at the start of a row).
    #[test]
    fn wrapped_lines_break_as_the_item_detail_does() {
        let family = "👨\u{200d}👩\u{200d}👧";
        for reason in [
            format!("{}ーです", "漢".repeat(29)),
            format!("{}{family}{}", "あ".repeat(27), "い".repeat(10)),
            format!("{}。、っょーー終わり", "記事".repeat(14)),
            format!("{}{family}{family}{family} end", "x".repeat(60)),
        ] {
            let line = Line::from(vec![
                Span::raw("          "),
                Span::raw("PAUSED — "),
                Span::raw(reason.clone()),
            ]);
            for max in [40, 59, 60, 61, 78] {
                let rows: Vec<String> = wrap_lines(vec![line.clone()], max, 10, 10)
                    .iter()
                    .map(line_text)
                    .collect();
                let what = format!("{max}: {rows:#?}");
                assert!(rows.iter().all(|r| text::width(r) <= max), "{what}");
                let body: Vec<&str> = rows.iter().map(|r| r.trim_start()).collect();
                // Nothing lost but the spaces broken at; the family whole.
                let kept: String = body.concat();
                assert_eq!(
                    kept.replace(' ', ""),
                    format!("PAUSED—{reason}").replace(' ', ""),
                    "{what}"
                );
                if reason.contains(family) {
                    assert_eq!(
                        kept.matches(family).count(),
                        reason.matches(family).count(),
                        "{what}"
                    );
                }
                // Each row is one the item detail's wrap would start.
                for row in &body[1..] {
                    let first = row.chars().next().unwrap();
                    assert!(!"ー。、っょ\u{200d}".contains(first), "{what}");
                }
            }
        }
    }
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(num(1_234_567), "1,234,567");
        assert_eq!(num(-12), "-12");
        assert_eq!(bar(0.5, 4), "██░░");
        assert_eq!(bar(0.94, 5), "████░");
        assert_eq!(bar(0.999, 20), format!("{}░", "█".repeat(19)));
        assert_eq!(bar(1.0, 5), "█████");
        assert_eq!(bar(f64::NAN, 2), "░░");
        assert_eq!(clean("a\x1b[2Jb", 100), "a\\x1b[2Jb");
        assert_eq!(clean("ブログ:技術記事:記事03", 12), "ブログ:技術…");
        let lines = wrap(&"x".repeat(100), 10, 3);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[3], "… (70 more characters)");
        let lines = wrap(&"記事".repeat(20), 10, 3);
        assert_eq!(lines[..3], ["記事記事記", "事記事記事", "記事記事記"]);
        assert_eq!(lines[3], "… (25 more characters)");
        assert_eq!(
            item_name("73ae5b202e46", "ブログ:記事", 9),
            "ブログ:記事 (73ae5b20…)"
        );
        assert_eq!(item_name("blog-01", "blog-01", 9), "blog-01");
    }

    #[test]
    fn counts_are_written_whole_or_shortened_never_cut() {
        let cells = |count: fn(i64) -> String| {
            vec![
                [count(100_005), format!("+{}", count(100_005))],
                [count(3), count(0)],
            ]
        };
        // Room for them whole: the text column takes the rest.
        let (text, widths, rows) = count_columns(60, [8, 6], 10, cells);
        assert_eq!(widths, [8, 8]);
        assert_eq!(rows[0], ["100,005".to_string(), "+100,005".to_string()]);
        assert_eq!(text, 60 - 2 - 16);
        // Too little: shortened, the text column at its narrowest first.
        let (text, widths, rows) = count_columns(24, [8, 6], 10, cells);
        assert_eq!(rows[0], ["100k".to_string(), "+100k".to_string()]);
        assert_eq!(widths, [8, 6]);
        assert_eq!(text, 8);
    }

    #[test]
    fn short_counts_round_down_and_stay_narrow() {
        assert_eq!(num_short(9_999), "9,999");
        assert_eq!(num_short(12_399), "12.3k");
        assert_eq!(num_short(100_005), "100k");
        assert_eq!(num_short(999_999), "999k");
        assert_eq!(num_short(1_000_000), "1.0M");
        assert_eq!(num_short(12_399_999), "12.3M");
        assert_eq!(num_short(999_999_999), "999M");
        assert_eq!(num_short(1_234_567_890), "1.2G");
        assert_eq!(num_short(-12_399), "-12.3k");
    }

    #[test]
    fn fit_line_cuts_at_the_edge_with_an_ellipsis() {
        let line = Line::from(vec![Span::raw("last run "), Span::raw("ブログ:技術記事")]);
        let fitted = fit_line(line, 16);
        let shown: String = fitted.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(shown, "last run ブログ…");
        assert!(text::width(&shown) <= 16);
        let fitted = fit_line(Line::from(vec![Span::raw("abc"), Span::raw("def")]), 3);
        let shown: String = fitted.spans.iter().map(|s| s.content.as_ref()).collect();
        assert_eq!(shown, "ab…");
    }

    /// The text module measures as ratatui draws: a text cut to fit ends
    /// where the next cell begins (a halfwidth dakuten, a combining mark,
    /// an emoji, a CJK character).
    #[test]
    fn widths_are_what_ratatui_draws() {
        use ratatui::buffer::Buffer;
        for s in [
            "ｶﾞｷﾞｸﾞ",
            "e\u{301}te\u{301}",
            "🎉👨\u{200d}👩\u{200d}👧",
            "ブログ:技術記事",
            "a❤\u{fe0f}b",
        ] {
            let mut buf = Buffer::empty(Rect::new(0, 0, 40, 1));
            let (x, _) = buf.set_stringn(0, 0, s, 40, ratatui::style::Style::default());
            assert_eq!(x as usize, text::width(s), "{s:?}");
        }
    }
}
