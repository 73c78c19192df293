//! Typing: the filter line, the pause prompt, the confirm dialog.

use super::{App, DEFAULT_PAUSE_REASON, FilterTarget};
use crate::tui::action::{Action, Effect, Pane, Write};
use crate::tui::keymap::Mode;

impl App {
    pub(super) fn start_filter(&mut self) {
        match self.pane {
            Pane::Items => {
                self.filter_target = FilterTarget::Search;
                self.input = self.search.clone();
            }
            Pane::Log => {
                self.filter_target = FilterTarget::Kinds;
                self.input = self.log.kinds.join(",");
            }
            _ => return,
        }
        self.mode = Mode::Filter;
    }

    /// The filter applies as it is typed.
    pub(super) fn apply_filter(&mut self) {
        match self.filter_target {
            FilterTarget::Search => {
                self.search = self.input.clone();
                self.reset_items();
            }
            FilterTarget::Kinds => {
                self.log.kinds = self
                    .input
                    .split([',', ' '])
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_string)
                    .collect();
                self.log_to_end();
            }
        }
    }

    pub(super) fn update_filter(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Input(c) => {
                self.input.push(c);
                self.apply_filter();
            }
            Action::Backspace => {
                self.input.pop();
                self.apply_filter();
            }
            Action::Submit => self.mode = Mode::Normal,
            Action::Cancel => {
                self.input.clear();
                self.apply_filter();
                self.mode = Mode::Normal;
            }
            Action::Quit => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            // Data and clock keep flowing while typing.
            other @ (Action::Tick(_)
            | Action::Resize(..)
            | Action::Polled { .. }
            | Action::Unchanged { .. }
            | Action::Done { .. }
            | Action::RunnerExited { .. }
            | Action::Prepared(_)
            | Action::Since(_)) => {
                self.mode = Mode::Normal;
                let effects = self.update(other);
                if self.mode == Mode::Normal {
                    self.mode = Mode::Filter;
                }
                return effects;
            }
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn update_prompt(&mut self, action: Action) -> Vec<Effect> {
        match action {
            Action::Input(c) => self.input.push(c),
            Action::Backspace => {
                self.input.pop();
            }
            Action::Submit => {
                self.mode = Mode::Normal;
                let reason = match self.input.trim() {
                    "" => DEFAULT_PAUSE_REASON.to_string(),
                    r => r.to_string(),
                };
                self.input.clear();
                if let Some(batch) = self.prompt.take() {
                    return self.run_write(Write::Pause { batch, reason });
                }
            }
            Action::Cancel => {
                self.mode = Mode::Normal;
                self.prompt = None;
                self.input.clear();
                self.say("pause cancelled");
            }
            Action::Quit => {
                self.quit = true;
                return vec![Effect::Quit];
            }
            other @ (Action::Tick(_)
            | Action::Resize(..)
            | Action::Polled { .. }
            | Action::Unchanged { .. }
            | Action::Done { .. }
            | Action::RunnerExited { .. }
            | Action::Prepared(_)
            | Action::Since(_)) => {
                self.mode = Mode::Normal;
                let effects = self.update(other);
                self.mode = Mode::Prompt;
                return effects;
            }
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn update_confirm(&mut self, action: Action) -> Vec<Effect> {
        self.mode = Mode::Normal;
        let write = self.confirm.take();
        match (action, write) {
            (Action::Quit, _) => {
                self.quit = true;
                vec![Effect::Quit]
            }
            (Action::Confirm(true), Some(write)) => self.run_write(write),
            _ => {
                self.say("cancelled: nothing was changed");
                Vec::new()
            }
        }
    }
}
