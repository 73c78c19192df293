//! The add path: one add's rows and keys written in input and key order
//! (`Adding`), the page cache sized for it, and the stop requests and
//! chunks of an add while a runner is live.

use rusqlite::{Connection, params};

use super::super::SqliteStore;
use super::super::batches::{ensure, keyed_by};
use super::super::events::insert as insert_event;
use crate::key::KeySpec;
use crate::model::{AddReport, Millis, NewItem};
use crate::store::chunks::Chunks;
use crate::store::{AddFeed, Fault, Result, StoreError};
use crate::util::signals::Stop;

/// One item per `INSERT`: a statement inserting several rows needs a
/// statement journal (it could fail half-way), and journalling every page
/// it touches cost more than stepping one cached statement per row (at a
/// million items, 9.0 s against 6.8 s of CPU). The id is the add's, in
/// input order (the claim order), so rows are appended to the table.
const INSERT_ITEM: &str =
    "INSERT INTO items (id, batch_id, key, label, payload, status, created_at, updated_at,
                        priority, next_attempt_at)
     VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6, ?7, ?8)";

/// The key of a new item, in key order (see `add_chunk`); nothing when the
/// key is taken (an item added meanwhile, or given twice).
const INSERT_KEY: &str = "INSERT INTO item_keys (batch_id, key, item_id) VALUES (?1, ?2, ?3)
     ON CONFLICT (batch_id, key) DO NOTHING";

/// Rows (and keys) written per statement: one statement keeps its cursors
/// on the last pages of the table and its indexes from row to row, so an
/// append needs no descent from the root, and its setup is paid once.
/// `OR ROLLBACK` spares such a statement its statement journal (a copy of
/// every page it touches, kept to undo it alone): a row that could fail
/// it (none can: the rows are made whole) ends the whole transaction,
/// which an add's failure does anyway. No trigger fires on these inserts,
/// whose own `OR IGNORE` the outer clause would override. (200,000
/// `--key-fields` items: 1.7 % fewer instructions; bench/README.)
const ROWS_PER_INSERT: usize = 32;

/// `n` rows of `INSERT_ITEM` in one statement (`ROWS_PER_INSERT`).
fn insert_items_sql(n: usize) -> String {
    let row = "(?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)";
    format!(
        "INSERT OR ROLLBACK INTO items (id, batch_id, key, label, payload, status, created_at, updated_at,
                            priority, next_attempt_at) VALUES {}",
        vec![row; n].join(", ")
    )
}

/// `n` rows of `INSERT_KEY` in one statement.
fn insert_keys_sql(n: usize) -> String {
    format!(
        "INSERT OR ROLLBACK INTO item_keys (batch_id, key, item_id) VALUES {}
         ON CONFLICT (batch_id, key) DO NOTHING",
        vec!["(?, ?, ?)"; n].join(", ")
    )
}

/// The item holding a key.
const KEY_ITEM: &str = "SELECT item_id FROM item_keys WHERE batch_id = ?1 AND key = ?2";

/// An item whose key was found taken once its row was written.
const DROP_ITEM: &str = "DELETE FROM items WHERE id = ?1";

/// The first id after every item's (of any batch): the add's rows follow.
const NEXT_ID: &str = "SELECT coalesce(max(id), 0) + 1 FROM items";

/// Is this key an item of the batch?
const KEY_PRESENT: &str = "SELECT 1 FROM item_keys WHERE batch_id = ?1 AND key = ?2";

/// Keys of a chunk looked up before deciding how to add it (see
/// `present_in_key_order`).
const SAMPLE: usize = 64;

/// Progress is reported every this many items.
const PROGRESS_STEP: usize = 10_000;

/// A one-transaction add checks for a stop request every this many items.
const STOP_STEP: usize = 1_024;

/// Page cache (KiB) to hold an add's new rows and index entries in one
/// transaction: about 1.5x their raw size, capped so a huge import spills
/// to the WAL rather than exhausting memory.
fn bulk_cache_kib(items: &[NewItem]) -> i64 {
    const CAP_KIB: usize = 512 * 1024;
    let bytes: usize = items
        .iter()
        .map(|i| 2 * i.key.len() + i.label.len() + i.payload.len() + 64)
        .sum();
    (bytes * 3 / 2 / 1024).min(CAP_KIB) as i64
}

