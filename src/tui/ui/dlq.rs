//! Pane 4: dead letters by error class, last 24 h against the 24 h before
//! (the morning check), with the items failed now by tier; Enter lists a
//! class's failed items.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, Row, Table};

use super::{clean, pane_block, placeholder};
use crate::tui::action::Intent;
use crate::tui::app::App;
use crate::tui::keymap::{self, Mode};
use crate::tui::theme::Role;

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let batch = app
        .batch
        .as_deref()
        .map(|b| clean(b, 40))
        .unwrap_or_default();
    if let Some(class) = &app.class {
        let mut title = vec![
            Span::styled("Dead letters", p.style(Role::Title)),
            Span::styled(format!(" · {batch} · "), p.style(Role::Dim)),
            Span::styled(clean(class, 60), p.style(Role::Fail)),
            Span::raw(" · failed items"),
        ];
        if let Some(page) = &app.data.class_items {
            title.push(Span::styled(
                super::items::position(page, &app.class_items),
                p.style(Role::Dim),
            ));
        }
        if let Some(marked) = super::items::marked(app) {
            title.push(marked);
        }
        let block = pane_block(app, area, title);
        match &app.data.class_items {
            Some(page) if page.total > 0 => {
                super::items::table(app, f, area, block, page, &app.class_items)
            }
            Some(_) => placeholder(
                app,
                f,
                area,
                block,
                &format!(
                    "no item of this class is failed now ({})",
                    keymap::offer(Mode::Normal, &Intent::Back)
                ),
            ),
            None => placeholder(app, f, area, block, "loading…"),
        }
        return;
    }
    let block = pane_block(
        app,
        area,
        vec![
            Span::styled("Dead letters", p.style(Role::Title)),
            Span::styled(
                format!(" · {batch} · by error class, last 24 h vs the 24 h before"),
                p.style(Role::Dim),
            ),
        ],
    );
    if app.data.dlq.is_empty() {
        placeholder(
            app,
            f,
            area,
            block,
            &super::empty_text(app, "no dead letters: nothing has failed"),
        );
        return;
    }
    let visible = (area.height as usize).saturating_sub(3);
    let shown: Vec<(usize, &_)> = app
        .data
        .dlq
        .iter()
        .enumerate()
        .skip(app.dlq.top)
        .take(visible)
        .collect();
    let cells = |count: fn(i64) -> String| -> Vec<[String; 7]> {
        shown
            .iter()
            .map(|(_, g)| {
                let delta = g.last_24h - g.prev_24h;
                [
                    count(g.last_24h),
                    count(g.prev_24h),
                    format!("{}{}", if delta > 0 { "+" } else { "" }, count(delta)),
                    count(g.total),
                    count(g.retry_now + g.manual_now),
                    count(g.retry_now),
                    count(g.manual_now),
                ]
            })
            .collect()
    };
    // The class column takes what the counts leave (see `count_columns`).
    let (class_width, counts, texts) = super::count_columns(
        (area.width as usize).saturating_sub(2),
        [8, 8, 6, 8, 10, 6, 6],
        10,
        cells,
    );
    let header = Row::new([
        "ERROR CLASS",
        "LAST 24H",
        "PREV 24H",
        "DELTA",
        "ALL TIME",
        "FAILED NOW",
        "RETRY",
        "MANUAL",
    ])
    .style(p.style(Role::Dim));
    let rows: Vec<Row> = shown
        .iter()
        .zip(texts)
        .map(|(&(i, g), texts)| {
            let delta = g.last_24h - g.prev_24h;
            let delta_role = match delta {
                d if d > 0 => Role::Fail,
                d if d < 0 => Role::Ok,
                _ => Role::Dim,
            };
            let [last, prev, delta, total, now, retry, manual] = texts;
            let row = Row::new(vec![
                Cell::from(clean(&g.error_class, class_width)),
                Cell::from(last),
                Cell::from(prev),
                Cell::from(delta).style(p.style(delta_role)),
                Cell::from(total),
                Cell::from(now),
                Cell::from(retry),
                Cell::from(manual).style(if g.manual_now > 0 {
                    p.style(Role::Fail)
                } else {
                    p.style(Role::Normal)
                }),
            ]);
            if i == app.dlq.sel {
                row.style(p.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let widths: Vec<Constraint> = std::iter::once(class_width)
        .chain(counts)
        .map(|w| Constraint::Length(w as u16))
        .collect();
    // The long form explains the columns when there is room for it; the
    // border keeps a corner each side, and what does not fit ends in `…`.
    let (open, all) = (
        keymap::offer(Mode::Normal, &Intent::Open),
        keymap::offer(Mode::Normal, &Intent::RequeueAll),
    );
    let long = format!(
        " {open}: the class's items · {all}: the class · counts: every failure; FAILED NOW: items failed at present "
    );
    let room = (area.width as usize).saturating_sub(2);
    let hint = if crate::util::text::width(&long) <= room {
        long
    } else {
        format!(" {open} · {all} ")
    };
    let hint = crate::util::text::cut(&hint, room).into_owned();
    let block = block.title_bottom(Span::styled(hint, p.style(Role::Dim)));
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}
