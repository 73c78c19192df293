//! The dashboard's state and `update(Action)`: every change goes through
//! here, and nothing here does I/O. An intent is read by the mode; an
//! arrival applies whatever the mode. What an action needs from the outside
//! (a write, a fresh poll) is returned as [`Effect`]s; the time is injected
//! with [`Arrival::Tick`], so the same actions always give the same state.

use std::collections::VecDeque;

use super::action::{Action, Arrival, Effect, Intent, Pane, Write};
use super::detail::{self, PageLine};
use super::keymap::{self, Mode};
use super::layout;
use super::nav::{ListNav, Window};
use super::theme::Palette;
use crate::config::Config;
use crate::model::{BatchInfo, Event, Millis, Status};
use crate::store::{
    BatchView, DashQuery, Dashboard, EventsQuery, ItemPage, ItemRow, ItemsQuery, PoolView,
    SinceSummary,
};
pub use configured::{BatchSchedule, Configured};
pub use state_filter::StateFilter;

/// Minutes of completions read per batch: rates use the last hour, the
/// sparkline as many as fit.
pub const MINUTES: i64 = 150;
/// Runs in the run-history chart.
pub const RUNS: usize = 30;
/// Events loaded for the run log.
pub const EVENTS: usize = 500;
/// How long a message stays in the footer.
const FLASH_MS: Millis = 8_000;
pub(super) const DEFAULT_PAUSE_REASON: &str = "paused from the dashboard";

/// What the dashboard knows before the first poll.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The store as shown in the header (tests use a fixed one).
    pub display_path: String,
    pub host: String,
    pub read_only: bool,
    pub palette: Palette,
    /// What the config file says (read again when it changes).
    pub config: Configured,
    /// `--batch`: open on this one.
    pub batch: Option<String>,
    /// A message shown in the footer when the dashboard opens (the demo's
    /// hint).
    pub greeting: Option<String>,
    /// Data older than this is shown stale, even when no poll failed (a
    /// read that hangs): see [`App::liveness`].
    pub stale_after: Millis,
}

impl Setup {
    pub fn new(display_path: &str, host: &str, read_only: bool, palette: Palette) -> Setup {
        Setup {
            display_path: display_path.to_string(),
            host: host.to_string(),
            read_only,
            palette,
            config: Configured::default(),
            batch: None,
            greeting: None,
            stale_after: STALE_AFTER,
        }
    }

    /// Batches, schedules, budgets and pools from the config.
    pub fn with_config(mut self, config: &Config) -> Setup {
        self.config = Configured::of(config);
        self
    }
}

/// A message in the footer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub text: String,
    pub error: bool,
    pub at: Millis,
}

/// An open item detail, and the pane it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    pub key: String,
    pub from: Pane,
    pub scroll: usize,
}

/// What the filter line is editing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterTarget {
    Search,
    Kinds,
}

/// The run log's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogView {
    pub follow: bool,
    pub nav: ListNav,
    /// The selected event, found again after each poll.
    pub sel_id: Option<i64>,
    /// Newest event loaded when not following.
    pub up_to: Option<i64>,
    pub kinds: Vec<String>,
    pub all_batches: bool,
}

/// A dialog that came with an arrival, not a key.
#[derive(Debug, Clone, PartialEq)]
pub enum Dialog {
    /// A write to confirm (the counted "requeue all").
    Confirm(Write),
    /// The "since you last looked" summary.
    Notice(Box<SinceSummary>),
}

/// The least time without a fresh answer before the header says stale
/// (three polls at the default interval, and slack for a busy machine).
pub const STALE_AFTER: Millis = 10_000;

/// What the header says about the data's freshness. No clock: a fresh
/// dashboard shows the same text all night, so an idle screen stays
/// unwritten; it speaks when a poll fails or no answer came for
/// [`Setup::stale_after`].
#[derive(Debug, Clone, PartialEq)]
pub enum Liveness<'a> {
    Loading,
    Live,
    /// The last poll failed; `age` in seconds since the last good one.
    Failing {
        err: &'a str,
        age: Option<u64>,
    },
    /// No answer for `age` seconds.
    Silent {
        age: u64,
    },
}

