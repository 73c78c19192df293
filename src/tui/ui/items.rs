//! Pane 3: the selected batch's items, filtered by status and searched by
//! key, label and error. The table is also the dead-letter pane's list of a
//! class's items.

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Block, Cell, Row, Table};

use super::{clean, num, pane_block, placeholder, state_role, state_word};
use crate::store::{ItemPage, ItemRow};
use crate::tui::action::Intent;
use crate::tui::app::App;
use crate::tui::keymap::{self, Mode};
use crate::tui::nav::ListNav;
use crate::tui::theme::Role;
use crate::util::{sanitize, text};

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
        .map_or("all", crate::tui::app::StateFilter::label);
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
    if let Some(marked) = marked(app) {
        title.push(marked);
    }
    let block = pane_block(app, area, title);
    match &app.data.items {
        Some(page) if page.total > 0 => table(app, f, area, block, page, &app.items),
        Some(page) if page.searching.is_some() => placeholder(app, f, area, block, "searching…"),
        Some(_) if app.status_filter.is_none() && app.search.is_empty() => {
            let batch = app
                .batch
                .as_deref()
                .map_or("BATCH".into(), sanitize::shell_word);
            let add = format!("no items: `nightshift add {batch} FILE` adds some");
            placeholder(app, f, area, block, &add)
        }
        Some(_) => placeholder(
            app,
            f,
            area,
            block,
            &format!(
                "no items match ({} · {} · {})",
                keymap::offer(Mode::Normal, &Intent::CycleStatus),
                keymap::offer(Mode::Normal, &Intent::StartFilter),
                keymap::offer(Mode::Normal, &Intent::Back)
            ),
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

/// The columns of an item table `inner` cells wide: the key shortened to
/// a prefix (the label names the item), the label at its full width where
/// it can be (it is the one column a person reads), the error the rest.
/// `mark` is the cells a marked key's `● ` takes (0 with no marks), so a
/// short key is not cut to make room for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Columns {
    pub key: usize,
    pub label: usize,
    pub error: usize,
}

/// Cells of the STATE column (`failed/manual`) and the attempts column.
const STATE: usize = 13;
const ATTEMPTS: usize = 3;
/// Spaces between the five columns.
const GAPS: usize = 4;
/// Cells of the `● ` that begins a marked item's key.
const MARK: usize = 2;

pub fn columns(inner: usize, pane_width: u16, rows: &[&ItemRow], mark: usize) -> Columns {
    let widest = |f: &dyn Fn(&ItemRow) -> usize| rows.iter().map(|r| f(r)).max().unwrap_or(0);
    let key = (widest(&|r| text::width(&crate::tui::format::inert(&r.key))) + mark)
        .clamp(3, super::key_width(pane_width));
    let rest = inner.saturating_sub(key + STATE + ATTEMPTS + GAPS);
    let label_wants = widest(&|r| {
        text::width(&crate::tui::format::inert(super::label_beside(
            &r.key, &r.label, key,
        )))
    })
    .max(5);
    let error_wants = widest(&|r| text::width(&error_text(r)));
    let label = if error_wants == 0 {
        rest
    } else {
        let share = super::label_share(rest);
        label_wants.min(share.max(rest.saturating_sub(error_wants)))
    };
    Columns {
        key,
        label,
        error: rest - label,
    }
}

/// `Class: message`, inert, on one line.
fn error_text(r: &ItemRow) -> String {
    match (&r.error_class, &r.error_message) {
        (Some(c), Some(m)) => format!(
            "{}: {}",
            crate::tui::format::inert(c),
            crate::tui::format::inert(m)
        ),
        (Some(c), None) => crate::tui::format::inert(c).into_owned(),
        _ => String::new(),
    }
}

/// How many items are marked, for a list's title (none: nothing).
pub fn marked(app: &App) -> Option<Span<'static>> {
    let n = app.marks.len();
    (n > 0).then(|| {
        Span::styled(
            format!(" · {n} marked"),
            app.setup.palette.style(Role::Warn),
        )
    })
}

