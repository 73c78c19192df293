//! The write keys: refused read-only; otherwise a write, a question or a
//! prompt. Writes themselves happen off the UI thread (`Effect::Write`).

use super::{App, StateFilter};
use crate::model::{Status, Tier};
use crate::store::ItemsQuery;
use crate::tui::action::{Effect, Intent, Pane, Write};
use crate::tui::format::item_in_sentence;
use crate::tui::keymap::{self, Mode};

impl App {
    /// What the run and unpause keys say of a hold on the batch's pool,
    /// while it is on: it stays (`runner::pool::hold_stays`).
    pub fn pool_hold_note(&self, batch: &str) -> Option<String> {
        let v = self.pool_of(batch)?;
        let h = v.hold.as_ref().filter(|h| h.until > self.now)?;
        Some(crate::runner::pool::hold_stays(&v.name, h, self.now))
    }

    pub(super) fn ask(&mut self, write: Write) {
        self.confirm = Some(write);
        self.mode = Mode::Confirm;
    }

    pub(super) fn run_write(&mut self, write: Write) -> Vec<Effect> {
        if self.setup.read_only {
            self.warn("read-only: nothing was changed");
            return Vec::new();
        }
        self.busy += 1;
        vec![Effect::Write(write)]
    }

    /// The write keys (read-only, `App::on_normal` refuses them first): a
    /// write, a question, or a prompt.
    pub(super) fn ask_write(&mut self, intent: Intent) -> Vec<Effect> {
        let Some(batch) = self.batch.clone() else {
            self.warn("no batch selected");
            return Vec::new();
        };
        match intent {
            // A run of a paused batch records itself paused and does
            // nothing: say so, and what lifts it, rather than start one and
            // report it "finished".
            Intent::Resume if self.selected_info().is_some_and(|i| i.pause.is_some()) => {
                self.warn(format!(
                    "{} is paused: a run would do nothing; {} unpauses it",
                    crate::tui::format::inert(&batch),
                    keymap::key_of(Mode::Normal, &Intent::TogglePause)
                ));
                Vec::new()
            }
            Intent::Resume if self.data.emergency.is_some() => {
                self.warn("the emergency-stop file PAUSED exists: a run would do nothing");
                Vec::new()
            }
            Intent::Resume => {
                let started = format!("starting a run of {}…", crate::tui::format::inert(&batch));
                self.say(match self.pool_hold_note(&batch) {
                    Some(note) => format!("{started} {note}"),
                    None => started,
                });
                self.run_write(Write::Resume { batch })
            }
            Intent::TogglePause => {
                let paused = self.selected_info().is_some_and(|i| i.pause.is_some());
                if paused {
                    self.ask(Write::Unpause { batch });
                } else {
                    self.prompt = Some(batch);
                    self.input.clear();
                    self.mode = Mode::Prompt;
                }
                Vec::new()
            }
            Intent::RequeueSelected if !self.marks.is_empty() => self.requeue_marked(batch),
            Intent::SkipSelected if !self.marks.is_empty() => self.skip_marked(batch),
            Intent::CancelSelected if !self.marks.is_empty() => self.cancel_marked(batch),
            Intent::RequeueSelected => match self.target_item() {
                Some((key, label, Status::Failed)) => self.run_write(Write::Requeue {
                    batch,
                    what: item_in_sentence(&key, &label),
                    keys: vec![key],
                }),
                Some((key, label, status)) => {
                    self.warn(format!(
                        "only failed items can be requeued; {} is {status}",
                        item_in_sentence(&key, &label)
                    ));
                    Vec::new()
                }
                None => {
                    self.warn("select a failed item first");
                    Vec::new()
                }
            },
            Intent::RequeueAll => self.prepare_requeue_all(batch),
            Intent::CancelSelected => {
                match self.target_item() {
                    Some((key, label, Status::Done)) => self.warn(format!(
                        "{} is already done; there is nothing to cancel",
                        item_in_sentence(&key, &label)
                    )),
                    // Where a cancel would send it: `cancel` changes nothing.
                    Some((key, label, Status::Failed))
                        if self.target_tier() == Some(Tier::Manual) =>
                    {
                        self.warn(format!(
                            "{} is already failed/manual; there is nothing to cancel",
                            item_in_sentence(&key, &label)
                        ));
                    }
                    Some((key, label, status)) => self.ask(Write::Cancel {
                        batch,
                        key,
                        label,
                        claimed: status == Status::Claimed,
                    }),
                    None => self.warn("select an item first"),
                }
                Vec::new()
            }
            Intent::StopRuns => {
                self.ask(Write::Stop { batch });
                Vec::new()
            }
            _ => match self.target_item() {
                Some((key, label, Status::Claimed)) => {
                    self.warn(format!(
                        "{} is in flight; it cannot be skipped now",
                        item_in_sentence(&key, &label)
                    ));
                    Vec::new()
                }
                Some((key, label, Status::Done)) => {
                    self.warn(format!(
                        "{} is already done",
                        item_in_sentence(&key, &label)
                    ));
                    Vec::new()
                }
                Some((key, label, _)) => {
                    self.ask(Write::Skip { batch, key, label });
                    Vec::new()
                }
                None => {
                    self.warn("select an item first");
                    Vec::new()
                }
            },
        }
    }

