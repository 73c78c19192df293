//! Typing: the filter line, the pause prompt, the confirm dialog.

use super::{App, DEFAULT_PAUSE_REASON, FilterTarget};
use crate::model::EventKind;
use crate::tui::action::{Effect, Intent, Pane, Write};
use crate::tui::keymap::Mode;
use crate::util::text;

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

    /// The run log filter's kinds that are no event kind (a typo, or a
    /// word not finished yet).
    pub fn unknown_kinds(&self) -> Vec<&str> {
        self.log
            .kinds
            .iter()
            .map(String::as_str)
            .filter(|k| k.parse::<EventKind>().is_err())
            .collect()
    }

    pub(super) fn update_filter(&mut self, intent: Intent) -> Vec<Effect> {
        match intent {
            Intent::Input(c) => {
                self.input.push(c);
                self.apply_filter();
            }
            Intent::Backspace => {
                text::pop_grapheme(&mut self.input);
                self.apply_filter();
            }
            // A kind the log has no word for matches nothing: the filter
            // stays open, its line naming it, until it is fixed or cleared.
            Intent::Submit if !self.unknown_kinds().is_empty() => {}
            Intent::Submit => self.mode = Mode::Normal,
            Intent::Cancel => {
                self.input.clear();
                self.apply_filter();
                self.mode = Mode::Normal;
            }
            Intent::Quit => return self.stop(),
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn update_prompt(&mut self, intent: Intent) -> Vec<Effect> {
        match intent {
            Intent::Input(c) => self.input.push(c),
            Intent::Backspace => text::pop_grapheme(&mut self.input),
            Intent::Submit => {
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
            Intent::Cancel => {
                self.mode = Mode::Normal;
                self.prompt = None;
                self.input.clear();
                self.say("pause cancelled");
            }
            Intent::Quit => return self.stop(),
            _ => {}
        }
        Vec::new()
    }

    pub(super) fn update_confirm(&mut self, intent: Intent) -> Vec<Effect> {
        let answer = match intent {
            Intent::Confirm(yes) => Some(yes),
            Intent::Quit => None,
            _ => return Vec::new(),
        };
        self.mode = Mode::Normal;
        let write = self.confirm.take();
        match (answer, write) {
            (None, _) => self.stop(),
            (Some(true), Some(write)) => {
                self.acted_on_marks(&write);
                self.run_write(write)
            }
            _ => {
                self.say("cancelled: nothing was changed");
                Vec::new()
            }
        }
    }
}
