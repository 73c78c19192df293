//! The frame around the panes: header (store, host, read-only badge, live
//! or stale), pane tabs with the selected batch, and the
//! footer (key hints from the keymap, or the latest message).

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{clean, fit_line, num};
use crate::model::EventKind;
use crate::tui::action::{Intent, Pane};
use crate::tui::app::{App, FilterTarget, Liveness};
use crate::tui::keymap::{self, Mode};
use crate::tui::theme::Role;
use crate::util::text;
use crate::util::time::compact;

pub fn header(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let status: Vec<Span> = match app.liveness() {
        Liveness::Loading => vec![Span::styled("loading…", p.style(Role::Dim))],
        Liveness::Live => vec![Span::styled("live", p.style(Role::Dim))],
        Liveness::Failing { err, age } => vec![Span::styled(
            match age {
                Some(age) => format!("stale {}: {}", compact(age), clean(err, 160)),
                None => format!("stale: {}", clean(err, 160)),
            },
            p.style(Role::Fail),
        )],
        Liveness::Silent { age } => vec![Span::styled(
            format!("stale {}: no answer from the store", compact(age)),
            p.style(Role::Fail),
        )],
    };
    let status_width: usize = status
        .iter()
        .map(|s| text::width(&s.content))
        .sum::<usize>()
        + 1;
    let status_room = status_width.min(area.width as usize * 2 / 3);
    let [left, right] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(status_room as u16)])
            .areas(area);
    let status = fit_line(Line::from(status), status_room.saturating_sub(1));
    let mut spans = vec![Span::styled(" nightshift ", p.style(Role::Title))];
    if app.setup.read_only {
        spans.push(Span::styled(" READ-ONLY ", p.style(Role::Badge)));
        spans.push(Span::raw(" "));
    }
    if app.data.emergency.is_some() {
        spans.push(Span::styled("⛔ EMERGENCY STOP ", p.style(Role::Fail)));
    }
    if app.busy > 0 {
        spans.push(Span::styled("⋯ working ", p.style(Role::Warn)));
    }
    let host = clean(&app.setup.host, 40);
    let used: usize = spans.iter().map(|s| text::width(&s.content)).sum();
    let room = (left.width as usize).saturating_sub(used + text::width(&host) + 4);
    // The end of a path says most: `…/nightshift/nightshift.db`.
    let path = crate::tui::format::inert(&app.setup.display_path).into_owned();
    spans.push(Span::raw(format!(
        "{} · {host}",
        text::cut_start(&path, room)
    )));
    let left_room = left.width as usize;
    f.render_widget(Paragraph::new(fit_line(Line::from(spans), left_room)), left);
    f.render_widget(
        Paragraph::new(status).alignment(ratatui::layout::Alignment::Right),
        right,
    );
}