    /// The item a key acts on (key, label, status): the open detail's,
    /// else the selected row's.
    pub(super) fn target_item(&self) -> Option<(String, String, Status)> {
        if let Some(d) = self.open_detail() {
            return match &self.data.detail {
                Some(Ok(det)) if det.item.key == d.key => {
                    Some((d.key.clone(), det.item.label.clone(), det.item.status))
                }
                _ => None,
            };
        }
        self.selected_row()
            .map(|r| (r.key.clone(), r.label.clone(), r.status))
    }

    /// The tier of the item `target_item` names (failed items have one).
    pub(super) fn target_tier(&self) -> Option<Tier> {
        if let Some(d) = self.open_detail() {
            return match &self.data.detail {
                Some(Ok(det)) if det.item.key == d.key => det.item.tier,
                _ => None,
            };
        }
        self.selected_row().and_then(|r| r.tier)
    }

    pub(super) fn prepare_requeue_all(&mut self, batch: String) -> Vec<Effect> {
        let clean = |s: &str| crate::tui::format::inert(s).into_owned();
        let (query, what) = match self.pane {
            Pane::DeadLetters => {
                let class = match &self.class {
                    Some(c) => c.clone(),
                    None => match self.data.dlq.get(self.dlq.sel) {
                        Some(g) => g.error_class.clone(),
                        None => {
                            self.warn("no error class selected");
                            return Vec::new();
                        }
                    },
                };
                let what = format!("class {} in {}", clean(&class), clean(&batch));
                (
                    ItemsQuery {
                        class: Some(class),
                        ..ItemsQuery::default()
                    },
                    what,
                )
            }
            _ => {
                if let Some(s) = self.status_filter.filter(|s| *s != StateFilter::Failed) {
                    let mut text = format!(
                        "the filter shows {} items; none of them is failed",
                        s.label()
                    );
                    if let Some(o) = s.outcome() {
                        // Done items run again only when asked for by name.
                        text.push_str(&format!(
                            " (to run them again: nightshift requeue {} --outcome {o})",
                            crate::util::sanitize::shell_word(&batch)
                        ));
                    }
                    self.warn(text);
                    return Vec::new();
                }
                let what = if self.search.is_empty() {
                    format!("all failed in {}", clean(&batch))
                } else {
                    format!(
                        "failed matching \"{}\" in {}",
                        clean(&self.search),
                        clean(&batch)
                    )
                };
                (
                    ItemsQuery {
                        status: Some(Status::Failed),
                        search: self.search.clone(),
                        ..ItemsQuery::default()
                    },
                    what,
                )
            }
        };
        self.busy += 1;
        self.say("counting the failed items…");
        vec![Effect::PrepareRequeue { batch, query, what }]
    }
}
