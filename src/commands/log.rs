//! `nightshift log`: the run log, optionally followed.

use std::time::Duration;

use super::scene::NAME_CELLS;
use super::{Ctx, Exit, named, out, out_json};
use crate::cli::LogArgs;
use crate::model::Event;
use crate::store::{EventFilter, Store, StoreError};
use crate::util::time::rfc3339;
use crate::util::{sanitize, text};

const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// The log's columns: the batch's as wide as the widest name it may show
/// (at least 8 cells, at most `NAME_CELLS`), the kind's as wide as the
/// longest kind, so that on every line the kind and the message start at
/// the same cell (a wider name or kind pushed the rest of its line right).
#[derive(Debug, Clone, Copy)]
pub struct Columns {
    batch: usize,
    kind: usize,
}

impl Columns {
    /// For a log of the batches `names` (those of the store, or the one
    /// asked for); an event of a batch made later is cut to fit.
    pub fn of<'a>(names: impl IntoIterator<Item = &'a str>) -> Columns {
        let widest = names
            .into_iter()
            .map(|n| text::width(&sanitize::line(n)))
            .max()
            .unwrap_or(0);
        Columns {
            batch: widest.clamp(8, NAME_CELLS),
            kind: crate::model::EventKind::ALL
                .iter()
                .map(|k| k.as_str().len())
                .max()
                .unwrap_or(12),
        }
    }

    /// Wide enough for `e`'s batch too (up to `NAME_CELLS`): a batch
    /// made while the log is followed is shown whole, not cut to the
    /// width of the names there were when it began.
    #[must_use]
    pub fn fitting(self, e: &Event) -> Columns {
        let name = e
            .batch
            .as_deref()
            .map_or(0, |b| text::width(&sanitize::line(b)));
        Columns {
            batch: self.batch.max(name.min(NAME_CELLS)),
            ..self
        }
    }
}

/// One event on one line: time, batch, kind, the item (its key, and its
/// label beside it when the label says more), message, who, run. Every
/// part made inert; columns padded by display width.
pub fn format_event(e: &Event, cols: Columns) -> String {
    let s = |t: &str| sanitize::line(t).into_owned();
    let batch = s(e.batch.as_deref().unwrap_or("-"));
    let mut line = format!(
        "{} {} {}",
        rfc3339(e.at),
        text::pad(&text::cut(&batch, cols.batch), cols.batch),
        text::pad(&s(&e.kind), cols.kind)
    );
    if let Some(key) = &e.key {
        line.push_str(&format!(" {}", s(key)));
        if let Some(label) = e.label.as_deref().filter(|l| !l.is_empty() && *l != key) {
            line.push_str(&format!(" ({})", s(label)));
        }
    }
    line.push_str(&format!(" {}", s(&e.message)));
    if let Some(actor) = e.named_actor() {
        line.push_str(&format!(" [{}]", s(actor)));
    }
    if let Some(run) = e.run_id {
        line.push_str(&format!(" (run {run})"));
    }
    line
}

/// The key of the item `--key` names in `batch`, by the rule `show` names
/// it by: a name no item has is refused, where it printed nothing (and
/// `--follow` waited forever). A pruned key keeps what its events kept.
fn item_key(ctx: &Ctx, store: &Store, batch: &str, name: &str) -> anyhow::Result<String> {
    match named::find(ctx, store, batch, name, named::LOG) {
        Ok(item) => Ok(item.key),
        Err(e) if matches!(e.downcast_ref(), Some(StoreError::Pruned { .. })) => Ok(name.into()),
        Err(e) => Err(e),
    }
}

/// The batch and key whose events `log` shows: `--key` in `BATCH` as
/// [`item_key`] names it; without a batch, a key some batch has (its
/// events in every batch) or the one item of any batch with that label,
/// refused alike when no item has it.
fn scope(
    ctx: &Ctx,
    store: &Store,
    args: &LogArgs,
) -> anyhow::Result<(Option<String>, Option<String>)> {
    Ok(match (&args.batch, &args.key) {
        (Some(batch), Some(name)) => (
            Some(batch.clone()),
            Some(item_key(ctx, store, batch, name)?),
        ),
        (None, Some(name)) => match named::find_anywhere(store, name, named::LOG)? {
            named::Anywhere::Key(key) => (None, Some(key)),
            named::Anywhere::Item { batch, key } => (Some(batch), Some(key)),
        },
        (batch, None) => (batch.clone(), None),
    })
}

/// Events read at a time by `-n 0`, so that a long log is printed in
/// bounded memory.
const PAGE: usize = 1000;

pub fn run(ctx: &Ctx, args: &LogArgs) -> anyhow::Result<Exit> {
    let store = ctx.open_read()?;
    let (batch, key) = scope(ctx, &store, args)?;
    let filter = EventFilter {
        batch,
        kinds: args.kind.iter().map(|k| k.as_str().to_string()).collect(),
        key,
        limit: args.limit,
        ..EventFilter::default()
    };
    // A configured batch that has not run yet has an empty log, and is
    // followed until its first event.
    let read = |events: crate::store::Result<Vec<Event>>| match &args.batch {
        Some(batch) => ctx.empty_if_unseen(batch, events),
        None => events,
    };
    let cols = match &filter.batch {
        Some(batch) => Columns::of([batch.as_str()]),
        None => Columns::of(store.batch_names()?.iter().map(String::as_str)),
    };
    let cols = std::cell::Cell::new(cols);
    let print = |events: &[Event]| -> anyhow::Result<()> {
        for e in events {
            if args.json {
                out_json(e)?;
            } else {
                cols.set(cols.get().fitting(e));
                out(format_event(e, cols.get()))?;
            }
        }
        Ok(())
    };
    // Taken before the listing: whatever commits while it is read is
    // followed, not lost.
    let mut cursor = if args.follow {
        Some(store.follow_start()?)
    } else {
        None
    };
    if args.limit == 0 {
        // Every event, oldest first, a page at a time.
        let mut after = 0;
        loop {
            let page = read(store.events(&EventFilter {
                after_id: Some(after),
                limit: PAGE,
                ..filter.clone()
            }))?;
            print(&page)?;
            if let Some(c) = cursor.as_mut() {
                c.shown(&page);
            }
            match page.last() {
                Some(last) if page.len() == PAGE => after = last.id,
                _ => break,
            }
        }
    } else {
        let events = read(store.events(&filter))?;
        print(&events)?;
        if let Some(c) = cursor.as_mut() {
            c.shown(&events);
        }
    }
    let Some(mut cursor) = cursor.take() else {
        return Ok(Exit::Ok);
    };
    loop {
        std::thread::sleep(FOLLOW_POLL);
        print(&read(store.follow_next(&filter, &mut cursor))?)?;
    }
}
