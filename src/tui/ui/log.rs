//! Pane 5: the run log (structured events), following new ones or held
//! still, filtered by kind and batch. Failures and empty results stand out.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};

use super::{clean, clock, pane_block, placeholder};
use crate::tui::app::App;
use crate::tui::theme::Role;

/// How an event kind is shown.
pub fn kind_role(kind: &str) -> Role {
    match kind {
        "failed" | "quarantined" | "crashed" | "aborted" => Role::Fail,
        "empty" | "lock-held" | "lock-takeover" | "paused" | "retry" => Role::Warn,
        "done" => Role::Ok,
        "run-started" | "run-finished" | "requeued" | "skipped" | "unpaused" | "fire" => {
            Role::Accent
        }
        _ => Role::Normal,
    }
}

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
    let header =
        Row::new(["TIME (UTC)", "BATCH", "KIND", "KEY", "MESSAGE"]).style(p.style(Role::Dim));
    let rows: Vec<Row> = events
        .iter()
        .enumerate()
        .skip(app.log.nav.top)
        .take(visible)
        .map(|(i, e)| {
            let role = kind_role(&e.kind);
            let mut message = clean(&e.message, 400);
            if let Some(actor) = &e.actor {
                message.push_str(&format!(" [{}]", clean(actor, 60)));
            }
            if let (true, Some(run)) = (wide, e.run_id) {
                message.push_str(&format!(" (run {run})"));
            }
            let row = Row::new(vec![
                Cell::from(clock(e.at, app.now)),
                Cell::from(
                    e.batch
                        .as_deref()
                        .map(|b| clean(b, 40))
                        .unwrap_or_else(|| "-".into()),
                ),
                Cell::from(clean(&e.kind, 20)).style(p.style(role)),
                Cell::from(e.key.as_deref().map(|k| clean(k, 64)).unwrap_or_default()),
                Cell::from(message).style(if role == Role::Fail {
                    p.style(Role::Fail)
                } else {
                    p.style(Role::Normal)
                }),
            ]);
            if i == app.log.nav.sel && !app.log.follow {
                row.style(p.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Length(11),
        Constraint::Length(if wide { 16 } else { 10 }),
        Constraint::Length(13),
        Constraint::Length(if wide { 34 } else { 12 }),
        Constraint::Fill(1),
    ];
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}
