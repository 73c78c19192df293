//! `update(Action)`: an intent read by the mode, an arrival applied
//! whatever it; a poll's answer taken in and every list refitted to it.

use super::{App, Dialog, Flash, StateFilter};
use crate::model::Millis;
use crate::tui::action::{Action, Arrival, Effect, Intent, Write};
use crate::tui::keymap::{self, Mode};

impl App {
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