pub fn tabs(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let narrow = area.width < 120;
    let tabs = app.tabs();
    let mut spans = Vec::new();
    for pane in &tabs {
        let style = if *pane == app.pane {
            p.style(Role::Selected)
        } else {
            p.style(Role::Dim)
        };
        let title = if narrow {
            pane.short_title()
        } else {
            pane.title()
        };
        spans.push(Span::styled(
            format!(" {} {title} ", pane.index() + 1),
            style,
        ));
        // Six tabs at 80 columns: their own padding parts them, so that
        // the selected batch's counts still fit beside them.
        if !narrow || tabs.len() < Pane::ALL.len() {
            spans.push(Span::raw(" "));
        }
    }
    let used: usize = spans.iter().map(|s| text::width(&s.content)).sum();
    f.render_widget(Paragraph::new(Line::from(spans)), area);
    let Some(info) = app.selected_info() else {
        return;
    };
    // Finished, failed and to do: they add up to the batch (`Counts`).
    let c = &info.counts;
    // Each mark with how much it says: where the room is short, the least
    // is left out first, so a crash, a pause or a hold is never lost to
    // the counts (the whole summary vanished at 80 columns).
    let mut marks: Vec<(Span<'static>, u8)> = Vec::new();
    if let Some(pct) = c.percent() {
        marks.push((Span::raw(format!(" {pct}%")), 0));
    }
    marks.push((
        Span::styled(format!(" ✓{}", num(c.finished())), p.style(Role::Ok)),
        1,
    ));
    if c.failed() > 0 {
        marks.push((
            Span::styled(format!(" ✗{}", num(c.failed())), p.style(Role::Fail)),
            3,
        ));
    }
    if c.to_do() > 0 {
        marks.push((Span::raw(format!(" …{}", num(c.to_do()))), 2));
    }
    // Held by a budget or a retry-after, as `status --short` says: a run
    // that may start no call is not said `running`.
    let hold = super::batches::hold_words(app, &info);
    if info.running() {
        let (word, role) = match (info.stop_asked_by(), hold) {
            (Some(_), _) => (" ▶ stopping".to_string(), Role::Warn),
            (None, Some(hold)) => (format!(" ▶ {hold}"), Role::Warn),
            (None, None) if narrow => (" ▶".to_string(), Role::Accent),
            (None, None) => (" ▶ running".to_string(), Role::Accent),
        };
        marks.push((Span::styled(word, p.style(role)), 4));
    } else if let Some(hold) = hold {
        marks.push((Span::styled(format!(" {hold}"), p.style(Role::Warn)), 4));
    }
    if let Some(dead) = info.dead_runner() {
        marks.push((Span::styled(format!(" {dead}"), p.style(Role::Fail)), 6));
    }
    // Paused by its flag, or with every batch by the emergency stop (as
    // `status --short` marks it).
    if info.pause.is_some() || app.data.emergency.is_some() {
        let word = if narrow { " ⏸" } else { " ⏸ PAUSED" };
        marks.push((Span::styled(word, p.style(Role::Warn)), 5));
    }
    let room = (area.width as usize).saturating_sub(used);
    let Some((name, marks)) = fit_summary(&info.name, marks, room) else {
        return;
    };
    let mut right = vec![Span::styled(name, p.style(Role::Title))];
    right.extend(marks);
    right.push(Span::raw(" "));
    let width: usize = right.iter().map(|s| text::width(&s.content)).sum();
    if width <= room {
        let [_, r] =
            Layout::horizontal([Constraint::Fill(1), Constraint::Length(width as u16)]).areas(area);
        f.render_widget(Paragraph::new(Line::from(right)), r);
    }
}

/// The fewest cells of a batch's name the header's summary cuts it to
/// (with its `…`); fewer, and the summary is left out.
const MIN_NAME: usize = 4;

/// The batch's name as the header's summary shows it, beside `marks`
/// cells of counts in `room` cells: whole (up to 40 cells), or cut with
/// `…` so the summary fits (a long name, or a run's ▶ at 80 columns, made
/// the whole summary vanish); `None` when even [`MIN_NAME`] cells do not.
fn summary_name(name: &str, marks: usize, room: usize) -> Option<String> {
    let name_room = room.saturating_sub(marks).min(40);
    (name_room >= MIN_NAME).then(|| clean(name, name_room))
}

/// The header's summary in `room` cells: the name (see [`summary_name`])
/// and the marks that fit beside it, the ones that say least (the lowest
/// weight) left out first; `None` when not even the name fits.
fn fit_summary(
    name: &str,
    mut marks: Vec<(Span<'static>, u8)>,
    room: usize,
) -> Option<(String, Vec<Span<'static>>)> {
    loop {
        let width = marks
            .iter()
            .map(|(s, _)| text::width(&s.content))
            .sum::<usize>()
            + 1;
        if let Some(name) = summary_name(name, width, room) {
            return Some((name, marks.into_iter().map(|(s, _)| s).collect()));
        }
        let least = marks
            .iter()
            .enumerate()
            .min_by_key(|(_, (_, says))| *says)?
            .0;
        marks.remove(least);
    }
}

/// Cells of what is typed that the filter line keeps, when it is that long.
const TYPED_ROOM: usize = 24;

/// The filter being typed: what is typed always shows (its end, where the
/// cursor is); the label, then the key hints, shorten to leave it room.
/// Kinds the run log has no word for are named.
fn filter_line(app: &App, width: usize) -> Line<'static> {
    let p = app.setup.palette;
    let (labels, unknown): (&[&str], _) = match app.filter_target {
        FilterTarget::Search => (&["search key/label: ", "search: "], Vec::new()),
        FilterTarget::Kinds => (
            &[
                "kinds (comma-separated, e.g. failed,empty,lock-held): ",
                "kinds (e.g. failed,empty): ",
                "kinds: ",
            ],
            app.unknown_kinds(),
        ),
    };
    let problem = if unknown.is_empty() {
        String::new()
    } else {
        // The kinds a word not finished yet may become.
        let like: Vec<&str> = EventKind::ALL
            .iter()
            .map(|k| k.as_str())
            .filter(|k| unknown.iter().any(|u| k.starts_with(u)))
            .take(3)
            .collect();
        let noun = if unknown.len() == 1 { "kind" } else { "kinds" };
        let mut problem = format!("   no {noun} {}", clean(&unknown.join(", "), 40));
        if !like.is_empty() {
            problem.push_str(&format!(" ({}?)", like.join(", ")));
        }
        problem
    };
    let typed = crate::tui::format::inert(&app.input).into_owned();
    let want = text::width(&typed).min(TYPED_ROOM);
    let fits = |label: &str, keys: &str| {
        text::width(label) + want + text::width(&problem) + text::width(keys) + 2 <= width
    };
    let keys = if problem.is_empty() {
        format!("   {}", keymap::offers(Mode::Filter, app.at()))
    } else {
        format!(" · {}", keymap::offer(Mode::Filter, &Intent::Cancel))
    };
    let keys = keys.as_str();
    let (label, keys) = labels
        .iter()
        .find(|l| fits(l, keys))
        .map(|l| (*l, keys))
        .unwrap_or((labels[labels.len() - 1], ""));
    let room =
        width.saturating_sub(text::width(label) + text::width(&problem) + text::width(keys) + 2);
    let hint_role = if problem.is_empty() {
        Role::Dim
    } else {
        Role::Fail
    };
    Line::from(vec![
        Span::styled(format!(" {label}"), p.style(Role::Key)),
        Span::raw(text::cut_start(&typed, room).into_owned()),
        Span::styled("█", p.style(Role::Accent)),
        Span::styled(problem, p.style(Role::Fail)),
        Span::styled(keys.to_string(), p.style(hint_role)),
    ])
}

/// Rows a message may take: the footer and the rows above it.
const FLASH_ROWS: usize = 4;

/// A message, wrapped whole where the footer's one row is too short (a
/// config file's error: what is wrong, and that the config shown is the
/// one before, come after its line number), over the rows above the
/// footer; past [`FLASH_ROWS`] its last row ends in `…`.
fn flash_rows(f: &mut Frame, footer: Rect, said: &str, style: ratatui::style::Style) {
    let width = (footer.width as usize).saturating_sub(1);
    let lines = super::wrap_cut(said, width, FLASH_ROWS);
    let rows = u16::try_from(lines.len())
        .unwrap_or(u16::MAX)
        .min(footer.y.saturating_add(1));
    let area = Rect {
        y: footer.y + 1 - rows,
        height: rows,
        ..footer
    };
    let lines: Vec<Line> = lines
        .into_iter()
        .map(|l| Line::from(Span::styled(format!(" {l}"), style)))
        .collect();
    f.render_widget(Clear, area);
    f.render_widget(Paragraph::new(lines), area);
}

pub fn footer(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    if app.mode == Mode::Filter {
        let line = filter_line(app, area.width as usize);
        f.render_widget(Paragraph::new(fit_line(line, area.width as usize)), area);
        return;
    }
    if let Some(flash) = app.flash_text() {
        let role = if flash.error { Role::Fail } else { Role::Warn };
        flash_rows(f, area, &flash.text, p.style(role));
        return;
    }
    // `?` and `q` always show, at the right; the rest as far as it fits.
    let mut fixed = Vec::new();
    let mut rest = Vec::new();
    let mut write_keys = Vec::new();
    for b in keymap::bindings(app.mode, app.at()) {
        if !b.footer {
            continue;
        }
        let (key, hint) = (b.keys[0].label(), b.name);
        if b.writes && app.setup.read_only {
            write_keys.push(key);
        } else if matches!(b.intent, Intent::Quit | Intent::Help) {
            fixed.push((key, hint));
        } else {
            rest.push((key, hint));
        }
    }
    let item = |(key, hint): &(String, &str)| {
        vec![
            Span::styled(key.clone(), p.style(Role::Key)),
            Span::styled(format!(" {hint}  "), p.style(Role::Dim)),
        ]
    };
    let mut right: Vec<Span> = fixed.iter().flat_map(item).collect();
    if !write_keys.is_empty() {
        right.insert(
            0,
            Span::styled(
                format!("{}: read-only  ", write_keys.join(" ")),
                p.style(Role::Warn),
            ),
        );
    }
    let right_width: usize = right.iter().map(|s| text::width(&s.content)).sum();
    let room = (area.width as usize).saturating_sub(right_width + 1);
    let mut left = vec![Span::raw(" ")];
    let mut used = 1;
    for r in &rest {
        let spans = item(r);
        let w: usize = spans.iter().map(|s| text::width(&s.content)).sum();
        if used + w > room {
            break;
        }
        used += w;
        left.extend(spans);
    }
    let [l, r] = Layout::horizontal([Constraint::Fill(1), Constraint::Length(right_width as u16)])
        .areas(area);
    f.render_widget(Paragraph::new(Line::from(left)), l);
    f.render_widget(Paragraph::new(Line::from(right)), r);
}

#[cfg(test)]
mod tests {
    use super::{fit_summary, summary_name};
    use ratatui::text::Span;

    /// At 80 columns the counts of a big batch left no room: the whole
    /// summary vanished, its crash mark with it. The counts go first.
    #[test]
    fn the_headers_summary_keeps_a_crash_and_a_pause_over_counts() {
        let marks = vec![
            (Span::raw(" 41%"), 0),
            (Span::raw(" ✓1,234"), 1),
            (Span::raw(" ✗56"), 3),
            (Span::raw(" …1,710"), 2),
            (Span::raw(" crashed"), 6),
            (Span::raw(" ⏸"), 5),
        ];
        let shown = |room| {
            fit_summary("articles", marks.clone(), room).map(|(name, marks)| {
                let marks: String = marks.iter().map(|s| s.content.to_string()).collect();
                format!("{name}{marks}")
            })
        };
        assert_eq!(
            shown(60).as_deref(),
            Some("articles 41% ✓1,234 ✗56 …1,710 crashed ⏸")
        );
        assert_eq!(shown(28).as_deref(), Some("artic… ✗56 …1,710 crashed ⏸"));
        assert_eq!(shown(20).as_deref(), Some("arti… ✗56 crashed ⏸"));
        assert_eq!(shown(16).as_deref(), Some("arti… crashed ⏸"));
        assert_eq!(shown(4), None);
    }

    /// `記事バッチ 15% ✓47 ✗13 …240 ▶` beside five tabs at 80 columns:
    /// the name gives way (cut by display width, with `…`), where the whole
    /// summary vanished.
    #[test]
    fn the_headers_summary_cuts_the_name_rather_than_vanish() {
        assert_eq!(
            summary_name("articles", 20, 40).as_deref(),
            Some("articles")
        );
        assert_eq!(
            summary_name("記事バッチ", 20, 27).as_deref(),
            Some("記事バ…")
        );
        assert_eq!(summary_name("記事バッチ", 20, 23), None);
        let long = "x".repeat(60);
        assert_eq!(
            summary_name(&long, 0, 100).map(|n| n.chars().count()),
            Some(40)
        );
    }
}
