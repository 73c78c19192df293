//! The dashboard's vocabulary: every state change is an [`Action`] with a
//! name, so key handling, help text and tests speak the same words. An
//! action is an [`Intent`] (the user's, read by the mode) or an
//! [`Arrival`] (from outside, applied in every mode). What an action asks
//! of the outside world comes back from `App::update` as an [`Effect`];
//! writes are data ([`Write`]) that a confirm dialog holds and sends back
//! confirmed.

use crate::model::Millis;
use crate::store::{Dashboard, ItemsQuery, SinceSummary};
use crate::util::noun;

/// The panes, in tab order (`1`–`6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pane {
    Batches,
    Activity,
    Items,
    DeadLetters,
    Log,
    /// The `[limit.NAME]` pools: each limit's use, the tokens per minute,
    /// a retry-after hold.
    Pools,
}

impl Pane {
    pub const ALL: [Pane; 6] = [
        Pane::Batches,
        Pane::Activity,
        Pane::Items,
        Pane::DeadLetters,
        Pane::Log,
        Pane::Pools,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Batches => "Batches",
            Pane::Activity => "Activity",
            Pane::Items => "Items",
            Pane::DeadLetters => "Dead letters",
            Pane::Log => "Run log",
            Pane::Pools => "Pools",
        }
    }

    /// For narrow terminals.
    pub fn short_title(self) -> &'static str {
        match self {
            Pane::DeadLetters => "DLQ",
            Pane::Log => "Log",
            other => other.title(),
        }
    }

    pub fn index(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }
}

/// What the user asked for: from the keymap of the current mode (and
/// `Quit` from a signal or a closed terminal). What it does depends on the
/// mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intent {
    NextPane,
    PrevPane,
    GoPane(Pane),
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    PrevBatch,
    NextBatch,
    /// Enter: open the selection (an item's detail, a class's items).
    Open,
    /// Esc: close what is open, else clear the filter.
    Back,
    /// `/`: edit the search (items) or the kinds (run log).
    StartFilter,
    /// `s` / `S`: the Items pane's state filter, forwards or back.
    CycleStatus,
    CycleStatusBack,
    ToggleFollow,
    ToggleLogBatch,
    Help,

    /// Typing in the filter or the prompt.
    Input(char),
    Backspace,
    Submit,
    Cancel,

    Resume,
    TogglePause,
    /// Mark or unmark the selected item (`R` and `x` then act on the marked).
    ToggleMark,
    RequeueSelected,
    RequeueAll,
    SkipSelected,
    /// `c`: cancel the selected item (its worker stopped if it runs).
    CancelSelected,
    /// `X`: stop the batch's runs, gracefully.
    StopRuns,
    /// The confirm dialog's answer.
    Confirm(bool),
    /// A key bound in this mode, but in other panes than this one: said,
    /// rather than nothing happening.
    Elsewhere(Elsewhere),

    Quit,
}

/// A key pressed in a pane where it does nothing, and where it works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elsewhere {
    /// How the help writes the key (`R`, `Space`).
    pub key: String,
    /// Its words (`Binding::name`).
    pub what: &'static str,
    /// The panes where it works.
    pub panes: &'static [Pane],
    /// It changes the store (disabled read-only, wherever it is pressed).
    pub writes: bool,
    /// It works in this pane, on the list an open item covers.
    pub behind: bool,
}

impl Elsewhere {
    /// What the footer says of it: read-only, a write key is disabled in
    /// every pane, so that is said first.
    pub fn says(&self, read_only: bool) -> String {
        use crate::tui::keymap::{self, Mode};
        if read_only && self.writes {
            return keymap::disabled(&self.key, self.what);
        }
        let named = keymap::named(&self.key, self.what);
        if self.behind {
            return format!(
                "{named} acts on the list: {} closes the item first",
                keymap::binding_of(Mode::Normal, &Intent::Back)
                    .map_or_else(String::new, keymap::keys_label)
            );
        }
        let panes: Vec<String> = self
            .panes
            .iter()
            .map(|p| format!("{} {}", p.index() + 1, p.title()))
            .collect();
        let panes = match panes.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => panes.join(""),
        };
        format!("{named} works only in {panes}")
    }
}

