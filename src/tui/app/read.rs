//! Reading the state, for the panes and the poller: what is shown and
//! selected now, the item detail's page, and what the next poll asks.

use super::{App, Detail, EVENTS, FLASH_MS, Flash, MINUTES, RUNS, StateFilter};
use crate::model::{BatchInfo, Event, Status};
use crate::store::{BatchView, DashQuery, EventsQuery, ItemPage, ItemRow, ItemsQuery, PoolView};
use crate::tui::action::Pane;
use crate::tui::detail::{self, PageLine};
use crate::tui::layout;
use crate::tui::nav::ListNav;

impl App {
    /// Batches to show: the store's, plus configured ones with no rows yet.
    pub fn batch_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .data
            .batches
            .iter()
            .map(|b| b.info.name.clone())
            .collect();
        for name in &self.setup.config.batches {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names.sort();
        names
    }

    pub fn batch_view(&self, name: &str) -> Option<&BatchView> {
        self.data.batches.iter().find(|b| b.info.name == name)
    }

    /// The selected batch's info (an empty one for a configured batch with
    /// no rows yet).
    pub fn selected_info(&self) -> Option<BatchInfo> {
        let name = self.batch.as_ref()?;
        Some(match self.batch_view(name) {
            Some(v) => v.info.clone(),
            None => BatchInfo::empty(name),
        })
    }

    /// The panes with a tab, in order: the Pools pane only when the config
    /// has pools (`6` opens it anyway, and says how to make one).
    pub fn tabs(&self) -> Vec<Pane> {
        Pane::ALL
            .into_iter()
            .filter(|p| *p != Pane::Pools || !self.setup.config.pools.is_empty())
            .collect()
    }

    /// The pool a batch draws from, as the last poll read it.
    pub fn pool_of(&self, batch: &str) -> Option<&PoolView> {
        let name = self.setup.config.pool_of.get(batch)?;
        self.data.pools.iter().find(|p| &p.name == name)
    }

    /// The tokens a call of `batch` reserves from its pool.
    pub fn call_of(&self, batch: &str) -> i64 {
        self.setup.config.calls.get(batch).copied().unwrap_or(0)
    }

    /// The batches that draw from a pool, by name.
    pub fn pool_batches(&self, pool: &str) -> Vec<&str> {
        self.setup
            .config
            .pool_of
            .iter()
            .filter(|(_, p)| p.as_str() == pool)
            .map(|(b, _)| b.as_str())
            .collect()
    }

    /// The item table shown now: the Items pane's, or a class's items.
    pub(super) fn table(&self) -> Option<(&ItemPage, &ListNav)> {
        match self.pane {
            Pane::Items => self.data.items.as_ref().map(|p| (p, &self.items)),
            Pane::DeadLetters if self.class.is_some() => self
                .data
                .class_items
                .as_ref()
                .map(|p| (p, &self.class_items)),
            _ => None,
        }
    }

    /// The selected row of the item table shown now, if loaded.
    pub fn selected_row(&self) -> Option<&ItemRow> {
        let (page, nav) = self.table()?;
        nav.sel
            .checked_sub(page.offset)
            .and_then(|i| page.rows.get(i))
    }

    /// The item detail shown in the current pane.
    pub fn open_detail(&self) -> Option<&Detail> {
        self.detail.as_ref().filter(|d| d.from == self.pane)
    }

    /// Where keys are pressed now (the keymap's word).
    pub fn at(&self) -> crate::tui::keymap::At {
        crate::tui::keymap::At {
            pane: self.pane,
            detail: self.open_detail().is_some(),
        }
    }

    pub fn selected_event(&self) -> Option<&Event> {
        self.data.events.get(self.log.nav.sel)
    }

    /// Rows a list shows at the current size.
    pub fn visible(&self) -> usize {
        layout::list_rows(self.size)
    }

    /// The item detail's page at the current size (empty with none open).
    pub fn detail_page(&self) -> Vec<PageLine> {
        match &self.detail {
            Some(d) => {
                let info = self.detail_batch();
                let holding = info.and_then(|b| self.holding(b));
                let rules = info.map(|b| crate::model::claim_view::Rules {
                    pool: self.setup.config.pool_of.get(&b.name).map(String::as_str),
                    max_attempts: self.setup.config.max_attempts_of(&b.name),
                    holding: holding.as_ref(),
                });
                let waits = match (&self.data.detail, info, &holding) {
                    (Some(Ok(det)), Some(b), Some(h)) if det.item.key == d.key => {
                        let item = crate::model::waiting::Waits::of(&det.item, b);
                        crate::model::waiting::item_waits(h, item, self.now)
                    }
                    _ => Vec::new(),
                };
                detail::page(
                    &d.key,
                    self.data.detail.as_ref(),
                    info.zip(rules),
                    &waits,
                    self.now,
                    layout::detail_text_width(self.size),
                )
            }
            None => Vec::new(),
        }
    }

    /// The batch of the item read for the detail, as the same poll read it.
    fn detail_batch(&self) -> Option<&crate::model::BatchInfo> {
        let Some(Ok(d)) = &self.data.detail else {
            return None;
        };
        self.data
            .batches
            .iter()
            .map(|b| &b.info)
            .find(|i| i.name == d.item.batch)
    }

    /// The furthest the detail page scrolls at the current size.
    pub(super) fn detail_max_scroll(&self) -> usize {
        self.detail_page()
            .len()
            .saturating_sub(layout::detail_rows(self.size))
    }

    pub fn flash_text(&self) -> Option<&Flash> {
        self.flash.as_ref().filter(|f| self.now - f.at < FLASH_MS)
    }

    /// What the next poll reads.
    pub fn query(&self) -> DashQuery {
        let items = ItemsQuery {
            status: self.status_filter.map(StateFilter::status),
            outcome: self.status_filter.and_then(StateFilter::outcome),
            class: None,
            search: self.search.clone(),
            offset: self.items_window.offset,
            limit: self.items_window.limit.max(1),
        };
        let class_items = self.class.as_ref().map(|class| ItemsQuery {
            status: Some(Status::Failed),
            outcome: None,
            class: Some(class.clone()),
            search: String::new(),
            offset: self.class_window.offset,
            limit: self.class_window.limit.max(1),
        });
        DashQuery {
            batch: self.batch.clone(),
            minutes: MINUTES,
            runs: RUNS,
            items: Some(items),
            class_items,
            dlq: true,
            events: Some(EventsQuery {
                batch: if self.log.all_batches {
                    None
                } else {
                    self.batch.clone()
                },
                kinds: self.log.kinds.clone(),
                up_to: if self.log.follow {
                    None
                } else {
                    self.log.up_to
                },
                limit: EVENTS,
            }),
            detail: self.open_detail().map(|d| d.key.clone()),
            pools: self.setup.config.pools.clone(),
            spend: self.spend_keys(),
        }
    }

    /// The budget windows a poll reads: every batch's (its own and its
    /// pool's: a row of the table says `held` by a budget reached, not
    /// only the selected one) and every pool's (the Pools pane).
    fn spend_keys(&self) -> Vec<crate::store::SpendKey> {
        use crate::runner::budget::key;
        let mut keys: Vec<crate::store::SpendKey> = Vec::new();
        for (s, n, b) in self.setup.config.budgets.values().flatten() {
            let k = key(*s, n, b, self.now);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        for (pool, b) in &self.setup.config.pool_budgets {
            let k = key(crate::store::SpendScope::Pool, pool, b, self.now);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        keys
    }
}