#[derive(Debug, Clone)]
pub struct App {
    pub setup: Setup,
    pub now: Millis,
    pub size: (u16, u16),
    pub mode: Mode,
    pub pane: Pane,
    pub data: Dashboard,
    /// A poll has succeeded at least once.
    pub loaded: bool,
    /// Which question the data must answer. It changes whenever shown data
    /// is dropped because it no longer answers what is asked (another
    /// batch, filter, class or item: see `forget`): the poller then reads
    /// at once even if the query reads like one it answered before, and
    /// answers to an older question are not applied.
    pub asked: u64,
    pub last_ok: Option<Millis>,
    /// The last poll failed: why.
    pub stale: Option<String>,
    pub batch: Option<String>,
    pub batch_nav: ListNav,
    pub items: ListNav,
    pub items_window: Window,
    pub status_filter: Option<StateFilter>,
    pub search: String,
    pub dlq: ListNav,
    pub class: Option<String>,
    pub class_items: ListNav,
    pub class_window: Window,
    pub log: LogView,
    /// The Pools pane's selected pool (shown first).
    pub pool_nav: ListNav,
    pub detail: Option<Detail>,
    pub filter_target: FilterTarget,
    pub input: String,
    /// The batch the pause prompt is for.
    pub prompt: Option<String>,
    pub confirm: Option<Write>,
    /// Items marked by hand (by key) in the selected batch.
    pub marks: marks::Marks,
    pub help_scroll: usize,
    pub since: Option<SinceSummary>,
    /// Dialogs that arrived while the keyboard was another mode's (typing,
    /// another question, the help): each opens, in turn, once the mode is
    /// Normal again, so none takes the keys from under what is open.
    pub pending: VecDeque<Dialog>,
    pub flash: Option<Flash>,
    /// Side effects not finished yet.
    pub busy: usize,
    pub quit: bool,
}

