//! Popups over the panes: the `?` help (generated from the keymap), the
//! confirm dialog (No by default), the pause-reason prompt and the
//! "since you last looked" summary.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::{clean, fit_lines, num, wrap, wrap_lines};
use crate::tui::action::{Pane, Write};
use crate::tui::app::App;
use crate::tui::keymap::{self, Mode};
use crate::tui::theme::Role;
use crate::util::noun;
use crate::util::text;
use crate::util::time::{compact, rfc3339};

/// Widest an error class gets in the "since you last looked" summary.
const CLASS_CELLS: usize = 40;

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [h] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    h
}

/// Clears `rect` for a popup, and a wide character (Japanese, emoji) that
/// starts in the cell left of it: its second half lies under the popup's
/// left border, and a terminal would draw it over the border.
fn clear(f: &mut Frame, rect: Rect) {
    f.render_widget(Clear, rect);
    let Some(left) = rect.x.checked_sub(1) else {
        return;
    };
    let buf = f.buffer_mut();
    for y in rect.top()..rect.bottom() {
        let cell = &mut buf[(left, y)];
        if text::width(cell.symbol()) > 1 {
            cell.set_symbol(" ");
        }
    }
}

fn popup<'a>(app: &App, title: &str, role: Role) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.setup.palette.style(role))
        .title(Span::styled(
            format!(" {title} "),
            app.setup.palette.style(role),
        ))
}

pub fn help(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let mut lines = Vec::new();
    let mut seen = Vec::new();
    // Every Normal binding once, whatever pane it belongs to.
    for pane in Pane::ALL {
        for b in keymap::bindings(Mode::Normal, pane) {
            if seen.contains(&b.intent) {
                continue;
            }
            seen.push(b.intent.clone());
            let mut spans = vec![
                Span::styled(
                    format!("  {:<18}", keymap::keys_label(b)),
                    p.style(Role::Key),
                ),
                Span::raw(b.described()),
            ];
            if !b.panes.is_empty() {
                let names: Vec<&str> = b.panes.iter().map(|p| p.title()).collect();
                spans.push(Span::styled(
                    format!("  ({})", names.join(", ")),
                    p.style(Role::Dim),
                ));
            }
            if b.writes && app.setup.read_only {
                spans.push(Span::styled("  — disabled: read-only", p.style(Role::Warn)));
            }
            lines.push(Line::from(spans));
        }
    }
    lines.push(Line::default());
    lines.push(Line::from(Span::styled(
        format!(
            "  Confirm dialogs: {}.  Filters: type, {}.",
            keymap::offers(Mode::Confirm, Pane::Items),
            keymap::offers(Mode::Filter, Pane::Items)
        ),
        p.style(Role::Dim),
    )));
    let height = area.height.saturating_sub(2);
    let rect = centered(area, area.width.saturating_sub(4).min(100), height);
    let visible = rect.height.saturating_sub(2) as usize;
    // Each description whole, wrapped under itself (the box scrolls): cut,
    // the longer ones lost what they say at 80 columns.
    let lines = wrap_lines(lines, rect.width.saturating_sub(2) as usize, usize::MAX, 20);
    let scroll = app.help_scroll.min(lines.len().saturating_sub(visible));
    clear(f, rect);
    f.render_widget(
        Paragraph::new(lines.into_iter().skip(scroll).collect::<Vec<_>>()).block(popup(
            app,
            &format!("Keys — {}", keymap::offers(Mode::Help, app.at())),
            Role::Title,
        )),
        rect,
    );
}

pub fn confirm(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let Some(write) = &app.confirm else {
        return;
    };
    let width = area.width.saturating_sub(4).min(76);
    let inner = width.saturating_sub(2) as usize;
    // The question whole (it names the items), wrapped by width.
    let mut question = write.question();
    if let Write::Unpause { batch } = write
        && let Some(note) = app.pool_hold_note(batch)
    {
        question.push_str(&format!(" Note: {note}."));
    }
    let mut lines: Vec<Line> = wrap(&question, inner, 6)
        .into_iter()
        .map(Line::from)
        .collect();
    lines.extend([
        Line::default(),
        Line::from(
            keymap::bindings(Mode::Confirm, app.at())
                .filter(|b| b.footer)
                .flat_map(|b| {
                    [
                        Span::styled(keymap::keys_label(b), p.style(Role::Key)),
                        Span::raw(format!(" {}     ", b.described())),
                    ]
                })
                .collect::<Vec<_>>(),
        ),
    ]);
    let rect = centered(area, width, lines.len() as u16 + 2);
    clear(f, rect);
    f.render_widget(
        Paragraph::new(fit_lines(lines, inner)).block(popup(app, "Confirm", Role::Warn)),
        rect,
    );
}

