//! An item in full: state, payload (pretty JSON), result, op id, every
//! attempt's error newest first, and its own events. One scrollable page;
//! long texts are wrapped and cut, never allowed to run off.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{ago, clean, clock, pane_block, state_role, state_word, wrap};
use crate::tui::app::App;
use crate::tui::theme::Role;
use crate::util::time::rfc3339;

/// Lines a long text may take before it is cut.
const MAX_TEXT_LINES: usize = 60;

fn text_width(app: &App) -> usize {
    (app.size.0 as usize).saturating_sub(6).max(20)
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

/// The whole page, before scrolling.
pub fn lines(app: &App) -> Vec<Line<'static>> {
    let p = app.setup.palette;
    let width = text_width(app);
    let label = |s: &str| Span::styled(format!("{s:<10}"), p.style(Role::Dim));
    let heading = |s: &str| Line::from(Span::styled(s.to_string(), p.style(Role::Title)));
    let indent = |s: String| Line::from(format!("  {s}"));
    let Some(detail) = &app.detail else {
        return Vec::new();
    };
    let d = match &app.data.detail {
        Some(Ok(d)) if d.item.key == detail.key => d,
        Some(Err(e)) => return vec![Line::from(Span::styled(clean(e, 500), p.style(Role::Fail)))],
        _ => return vec![Line::from(Span::styled("loading…", p.style(Role::Dim)))],
    };
    let item = &d.item;
    let mut out = vec![
        Line::from(vec![label("key"), Span::raw(clean(&item.key, 200))]),
        Line::from(vec![label("label"), Span::raw(clean(&item.label, 400))]),
        Line::from(vec![
            label("state"),
            Span::styled(
                state_word(item.status, item.tier, item.outcome),
                p.style(state_role(item.status, item.outcome)),
            ),
            Span::raw(format!("   attempts {}", item.attempts)),
            Span::raw(match &item.op_id {
                Some(op) => format!("   op id {}", clean(op, 120)),
                None => "   op id —".into(),
            }),
        ]),
    ];
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
    out.push(Line::from(vec![label("time"), Span::raw(when)]));
    out.push(Line::from(vec![
        label(""),
        Span::raw(format!("created {}", rfc3339(item.created_at))),
    ]));
    if let Some(class) = &item.error_class {
        let message = item.error_message.as_deref().unwrap_or("");
        let text = format!("{}: {message}", class);
        for (i, l) in wrap(&text, width - 10, 8).into_iter().enumerate() {
            let head = if i == 0 { label("error") } else { label("") };
            out.push(Line::from(vec![head, Span::styled(l, p.style(Role::Fail))]));
        }
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
        for l in wrap(&fl.message, width - 4, 8) {
            out.push(Line::from(format!("    {l}")));
        }
    }
    out.push(Line::default());
    out.push(heading(&format!("events ({})", d.events.len())));
    for e in &d.events {
        let who = e
            .actor
            .as_deref()
            .map(|a| format!(" [{}]", clean(a, 60)))
            .unwrap_or_default();
        out.push(Line::from(vec![
            Span::raw(format!("  {}  ", clock(e.at, app.now))),
            Span::styled(
                format!("{:<12} ", clean(&e.kind, 20)),
                p.style(super::log::kind_role(&e.kind)),
            ),
            Span::raw(format!("{}{who}", clean(&e.message, 300))),
        ]));
    }
    out
}

/// Pretty JSON, each line made inert and wrapped.
fn json_lines(value: &serde_json::Value, width: usize, out: &mut Vec<Line<'static>>) {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_default();
    let mut budget = MAX_TEXT_LINES * 8;
    for line in pretty.lines() {
        for l in wrap(line, width - 2, MAX_TEXT_LINES) {
            if budget == 0 {
                out.push(Line::from("  … (cut)"));
                return;
            }
            budget -= 1;
            out.push(Line::from(format!("  {l}")));
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
    let block = pane_block(
        app,
        vec![
            Span::styled("Item ", p.style(Role::Title)),
            Span::raw(clean(&detail.key, 60)),
            Span::styled(
                format!(
                    " · {batch} · lines {}–{} of {} · Esc: back",
                    scroll + 1,
                    (scroll + visible).min(all.len()),
                    all.len()
                ),
                p.style(Role::Dim),
            ),
        ],
    );
    let shown: Vec<Line> = all.into_iter().skip(scroll).take(visible).collect();
    f.render_widget(Paragraph::new(shown).block(block), area);
}
