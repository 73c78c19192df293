//! Moving around: panes, batches, lists, the run log, opening and closing.

use super::{App, Detail, EVENTS};

/// What [`App::forget`] drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shown {
    Items,
    ClassItems,
    Detail,
    /// Everything of the selected batch.
    Batch,
}
use crate::tui::action::{Intent, Pane};
use crate::tui::nav::{ListNav, Window};

impl App {
    pub(super) fn go(&mut self, pane: Pane) {
        self.pane = pane;
        self.refit();
    }

    pub(super) fn set_batch(&mut self, name: Option<String>) {
        if self.batch == name {
            return;
        }
        self.batch = name;
        self.marks.clear();
        self.reset_items();
        self.dlq = ListNav::default();
        self.class = None;
        self.class_items = ListNav::default();
        self.class_window = Window::default();
        self.detail = None;
        if !self.log.all_batches {
            self.log_to_end();
        }
        // Data of the previous batch must not show under the new name.
        self.forget(Shown::Batch);
        self.refit();
    }

    /// Drops shown data that no longer answers the question, and asks a
    /// new one (see `App::asked`). Every drop goes through here: a drop
    /// without a new question would wait for an answer the poller thinks
    /// it gave already.
    pub(super) fn forget(&mut self, shown: Shown) {
        match shown {
            Shown::Items => self.data.items = None,
            Shown::ClassItems => self.data.class_items = None,
            Shown::Detail => self.data.detail = None,
            Shown::Batch => {
                self.data.items = None;
                self.data.class_items = None;
                self.data.dlq.clear();
                self.data.runs.clear();
                self.data.detail = None;
            }
        }
        self.asked += 1;
    }

    pub(super) fn step_batch(&mut self, step: isize) {
        let names = self.batch_names();
        if names.is_empty() {
            return;
        }
        let pos = self
            .batch
            .as_ref()
            .and_then(|b| names.iter().position(|n| n == b))
            .unwrap_or(0) as isize;
        let next = (pos + step).clamp(0, names.len() as isize - 1) as usize;
        self.batch_nav.sel = next;
        self.set_batch(Some(names[next].clone()));
    }

    pub(super) fn reset_items(&mut self) {
        self.items = ListNav::default();
        self.items_window = Window::default();
        self.forget(Shown::Items);
        self.refit();
    }

    pub(super) fn log_to_end(&mut self) {
        self.log.follow = true;
        self.log.up_to = None;
        self.log.sel_id = None;
        self.log.nav = ListNav::default();
        self.refit();
    }

    pub(super) fn move_sel(&mut self, intent: &Intent) {
        let visible = self.visible();
        let max = self.detail_max_scroll();
        if let Some(d) = self.detail.as_mut().filter(|d| d.from == self.pane) {
            let page = visible.max(1);
            d.scroll = match intent {
                Intent::Up => d.scroll.saturating_sub(1),
                Intent::Down => d.scroll + 1,
                Intent::PageUp => d.scroll.saturating_sub(page),
                Intent::PageDown => d.scroll + page,
                Intent::Top => 0,
                _ => usize::MAX,
            };
            d.scroll = d.scroll.min(max);
            return;
        }
        match self.pane {
            Pane::Batches => {
                let names = self.batch_names();
                self.batch_nav.apply(intent, names.len(), visible);
                let name = names.get(self.batch_nav.sel).cloned();
                self.set_batch(name);
            }
            Pane::Activity => {}
            Pane::Items => {
                let len = self.data.items.as_ref().map_or(0, |p| p.total as usize);
                self.items.apply(intent, len, visible);
                self.items_window.follow(&self.items, visible);
            }
            Pane::DeadLetters if self.class.is_some() => {
                let len = self
                    .data
                    .class_items
                    .as_ref()
                    .map_or(0, |p| p.total as usize);
                self.class_items.apply(intent, len, visible);
                self.class_window.follow(&self.class_items, visible);
            }
            Pane::DeadLetters => {
                self.dlq.apply(intent, self.data.dlq.len(), visible);
            }
            Pane::Log => self.move_log(intent, visible),
            // One pool a step: the selected one is the first shown.
            Pane::Pools => {
                self.pool_nav.apply(intent, self.data.pools.len(), 1);
            }
        }
    }

    pub(super) fn move_log(&mut self, intent: &Intent, visible: usize) {
        let len = self.data.events.len();
        let at_top = self.log.nav.sel == 0;
        let at_end = self.log.nav.sel + 1 >= len;
        match intent {
            Intent::Bottom => return self.log_to_end(),
            Intent::Down | Intent::PageDown if at_end => return self.log_to_end(),
            _ => {}
        }
        if self.log.follow {
            // Scrolling back stops following; the view stays put.
            self.log.follow = false;
            self.log.up_to = self.data.events.last().map(|e| e.id);
        }
        if at_top && matches!(intent, Intent::Up | Intent::PageUp | Intent::Top) && len == EVENTS {
            // Older events than loaded: move the window back, keeping the
            // selected one in it.
            let keep = visible.min(len.saturating_sub(1));
            self.log.up_to = self.data.events.get(keep).map(|e| e.id);
            return;
        }
        self.log.nav.apply(intent, len, visible);
        self.log.sel_id = self.data.events.get(self.log.nav.sel).map(|e| e.id);
    }

    pub(super) fn open(&mut self) {
        match self.pane {
            Pane::Batches => self.go(Pane::Items),
            Pane::Activity => {}
            Pane::Items | Pane::DeadLetters if self.open_detail().is_none() => {
                if self.pane == Pane::DeadLetters && self.class.is_none() {
                    if let Some(g) = self.data.dlq.get(self.dlq.sel) {
                        self.class = Some(g.error_class.clone());
                        self.class_items = ListNav::default();
                        self.class_window = Window::default();
                        self.forget(Shown::ClassItems);
                        self.refit();
                    }
                    return;
                }
                if let Some(row) = self.selected_row() {
                    self.detail = Some(Detail {
                        key: row.key.clone(),
                        from: self.pane,
                        scroll: 0,
                    });
                    self.forget(Shown::Detail);
                }
            }
            Pane::Log => {
                let Some(e) = self.selected_event() else {
                    return;
                };
                let (Some(batch), Some(key)) = (e.batch.clone(), e.key.clone()) else {
                    return;
                };
                if self.batch.as_deref() != Some(batch.as_str()) {
                    self.set_batch(Some(batch));
                }
                self.detail = Some(Detail {
                    key,
                    from: Pane::Log,
                    scroll: 0,
                });
                self.forget(Shown::Detail);
            }
            _ => {}
        }
    }

    pub(super) fn back(&mut self) {
        if self.open_detail().is_some() {
            self.detail = None;
            self.forget(Shown::Detail);
            return;
        }
        match self.pane {
            Pane::DeadLetters if self.class.is_some() => {
                self.class = None;
                self.forget(Shown::ClassItems);
            }
            Pane::Items if !self.search.is_empty() || self.status_filter.is_some() => {
                self.search.clear();
                self.status_filter = None;
                self.reset_items();
            }
            Pane::Log if !self.log.kinds.is_empty() => {
                self.log.kinds.clear();
                self.log_to_end();
            }
            _ => {}
        }
    }
}
