//! Where things go on the screen, in cells: what the state needs to know
//! (how many rows a list shows, how wide and tall the detail page is) and
//! the panes are drawn into. No drawing here.

use ratatui::layout::{Constraint, Layout, Rect};

pub const MIN_WIDTH: u16 = 80;
pub const MIN_HEIGHT: u16 = 24;

/// The screen, top to bottom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub tabs: Rect,
    /// The pane (or an item's detail).
    pub main: Rect,
    pub footer: Rect,
}

/// A screen of `size` (columns, rows): a header line, the tabs, the pane,
/// a footer line.
pub fn areas(size: (u16, u16)) -> Areas {
    let [header, tabs, main, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(Rect::new(0, 0, size.0, size.1));
    Areas {
        header,
        tabs,
        main,
        footer,
    }
}

/// Rows a list pane shows: the pane less its borders and its column
/// header.
pub fn list_rows(size: (u16, u16)) -> usize {
    (areas(size).main.height as usize).saturating_sub(3).max(1)
}

/// Cells of text across the detail page, inside its borders.
pub fn detail_text_width(size: (u16, u16)) -> usize {
    (areas(size).main.width as usize).saturating_sub(2).max(20)
}

/// Rows of the detail page that show at once, inside its borders.
pub fn detail_rows(size: (u16, u16)) -> usize {
    (areas(size).main.height as usize).saturating_sub(2).max(1)
}

/// Rows of one pool in the Pools pane: its name, its hold (two), a row per
/// limit (and one for calls in flight), the tokens/min sparkline, today,
/// its budget when it has one, a blank.
pub fn pool_rows(v: &crate::store::PoolView, budget: bool) -> usize {
    1 + 2 * usize::from(v.hold.is_some())
        + v.dims.len()
        + usize::from(v.concurrency.is_some())
        + 3
        + usize::from(budget)
}

/// The first pool the Pools pane shows in `rows` rows, for pools of
/// `heights` rows with `sel` selected: the first one while the selected
/// one fits below it (and the row saying more follow), else the selected.
pub fn first_pool_shown(heights: &[usize], sel: usize, rows: usize) -> usize {
    let more = usize::from(sel + 1 < heights.len());
    let through: usize = heights.iter().take(sel + 1).sum();
    if through + more <= rows { 0 } else { sel }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pane is what the header, tabs and footer leave, at every height,
    /// however small.
    #[test]
    fn the_pane_takes_what_the_three_lines_leave() {
        for h in 0..60u16 {
            let rows = h as usize;
            assert_eq!(list_rows((80, h)), rows.saturating_sub(6).max(1), "{h}");
            assert_eq!(detail_rows((80, h)), rows.saturating_sub(5).max(1), "{h}");
        }
        let a = areas((MIN_WIDTH, MIN_HEIGHT));
        assert_eq!((a.header.y, a.tabs.y, a.main.y, a.footer.y), (0, 1, 2, 23));
        assert_eq!(a.main.height, 21);
        assert_eq!(detail_text_width((120, 40)), 118);
        assert_eq!(detail_text_width((10, 40)), 20, "never under 20");
    }

    /// The selected pool is always shown: from the first while it fits,
    /// else at the top.
    #[test]
    fn the_selected_pool_is_shown() {
        let h = [7, 7, 7];
        assert_eq!(first_pool_shown(&h, 0, 21), 0);
        assert_eq!(first_pool_shown(&h, 1, 15), 0);
        assert_eq!(
            first_pool_shown(&h, 1, 14),
            1,
            "no row left to say more follow"
        );
        assert_eq!(first_pool_shown(&h, 2, 21), 0);
        assert_eq!(first_pool_shown(&h, 2, 20), 2);
    }
}
