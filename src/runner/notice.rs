//! A notice of a run: something the run says once, the first time it
//! happens (a line on stderr and its event), then only counts, saying at
//! its end how many there were with the first of them (one line, one
//! event), however many slots, workers and attempts it happened in. The
//! run's notices: an item's `estimate_field` the run ignored (`pool`), a
//! `@nightshift` line on a persistent worker's stderr, a stray line on
//! its stdout and a process-mode `@nightshift` line the runner cannot read
//! (`unread`).

use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::child::output::Unread;
use super::child::persistent::Reports;
use super::cycle::Cycle;
use super::pool::IgnoredEstimate;
use super::unread::{StderrReport, StrayLine, UnreadMarker};
use crate::config::BatchConfig;
use crate::model::EventKind;

/// What a notice says: at once of its run's first occurrence, at the
/// run's end of all of them.
pub(super) trait Wording {
    /// What the notice quotes of an occurrence.
    type Example: Clone;
    /// The kind of both its events.
    const KIND: EventKind;
    /// Said at once of the run's first occurrence.
    fn first(&self, example: &Self::Example) -> Said;
    /// Said at the run's end of its `count` occurrences (more than one),
    /// `first` the one said at once.
    fn count(&self, count: u64, first: &Self::Example) -> Said;
}

/// A line said on stderr and recorded as an event with `fields`, about
/// the item `key` when it names one.
pub(super) struct Said {
    pub message: String,
    pub fields: Value,
    pub key: Option<String>,
}

/// A notice of a run, shared by its slots (and a persistent worker's
/// stderr reader, which notes without saying: the next
/// [`Cycle::tell`] says it).
pub(super) struct Notice<W: Wording> {
    wording: W,
    seen: Mutex<Seen<W::Example>>,
}

struct Seen<E> {
    first: Option<E>,
    count: u64,
    /// The first was said.
    said: bool,
}

impl<W: Wording> Notice<W> {
    pub(super) fn new(wording: W) -> Notice<W> {
        Notice {
            wording,
            seen: Mutex::new(Seen {
                first: None,
                count: 0,
                said: false,
            }),
        }
    }

    /// Counts one occurrence, the run's first kept to quote.
    pub(super) fn note(&self, example: W::Example) {
        self.note_many(1, example);
    }

    /// Counts `n` occurrences alike (`example` quotes them), the run's
    /// first kept to quote.
    pub(super) fn note_many(&self, n: u64, example: W::Example) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.count += n;
        seen.first.get_or_insert(example);
    }

    /// The run's first occurrence when it was not said yet (it is now).
    fn news(&self) -> Option<W::Example> {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.said {
            return None;
        }
        let first = seen.first.clone()?;
        seen.said = true;
        Some(first)
    }

    /// How many occurrences and the first, when there were more than the
    /// one said at once.
    fn total(&self) -> Option<(u64, W::Example)> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let first = seen.first.clone()?;
        (seen.count > 1).then_some((seen.count, first))
    }
}

/// The run's notices.
pub(super) struct Notices {
    /// Items whose `estimate_field` held no estimate (`pool`).
    pub estimates: Notice<IgnoredEstimate>,
    /// `@nightshift` lines on persistent workers' stderr, noted by their
    /// readers (`unread`).
    pub stderr: Arc<Notice<StderrReport>>,
    /// Stray stdout lines of persistent workers (`unread`).
    pub strays: Notice<StrayLine>,
    /// Process-mode `@nightshift` lines the runner cannot read (`unread`).
    pub markers: Notice<UnreadMarker>,
}

impl Notices {
    pub(super) fn of(cfg: &BatchConfig) -> Notices {
        Notices {
            estimates: Notice::new(IgnoredEstimate::of(cfg)),
            stderr: Arc::new(Notice::new(StderrReport)),
            strays: Notice::new(StrayLine),
            markers: Notice::new(UnreadMarker),
        }
    }

    /// Where a persistent worker's stderr reader notes its `@nightshift`
    /// lines.
    pub(super) fn stderr_reports(&self) -> Reports {
        let notice = self.stderr.clone();
        Arc::new(move |line| notice.note(line))
    }
}

impl Cycle {
    /// At the run's end, each notice's first occurrence if not said yet,
    /// and how many there were.
    pub(super) async fn tally_notices(&self) {
        self.tally(&self.notices.estimates).await;
        self.tally(&*self.notices.stderr).await;
        self.tally(&self.notices.strays).await;
        self.tally(&self.notices.markers).await;
    }

    /// Counts one occurrence of `notice` and says it if it is the run's
    /// first.
    pub(super) async fn notice<W: Wording>(&self, notice: &Notice<W>, example: W::Example) {
        notice.note(example);
        self.tell(notice).await;
    }

    /// Counts an attempt's `@nightshift` lines the runner could not read,
    /// and says the run's first.
    pub(super) async fn unread_markers(&self, key: &str, unread: &Unread) {
        let Some(first) = &unread.first else {
            return;
        };
        self.notices
            .markers
            .note_many(unread.count, (key.to_string(), first.clone()));
        self.tell(&self.notices.markers).await;
    }

    /// Says the run's first occurrence of `notice`, once a run.
    pub(super) async fn tell<W: Wording>(&self, notice: &Notice<W>) {
        if let Some(first) = notice.news() {
            self.say_notice(W::KIND, notice.wording.first(&first)).await;
        }
    }

    /// At the run's end: the first occurrence if not said yet (noted after
    /// the last [`Cycle::tell`]), then how many there were when more.
    async fn tally<W: Wording>(&self, notice: &Notice<W>) {
        self.tell(notice).await;
        if let Some((count, first)) = notice.total() {
            self.say_notice(W::KIND, notice.wording.count(count, &first))
                .await;
        }
    }

    async fn say_notice(&self, kind: EventKind, said: Said) {
        self.say(&said.message);
        let mut event = self.new_event(kind, said.message).fields(said.fields);
        if let Some(key) = &said.key {
            event = event.key(key);
        }
        self.event(event).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Words;

    impl Wording for Words {
        type Example = String;
        const KIND: EventKind = EventKind::StrayOutput;
        fn first(&self, example: &String) -> Said {
            Said {
                message: example.clone(),
                fields: Value::Null,
                key: None,
            }
        }
        fn count(&self, count: u64, first: &String) -> Said {
            Said {
                message: format!("{count} {first}"),
                fields: Value::Null,
                key: None,
            }
        }
    }

    #[test]
    fn the_first_is_news_once_however_many_note_it_and_all_are_counted() {
        let notice = std::sync::Arc::new(Notice::new(Words));
        assert_eq!(notice.news(), None, "nothing noted");
        assert_eq!(notice.total(), None);
        let threads: Vec<_> = (0..3)
            .map(|slot| {
                let notice = notice.clone();
                std::thread::spawn(move || {
                    (0..4)
                        .filter(|i| {
                            notice.note(format!("slot {slot} line {i}"));
                            notice.news().is_some()
                        })
                        .count()
                })
            })
            .collect();
        let news: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(news, 1, "said once a run");
        let (count, first) = notice.total().unwrap();
        assert_eq!(count, 12);
        assert!(first.ends_with("line 0"), "{first}");
    }

    #[test]
    fn one_occurrence_is_said_and_never_counted() {
        let notice = Notice::new(Words);
        notice.note("a".into());
        assert_eq!(notice.total(), None, "the one said at once is all");
        assert_eq!(notice.news().as_deref(), Some("a"));
        assert_eq!(notice.news(), None);
    }
}
