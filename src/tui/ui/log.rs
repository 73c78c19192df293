//! Pane 5: the run log (structured events), following new ones or held
//! still, filtered by kind and batch. Failures and empty results stand out.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};

use super::{clean, clock, pane_block, placeholder};
use crate::model::Event;
use crate::tui::app::App;
use crate::tui::theme::{Role, kind_role};
use crate::util::text;

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let scope = if app.log.all_batches {
        "all batches".to_string()
    } else {
        app.batch
            .as_deref()
            .map(|b| clean(b, 40))
            .unwrap_or_default()
    };
    let kinds = if app.log.kinds.is_empty() {
        "all".to_string()
    } else {
        clean(&app.log.kinds.join(","), 60)
    };
    let (follow, follow_role) = if app.log.follow {
        ("following", Role::Ok)
    } else {
        ("held (f: follow)", Role::Warn)
    };
    let block = pane_block(
        app,
        area,
        vec![
            Span::styled("Run log", p.style(Role::Title)),
            Span::styled(
                format!(" · {scope} · kinds: {kinds} · "),
                p.style(Role::Dim),
            ),
            Span::styled(follow, p.style(follow_role)),
        ],
    );
    let events = &app.data.events;
    if events.is_empty() {
        let what = if app.log.kinds.is_empty() {
            "no events yet"
        } else {
            "no events of these kinds"
        };
        placeholder(app, f, area, block, &super::empty_text(app, what));
        return;
    }
    let visible = (area.height as usize).saturating_sub(3);
    let wide = area.width >= 120;
    let shown: Vec<(usize, &Event)> = events
        .iter()
        .enumerate()
        .skip(app.log.nav.top)
        .take(visible)
        .collect();
    let cols = columns(app, area.width, &shown);
    let cell = |s: &str, w: usize| Cell::from(text::cut(s, w).into_owned());
    let header = Row::new(vec![
        cell(
            if cols.time >= 10 { "TIME (UTC)" } else { "UTC" },
            cols.time,
        ),
        cell("BATCH", cols.batch),
        cell("KIND", cols.kind),
        cell("KEY", cols.key),
        cell("LABEL", cols.label),
        cell("MESSAGE", cols.message),
    ])
    .style(p.style(Role::Dim));
    let rows: Vec<Row> = shown
        .iter()
        .map(|&(i, e)| {
            let role = kind_role(&e.kind);
            let row = Row::new(vec![
                Cell::from(clock(e.at, app.now)),
                Cell::from(clean(e.batch.as_deref().unwrap_or("-"), cols.batch)),
                Cell::from(clean(&e.kind, cols.kind)).style(p.style(role)),
                Cell::from(
                    e.key
                        .as_deref()
                        .map(|k| super::short_key(k, cols.key))
                        .unwrap_or_default(),
                ),
                Cell::from(clean(&label_of(e, cols.key), cols.label)),
                Cell::from(text::cut(&message(e, wide), cols.message).into_owned()).style(
                    if role == Role::Fail {
                        p.style(Role::Fail)
                    } else {
                        p.style(Role::Normal)
                    },
                ),
            ]);
            if i == app.log.nav.sel && !app.log.follow {
                row.style(p.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let widths = [
        cols.time,
        cols.batch,
        cols.kind,
        cols.key,
        cols.label,
        cols.message,
    ]
    .map(|w| Constraint::Length(w as u16));
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

/// The item an event is about, by label beside a KEY column `key_cells`
/// wide (`label_beside`; empty when it is about none).
fn label_of(e: &Event, key_cells: usize) -> String {
    match (&e.key, &e.label) {
        (Some(key), label) => {
            super::label_beside(key, label.as_deref().unwrap_or(key), key_cells).to_string()
        }
        _ => String::new(),
    }
}

/// The message with who did it and, when there is room, the run.
fn message(e: &Event, wide: bool) -> String {
    let mut message = crate::tui::format::inert(&e.message).into_owned();
    if let Some(actor) = e.named_actor() {
        message.push_str(&format!(" [{}]", crate::tui::format::inert(actor)));
    }
    if let (true, Some(run)) = (wide, e.run_id) {
        message.push_str(&format!(" (run {run})"));
    }
    message
}

/// The widths of the run log's columns: time, batch and kind as wide as
/// what shows (within limits), the key a prefix, the label and the message
/// sharing the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Columns {
    time: usize,
    batch: usize,
    kind: usize,
    key: usize,
    label: usize,
    message: usize,
}

fn columns(app: &App, pane_width: u16, shown: &[(usize, &Event)]) -> Columns {
    let wide = pane_width >= 120;
    let widest = |f: &dyn Fn(&Event) -> usize, min: usize, max: usize| {
        shown
            .iter()
            .map(|(_, e)| f(e))
            .max()
            .unwrap_or(0)
            .clamp(min, max)
    };
    let time = widest(&|e| text::width(&clock(e.at, app.now)), 8, 11);
    let batch = widest(
        &|e| {
            text::width(&crate::tui::format::inert(
                e.batch.as_deref().unwrap_or("-"),
            ))
        },
        5,
        if wide { 16 } else { 10 },
    );
    let kind = widest(&|e| text::width(&e.kind), 4, 13);
    let key = widest(
        &|e| {
            e.key
                .as_deref()
                .map_or(0, |k| text::width(&crate::tui::format::inert(k)))
        },
        3,
        super::key_width(pane_width),
    );
    let inner = (pane_width as usize).saturating_sub(2);
    let rest = inner.saturating_sub(time + batch + kind + key + 5);
    let label_wants = widest(
        &|e| text::width(&crate::tui::format::inert(&label_of(e, key))),
        5,
        usize::MAX,
    );
    let label = label_wants.min(super::label_share(rest));
    Columns {
        time,
        batch,
        kind,
        key,
        label,
        message: rest - label,
    }
}
