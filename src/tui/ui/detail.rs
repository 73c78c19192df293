//! An item in full: state, payload (pretty JSON), result, op id, every
//! attempt's error newest first, and its own events. One scrollable page;
//! long texts are wrapped and cut, never allowed to run off.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{ago, clean, clock, pane_block, state_role, state_word, wrap};
use crate::tui::app::App;
use crate::tui::theme::Role;
use crate::util::text;
use crate::util::time::rfc3339;

/// Lines one line of the payload or result may take before it is cut.
const MAX_TEXT_LINES: usize = 60;
/// Lines one field (a label, an error, an event's message) may take
/// before it is cut: a worker's message is kept to 500 characters, 15
/// lines of CJK text at 80 columns.
const FIELD_LINES: usize = 24;
/// Cells of the field names on the left (`label`, `state`, ...).
const FIELD: usize = 10;

/// Cells inside the pane's borders.
fn text_width(app: &App) -> usize {
    (app.size.0 as usize).saturating_sub(2).max(20)
}

fn visible_rows(app: &App) -> usize {
    (app.size.1 as usize).saturating_sub(5).max(1)
}

/// The furthest the page can scroll at the current size.
pub fn max_scroll(app: &App) -> usize {
    if app.detail.is_none() {
        return 0;
    }
    lines(app).len().saturating_sub(visible_rows(app))
}

/// `text` wrapped (inert) after a first-line `head` of `indent` cells;
/// the lines after it indented as far.
fn hanging(
    head: Vec<Span<'static>>,
    indent: usize,
    text: &str,
    width: usize,
    style: Style,
    out: &mut Vec<Line<'static>>,
) {
    let pad = " ".repeat(indent);
    for (i, l) in wrap(text, width.saturating_sub(indent), FIELD_LINES)
        .into_iter()
        .enumerate()
    {
        let mut spans = if i == 0 {
            head.clone()
        } else {
            vec![Span::raw(pad.clone())]
        };
        spans.push(Span::styled(l, style));
        out.push(Line::from(spans));
    }
}

/// The whole page, before scrolling: every line fits the pane, long texts
/// wrapped by display width.
pub fn lines(app: &App) -> Vec<Line<'static>> {
    let p = app.setup.palette;
    let width = text_width(app);
    let field = |s: &str| Span::styled(text::pad(s, FIELD), p.style(Role::Dim));
    let heading = |s: &str| Line::from(Span::styled(s.to_string(), p.style(Role::Title)));
    let indent = |s: String| Line::from(format!("  {s}"));
    let Some(detail) = &app.detail else {
        return Vec::new();
    };
    let d = match &app.data.detail {
        Some(Ok(d)) if d.item.key == detail.key => d,
        Some(Err(e)) => {
            let mut out = Vec::new();
            hanging(Vec::new(), 0, e, width, p.style(Role::Fail), &mut out);
            return out;
        }
        _ => return vec![Line::from(Span::styled("loading…", p.style(Role::Dim)))],
    };
    let item = &d.item;
    let plain = Style::default();
    let mut out = Vec::new();
    hanging(vec![field("key")], FIELD, &item.key, width, plain, &mut out);
    hanging(
        vec![field("label")],
        FIELD,
        &item.label,
        width,
        plain,
        &mut out,
    );
    out.push(Line::from(vec![
        field("state"),
        Span::styled(
            state_word(item.status, item.tier, item.outcome),
            p.style(state_role(item.status, item.outcome)),
        ),
        Span::raw(format!("   attempts {}", item.attempts)),
        Span::raw(match &item.op_id {
            Some(op) => format!("   op id {}", clean(op, 120)),
            None => "   op id —".into(),
        }),
    ]));
    let mut when = format!(
        "updated {} ({})",
        rfc3339(item.updated_at),
        ago(item.updated_at, app.now),
    );
    if let Some(at) = item.next_attempt_at {
        when.push_str(&format!("   next try {}", ago(at, app.now)));
    }
    if let Some(cost) = item.cost {
        when.push_str(&format!("   cost {cost:.4}"));
    }
    hanging(vec![field("time")], FIELD, &when, width, plain, &mut out);
    out.push(Line::from(vec![
        field(""),
        Span::raw(format!("created {}", rfc3339(item.created_at))),
    ]));
    if let Some(class) = &item.error_class {
        let message = item.error_message.as_deref().unwrap_or("");
        let text = format!("{class}: {message}");
        hanging(
            vec![field("error")],
            FIELD,
            &text,
            width,
            p.style(Role::Fail),
            &mut out,
        );
    }
    out.push(Line::default());
    out.push(heading("payload"));
    json_lines(&item.payload, width, &mut out);
    out.push(Line::default());
    out.push(heading("result"));
    match &item.result {
        Some(r) => json_lines(r, width, &mut out),
        None => out.push(indent("—".into())),
    }
    out.push(Line::default());
    out.push(heading(&format!(
        "attempts that failed ({}), newest first",
        d.failures.len()
    )));
    if d.failures.is_empty() {
        out.push(indent("none".into()));
    }
    for fl in &d.failures {
        out.push(Line::from(vec![
            Span::raw(format!(
                "  {}  attempt {}  ",
                rfc3339(fl.failed_at),
                fl.attempt
            )),
            Span::styled(format!("{}  ", fl.tier), p.style(Role::Warn)),
            Span::styled(clean(&fl.error_class, 80), p.style(Role::Fail)),
        ]));
        hanging(
            vec![Span::raw("    ")],
            4,
            &fl.message,
            width,
            plain,
            &mut out,
        );
    }
    out.push(Line::default());
    out.push(heading(&format!("events ({})", d.events.len())));
    for e in &d.events {
        let who = e
            .actor
            .as_deref()
            .map(|a| format!(" [{a}]"))
            .unwrap_or_default();
        let when = format!("  {}  ", clock(e.at, app.now));
        let kind = format!("{} ", text::pad(&clean(&e.kind, 20), 12));
        let indent = text::width(&when) + text::width(&kind);
        hanging(
            vec![
                Span::raw(when),
                Span::styled(kind, p.style(crate::tui::theme::kind_role(&e.kind))),
            ],
            indent,
            &format!("{}{who}", e.message),
            width,
            plain,
            &mut out,
        );
    }
    super::fit_lines(out, width)
}