/// The key, shortened to fit; a marked item's begins with `●`.
fn key_cell(app: &App, key: &str, width: usize) -> Cell<'static> {
    if app.marks.contains_key(key) {
        let p = app.setup.palette;
        Cell::from(format!(
            "● {}",
            super::short_key(key, width.saturating_sub(MARK))
        ))
        .style(p.style(Role::Warn))
    } else {
        Cell::from(super::short_key(key, width))
    }
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
    let shown: Vec<(usize, Option<&ItemRow>)> = (nav.top..nav.top + visible)
        .filter(|i| (*i as i64) < page.total)
        .map(|i| (i, i.checked_sub(page.offset).and_then(|j| page.rows.get(j))))
        .collect();
    let loaded: Vec<&ItemRow> = shown.iter().filter_map(|(_, r)| *r).collect();
    let inner = (area.width as usize).saturating_sub(2);
    let mark = if app.marks.is_empty() { 0 } else { MARK };
    let cols = columns(inner, area.width, &loaded, mark);
    let cell = |s: &str, w: usize| Cell::from(text::cut(s, w).into_owned());
    let header = Row::new(vec![
        cell("KEY", cols.key),
        cell("STATE", STATE),
        cell("ATT", ATTEMPTS),
        cell("LABEL", cols.label),
        cell("LAST ERROR", cols.error),
    ])
    .style(p.style(Role::Dim));
    let rows: Vec<Row> = shown
        .iter()
        .map(|&(i, r)| {
            let row = match r {
                Some(r) => Row::new(vec![
                    key_cell(app, &r.key, cols.key),
                    Cell::from(state_word(r.status, r.tier, r.outcome))
                        .style(p.style(state_role(r.status, r.outcome))),
                    Cell::from(r.attempts.to_string()),
                    Cell::from(clean(
                        super::label_beside(&r.key, &r.label, cols.key),
                        cols.label,
                    )),
                    Cell::from(text::cut(&error_text(r), cols.error).into_owned())
                        .style(p.style(Role::Fail)),
                ]),
                None => Row::new(vec![Cell::from("…").style(p.style(Role::Dim))]),
            };
            if i == nav.sel {
                row.style(p.style(Role::Selected))
            } else {
                row
            }
        })
        .collect();
    let widths = [
        Constraint::Length(cols.key as u16),
        Constraint::Length(STATE as u16),
        Constraint::Length(ATTEMPTS as u16),
        Constraint::Length(cols.label as u16),
        Constraint::Length(cols.error as u16),
    ];
    f.render_widget(Table::new(rows, widths).header(header).block(block), area);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;

    fn row(key: &str, label: &str, error: Option<&str>) -> ItemRow {
        ItemRow {
            key: key.into(),
            label: label.into(),
            status: Status::Failed,
            tier: None,
            outcome: None,
            attempts: 1,
            error_class: error.map(|_| "Exit3".to_string()),
            error_message: error.map(str::to_string),
            updated_at: 0,
        }
    }

    /// A label that only repeats the key is left out where the KEY column
    /// shows the key whole (the CLI's rule), and its width goes to the
    /// error; a key cut to its prefix keeps it whole in LABEL.
    #[test]
    fn a_label_that_repeats_a_whole_key_is_left_out() {
        let error = "Exit2: exited with status 2: 上流が応答しません";
        let r = row("記事-1", "記事-1", Some(error));
        let c = columns(78, 80, &[&r], 0);
        assert_eq!(super::super::label_beside("記事-1", "記事-1", c.key), "");
        assert_eq!(c.label, 5, "the least a label column takes");
        let long = "73ae5b202e4682d89c3f0080c10303d3";
        assert_eq!(super::super::label_beside(long, long, 9), long);
        assert_eq!(super::super::label_beside("k1", "ブログ", 9), "ブログ");
    }

    #[test]
    fn the_label_wins_over_the_hash() {
        let long_error = "exited with status 3: 投稿に失敗しました：サーバーが応答しません。";
        let r = row(
            "73ae5b202e4682d89c3f0080c10303d3",
            "ブログ:技術記事:記事03",
            Some(long_error),
        );
        // 80 columns: the key is a prefix, the label whole.
        let c = columns(78, 80, &[&r], 0);
        assert_eq!(c.key, 9);
        assert_eq!(c.label, 22);
        assert_eq!(c.key + c.label + c.error + STATE + ATTEMPTS + GAPS, 78);
        // 120: a longer prefix; 160: the whole key.
        assert_eq!(columns(118, 120, &[&r], 0).key, 13);
        assert_eq!(columns(158, 160, &[&r], 0).key, 32);
        // Without errors the label takes the rest.
        let quiet = row("k1", "blog:rust:post-01", None);
        let c = columns(78, 80, &[&quiet], 0);
        assert_eq!((c.key, c.error), (3, 0));
        // A very long label leaves the error its share.
        let long = row("k1", &"長いラベル".repeat(20), Some(long_error));
        let c = columns(78, 80, &[&long], 0);
        assert_eq!(c.label, (78 - 3 - 20) * 3 / 5);
    }
}
