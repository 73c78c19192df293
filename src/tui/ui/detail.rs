//! An item in full (the page is `tui::detail`'s): each line styled by its
//! roles and cut to the pane, scrolled, under a title saying where in the
//! page it is.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{clean, fit_lines, pane_block};
use crate::tui::action::Intent;
use crate::tui::app::App;
use crate::tui::detail::PageLine;
use crate::tui::keymap::{self, Mode};
use crate::tui::layout;
use crate::tui::theme::{Palette, Role};
use crate::util::text;

fn styled(line: PageLine, p: Palette) -> Line<'static> {
    Line::from(
        line.into_iter()
            .map(|piece| Span::styled(piece.text, p.style(piece.role)))
            .collect::<Vec<_>>(),
    )
}

pub fn render(app: &App, f: &mut Frame, area: Rect) {
    let p = app.setup.palette;
    let Some(detail) = app.open_detail() else {
        return;
    };
    let all = fit_lines(
        app.detail_page()
            .into_iter()
            .map(|l| styled(l, p))
            .collect(),
        layout::detail_text_width(app.size),
    );
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
    // The label gives way, so the title still says where in the detail
    // this is (it was cut after a long label, the batch and lines lost).
    let name_room = room.saturating_sub(text::width("Item ") + text::width(&place));
    let name = super::item_name_within(&detail.key, label, super::key_width(area.width), name_room);
    let back = format!(" · {}", keymap::offer(Mode::Normal, &Intent::Back));
    let used = text::width("Item ") + text::width(&name) + text::width(&place);
    let mut title = vec![
        Span::styled("Item ", p.style(Role::Title)),
        Span::raw(name),
        Span::styled(place, p.style(Role::Dim)),
    ];
    if used + text::width(&back) <= room {
        title.push(Span::styled(back, p.style(Role::Dim)));
    }
    let block = pane_block(app, area, title);
    let shown: Vec<Line> = all.into_iter().skip(scroll).take(visible).collect();
    f.render_widget(Paragraph::new(shown).block(block), area);
}
