//! The dashboard's state and `update(Action)`: every change goes through
//! here, and nothing here does I/O. An intent is read by the mode; an
//! arrival applies whatever the mode. What an action needs from the outside
//! (a write, a fresh poll) is returned as [`Effect`](super::action::Effect)s; the
//! time is injected with [`Arrival::Tick`](super::action::Arrival::Tick), so the same actions always give the same state.

use std::collections::VecDeque;

use super::action::{Pane, Write};
use super::keymap::Mode;
use super::nav::{ListNav, Window};
use super::theme::Palette;
use crate::config::Config;
use crate::model::Millis;
use crate::store::{Dashboard, SinceSummary};
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
}

mod configured;
mod holding;
mod input;
pub mod marks;
mod navigate;
mod read;
mod state_filter;
mod update;
mod writes;

#[cfg(test)]
mod tests;
