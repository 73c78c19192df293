//! The `Store` methods whose mechanism is each engine's own, so they match
//! on the dialect once instead of being decided in `ops`: accessors, engine
//! mechanisms (integrity, change markers, following the log, checkpoints)
//! and the hot paths, whose SQL differs on purpose (`sqlite::hot`,
//! `pg::hot`: DESIGN16 §1.4).

use std::path::Path;

use super::sqlite::beside::Span;
use super::{Access, AddFeed, Completion, EventFilter, FeedRefused, FollowCursor, Result, Store};
use crate::key::KeySpec;
use crate::model::{AddReport, Claim, Event, Millis, NewEvent, NewItem};

impl Store {
    /// What messages call this store: its path, or its URL without the
    /// password.
    pub fn path(&self) -> &Path {
        match self {
            Store::Sqlite(s) => s.path(),
            Store::Pg(s) => s.path(),
        }
    }

    pub fn access(&self) -> Access {
        match self {
            Store::Sqlite(s) => s.access(),
            Store::Pg(s) => s.access(),
        }
    }

    /// Makes bulk writes (`add_items`, `requeue`) stop at the next chunk
    /// boundary once `stop` is set, saying how far they got.
    pub fn set_stop(&mut self, stop: crate::util::signals::Stop) {
        match self {
            Store::Sqlite(s) => s.set_stop(stop),
            Store::Pg(s) => s.set_stop(stop),
        }
    }

    /// "ok" or the problems found: SQLite's `PRAGMA integrity_check`;
    /// on PostgreSQL, the counters checked against the items they count.
    pub fn integrity_check(&self) -> Result<String> {
        match self {
            Store::Sqlite(s) => s.integrity_check(),
            Store::Pg(s) => s.integrity_check(),
        }
    }

    /// A value that differs after any commit to the store: a poller that
    /// sees the same marker twice can skip reading (SQLite: the file and
    /// `data_version`; PostgreSQL: the server's WAL position).
    pub fn change_marker(&self) -> Vec<u8> {
        match self {
            Store::Sqlite(s) => s.change_marker(),
            Store::Pg(s) => s.change_marker(),
        }
    }

    /// Starts following the log: take the cursor before listing what is
    /// already there, then pass the listing to `FollowCursor::shown`
    /// (SQLite follows by id, PostgreSQL by transaction horizon).
    pub fn follow_start(&self) -> Result<FollowCursor> {
        match self {
            Store::Sqlite(s) => s.follow_start(),
            Store::Pg(s) => s.follow_start(),
        }
    }

    /// The events matching `filter` that appeared since the cursor (all of
    /// them, oldest first), moving the cursor past them.
    pub fn follow_next(
        &self,
        filter: &EventFilter,
        cursor: &mut FollowCursor,
    ) -> Result<Vec<Event>> {
        match self {
            Store::Sqlite(s) => s.follow_next(filter, cursor),
            Store::Pg(s) => s.follow_next(filter, cursor),
        }
    }

    /// Keeps SQLite's WAL short between runs (a passive checkpoint);
    /// PostgreSQL checkpoints on its own.
    pub fn checkpoint(&mut self) -> Result<()> {
        match self {
            Store::Sqlite(s) => s.checkpoint(),
            Store::Pg(s) => s.checkpoint(),
        }
    }

    /// Runs `f`, a bulk write of many commits (a requeue), with SQLite's
    /// WAL checkpointed beside it rather than inside its commits (see
    /// `sqlite::beside`); PostgreSQL checkpoints on its own.
    pub fn with_checkpoints_beside<T>(&mut self, f: impl FnOnce(&mut Store) -> T) -> T {
        if let Store::Sqlite(s) = self {
            s.begin_checkpoints_beside(Span::Bulk);
        }
        let out = f(self);
        self.end_checkpoints_beside();
        out
    }

    /// From here on SQLite's WAL is checkpointed beside the commits, until
    /// [`Store::end_checkpoints_beside`]: for a writer that outlives one
    /// call (the runner's store thread), whose log is still made to start
    /// over as it grows.
    pub fn begin_checkpoints_beside(&mut self) {
        if let Store::Sqlite(s) = self {
            s.begin_checkpoints_beside(Span::Lasting);
        }
    }

    /// The commits checkpoint themselves again.
    pub fn end_checkpoints_beside(&mut self) {
        if let Store::Sqlite(s) = self {
            s.end_checkpoints_beside();
        }
    }

    /// A small page cache for a run's hot path (SQLite; the server keeps
    /// PostgreSQL's), so the runner's memory stays flat as the store grows.
    pub fn use_runner_cache(&self) {
        match self {
            Store::Sqlite(s) => s.use_runner_cache(),
            Store::Pg(s) => s.use_runner_cache(),
        }
    }

    /// Adds items idempotently: an item whose key is already in the batch,
    /// or was and has been pruned (its tombstone), is left exactly as it
    /// is. Hot path: SQLite adds in paced chunks beside a live runner,
    /// PostgreSQL in one transaction of `unnest` inserts.
    pub fn add_items(
        &mut self,
        batch: &str,
        items: &[NewItem],
        now: Millis,
        progress: impl FnMut(usize),
    ) -> Result<AddReport> {
        self.add_keyed((batch, None), items, now, progress)
    }

