//! Pane 3: the selected batch's items, filtered by status and searched by
//! key, label and error. The table is also the dead-letter pane's list of a
//! class's items.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Block, Cell, Row, Table};

use super::{clean, num, pane_block, placeholder, state_role, state_word};
use crate::store::ItemPage;
use crate::tui::app::App;
use crate::tui::nav::ListNav;
use crate::tui::theme::Role;

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let mut title = vec![Span::styled("Items", p.style(Role::Title))];
    if let Some(b) = &app.batch {
        title.push(Span::styled(
            format!(" · {}", clean(b, 40)),
            p.style(Role::Dim),
        ));
    }
    let status = app
        .status_filter
        .map_or("all".to_string(), |s| s.to_string());
    title.push(Span::raw(format!(" · status: {status}")));
    if !app.search.is_empty() {
        title.push(Span::raw(format!(
            " · search: \"{}\"",
            clean(&app.search, 40)
        )));
    }
    if let Some(page) = &app.data.items {
        title.push(Span::styled(position(page, &app.items), p.style(Role::Dim)));
    }
    let block = pane_block(app, title);
    match &app.data.items {
        Some(page) if page.total > 0 => table(app, f, area, block, page, &app.items),
        Some(page) if page.searching.is_some() => placeholder(app, f, area, block, "searching…"),
        Some(_) => placeholder(
            app,
            f,
            area,
            block,
            "no items match (s: status filter, /: search, Esc: clear)",
        ),
        None => placeholder(app, f, area, block, &super::empty_text(app, "loading…")),
    }
}

/// ` · 12 of 1,000` (`10,000+` when the count stopped), and how far a
/// search has got.
pub fn position(page: &ItemPage, nav: &ListNav) -> String {
    let searching = page
        .searching
        .map_or(String::new(), |pct| format!(" · searching {pct}%"));
    if page.total == 0 {
        return format!(" · none{searching}");
    }
    let total = if page.capped {
        format!("{}+", num(page.total.min(crate::store::COUNT_CAP)))
    } else {
        num(page.total)
    };
    format!(" · {} of {total}{searching}", num(nav.sel as i64 + 1))
}

pub fn table(
    app: &App,
    f: &mut Frame,
    area: Rect,
    block: Block<'_>,
    page: &ItemPage,
    nav: &ListNav,
) {
    let p = app.setup.palette;
    let visible = (area.height as usize).saturating_sub(3);
    let header = Row::new(["KEY", "STATE", "ATT", "LABEL", "LAST ERROR"]).style(p.style(Role::Dim));
    let rows: Vec<Row> = (nav.top..nav.top + visible)
        .filter(|i| (*i as i64) < page.total)
        .map(|i| {
            let row = match i.checked_sub(page.offset).and_then(|j| page.rows.get(j)) {
                Some(r) => {
                    let error = match (&r.error_class, &r.error_message) {
                        (Some(c), Some(m)) => format!("{}: {}", clean(c, 60), clean(m, 300)),
                        (Some(c), None) => clean(c, 60),
                        _ => String::new(),
                    };
                    let label = if r.label == r.key {
                        String::new()
                    } else {
                        clean(&r.label, 200)
                    };
                    Row::new(vec![
                        Cell::from(clean(&r.key, 64)),
                        Cell::from(state_word(r.status, r.tier, r.outcome))
                            .style(p.style(state_role(r.status, r.outcome))),
                        Cell::from(r.attempts.to_string()),
                        Cell::from(label),
                        Cell::from(error).style(p.style(Role::Fail)),
                    ])
                }
                None => Row::new(vec![Cell::from("…").style(p.style(Role::Dim))]),
            };
            if i == nav.sel {
                row.style(p.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let key_width = if area.width >= 120 { 34 } else { 18 };
    // Labels get the room when no visible row has an error to show.
    let any_error = (nav.top..nav.top + visible)
        .filter_map(|i| i.checked_sub(page.offset).and_then(|j| page.rows.get(j)))
        .any(|r| r.error_class.is_some());
    let error_width = if any_error {
        Constraint::Fill(2)
    } else {
        Constraint::Length(10)
    };
    let widths = [
        Constraint::Length(key_width),
        Constraint::Length(13),
        Constraint::Length(3),
        Constraint::Fill(1),
        error_width,
    ];
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}