pub fn prompt(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let batch = app
        .prompt
        .as_deref()
        .map(|b| clean(b, 40))
        .unwrap_or_default();
    let width = area.width.saturating_sub(4).min(76);
    let inner = width.saturating_sub(2) as usize;
    let mut lines: Vec<Line> = text::wrap(
        &format!("Pause {batch}: runs and schedule fires do nothing until unpaused."),
        inner,
    )
    .into_iter()
    .map(Line::from)
    .collect();
    // The end of what is typed, where the cursor is.
    let typed = crate::tui::format::inert(&app.input).into_owned();
    lines.push(Line::from(vec![
        Span::styled("why? ", p.style(Role::Key)),
        Span::raw(text::cut_start(&typed, inner.saturating_sub(6)).into_owned()),
        Span::styled("█", p.style(Role::Accent)),
    ]));
    lines.push(Line::from(Span::styled(
        format!(
            "{} (empty: \"paused from the dashboard\")",
            keymap::offers(Mode::Prompt, app.at())
        ),
        p.style(Role::Dim),
    )));
    let rect = centered(area, width, lines.len() as u16 + 3);
    clear(f, rect);
    f.render_widget(
        Paragraph::new(fit_lines(lines, inner)).block(popup(app, "Pause", Role::Warn)),
        rect,
    );
}

pub fn since(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let Some(s) = &app.since else {
        return;
    };
    let mut lines = vec![Line::from(Span::styled(
        format!(
            "Your last visit: {} ({} ago).",
            rfc3339(s.since),
            compact(((app.now - s.since).max(0) / 1000) as u64)
        ),
        p.style(Role::Dim),
    ))];
    if s.is_empty() {
        lines.push(Line::from("Nothing failed, ran or fired since then."));
    }
    let mut batches: Vec<&str> = s
        .failures
        .iter()
        .map(|f| f.0.as_str())
        .chain(s.runs.iter().map(|r| r.0.as_str()))
        .chain(s.takeovers.iter().map(|t| t.0.as_str()))
        .chain(s.fires.iter().map(|t| t.0.as_str()))
        .collect();
    batches.sort();
    batches.dedup();
    for b in batches {
        lines.push(Line::default());
        lines.push(Line::from(Span::styled(
            if b.is_empty() {
                "(no batch)".to_string()
            } else {
                clean(b, 60)
            },
            p.style(Role::Title),
        )));
        let failures: Vec<_> = s.failures.iter().filter(|f| f.0 == b).collect();
        if !failures.is_empty() {
            let total: i64 = failures.iter().map(|f| f.3).sum();
            let quarantined: i64 = failures
                .iter()
                .filter(|f| f.2 == crate::model::Tier::Manual)
                .map(|f| f.3)
                .sum();
            lines.push(Line::from(vec![
                Span::styled(
                    format!("  {} new {}", num(total), noun::of(total, "failure")),
                    p.style(Role::Fail),
                ),
                Span::raw(format!(", {} quarantined (manual)", num(quarantined))),
            ]));
            // Columns by display width: a Japanese class lines up too.
            let class_cells = failures
                .iter()
                .map(|f| text::width(&clean(&f.1, CLASS_CELLS)))
                .max()
                .unwrap_or(0)
                .max(12);
            for (_, class, tier, n) in failures {
                lines.push(Line::from(format!(
                    "    {} {}  {tier}",
                    text::pad(&clean(class, CLASS_CELLS), class_cells),
                    text::pad_left(&num(*n), 7)
                )));
            }
        }
        let runs: Vec<String> = s
            .runs
            .iter()
            .filter(|r| r.0 == b)
            .map(|r| format!("{} {}", num(r.2), clean(&r.1, 20)))
            .collect();
        if !runs.is_empty() {
            lines.push(Line::from(format!("  runs: {}", runs.join(", "))));
        }
        for (_, n) in s.takeovers.iter().filter(|t| t.0 == b) {
            lines.push(Line::from(Span::styled(
                format!("  lock takeovers: {n} (a runner died or its lock expired)"),
                p.style(Role::Warn),
            )));
        }
        let fires: Vec<String> = s
            .fires
            .iter()
            .filter(|r| r.0 == b)
            .map(|r| format!("{} {}", num(r.2), clean(&r.1, 20)))
            .collect();
        if !fires.is_empty() {
            lines.push(Line::from(format!(
                "  schedule fires: {}",
                fires.join(", ")
            )));
        }
    }
    let height = (lines.len() as u16 + 2).min(area.height.saturating_sub(2));
    let rect = centered(area, area.width.saturating_sub(8).min(90), height);
    let lines = fit_lines(lines, rect.width.saturating_sub(2) as usize);
    clear(f, rect);
    f.render_widget(
        Paragraph::new(lines).block(popup(
            app,
            &format!(
                "Since you last looked — {}",
                keymap::offers(Mode::Notice, app.at())
            ),
            Role::Title,
        )),
        rect,
    );
}