    /// [`Store::add_items`] of items keyed by `spec`: refused, nothing
    /// written, when the batch's items were keyed otherwise
    /// (`Refusal::KeyedOtherwise`); recorded as the batch's spec when it
    /// has none yet. `None`: an add that does not know (a test's items).
    pub fn add_keyed(
        &mut self,
        (batch, spec): (&str, Option<&KeySpec>),
        items: &[NewItem],
        now: Millis,
        progress: impl FnMut(usize),
    ) -> Result<AddReport> {
        let as_written = self.keyed_as_written(batch, items)?;
        let items = as_written.as_deref().unwrap_or(items);
        match self {
            Store::Sqlite(s) => s.add_items((batch, spec), items, now, progress),
            Store::Pg(s) => s.add_items((batch, spec), items, now, progress),
        }
    }

    /// Whether `add_fed` writes the parts as they come (in one
    /// transaction: always on PostgreSQL, on SQLite with no runner live)
    /// rather than once all are read.
    pub fn feeds_adds(&self) -> bool {
        match self {
            Store::Sqlite(s) => s.feeds_adds(),
            Store::Pg(_) => true,
        }
    }

    /// `add_items` of an input still being read, its parts taken from
    /// `feed` in input order (`input_bytes`: its size). `None`: the feed
    /// refused the input, and nothing was written. Its items' written keys
    /// are not looked for (`Store::keyed_as_written`): an input with text
    /// not composed goes to `add_items`.
    pub fn add_fed<'a>(
        &mut self,
        batch: &str,
        feed: &mut dyn AddFeed<'a>,
        input_bytes: usize,
        now: Millis,
        progress: impl FnMut(usize),
    ) -> Result<Option<AddReport>> {
        self.add_fed_keyed((batch, None), feed, input_bytes, now, progress)
    }

    /// [`Store::add_fed`] of items keyed by `spec`, as
    /// [`Store::add_keyed`] checks and records it.
    pub fn add_fed_keyed<'a>(
        &mut self,
        (batch, spec): (&str, Option<&KeySpec>),
        feed: &mut dyn AddFeed<'a>,
        input_bytes: usize,
        now: Millis,
        progress: impl FnMut(usize),
    ) -> Result<Option<AddReport>> {
        match self {
            Store::Sqlite(s) if s.feeds_adds() => {
                return s.add_fed((batch, spec), feed, input_bytes, now, progress);
            }
            Store::Pg(s) => return s.add_fed((batch, spec), feed, now, progress),
            Store::Sqlite(_) => {}
        }
        let mut all = Vec::new();
        while let Some(part) = feed.next_part() {
            match part {
                Ok(part) => all.extend_from_slice(part),
                Err(FeedRefused) => return Ok(None),
            }
        }
        self.add_keyed((batch, spec), &all, now, progress).map(Some)
    }

    /// Claims up to `n` pending items for `run_id`: each gets a lease until
    /// `lease_until`, a fresh (larger) fencing token and its attempt counted.
    /// `None` (and nothing claimed) when `run_id` no longer holds the batch
    /// lock. Hot path: one CTE with `SKIP LOCKED` on PostgreSQL.
    pub fn claim(
        &mut self,
        batch: &str,
        run_id: i64,
        n: usize,
        lease_until: Millis,
        now: Millis,
    ) -> Result<Option<Vec<Claim>>> {
        match self {
            Store::Sqlite(s) => s.claim(batch, run_id, n, lease_until, now),
            Store::Pg(s) => s.claim(batch, run_id, n, lease_until, now),
        }
    }

    /// How the engine plans a claim of `batch`, one line per step (its
    /// `EXPLAIN`): the tests keep it an index read in claim order, no scan
    /// and no sort, so a claim costs the same at a million items.
    #[doc(hidden)]
    pub fn claim_plan(&self, batch: &str) -> Result<Vec<String>> {
        match self {
            Store::Sqlite(s) => s.claim_plan(batch),
            Store::Pg(s) => s.claim_plan(batch),
        }
    }

    /// Marks a claimed item done — only after its worker succeeded. False
    /// (and nothing written) if the lease token no longer matches. Hot
    /// path: one statement on PostgreSQL.
    pub fn complete(&mut self, c: &Completion<'_>, event: &NewEvent) -> Result<bool> {
        match self {
            Store::Sqlite(s) => s.complete(c, event),
            Store::Pg(s) => s.complete(c, event),
        }
    }

    /// Marks several claimed items done in one transaction (a persistent
    /// worker's batch): as `complete` for each, with the run's counters
    /// updated once. All must belong to one run. One flag per item, in
    /// order: false where the lease token no longer matched. Hot path:
    /// three statements whatever the number on PostgreSQL.
    pub fn complete_all(&mut self, done: &[(Completion<'_>, &NewEvent)]) -> Result<Vec<bool>> {
        match self {
            Store::Sqlite(s) => s.complete_all(done),
            Store::Pg(s) => s.complete_all(done),
        }
    }
}