/// `bulk_cache_kib` of an input of `bytes` not parsed yet: its rows, keys
/// and index entries take up to four times its size (short lines: a
/// million of 56 bytes made 210 MB of pages; a smaller cache spilled them
/// to the WAL mid-transaction).
fn fed_cache_kib(bytes: usize) -> i64 {
    const CAP_KIB: usize = 512 * 1024;
    (bytes * 4 / 1024).min(CAP_KIB) as i64
}

/// Inserts one chunk of an add and counts its new items as pending (once
/// for the chunk rather than per row by a trigger, see the schema). A key
/// with a tombstone counts as present. With `last` (the report of the
/// earlier chunks), also writes the add's event. With `stop`, gives up
/// (and the transaction rolls back) once a stop is requested.
fn add_chunk(
    tx: &Connection,
    (batch, spec): (&str, Option<&KeySpec>),
    chunk: &[NewItem],
    now: Millis,
    last: Option<AddReport>,
    stop: Option<&Stop>,
    progress: &mut dyn FnMut(usize),
) -> Result<AddReport> {
    let mut add = Adding::begin(tx, (batch, spec), now, stop)?;
    add.rows(chunk, progress)?;
    add.finish(last)
}

/// One add's writes in one transaction, its parts given in input order.
/// The rows go first, under ids counted up from the table's last (each
/// appended; the ids are the claim order), then their keys, sorted, into
/// `item_keys`: both b-trees fill in order, where one table with a unique
/// key index took a random leaf of that index per row (hashed keys). A key
/// found taken then (present, and not seen so by `present_in_key_order`)
/// drops its row again: rare, and it leaves a gap in the ids.
struct Adding<'c, 'a> {
    tx: &'c Connection,
    batch: &'c str,
    id: i64,
    /// Only a batch that was pruned has tombstones to look up.
    pruned: bool,
    next: i64,
    now: Millis,
    stop: Option<&'c Stop>,
    /// The rows written: each key and its item's id.
    keys: Vec<(&'a str, i64)>,
    /// Instead of `keys` (`by_place`): the id of every item given, in the
    /// order given, 0 where none was written; the caller knows the keys'
    /// order (`finish_in`).
    placed: Option<Vec<i64>>,
    report: AddReport,
}

impl<'c, 'a> Adding<'c, 'a> {
    /// Starts an add into `batch` (made if missing), refused before any
    /// row when `spec` keys its items otherwise than the batch's were.
    fn begin(
        tx: &'c Connection,
        (batch, spec): (&'c str, Option<&KeySpec>),
        now: Millis,
        stop: Option<&'c Stop>,
    ) -> Result<Self> {
        let id = ensure(tx, batch, now)?;
        if let Some(spec) = spec {
            keyed_by(tx, id, batch, spec)?;
        }
        Ok(Adding {
            tx,
            batch,
            id,
            pruned: super::super::tombstones::any(tx, id)?,
            next: tx.prepare_cached(NEXT_ID)?.query_row([], |r| r.get(0))?,
            now,
            stop,
            keys: Vec::new(),
            placed: None,
            report: AddReport::default(),
        })
    }

    /// Records the ids by place (`placed`), not by key.
    fn by_place(mut self) -> Self {
        self.placed = Some(Vec::new());
        self
    }

    /// Writes the rows of `part`'s items not in the batch yet.
    fn rows(&mut self, part: &'a [NewItem], progress: &mut dyn FnMut(usize)) -> Result<()> {
        let (tx, id, now) = (self.tx, self.id, self.now);
        let present = present_in_key_order(tx, id, part, self.stop)?;
        let mut many = tx.prepare_cached(&insert_items_sql(ROWS_PER_INSERT))?;
        let mut ready: Vec<(i64, &NewItem)> = Vec::with_capacity(ROWS_PER_INSERT);
        match &mut self.placed {
            Some(placed) => placed.reserve(part.len()),
            None => self.keys.reserve(part.len()),
        }
        self.report.order = self.report.order.then(crate::model::AddOrder::of(part));
        for (i, item) in part.iter().enumerate() {
            progress(i);
            stopped(self.stop, i)?;
            if present.get(i).copied().unwrap_or(false) {
                self.report.present += 1;
                self.place(None);
                continue;
            }
            if self.pruned
                && let Some(at) = super::super::tombstones::pruned_at(tx, id, &item.key)?
            {
                self.report.count_pruned(at);
                self.place(None);
                continue;
            }
            let next = self.next;
            ready.push((next, item));
            if ready.len() == ROWS_PER_INSERT {
                bind_rows(&mut many, id, now, &ready)?;
                many.raw_execute()?;
                ready.clear();
            }
            match &mut self.placed {
                Some(placed) => placed.push(next),
                None => self.keys.push((&item.key, next)),
            }
            self.next += 1;
        }
        let mut st = tx.prepare_cached(INSERT_ITEM)?;
        for (next, item) in ready {
            st.execute(params![
                next,
                id,
                item.key,
                item.label,
                item.payload,
                now,
                item.priority,
                item.not_before
            ])?;
        }
        Ok(())
    }

    fn place(&mut self, item: Option<i64>) {
        if let Some(placed) = &mut self.placed {
            placed.push(item.unwrap_or(0));
        }
    }

    /// `finish` of an add `by_place`: `by_key` names every item given by
    /// its place, in key order (then place).
    fn finish_in(
        mut self,
        by_key: &[(&'a str, usize)],
        last: Option<AddReport>,
    ) -> Result<AddReport> {
        let placed = self.placed.take().unwrap_or_default();
        self.keys = by_key
            .iter()
            .filter_map(|&(key, at)| placed.get(at).filter(|&&i| i != 0).map(|&i| (key, i)))
            .collect();
        self.write_keys(last)
    }

    /// Counts the rows as pending, writes their keys in key order, drops
    /// the rows whose key was taken, and with `last` (the report of the
    /// earlier chunks) writes the add's event. What this part did.
    fn finish(mut self, last: Option<AddReport>) -> Result<AddReport> {
        // A key given twice: the first line's row keeps it, as it is added.
        self.keys.sort_unstable();
        self.write_keys(last)
    }

    /// `finish` of the keys in key order.
    fn write_keys(self, last: Option<AddReport>) -> Result<AddReport> {
        let (tx, id) = (self.tx, self.id);
        let written = self.keys.len() as i64;
        if written > 0 {
            tx.prepare_cached(
                "UPDATE counts SET n = n + ?2 WHERE batch_id = ?1 AND bucket = 'pending'",
            )?
            .execute(params![id, written])?;
        }
        let mut key = tx.prepare_cached(INSERT_KEY)?;
        let mut many = tx.prepare_cached(&insert_keys_sql(ROWS_PER_INSERT))?;
        let mut holder = tx.prepare_cached(KEY_ITEM)?;
        let mut taken = Vec::new();
        let mut groups = self.keys.chunks_exact(ROWS_PER_INSERT);
        for (n, group) in groups.by_ref().enumerate() {
            stopped(self.stop, n * ROWS_PER_INSERT)?;
            for (i, (k, item)) in group.iter().enumerate() {
                many.raw_bind_parameter(3 * i + 1, id)?;
                many.raw_bind_parameter(3 * i + 2, k)?;
                many.raw_bind_parameter(3 * i + 3, item)?;
            }
            if many.raw_execute()? < group.len() {
                // Which were taken: rare, each looked up again.
                for (k, item) in group {
                    let held: i64 = holder.query_row(params![id, k], |r| r.get(0))?;
                    if held != *item {
                        taken.push(*item);
                    }
                }
            }
        }
        for (k, item) in groups.remainder() {
            if key.execute(params![id, k, item])? == 0 {
                taken.push(*item);
            }
        }
        // Their rows out again: the delete trigger takes them out of the
        // pending count and leaves the key to the item holding it.
        let mut drop_item = tx.prepare_cached(DROP_ITEM)?;
        for item in &taken {
            drop_item.execute(params![item])?;
        }
        let mut report = self.report;
        report.added = (self.keys.len() - taken.len()) as u64;
        report.present += taken.len() as u64;
        if let Some(before) = last {
            let all = before.then(report);
            if all.added > 0 {
                insert_event(
                    tx,
                    &crate::store::ops::add::added_event(self.batch, &all, None, self.now),
                )?;
            }
        }
        Ok(report)
    }
}

/// Binds `rows` (each with its id) to `INSERT_ITEM` of as many rows.
fn bind_rows(
    st: &mut rusqlite::CachedStatement<'_>,
    batch: i64,
    now: Millis,
    rows: &[(i64, &NewItem)],
) -> Result<()> {
    for (i, (next, item)) in rows.iter().enumerate() {
        let at = 9 * i;
        st.raw_bind_parameter(at + 1, next)?;
        st.raw_bind_parameter(at + 2, batch)?;
        st.raw_bind_parameter(at + 3, &item.key)?;
        st.raw_bind_parameter(at + 4, &item.label)?;
        st.raw_bind_parameter(at + 5, &item.payload)?;
        st.raw_bind_parameter(at + 6, now)?;
        st.raw_bind_parameter(at + 7, now)?;
        st.raw_bind_parameter(at + 8, item.priority)?;
        st.raw_bind_parameter(at + 9, item.not_before)?;
    }
    Ok(())
}

/// The error of a stop requested, checked every `STOP_STEP` items.
fn stopped(stop: Option<&Stop>, n: usize) -> Result<()> {
    match stop
        .filter(|_| n.is_multiple_of(STOP_STEP))
        .and_then(Stop::requested)
    {
        Some(signal) => Err(StoreError::Interrupted(signal)),
        None => Ok(()),
    }
}

/// Which items of `chunk` are already in the batch, when most of a sample
/// of them are (an add run again; empty otherwise: the keys' inserts find
/// the few present ones themselves). Looked up in key order, so
/// consecutive lookups descend to the same or the next page, and only the
/// absent items' rows are written.
fn present_in_key_order(
    tx: &Connection,
    id: i64,
    chunk: &[NewItem],
    stop: Option<&Stop>,
) -> Result<Vec<bool>> {
    let mut found = tx.prepare_cached(KEY_PRESENT)?;
    let stride = (chunk.len() / SAMPLE).max(1);
    let mut sampled = 0;
    let mut hits = 0;
    for item in chunk.iter().step_by(stride).take(SAMPLE) {
        sampled += 1;
        hits += usize::from(found.exists(params![id, item.key])?);
    }
    if hits * 2 <= sampled {
        return Ok(Vec::new());
    }
    let mut order: Vec<usize> = (0..chunk.len()).collect();
    order.sort_unstable_by(|&a, &b| chunk[a].key.cmp(&chunk[b].key));
    let mut present = vec![false; chunk.len()];
    for (n, i) in order.into_iter().enumerate() {
        stopped(stop, n)?;
        present[i] = found.exists(params![id, chunk[i].key])?;
    }
    Ok(present)
}

impl SqliteStore {
    /// Adds items idempotently: an item whose key is already in the batch,
    /// or was and has been pruned (its tombstone), is left exactly as it
    /// is. With no runner live, one transaction: an add that fails (a full
    /// disk, a stop request) changes nothing. With one live, chunks (see
    /// `chunks`) of about 50 ms, so it waits at most that long; each chunk
    /// counts its new items in the same transaction, so the counters are
    /// always exact. A chunked add stopped part-way (a full disk; a stop
    /// request, checked between chunks) keeps the chunks committed and
    /// fails with `CutShort`, saying how far it got, after recording that
    /// part in an `added` event if it still can; running it again adds the
    /// rest, as keys make adding idempotent. A crash keeps the committed
    /// chunks too, without an event.
    pub fn add_items(
        &mut self,
        (batch, spec): (&str, Option<&KeySpec>),
        items: &[NewItem],
        now: Millis,
        mut progress: impl FnMut(usize),
    ) -> Result<AddReport> {
        // Keep the pages of a large add in the cache (its keys, into a full
        // batch, touch every leaf of `item_keys`) rather than spilling them
        // to the WAL mid-transaction or reading them back for every chunk.
        let restore = self.grow_cache(bulk_cache_kib(items));
        let live = self.read(|c| super::super::locks::any_live(c, crate::util::time::now_ms()));
        let out = if live.unwrap_or(true) {
            self.add_in_chunks((batch, spec), items, now, &mut progress)
        } else {
            let stop = self.stop.clone();
            self.write(|tx| {
                add_chunk(
                    tx,
                    (batch, spec),
                    items,
                    now,
                    Some(AddReport::default()),
                    Some(&stop),
                    &mut |i| {
                        if i.is_multiple_of(PROGRESS_STEP) {
                            progress(i);
                        }
                    },
                )
            })
        };
        self.restore_cache(restore);
        out
    }

    /// Whether no runner is live, so an add may hold the store in one
    /// transaction (`add_fed`).
    pub fn feeds_adds(&self) -> bool {
        let live = self.read(|c| super::super::locks::any_live(c, crate::util::time::now_ms()));
        !live.unwrap_or(true)
    }

    /// `add_items` in one transaction of an input still being read: each
    /// part's rows written as it comes, the keys at the end (see
    /// `Adding`). `None`: the feed refused the input, and the transaction
    /// was rolled back. Nothing is written for an input without items.
    pub fn add_fed<'a>(
        &mut self,
        (batch, spec): (&str, Option<&KeySpec>),
        feed: &mut dyn AddFeed<'a>,
        input_bytes: usize,
        now: Millis,
        mut progress: impl FnMut(usize),
    ) -> Result<Option<AddReport>> {
        let restore = self.grow_cache(fed_cache_kib(input_bytes));
        let stop = self.stop.clone();
        let mut refused = false;
        let out = self.write(|tx| {
            let mut add = None;
            let mut handled = 0;
            while let Some(part) = feed.next_part() {
                let Ok(part) = part else {
                    refused = true;
                    return Err(StoreError::Fault(Fault::Database("input refused".into())));
                };
                if part.is_empty() {
                    continue;
                }
                let add = match &mut add {
                    Some(add) => add,
                    None => {
                        add.insert(Adding::begin(tx, (batch, spec), now, Some(&stop))?.by_place())
                    }
                };
                add.rows(part, &mut |i| {
                    if (handled + i).is_multiple_of(PROGRESS_STEP) {
                        progress(handled + i);
                    }
                })?;
                handled += part.len();
            }
            match add {
                Some(add) => add.finish_in(&feed.by_key(), Some(AddReport::default())),
                None => Ok(AddReport::default()),
            }
        });
        self.restore_cache(restore);
        match out {
            Err(_) if refused => Ok(None),
            out => out.map(Some),
        }
    }

    /// `add_items` while a runner is live.
    fn add_in_chunks(
        &mut self,
        (batch, spec): (&str, Option<&KeySpec>),
        items: &[NewItem],
        now: Millis,
        progress: &mut impl FnMut(usize),
    ) -> Result<AddReport> {
        let mut report = AddReport::default();
        let mut rest = items;
        let mut chunks = Chunks::for_bulk_insert();
        while !rest.is_empty() {
            let handled = items.len() - rest.len();
            if let Some(signal) = self.stop.requested() {
                return Err(self.add_stopped(
                    batch,
                    &report,
                    handled,
                    items.len(),
                    StoreError::Interrupted(signal),
                ));
            }
            // The clock, not `now`: callers may add items "as of" a time.
            let now_real = crate::util::time::now_ms();
            let live = self.read(|c| super::super::locks::any_live(c, now_real));
            chunks.insert_pace(live.unwrap_or(true));
            let store = &mut *self;
            let step = chunks.run(|size| {
                let (chunk, later) = rest.split_at(size.min(rest.len()));
                let last = later.is_empty().then_some(report);
                let r = store.write(|tx| {
                    add_chunk(tx, (batch, spec), chunk, now, last, None, &mut |i| {
                        if (handled + i).is_multiple_of(PROGRESS_STEP) {
                            progress(handled + i);
                        }
                    })
                });
                (r, later)
            });
            match step {
                (Ok(r), later) => {
                    rest = later;
                    report = report.then(r);
                }
                (Err(e), _) => {
                    return Err(self.add_stopped(batch, &report, handled, items.len(), e));
                }
            }
        }
        Ok(report)
    }

    /// The error of a chunked add stopped by `cause` after `handled` items,
    /// once its committed part is recorded in an `added` event (if any
    /// committed, and if the store still takes a write).
    fn add_stopped(
        &mut self,
        batch: &str,
        report: &AddReport,
        handled: usize,
        total: usize,
        cause: StoreError,
    ) -> StoreError {
        let mut unlogged = None;
        if handled > 0 && report.added > 0 {
            let event = crate::store::ops::add::added_event(
                batch,
                report,
                Some((&cause, handled, total)),
                crate::util::time::now_ms(),
            );
            if let Err(e) = self.write(|tx| insert_event(tx, &event).map(drop)) {
                unlogged = Some(e.to_string());
            }
        }
        crate::store::ops::add::add_cut_short(report, handled, total, cause, unlogged)
    }
}
