//! Drawing: `render(&App, &mut Frame)` and one module per pane. Nothing
//! here changes the state. Every text that came from the store goes
//! through [`clean`] (control characters made inert, length cut) before it
//! reaches a cell.

pub mod activity;
pub mod batches;
pub mod chrome;
pub mod detail;
pub mod dlq;
pub mod items;
pub mod log;
pub mod overlay;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

use super::action::Pane;
use super::app::App;
use super::keymap::Mode;
use super::theme::Role;
use crate::model::{Millis, Outcome, Status, Tier};
use crate::util::sanitize;

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// Rows a list pane shows: the screen less header, tabs, footer, the
/// pane's borders and its column header.
pub fn list_rows(size: (u16, u16)) -> usize {
    (size.1 as usize).saturating_sub(6).max(1)
}

pub fn render(app: &App, f: &mut Frame) {
    let area = f.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        too_small(app, f, area);
        return;
    }
    let [header, tabs, main, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(area);
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

/// Untrusted text for one cell: cut to `max` characters, then every
/// control, escape or bidi character shown as a visible escape.
pub fn clean(s: &str, max: usize) -> String {
    sanitize::line(&sanitize::truncate(s, max)).into_owned()
}

/// Untrusted text wrapped into lines of `width` characters, at most
/// `max_lines` (the last saying how much was left out).
pub fn wrap(s: &str, width: usize, max_lines: usize) -> Vec<String> {
    let width = width.max(10);
    let mut out = Vec::new();
    let mut chars = s.chars();
    let budget = width * max_lines;
    let head: String = chars.by_ref().take(budget).collect();
    let rest = chars.count();
    let safe = sanitize::line(&head).into_owned();
    let safe: Vec<char> = safe.chars().collect();
    for chunk in safe.chunks(width) {
        if out.len() == max_lines {
            break;
        }
        out.push(chunk.iter().collect());
    }
    let shown: usize = out.iter().map(|l: &String| l.chars().count()).sum();
    let hidden = rest + safe.len().saturating_sub(shown);
    if hidden > 0 {
        out.push(format!("… ({hidden} more characters)"));
    }
    out
}

/// `1,234,567`.
pub fn num(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A text progress bar that reads without colour.
pub fn bar(ratio: f64, width: usize) -> String {
    let ratio = if ratio.is_finite() {
        ratio.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let filled = (ratio * width as f64).round() as usize;
    format!(
        "{}{}",
        "█".repeat(filled),
        "░".repeat(width - filled.min(width))
    )
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

/// `failed/manual`, `done/empty`, `pending`.
pub fn state_word(status: Status, tier: Option<Tier>, outcome: Option<Outcome>) -> String {
    match (status, tier, outcome) {
        (Status::Failed, Some(t), _) => format!("failed/{t}"),
        (Status::Done, _, Some(o)) if o != Outcome::Done => format!("done/{o}"),
        (s, _, _) => s.to_string(),
    }
}

pub fn state_role(status: Status, outcome: Option<Outcome>) -> Role {
    match (status, outcome) {
        (Status::Failed, _) => Role::Fail,
        (Status::Done, Some(Outcome::Empty)) => Role::Warn,
        (Status::Done, _) => Role::Ok,
        (Status::Claimed, _) => Role::Accent,
        (Status::Pending, _) => Role::Normal,
    }
}

/// A bordered pane with a title.
pub fn pane_block<'a>(app: &App, title: Vec<Span<'a>>) -> Block<'a> {
    let mut spans = vec![Span::raw(" ")];
    spans.extend(title);
    spans.push(Span::raw(" "));
    Block::default()
        .borders(Borders::ALL)
        .border_style(app.setup.palette.style(Role::Dim))
        .title(Line::from(spans))
}

/// Centered text when a pane has nothing to show yet.
pub fn placeholder(app: &App, f: &mut Frame, area: Rect, block: Block<'_>, text: &str) {
    f.render_widget(
        Paragraph::new(text.to_string())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(num(1_234_567), "1,234,567");
        assert_eq!(num(-12), "-12");
        assert_eq!(bar(0.5, 4), "██░░");
        assert_eq!(bar(f64::NAN, 2), "░░");
        assert_eq!(clean("a\x1b[2Jb", 100), "a\\x1b[2Jb");
        let lines = wrap(&"x".repeat(100), 10, 3);
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[3], "… (70 more characters)");
    }
}