impl App {
    pub fn liveness(&self) -> Liveness<'_> {
        let age = |t: Millis| ((self.now - t).max(0) / 1000) as u64;
        match (&self.stale, self.last_ok) {
            (Some(err), last) => Liveness::Failing {
                err,
                age: last.map(age),
            },
            (None, Some(t)) if self.now - t > self.setup.stale_after => {
                Liveness::Silent { age: age(t) }
            }
            (None, Some(_)) => Liveness::Live,
            (None, None) => Liveness::Loading,
        }
    }

    pub fn new(setup: Setup, now: Millis) -> App {
        // Before the first poll the configured batches are all we know.
        let batch = setup.batch.clone().or_else(|| {
            let mut names = setup.config.batches.clone();
            names.sort();
            names.into_iter().next()
        });
        let flash = setup.greeting.as_ref().map(|text| Flash {
            text: text.clone(),
            error: false,
            at: now,
        });
        App {
            batch,
            setup,
            now,
            size: (80, 24),
            mode: Mode::Normal,
            pane: Pane::Batches,
            data: Dashboard::default(),
            loaded: false,
            asked: 0,
            last_ok: None,
            stale: None,
            batch_nav: ListNav::default(),
            items: ListNav::default(),
            items_window: Window::default(),
            status_filter: None,
            search: String::new(),
            dlq: ListNav::default(),
            class: None,
            class_items: ListNav::default(),
            class_window: Window::default(),
            log: LogView {
                follow: true,
                nav: ListNav::default(),
                sel_id: None,
                up_to: None,
                kinds: Vec::new(),
                all_batches: true,
            },
            pool_nav: ListNav::default(),
            detail: None,
            filter_target: FilterTarget::Search,
            input: String::new(),
            prompt: None,
            confirm: None,
            marks: marks::Marks::new(),
            help_scroll: 0,
            since: None,
            pending: VecDeque::new(),
            flash,
            busy: 0,
            quit: false,
        }
    }

    // ----- reading the state (also used by the panes) -----

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
    pub fn at(&self) -> super::keymap::At {
        super::keymap::At {
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
                let rules = info.map(|b| crate::model::claim_view::Rules {
                    pool: self.setup.config.pool_of.get(&b.name).map(String::as_str),
                    max_attempts: self.setup.config.max_attempts_of(&b.name),
                });
                let waits = match (&self.data.detail, info) {
                    (Some(Ok(det)), Some(b)) if det.item.key == d.key => {
                        self.holding(b).map_or_else(Vec::new, |h| {
                            let item = crate::model::waiting::Waits::of(&det.item, b);
                            crate::model::waiting::item_waits(&h, item, self.now)
                        })
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

    // ----- changing it -----

    pub(super) fn say(&mut self, text: impl Into<String>) {
        self.flash = Some(Flash {
            text: text.into(),
            error: false,
            at: self.now,
        });
    }

    pub(super) fn warn(&mut self, text: impl Into<String>) {
        self.flash = Some(Flash {
            text: text.into(),
            error: true,
            at: self.now,
        });
    }

    /// Applies one action; returns what it asks of the outside world.
    pub fn update(&mut self, action: impl Into<Action>) -> Vec<Effect> {
        let effects = match action.into() {
            Action::Intent(intent) => self.on_intent(intent),
            Action::Arrival(arrival) => self.on_arrival(arrival),
        };
        self.open_pending();
        effects
    }

    /// The next dialog waiting, once nothing else has the keyboard.
    fn open_pending(&mut self) {
        if self.mode != Mode::Normal {
            return;
        }
        match self.pending.pop_front() {
            Some(Dialog::Confirm(write)) => self.ask(write),
            Some(Dialog::Notice(summary)) => {
                self.since = Some(*summary);
                self.mode = Mode::Notice;
            }
            None => {}
        }
    }

    /// What an intent does is the mode's to say.
    fn on_intent(&mut self, intent: Intent) -> Vec<Effect> {
        match self.mode {
            Mode::Normal => self.on_normal(intent),
            Mode::Filter => self.update_filter(intent),
            Mode::Prompt => self.update_prompt(intent),
            Mode::Confirm => self.update_confirm(intent),
            Mode::Help => {
                match intent {
                    Intent::Up => self.help_scroll = self.help_scroll.saturating_sub(1),
                    Intent::Down => self.help_scroll += 1,
                    Intent::Back => self.mode = Mode::Normal,
                    Intent::Quit => return self.stop(),
                    _ => {}
                }
                Vec::new()
            }
            Mode::Notice => {
                match intent {
                    Intent::Back => {
                        self.since = None;
                        self.mode = Mode::Normal;
                    }
                    Intent::Quit => return self.stop(),
                    _ => {}
                }
                Vec::new()
            }
        }
    }

    pub(super) fn stop(&mut self) -> Vec<Effect> {
        self.quit = true;
        vec![Effect::Quit]
    }

    fn on_normal(&mut self, intent: Intent) -> Vec<Effect> {
        // Read-only, a write key says so in the keymap's words, the same
        // sentence as when pressed in another pane (`Elsewhere::says`).
        if self.setup.read_only
            && let Some(b) = keymap::binding_of(Mode::Normal, &intent).filter(|b| b.writes)
        {
            self.warn(keymap::disabled(&keymap::keys_label(b), b.name));
            return Vec::new();
        }
        match intent {
            Intent::NextPane | Intent::PrevPane => {
                let tabs = self.tabs();
                let at = tabs.iter().position(|p| *p == self.pane).unwrap_or(0);
                let step = if intent == Intent::NextPane {
                    1
                } else {
                    tabs.len() - 1
                };
                self.go(tabs[(at + step) % tabs.len()])
            }
            Intent::GoPane(p) => self.go(p),
            Intent::Up
            | Intent::Down
            | Intent::PageUp
            | Intent::PageDown
            | Intent::Top
            | Intent::Bottom => self.move_sel(&intent),
            Intent::PrevBatch => self.step_batch(-1),
            Intent::NextBatch => self.step_batch(1),
            Intent::Open => self.open(),
            Intent::Back => self.back(),
            Intent::StartFilter => self.start_filter(),
            Intent::CycleStatus => {
                self.status_filter = StateFilter::next(self.status_filter);
                self.reset_items();
            }
            Intent::CycleStatusBack => {
                self.status_filter = StateFilter::prev(self.status_filter);
                self.reset_items();
            }
            Intent::ToggleFollow => {
                self.log.follow = !self.log.follow;
                self.log.up_to = self.data.events.last().map(|e| e.id);
                if self.log.follow {
                    self.log_to_end();
                }
            }
            Intent::ToggleLogBatch => {
                self.log.all_batches = !self.log.all_batches;
                self.log.follow = true;
                self.log_to_end();
            }
            Intent::Help => {
                self.mode = Mode::Help;
                self.help_scroll = 0;
            }
            Intent::Resume
            | Intent::TogglePause
            | Intent::RequeueSelected
            | Intent::RequeueAll
            | Intent::SkipSelected
            | Intent::CancelSelected
            | Intent::StopRuns => return self.ask_write(intent),
            Intent::ToggleMark => self.toggle_mark(),
            Intent::Elsewhere(elsewhere) => self.warn(elsewhere.says(self.setup.read_only)),
            Intent::Quit => return self.stop(),
            // Only meaningful in the other modes.
            Intent::Input(_)
            | Intent::Backspace
            | Intent::Submit
            | Intent::Cancel
            | Intent::Confirm(_) => {}
        }
        Vec::new()
    }

    /// Whatever the mode: the clock, the terminal, what the poller and
    /// the effects thread send back.
    fn on_arrival(&mut self, arrival: Arrival) -> Vec<Effect> {
        match arrival {
            Arrival::Tick(now) => self.now = now,
            Arrival::Resize(w, h) => {
                self.size = (w, h);
                self.refit();
            }
            Arrival::Polled { at, asked, result } => self.polled(at, asked, result),
            Arrival::Config(read) => self.reconfigure(read),
            Arrival::Unchanged { at, asked } => {
                if asked == self.asked {
                    self.last_ok = Some(at);
                    self.stale = None;
                }
            }
            // Nothing to report is a line, not a box that takes the first key.
            Arrival::Since(summary) if summary.is_empty() => self.say(format!(
                "nothing failed, ran or fired since your last visit ({} ago)",
                crate::util::time::compact(((self.now - summary.since).max(0) / 1000) as u64)
            )),
            Arrival::Since(summary) => self.pending.push_back(Dialog::Notice(summary)),
            Arrival::Prepared(write) => {
                self.busy = self.busy.saturating_sub(1);
                match &write {
                    Write::Requeue { keys, what, .. } if keys.is_empty() => {
                        self.say(format!("no failed items to requeue: {what}"));
                    }
                    _ => self.pending.push_back(Dialog::Confirm(write)),
                }
            }
            Arrival::Done { ok, message } => {
                self.busy = self.busy.saturating_sub(1);
                if ok {
                    self.say(message);
                } else {
                    self.warn(message);
                }
                return vec![Effect::PollNow];
            }
            Arrival::Said(line) => self.warn(line),
            Arrival::RunnerExited { ok, message } => {
                if ok {
                    self.say(message);
                } else {
                    self.warn(message);
                }
                return vec![Effect::PollNow];
            }
        }
        Vec::new()
    }

    pub(super) fn polled(
        &mut self,
        at: Millis,
        asked: u64,
        result: Result<Box<crate::store::Dashboard>, String>,
    ) {
        match result {
            // The answer to a question no longer asked: the one asked now
            // is on its way.
            Ok(_) if asked != self.asked => {}
            Ok(data) => {
                self.data = *data;
                self.refresh_marks();
                self.loaded = true;
                self.last_ok = Some(at);
                self.stale = None;
                self.reselect();
                self.refit();
            }
            Err(e) => self.stale = Some(e),
        }
    }

    /// Keeps the selected batch if it is still in the list (the store's
    /// and the config's), else selects the first.
    pub(super) fn reselect(&mut self) {
        let names = self.batch_names();
        let wanted = self.batch.clone();
        match wanted {
            Some(name) if names.contains(&name) => {}
            Some(name) if self.setup.batch.as_deref() == Some(name.as_str()) => {
                self.setup.batch = None;
                self.warn(format!(
                    "no batch {} in this store or its config",
                    crate::tui::format::inert(&name)
                ));
                self.set_batch(names.first().cloned());
            }
            _ => self.set_batch(names.first().cloned()),
        }
        if let Some(pos) = self
            .batch
            .as_ref()
            .and_then(|b| names.iter().position(|n| n == b))
        {
            self.batch_nav.sel = pos;
        }
    }

    /// Re-applies list bounds after new data or a resize.
    pub(super) fn refit(&mut self) {
        let visible = self.visible();
        let n = self.batch_names().len();
        self.batch_nav.fit(n, visible);
        if let Some(p) = &self.data.items {
            self.items.fit(p.total as usize, visible);
        }
        self.items_window.follow(&self.items, visible);
        self.dlq.fit(self.data.dlq.len(), visible);
        if let Some(p) = &self.data.class_items {
            self.class_items.fit(p.total as usize, visible);
        }
        if self.class.is_some() {
            self.class_window.follow(&self.class_items, visible);
        }
        let events = &self.data.events;
        if self.log.follow {
            self.log.nav.sel = events.len().saturating_sub(1);
        } else if let Some(id) = self.log.sel_id {
            // The newest event at or before the selected one.
            self.log.nav.sel = events.iter().rposition(|e| e.id <= id).unwrap_or(0);
        }
        self.log.nav.fit(events.len(), visible);
        self.log.sel_id = events.get(self.log.nav.sel).map(|e| e.id);
        let max = self.detail_max_scroll();
        if let Some(d) = &mut self.detail {
            d.scroll = d.scroll.min(max);
        }
    }
}

mod configured;
mod holding;
mod input;
pub mod marks;
mod navigate;
mod state_filter;
mod writes;

#[cfg(test)]
mod tests;
