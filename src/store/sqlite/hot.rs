//! The hot paths of SQLite, whole: add, claim, complete and complete_all run
//! once per item (or chunk) at full speed, and their statements are shaped
//! for this engine (one cached `INSERT` per row, `RETURNING` batches), so
//! they are not split into the shared statement interface of `dialect`.

use std::borrow::Cow;

use rusqlite::types::Value;
use rusqlite::{Connection, params};

use super::SqliteStore;
use super::batches::{batch_id, ensure};
use super::counted::Marked;
use super::events::insert as insert_event;
use super::locks::seat_stop;
use crate::model::{AddReport, Claim, Millis, NewEvent, NewItem, Outcome};
use crate::store::api::Completion;
use crate::store::chunks::Chunks;
use crate::store::dialect::sql::kept as kept_text;
use crate::store::rows::claim_order;
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
    batch: &str,
    chunk: &[NewItem],
    now: Millis,
    last: Option<AddReport>,
    stop: Option<&Stop>,
    progress: &mut dyn FnMut(usize),
) -> Result<AddReport> {
    let mut add = Adding::begin(tx, batch, now, stop)?;
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
    fn begin(
        tx: &'c Connection,
        batch: &'c str,
        now: Millis,
        stop: Option<&'c Stop>,
    ) -> Result<Self> {
        let id = ensure(tx, batch, now)?;
        Ok(Adding {
            tx,
            batch,
            id,
            pruned: super::tombstones::any(tx, id)?,
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
                && let Some(at) = super::tombstones::pruned_at(tx, id, &item.key)?
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
        batch: &str,
        items: &[NewItem],
        now: Millis,
        mut progress: impl FnMut(usize),
    ) -> Result<AddReport> {
        // Keep the pages of a large add in the cache (its keys, into a full
        // batch, touch every leaf of `item_keys`) rather than spilling them
        // to the WAL mid-transaction or reading them back for every chunk.
        let restore = self.grow_cache(bulk_cache_kib(items));
        let live = self.read(|c| super::locks::any_live(c, crate::util::time::now_ms()));
        let out = if live.unwrap_or(true) {
            self.add_in_chunks(batch, items, now, &mut progress)
        } else {
            let stop = self.stop.clone();
            self.write(|tx| {
                add_chunk(
                    tx,
                    batch,
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
        let live = self.read(|c| super::locks::any_live(c, crate::util::time::now_ms()));
        !live.unwrap_or(true)
    }

    /// `add_items` in one transaction of an input still being read: each
    /// part's rows written as it comes, the keys at the end (see
    /// `Adding`). `None`: the feed refused the input, and the transaction
    /// was rolled back. Nothing is written for an input without items.
    pub fn add_fed<'a>(
        &mut self,
        batch: &str,
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
                    None => add.insert(Adding::begin(tx, batch, now, Some(&stop))?.by_place()),
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
        batch: &str,
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
            let live = self.read(|c| super::locks::any_live(c, now_real));
            chunks.insert_pace(live.unwrap_or(true));
            let store = &mut *self;
            let step = chunks.run(|size| {
                let (chunk, later) = rest.split_at(size.min(rest.len()));
                let last = later.is_empty().then_some(report);
                let r = store.write(|tx| {
                    add_chunk(tx, batch, chunk, now, last, None, &mut |i| {
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

    /// Claims up to `n` pending items for `run_id`: each gets a lease until
    /// `lease_until`, a fresh (larger) fencing token and its attempt counted.
    /// `None` (and nothing claimed) when `run_id` no longer holds the batch
    /// lock: a runner that was cut off (stopped, partitioned) past its TTL
    /// and taken over must not start new work beside the new holder.
    pub fn claim(
        &mut self,
        batch: &str,
        run_id: i64,
        n: usize,
        lease_until: Millis,
        now: Millis,
    ) -> Result<Option<Vec<Claim>>> {
        // No savepoint in a group: it fails only as the store does.
        self.write_whole(|tx| {
            let id = batch_id(tx, batch)?;
            match seat_stop(tx, id, run_id)? {
                None => return Ok(None),
                // Asked to stop: nothing more is claimed.
                Some(true) => return Ok(Some(Vec::new())),
                Some(false) if n == 0 => return Ok(Some(Vec::new())),
                Some(false) => {}
            }
            // Select, then update each row by id, in this one transaction:
            // `UPDATE ... WHERE id IN (SELECT ...) RETURNING` builds two
            // temporary b-trees per claim, a large part of a claim's cost.
            let claims: Vec<Claim> = tx
                .prepare_cached(CLAIMABLE)?
                .query_map(params![id, n as i64], |r| {
                    Ok(Claim {
                        item_id: r.get(0)?,
                        key: r.get(1)?,
                        label: r.get(2)?,
                        payload: r.get(3)?,
                        attempt: r.get::<_, u32>(4)? + 1,
                        op_id: r.get(5)?,
                        token: r.get::<_, i64>(6)? + 1,
                    })
                })?
                .collect::<rusqlite::Result<_>>()?;
            if claims.is_empty() {
                return Ok(Some(claims));
            }
            // One statement for all of them, not one per item: each
            // statement that fires the counter triggers opens and releases
            // a statement journal, which cost more than the row updates.
            // One item (a runner in process mode claims one at a time) is
            // named by its id: the `json_each` list costs two temporary
            // b-trees per statement, more than the row's own update.
            let (claim_sql, log_sql, ids) = match claims.as_slice() {
                [one] => (CLAIM_ONE, LOG_CLAIM_ONE, Value::Integer(one.item_id)),
                _ => (
                    CLAIM_ITEMS,
                    LOG_CLAIMS,
                    Value::Text(ids_json(claims.iter().map(|c| c.item_id))?),
                ),
            };
            let moved =
                tx.prepare_cached(claim_sql)?
                    .execute(params![ids, run_id, lease_until, now])?;
            super::counted::claimed(tx, id, moved as i64)?;
            tx.prepare_cached(log_sql)?
                .execute(params![ids, now, id, run_id])?;
            Ok(Some(claims))
        })
    }

    /// Marks a claimed item done — only after its worker succeeded. False
    /// (and nothing written) if the lease token no longer matches.
    pub fn complete(&mut self, c: &Completion<'_>, event: &NewEvent) -> Result<bool> {
        // The done mark is one statement (`COMPLETE_ITEMS`), alone or in a group.
        Ok(self.complete_all(&[(c.clone(), event)])?[0])
    }

    /// Marks several claimed items done in one transaction (a persistent
    /// worker's batch): as `complete` for each, with the run's counters
    /// updated once. All must belong to one run. One flag per item, in
    /// order: false where the lease token no longer matched.
    pub fn complete_all(&mut self, done: &[(Completion<'_>, &NewEvent)]) -> Result<Vec<bool>> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        // No savepoint in a group: it fails only as the store does.
        self.write_whole(|tx| {
            // One statement for all successes (see `COMPLETE_ITEMS`).
            // The statement counts itself (`counted`), from what it wrote.
            let mut kept: std::collections::HashSet<i64> = match done {
                [] => Default::default(),
                [(c, _)] => {
                    let changed = tx.prepare_cached(COMPLETE_ONE)?.execute(fields(c))?;
                    if changed == 1 {
                        let batch = tx
                            .prepare_cached("SELECT batch_id FROM items WHERE id = ?1")?
                            .query_row([c.item_id], |r| r.get(0))?;
                        let outcome = c.outcome.as_str();
                        let marked = Marked { batch, outcome, at: c.now };
                        super::counted::done(tx, &[marked])?;
                    }
                    (changed == 1).then_some(c.item_id).into_iter().collect()
                }
                [(first, _), ..] => {
                    let (now, version, outcome) = (first.now, first.version, first.outcome);
                    let shared = done.iter().all(|(c, _)| (c.now, c.version) == (now, version));
                    let plain = shared
                        && done.iter().all(|(c, _)| {
                            c.outcome == outcome && c.cost.is_none() && c.usage.is_none()
                        });
                    let row = |r: &rusqlite::Row<'_>| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?));
                    let rows: Vec<(i64, i64, String, Millis)> = if plain {
                        let json = completions_json(done, |c| {
                            (c.item_id, c.token, c.result.map(kept_text))
                        })?;
                        tx.prepare_cached(COMPLETE_PLAIN)?
                            .query_map(
                                params![json, now, version.map(kept_text), outcome.as_str()],
                                row,
                            )?
                            .collect::<rusqlite::Result<_>>()?
                    } else if shared {
                        tx.prepare_cached(COMPLETE_SHARED)?
                            .query_map(
                                params![completions_json(done, fields)?, now, version.map(kept_text)],
                                row,
                            )?
                            .collect::<rusqlite::Result<_>>()?
                    } else {
                        tx.prepare_cached(COMPLETE_ITEMS)?
                            .query_map(params![completions_json(done, fields)?], row)?
                            .collect::<rusqlite::Result<_>>()?
                    };
                    let marked: Vec<Marked<'_>> = rows
                        .iter()
                        .map(|(_, batch, outcome, at)| Marked { batch: *batch, outcome, at: *at })
                        .collect();
                    super::counted::done(tx, &marked)?;
                    rows.into_iter().map(|r| r.0).collect()
                }
            };
            // An item listed twice is accepted once, as by one statement each.
            let accepted: Vec<bool> = done.iter().map(|(c, _)| kept.remove(&c.item_id)).collect();
            let (mut n_done, mut n_empty, mut cost) = (0i64, 0i64, 0f64);
            let mut logged = Vec::new();
            for ((c, event), ok) in done.iter().zip(&accepted) {
                if *ok {
                    match c.outcome {
                        Outcome::Empty => n_empty += 1,
                        _ => n_done += 1,
                    }
                    cost += c.cost.unwrap_or(0.0);
                    logged.push((c.item_id, *event));
                }
            }
            log_done(tx, &logged)?;
            if n_done + n_empty > 0 {
                tx.prepare_cached(
                    "UPDATE runs SET done = done + ?2, empty = empty + ?3, cost = cost + ?4 WHERE id = ?1",
                )?
                .execute(params![done[0].0.run_id, n_done, n_empty, cost])?;
            }
            Ok(accepted)
        })
    }
}

/// The next `?2` items a claim takes: higher priority first, then older.
/// The first entries of `items_queue` past its four equalities (`IS NULL`
/// is one to SQLite), whatever the batch holds.
pub(super) const CLAIMABLE: &str = concat!(
    "SELECT id, key, label, payload, attempts, op_id, lease_token FROM items
  WHERE batch_id = ?1 AND status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL
  ORDER BY ",
    claim_order!(""),
    " LIMIT ?2"
);

impl SqliteStore {
    /// How SQLite plans a claim's read (`EXPLAIN QUERY PLAN`), one line
    /// per step: for the tests that keep its cost flat.
    pub fn claim_plan(&self, batch: &str) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            Ok(c.prepare(&format!("EXPLAIN QUERY PLAN {CLAIMABLE}"))?
                .query_map(params![id, 8], |r| r.get(3))?
                .collect::<rusqlite::Result<_>>()?)
        })
    }
}

// `OR ROLLBACK`: a statement that cannot abort alone needs no statement
// journal (a copy of each page it touches, ~10k instructions a claim); it
// never fails but as the store does, and then its transaction (or group,
// `write_whole`) is refused whole.
macro_rules! claim_items {
    () => {
        "UPDATE OR ROLLBACK items
    SET status = 'claimed', lease_run = ?2, lease_until = ?3,
        lease_token = lease_token + 1, attempts = attempts + 1, updated_at = ?4,
        self_counted = 1 - self_counted, pool_wait_since = NULL, retry_at = NULL
  WHERE "
    };
}

macro_rules! log_claims {
    () => {
        "INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message, fields)
     SELECT ?2, ?3, ?4, key, id, 'claimed', 'claimed (attempt ' || attempts || ')', NULL
       FROM items WHERE "
    };
}

/// Claims the items whose ids are in the JSON array ?1 (selected pending
/// in the same transaction): a fresh, larger fencing token and the attempt
/// counted, as the claim's `SELECT` computed them.
const CLAIM_ITEMS: &str = concat!(claim_items!(), "id IN (SELECT value FROM json_each(?1))");
/// `CLAIM_ITEMS` for the one item whose id is ?1.
const CLAIM_ONE: &str = concat!(claim_items!(), "id = ?1");

/// The `claimed` event of each item just claimed by `CLAIM_ITEMS`.
const LOG_CLAIMS: &str = concat!(
    log_claims!(),
    "id IN (SELECT value FROM json_each(?1)) ORDER BY id"
);
/// `LOG_CLAIMS` for `CLAIM_ONE`.
const LOG_CLAIM_ONE: &str = concat!(log_claims!(), "id = ?1");

/// The done mark's `UPDATE … SET`, written once for `COMPLETE_ITEMS` and
/// `COMPLETE_ONE`: `$v` then each field's place makes the expression of
/// the completion's outcome, result, cost, time, version and usage line
/// (the id and the token are the statements' own `WHERE`).
macro_rules! complete_items {
    ($v:literal, $outcome:literal, $result:literal, $cost:literal, $now:literal,
     $version:literal, $usage:literal) => {
        concat!(
            "UPDATE items AS i SET status = 'done', outcome = ",
            $v,
            $outcome,
            ", result = ",
            $v,
            $result,
            // The completion's cost added, or the old one if it has none.
            ", cost = coalesce(coalesce(i.cost, 0) + (",
            $v,
            $cost,
            "), i.cost)",
            ", tier = NULL, error_class = NULL, error_message = NULL, next_attempt_at = NULL",
            ", lease_run = NULL, lease_until = NULL, self_counted = 1 - i.self_counted",
            ", updated_at = ",
            $v,
            $now,
            ", done_version = ",
            $v,
            $version,
            ", usage = coalesce(coalesce(i.usage || char(10), '') || (",
            $v,
            $usage,
            "), i.usage)"
        )
    };
}

/// The done mark's fence besides the token: a claim not asked to cancel.
macro_rules! complete_fence {
    () => {
        " AND i.status = 'claimed' AND i.cancel_to IS NULL"
    };
}

/// The done mark: successes, fenced (only the claim holding its lease
/// token is completed, and never one asked to be cancelled: `cancel_to`,
/// checked in this very statement, so a success racing the cancel loses,
/// see `ops::steer`), from a JSON array of
/// `[item_id, token, outcome, result, cost, now, version, usage]`; returns
/// the accepted ones (id, batch, outcome, time: what `counted::done`
/// counts). One statement for the whole batch: one statement journal
/// where a statement per item opened one each. An item's
/// cost is every attempt's: the done mark adds its own, as a failure does.
/// `jsonb_each`: each row's array comes as SQLite's binary JSON, which
/// `->>` reads as it is; `json_each` wrote it out as text and each `->>`
/// parsed it back (about 4 % of the runner in persistent mode).
const COMPLETE_ITEMS: &str = concat!(
    complete_items!("d.value ->> ", "2", "3", "4", "5", "6", "7"),
    " FROM jsonb_each(?1) AS d WHERE i.id = d.value ->> 0 AND i.lease_token = d.value ->> 1",
    complete_fence!(),
    " RETURNING id, batch_id, outcome, updated_at"
);

/// `COMPLETE_ITEMS` of completions sharing one time (?2) and version (?3),
/// as a runner's group does: two fewer `->>` per row (each about 700
/// instructions).
const COMPLETE_SHARED: &str = concat!(
    complete_items!(
        "",
        "d.value ->> 2",
        "d.value ->> 3",
        "d.value ->> 4",
        "?2",
        "?3",
        "d.value ->> 7"
    ),
    " FROM jsonb_each(?1) AS d WHERE i.id = d.value ->> 0 AND i.lease_token = d.value ->> 1",
    complete_fence!(),
    " RETURNING id, batch_id, outcome, updated_at"
);

/// `COMPLETE_SHARED` of completions that also share their outcome (?4)
/// and have no cost and no usage line, as a runner's group of one worker
/// nearly always does: each row of ?1 is `[item_id, token, result]`, three
/// fewer `->>` per row and a third of the JSON to parse (the store's calls
/// 4 % faster, `examples/persistent_sql_floor.rs`).
/// The cost and usage expressions of `NULL` keep the item's own.
const COMPLETE_PLAIN: &str = concat!(
    complete_items!("", "?4", "d.value ->> 2", "NULL", "?2", "?3", "NULL"),
    " FROM jsonb_each(?1) AS d WHERE i.id = d.value ->> 0 AND i.lease_token = d.value ->> 1",
    complete_fence!(),
    " RETURNING id, batch_id, outcome, updated_at"
);

/// `COMPLETE_ITEMS` for one completion, its fields bound as ?1 to ?8 (in
/// the array's order): no `jsonb_each` to join, and no `RETURNING` (one
/// row changed or none), each a temporary b-tree per statement, more than
/// the row's update (a runner in process mode completes one at a time).
const COMPLETE_ONE: &str = concat!(
    complete_items!("?", "3", "4", "5", "6", "7", "8"),
    " WHERE i.id = ?1 AND i.lease_token = ?2",
    complete_fence!()
);

/// An accepted completion's event, its batch (?2) and item (?5) known:
/// the general `events::insert` looks both up again by name and key (a
/// random descent of the key index per item). A row per statement, as no
/// trigger fires on events: no statement journal, and no JSON to unpack
/// per field (over `json_each` that cost more than the rows).
const LOG_DONE: &str =
    "INSERT INTO events (at, batch_id, run_id, key, item_id, kind, actor, message, fields)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// Writes the events of the accepted completions (`(item_id, event)`), in
/// order.
fn log_done(tx: &Connection, events: &[(i64, &NewEvent)]) -> Result<()> {
    let mut st = tx.prepare_cached(LOG_DONE)?;
    let mut batch: Option<(&str, i64)> = None;
    for (item, e) in events {
        let (Some(name), Some(_)) = (e.batch.as_deref(), &e.key) else {
            insert_event(tx, e)?;
            continue;
        };
        let id = match batch {
            Some((b, id)) if b == name => id,
            _ => {
                let id = batch_id(tx, name)?;
                batch = Some((name, id));
                id
            }
        };
        st.execute(params![
            e.at,
            id,
            e.run_id,
            e.key,
            item,
            e.kind,
            e.actor,
            kept_text(&e.message),
            e.fields_text().as_deref().map(kept_text)
        ])?;
    }
    Ok(())
}

/// Item ids as a JSON array, for a statement that reads them with
/// `json_each` (the claim's, a requeue chunk's).
pub(super) fn ids_json(ids: impl Iterator<Item = i64>) -> Result<String> {
    serde_json::to_string(&ids.collect::<Vec<_>>())
        .map_err(|e| StoreError::Fault(Fault::Encoding(format!("encoding item ids: {e}"))))
}

/// A completion's fields in the done mark's order: `COMPLETE_ONE`'s
/// parameters, one element of `COMPLETE_ITEMS`' array; its texts as the
/// stores keep them (`kept`).
type Fields<'a> = (
    i64,
    i64,
    &'a str,
    Option<Cow<'a, str>>,
    Option<f64>,
    Millis,
    Option<Cow<'a, str>>,
    Option<Cow<'a, str>>,
);

fn fields<'a>(c: &Completion<'a>) -> Fields<'a> {
    (
        c.item_id,
        c.token,
        c.outcome.as_str(),
        c.result.map(kept_text),
        c.cost,
        c.now,
        c.version.map(kept_text),
        c.usage.map(kept_text),
    )
}

/// The JSON array a done mark joins: one row per completion, as `row`
/// writes it (`fields`, or `COMPLETE_PLAIN`'s `[item_id, token, result]`).
fn completions_json<'a, R: serde::Serialize>(
    done: &'a [(Completion<'a>, &NewEvent)],
    row: impl Fn(&'a Completion<'a>) -> R,
) -> Result<String> {
    let rows: Vec<R> = done.iter().map(|(c, _)| row(c)).collect();
    serde_json::to_string(&rows)
        .map_err(|e| StoreError::Fault(Fault::Encoding(format!("encoding completions: {e}"))))
}
