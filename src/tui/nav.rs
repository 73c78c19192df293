//! Moving a selection through a list that may be longer than what is
//! loaded: the selection and the first visible row are indices into the
//! whole list; the window is the slice the poller reads.

use super::action::Intent;

/// Selection and scroll of one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListNav {
    pub sel: usize,
    /// First visible row.
    pub top: usize,
}

impl ListNav {
    /// Applies a movement; returns whether it was one.
    pub fn apply(&mut self, intent: &Intent, len: usize, visible: usize) -> bool {
        let visible = visible.max(1);
        let last = len.saturating_sub(1);
        self.sel = match intent {
            Intent::Up => self.sel.saturating_sub(1),
            Intent::Down => (self.sel + 1).min(last),
            Intent::PageUp => self.sel.saturating_sub(visible),
            Intent::PageDown => (self.sel + visible).min(last),
            Intent::Top => 0,
            Intent::Bottom => last,
            _ => return false,
        };
        self.fit(len, visible);
        true
    }

    /// Keeps the selection inside the list and the visible rows.
    pub fn fit(&mut self, len: usize, visible: usize) {
        let visible = visible.max(1);
        self.sel = self.sel.min(len.saturating_sub(1));
        if self.sel < self.top {
            self.top = self.sel;
        } else if self.sel >= self.top + visible {
            self.top = self.sel + 1 - visible;
        }
        // No empty space below the last row when the list shrank.
        self.top = self.top.min(len.saturating_sub(visible));
    }
}

/// The rows the poller reads around the visible ones: `(offset, limit)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    pub offset: usize,
    pub limit: usize,
}

impl Window {
    /// A window covering the visible rows, moved only when they leave it,
    /// so scrolling within it needs no new read.
    pub fn follow(&mut self, nav: &ListNav, visible: usize) {
        let visible = visible.max(1);
        let covered = nav.top >= self.offset
            && nav.top + visible <= self.offset + self.limit
            && self.limit > 0;
        if !covered {
            self.offset = nav.top.saturating_sub(visible);
            self.limit = visible * 3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_stays_visible_and_in_range() {
        let mut nav = ListNav::default();
        for _ in 0..12 {
            nav.apply(&Intent::Down, 100, 10);
        }
        assert_eq!((nav.sel, nav.top), (12, 3));
        nav.apply(&Intent::Bottom, 100, 10);
        assert_eq!((nav.sel, nav.top), (99, 90));
        nav.apply(&Intent::PageUp, 100, 10);
        assert_eq!((nav.sel, nav.top), (89, 89));
        nav.fit(5, 10);
        assert_eq!((nav.sel, nav.top), (4, 0));
        nav.apply(&Intent::Down, 0, 10);
        assert_eq!((nav.sel, nav.top), (0, 0));
    }

    #[test]
    fn window_moves_only_when_the_view_leaves_it() {
        let mut w = Window::default();
        let mut nav = ListNav::default();
        w.follow(&nav, 10);
        assert_eq!((w.offset, w.limit), (0, 30));
        nav.top = 15;
        w.follow(&nav, 10);
        assert_eq!((w.offset, w.limit), (0, 30));
        nav.top = 25;
        w.follow(&nav, 10);
        assert_eq!((w.offset, w.limit), (15, 30));
    }
}