/// What came from outside: the clock, the terminal, poll and effect
/// results. Applied whatever the mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// The clock moved (injected, so tests and snapshots are deterministic).
    Tick(Millis),
    Resize(u16, u16),
    /// A poll of question `asked` (see `App::asked`) finished at `at`.
    Polled {
        at: Millis,
        asked: u64,
        result: Result<Box<Dashboard>, String>,
    },
    /// A poll of question `asked` found the store unchanged since it last
    /// answered it (nothing read).
    Unchanged {
        at: Millis,
        asked: u64,
    },
    /// The config file changed: the config as it reads now, or why it was
    /// refused (in words for the footer).
    Config(Result<Box<crate::config::Config>, String>),
    /// What changed since the previous visit, read once at start.
    Since(Box<SinceSummary>),
    /// The keys a "requeue all" would move, counted off the UI thread.
    Prepared(Write),
    /// A side effect finished.
    Done {
        ok: bool,
        message: String,
    },
    /// A line the process would have written to the terminal (a warning):
    /// shown in the footer, never drawn over the screen (`util::stdio`).
    Said(String),
    /// A runner started from the dashboard ended (it may outlive us; then
    /// this never comes).
    RunnerExited {
        ok: bool,
        message: String,
    },
}

/// Everything `App::update` takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Intent(Intent),
    Arrival(Arrival),
}

impl From<Intent> for Action {
    fn from(i: Intent) -> Action {
        Action::Intent(i)
    }
}

impl From<Arrival> for Action {
    fn from(a: Arrival) -> Action {
        Action::Arrival(a)
    }
}

/// A change to the store (or a runner to start), as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Requeue {
        batch: String,
        keys: Vec<String>,
        /// What was selected, for the dialog and the message.
        what: String,
    },
    Skip {
        batch: String,
        key: String,
        /// For the dialog and the message.
        label: String,
    },
    /// The marked items not done yet (`done`: marked ones done already,
    /// left as they are).
    SkipMarked {
        batch: String,
        keys: Vec<String>,
        done: usize,
    },
    Pause {
        batch: String,
        reason: String,
    },
    Unpause {
        batch: String,
    },
    Resume {
        batch: String,
    },
    /// `nightshift cancel BATCH KEY` (to the `manual` tier).
    Cancel {
        batch: String,
        key: String,
        /// For the dialog and the message.
        label: String,
        /// Claimed: a worker may run it, or it waits to retry or for a
        /// place in its pool (the row does not say which).
        claimed: bool,
    },
    /// The marked items not done nor quarantined yet, each as `Cancel`
    /// (`left`: marked ones there already, left as they are).
    CancelMarked {
        batch: String,
        keys: Vec<String>,
        left: usize,
    },
    /// `nightshift stop BATCH` (graceful).
    Stop {
        batch: String,
    },
}

impl Write {
    /// The question a confirm dialog asks about this write.
    pub fn question(&self) -> String {
        match self {
            Write::Requeue { keys, what, .. } => format!(
                "Requeue {}: {what}?",
                noun::count(keys.len(), "failed item")
            ),
            Write::Skip { batch, key, label } => format!(
                "Mark {} of {batch} skipped (done without running it)?",
                crate::key::named(key, label)
            ),
            Write::SkipMarked { batch, keys, done } => {
                let mut q = format!(
                    "Mark {} of {batch} skipped (done without running)?",
                    noun::count(keys.len(), "marked item")
                );
                if *done > 0 {
                    q.push_str(&format!(" {done} more marked are done already and stay."));
                }
                q
            }
            Write::Pause { batch, reason } => format!("Pause {batch} ({reason})?"),
            Write::Unpause { batch } => {
                format!("Unpause {batch}? Its runs and schedule fires start doing work again.")
            }
            Write::Resume { batch } => format!("Start a run of {batch}?"),
            Write::Cancel {
                batch,
                key,
                label,
                claimed,
            } => {
                let item = crate::key::named(key, label);
                if *claimed {
                    format!(
                        "Cancel {item} of {batch}? A worker running it is stopped (a claim waiting to retry or for a pool place is dropped); it goes to manual, never done."
                    )
                } else {
                    format!("Cancel {item} of {batch}? It is not running; it goes to manual.")
                }
            }
            Write::CancelMarked { batch, keys, left } => {
                let mut q = format!(
                    "Cancel {} of {batch}? Running ones have their workers stopped; all go to manual, never done.",
                    noun::count(keys.len(), "marked item")
                );
                if *left > 0 {
                    let (is, stay) = if *left == 1 {
                        ("is", "stays")
                    } else {
                        ("are", "stay")
                    };
                    q.push_str(&format!(
                        " {left} more marked {is} done or failed/manual already and {stay}."
                    ));
                }
                q
            }
            Write::Stop { batch } => format!(
                "Stop the runs of {batch}? No new items; in-flight ones get the grace period."
            ),
        }
    }
}

/// What `App::update` asks the event loop to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Write to the store or start a runner (off the UI thread).
    Write(Write),
    /// Find the failed items a "requeue all" would move, then ask.
    PrepareRequeue {
        batch: String,
        query: ItemsQuery,
        what: String,
    },
    PollNow,
    Quit,
}