/// Pretty JSON, each line made inert and wrapped by width; a wrapped
/// line goes on under its own indentation.
fn json_lines(value: &serde_json::Value, width: usize, out: &mut Vec<Line<'static>>) {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
    let mut budget = MAX_TEXT_LINES * 8;
    for line in pretty.lines() {
        let body = line.trim_start_matches(' ');
        let indent = 2 + line.len() - body.len();
        let pad = " ".repeat(indent);
        let more = " ".repeat(indent + 2);
        for (i, l) in wrap(body, width.saturating_sub(indent + 2), MAX_TEXT_LINES)
            .into_iter()
            .enumerate()
        {
            if budget == 0 {
                out.push(Line::from("  … (cut)"));
                return;
            }
            budget -= 1;
            let lead = if i == 0 { &pad } else { &more };
            out.push(Line::from(format!("{lead}{l}")));
        }
    }
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let Some(detail) = app.open_detail() else {
        return;
    };
    let all = lines(app);
    let visible = (area.height as usize).saturating_sub(2);
    let scroll = detail.scroll.min(all.len().saturating_sub(visible));
    let batch = app
        .batch
        .as_deref()
        .map(|b| clean(b, 40))
        .unwrap_or_default();
    let label = match &app.data.detail {
        Some(Ok(d)) if d.item.key == detail.key => d.item.label.as_str(),
        _ => "",
    };
    let place = format!(
        " · {batch} · lines {}–{} of {}",
        scroll + 1,
        (scroll + visible).min(all.len()),
        all.len()
    );
    let room = (area.width as usize).saturating_sub(4);
    let name = super::item_name(&detail.key, label, super::key_width(area.width));
    let back = " · Esc: back";
    let used = text::width("Item ") + text::width(&name) + text::width(&place);
    let mut title = vec![
        Span::styled("Item ", p.style(Role::Title)),
        Span::raw(name),
        Span::styled(place, p.style(Role::Dim)),
    ];
    if used + text::width(back) <= room {
        title.push(Span::styled(back, p.style(Role::Dim)));
    }
    let block = pane_block(app, area, title);
    let shown: Vec<Line> = all.into_iter().skip(scroll).take(visible).collect();
    f.render_widget(Paragraph::new(shown).block(block), area);
}
