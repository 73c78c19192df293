//! `add` on PostgreSQL: items inserted idempotently in one transaction,
//! all given at once (`PgStore::add_items`) or part by part while the
//! input is still read (`PgStore::add_fed`), so the server inserts while
//! the client parses. A batch that held no items takes its rows by binary
//! `COPY`; one that did (or keeps tombstones) by `unnest` inserts that pass
//! over the keys present.

use super::PgStore;
use super::batches::{ensure, keyed_by};
use super::conn::{Conn, Params};
use super::copy;
use super::events::insert as insert_event;
use super::tombstones;
use crate::key::KeySpec;
use crate::model::{AddOrder, AddReport, Millis, NewItem};
use crate::store::ops::add;
use crate::store::{AddFeed, Fault, FeedRefused, Result, StoreError};
use crate::util::signals::Stop;

/// Items inserted per statement (a `COPY` or an insert).
const ADD_ROWS: usize = 5_000;

/// The lines of a part of an add (`lines`), and its rows (`u`), each key
/// once (its first line): `$3` to `$7` keys, labels, payloads, priorities
/// and not-before times as arrays, `o` the line's place.
macro_rules! part_rows {
    () => {
        "WITH lines AS (
         SELECT k, l, p, r, nb, o
           FROM unnest($3::text[], $4::text[], $5::text[], $6::int4[], $7::int8[])
                WITH ORDINALITY AS u(k, l, p, r, nb, o)),
     u AS (SELECT DISTINCT ON (k) k, l, p, r, nb, o FROM lines ORDER BY k, o)"
    };
}

/// The keys of `u` (`part_rows!`, less any filter `$filter`) not in batch
/// `$1`: taken in `item_keys`, each with the id of the item it names, in
/// the order of the input (so are the items' ids: their claim order).
/// `keyed` returns the keys taken and their ids.
macro_rules! keys_taken {
    ($filter:literal) => {
        concat!(
            "keyed AS (
         INSERT INTO item_keys (batch_id, key, item_id)
         SELECT $1, k, nextval('items_id_seq') FROM u ",
            $filter,
            " ORDER BY o
         ON CONFLICT (batch_id, key) DO NOTHING
         RETURNING key, item_id)"
        )
    };
}

/// The items of the keys `keyed` took, from `u`.
macro_rules! items_of_keys_taken {
    () => {
        "INSERT INTO items (id, batch_id, key, label, payload, status, created_at, updated_at,
                            priority, next_attempt_at)
         SELECT keyed.item_id, $1, u.k, u.l, u.p, 'pending', $2, $2, u.r, u.nb
           FROM keyed JOIN u ON u.k = keyed.key
          ORDER BY keyed.item_id"
    };
}

/// One part of an add: `$1` batch id, `$2` the time, then keys, labels,
/// payloads, priorities and not-before times as arrays. Keys present are
/// passed over.
const INSERT_ITEMS: &str = concat!(
    part_rows!(),
    ", ",
    keys_taken!(""),
    " ",
    items_of_keys_taken!()
);

/// A part of an add into a batch that held no items: binary `COPY`s of
/// its keys (`COPY_NEW_KEYS`) and then its rows (`COPY_NEW_ITEMS`), under
/// ids taken first (`IDS`), nothing to parse or unnest, and no conflict clause,
/// whose speculative insertion descends the key index twice a row (a
/// probe, then the insert) and logs a confirmation record; the keys'
/// own uniqueness check remains. A key given twice (or added by another
/// session meanwhile) fails it, and the add starts again with
/// `INSERT_ITEMS`.
const COPY_NEW_KEYS: &str = "COPY item_keys (batch_id, key, item_id) FROM STDIN (FORMAT binary)";
const COPY_NEW_ITEMS: &str = "COPY items (id, batch_id, key, label, payload, status, created_at,
                  updated_at, priority, next_attempt_at)
     FROM STDIN (FORMAT binary)";
/// `$1` ids for the items of a part, in order.
const IDS: &str = "SELECT nextval('items_id_seq') FROM generate_series(1, $1::int8)";

/// The fields of a row of `COPY_NEW_KEYS` and of `COPY_NEW_ITEMS`.
const KEY_COLUMNS: i16 = 3;
const ITEM_COLUMNS: i16 = 10;

/// Inserts `part`, added at `at` to batch `id`, which held none of its
/// keys: `COPY_NEW_KEYS`, then `COPY_NEW_ITEMS`. How many were added.
fn copy_new(c: &mut Conn, (id, at): (i64, i64), part: &[NewItem]) -> Result<u64> {
    let ids: Vec<i64> = c
        .q(IDS, &[&(part.len() as i64)])?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let keys_len: usize = part.iter().map(|i| i.key.len()).sum();
    // Per row: its field count and a length per field, two BIGINTs.
    let mut keys = copy::BinaryRows::with_capacity(keys_len + part.len() * 34);
    for (i, item_id) in part.iter().zip(&ids) {
        keys.row(KEY_COLUMNS).int8(id).text(&i.key).int8(*item_id);
    }
    c.copy_in(COPY_NEW_KEYS, &keys.finish()?)?;
    let text: usize = part
        .iter()
        .map(|i| i.key.len() + i.label.len() + i.payload.len())
        .sum();
    // Per row: its field count, a length per field, five BIGINTs, an INT
    // and the status, beside the texts.
    let mut rows = copy::BinaryRows::with_capacity(text + part.len() * 100);
    for (i, item_id) in part.iter().zip(&ids) {
        rows.row(ITEM_COLUMNS)
            .int8(*item_id)
            .int8(id)
            .text(&i.key)
            .text(&i.label)
            .text(&i.payload)
            .text("pending")
            .int8(at)
            .int8(at)
            .int4(i.priority)
            .int8_opt(c.tin_opt(i.not_before));
    }
    c.copy_in(COPY_NEW_ITEMS, &rows.finish()?)
}

/// How the parts of an add are inserted.
#[derive(Clone, Copy, PartialEq)]
enum Parts {
    /// Into a batch that held no items (`COPY_NEW_ITEMS`).
    New,
    /// Idempotently (`INSERT_ITEMS`).
    Idempotent,
    /// Idempotently, beside tombstones (`INSERT_ITEMS_BESIDE_TOMBSTONES`).
    BesideTombstones,
}

/// `INSERT_ITEMS` for a batch that keeps tombstones: a key with one is
/// present, and counted with the first and last time of its prune.
const INSERT_ITEMS_BESIDE_TOMBSTONES: &str = concat!(
    part_rows!(),
    ",
     gone AS (
         SELECT t.key, t.pruned_at FROM tombstones t JOIN lines ON t.key = lines.k
          WHERE t.batch_id = $1), ",
    keys_taken!("WHERE NOT EXISTS (SELECT 1 FROM gone WHERE gone.key = u.k)"),
    ",
     added AS (",
    items_of_keys_taken!(),
    " RETURNING 1)
     SELECT (SELECT count(*) FROM added)::int8, count(*)::int8, min(pruned_at), max(pruned_at)
       FROM gone"
);

/// One part of an add into a batch that keeps tombstones.
/// `args`: the part's parameters, as `add_part_by_arrays` binds them to
/// each form;
/// `n` its items.
fn add_part_beside_tombstones(c: &mut Conn, args: Params<'_>, n: usize) -> Result<AddReport> {
    let r = c.one(INSERT_ITEMS_BESIDE_TOMBSTONES, args)?;
    let (added, pruned) = (r.get::<_, i64>(0) as u64, r.get::<_, i64>(1) as u64);
    let span = match (r.get::<_, Option<i64>>(2), r.get::<_, Option<i64>>(3)) {
        (Some(first), Some(last)) => Some((c.tout(first), c.tout(last))),
        _ => None,
    };
    Ok(AddReport {
        added,
        present: n as u64 - added,
        pruned,
        pruned_span: span,
        ..AddReport::default()
    })
}

/// Whether the batch holds any item (a fresh add takes `Parts::New`).
fn holds_items(c: &mut Conn, id: i64) -> Result<bool> {
    Ok(c.one(
        "SELECT EXISTS (SELECT 1 FROM items WHERE batch_id = $1)",
        &[&id],
    )?
    .get(0))
}

/// One part of an add into a batch that held items: `INSERT_ITEMS`, or
/// `INSERT_ITEMS_BESIDE_TOMBSTONES` where the batch keeps tombstones.
fn add_part_by_arrays(
    c: &mut Conn,
    (id, at): (i64, i64),
    part: &[NewItem],
    beside_tombstones: bool,
) -> Result<AddReport> {
    let keys: Vec<&str> = part.iter().map(|i| i.key.as_str()).collect();
    let labels: Vec<&str> = part.iter().map(|i| i.label.as_str()).collect();
    let payloads: Vec<&str> = part.iter().map(|i| i.payload.as_str()).collect();
    let priorities: Vec<i32> = part.iter().map(|i| i.priority).collect();
    let not_before: Vec<Option<i64>> = part.iter().map(|i| c.tin_opt(i.not_before)).collect();
    // The same parameters for both forms of the insert.
    let args: Params<'_> = &[
        &id,
        &at,
        &keys,
        &labels,
        &payloads,
        &priorities,
        &not_before,
    ];
    if beside_tombstones {
        return add_part_beside_tombstones(c, args, part.len());
    }
    let added = c.x(INSERT_ITEMS, args)?;
    Ok(AddReport {
        added,
        present: part.len() as u64 - added,
        ..AddReport::default()
    })
}

/// `n` items added to batch `id`, into its pending count: an add counts
/// its own items, once (no trigger keeps a copy of every row to count).
fn count_pending(c: &mut Conn, id: i64, n: u64) -> Result<()> {
    c.x(
        "INSERT INTO counts AS c (batch_id, bucket, shard, n) VALUES ($1, 'pending', shard(), $2)
         ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n",
        &[&id, &(n as i64)],
    )?;
    Ok(())
}

/// Statistics of `items` taken again after an add of a tenth of the table
/// or more (or into one never analysed), in the add's transaction, which
/// counts its own rows. Without them a claim right after a big add is
/// planned for a queue of one row: a scan (by `items_queue` before version
/// 20) and a sort of every pending item, each claim reading the whole
/// queue, not the first entries of `items_claimable`; autovacuum's analyse
/// comes a minute or more later, and the runner's prepared claim keeps its
/// plan. A role that does not own the table gets a warning, not an error.
fn refresh_statistics(c: &mut Conn, added: u64) -> Result<()> {
    if added == 0 {
        return Ok(());
    }
    let known: f32 = c
        .one(
            "SELECT reltuples FROM pg_class WHERE oid = 'nightshift.items'::regclass",
            &[],
        )?
        .get(0);
    if known < 0.0 || added as f32 * 10.0 >= known {
        c.simple("ANALYZE nightshift.items, nightshift.item_keys")?;
    }
    Ok(())
}

/// An add under way in the write's transaction: where its rows go, how,
/// and what the parts given so far did.
struct Adding {
    /// The batch's id and the time of the add, on the database's clock.
    to: (i64, i64),
    how: Parts,
    report: AddReport,
    order: AddOrder,
    /// A fresh add's `COPY` found a key taken: the transaction is failed
    /// until the savepoint's rollback, which waits for the last part (the
    /// input may yet be refused), and the add then starts again.
    taken: bool,
    /// Items handled, and the progress already reported (an add started
    /// again reports each step once).
    done: usize,
    shown: usize,
}

impl Adding {
    /// Starts an add into `batch` (made if missing) at `now`.
    /// Refused before any row when `spec` keys its items otherwise than
    /// the batch's were.
    fn begin(c: &mut Conn, (batch, spec): (&str, Option<&KeySpec>), now: Millis) -> Result<Adding> {
        // Before anything else: a prune in progress commits first (see
        // `tombstones`).
        tombstones::share_lock(c)?;
        let id = ensure(c, batch, now)?;
        if let Some(spec) = spec {
            keyed_by(c, id, batch, spec)?;
        }
        let how = if tombstones::any(c, id)? {
            Parts::BesideTombstones
        } else if holds_items(c, id)? {
            Parts::Idempotent
        } else {
            // One savepoint for the whole add (not one a part: more than
            // 64 subtransactions overflow every snapshot's cache).
            c.simple("SAVEPOINT new_keys")?;
            Parts::New
        };
        Ok(Adding {
            to: (id, c.tin(now)),
            how,
            report: AddReport::default(),
            order: AddOrder::default(),
            taken: false,
            done: 0,
            shown: 0,
        })
    }

    /// Inserts `part`, the next items of the add.
    fn part(
        &mut self,
        c: &mut Conn,
        part: &[NewItem],
        stop: &Stop,
        progress: &mut impl FnMut(usize),
    ) -> Result<()> {
        self.order = self.order.then(AddOrder::of(part));
        if self.taken {
            return Ok(());
        }
        match self.statements(c, part, stop, progress) {
            Err(e) if self.how == Parts::New && e.is_unique_violation_pg() => {
                self.taken = true;
                Ok(())
            }
            out => out,
        }
    }

    /// `part` in statements of `ADD_ROWS` items. A stop request (checked
    /// between statements) ends it.
    fn statements(
        &mut self,
        c: &mut Conn,
        part: &[NewItem],
        stop: &Stop,
        progress: &mut impl FnMut(usize),
    ) -> Result<()> {
        for rows in part.chunks(ADD_ROWS) {
            if let Some(signal) = stop.requested() {
                return Err(StoreError::Interrupted(signal));
            }
            let did = match self.how {
                Parts::New => {
                    let added = copy_new(c, self.to, rows)?;
                    AddReport {
                        added,
                        present: rows.len() as u64 - added,
                        ..AddReport::default()
                    }
                }
                Parts::Idempotent | Parts::BesideTombstones => {
                    add_part_by_arrays(c, self.to, rows, self.how == Parts::BesideTombstones)?
                }
            };
            self.report = self.report.then(did);
            // Progress in steps of 10,000, as the SQLite store reports it.
            let (from, to) = (self.done.max(self.shown), self.done + rows.len());
            for step in (from..to).filter(|n| n % 10_000 == 0) {
                progress(step);
                self.shown = step + 1;
            }
            self.done = to;
        }
        Ok(())
    }

    /// Ends the add once every part was given (`given`, all of them): a
    /// fresh add that found a key taken (added by another session
    /// meanwhile) starts again idempotently. Its `added` event, and fresh
    /// statistics after a large add.
    fn finish(
        mut self,
        c: &mut Conn,
        (batch, now): (&str, Millis),
        given: &[&[NewItem]],
        stop: &Stop,
        progress: &mut impl FnMut(usize),
    ) -> Result<AddReport> {
        if self.how == Parts::New {
            if self.taken {
                c.simple("ROLLBACK TO SAVEPOINT new_keys")?;
                self.how = Parts::Idempotent;
                self.report = AddReport::default();
                self.done = 0;
                for part in given {
                    self.statements(c, part, stop, progress)?;
                }
            } else {
                c.simple("RELEASE new_keys")?;
            }
        }
        let report = AddReport {
            order: self.order,
            ..self.report
        };
        if report.added > 0 {
            count_pending(c, self.to.0, report.added)?;
            insert_event(c, &add::added_event(batch, &report, None, now))?;
        }
        refresh_statistics(c, report.added)?;
        Ok(report)
    }
}

impl PgStore {
    /// Adds items idempotently in one transaction: an item whose key is
    /// already in the batch, or was and has been pruned (its tombstone), is
    /// left exactly as it is. A stop request (checked between statements)
    /// rolls it back whole.
    pub fn add_items(
        &mut self,
        (batch, spec): (&str, Option<&KeySpec>),
        items: &[NewItem],
        now: Millis,
        mut progress: impl FnMut(usize),
    ) -> Result<AddReport> {
        let stop = self.stop().clone();
        self.write(|c| {
            let mut adding = Adding::begin(c, (batch, spec), now)?;
            adding.part(c, items, &stop, &mut progress)?;
            adding.finish(c, (batch, now), &[items], &stop, &mut progress)
        })
    }

    /// `add_items` of an input still being read, its parts inserted as
    /// `feed` gives them, in one transaction. `None`: the feed refused the
    /// input, and the transaction was rolled back. Nothing is written for
    /// an input without items.
    pub fn add_fed<'a>(
        &mut self,
        (batch, spec): (&str, Option<&KeySpec>),
        feed: &mut dyn AddFeed<'a>,
        now: Millis,
        mut progress: impl FnMut(usize),
    ) -> Result<Option<AddReport>> {
        let stop = self.stop().clone();
        // Every part the feed gave: a transaction tried again (a deadlock)
        // takes them again before the feed's next.
        let mut given: Vec<&'a [NewItem]> = Vec::new();
        let (mut ended, mut refused) = (false, false);
        let out = self.write(|c| {
            let mut adding: Option<Adding> = None;
            let mut k = 0;
            loop {
                let part = if k < given.len() {
                    given[k]
                } else if ended {
                    break;
                } else {
                    match feed.next_part() {
                        None => {
                            ended = true;
                            break;
                        }
                        Some(Err(FeedRefused)) => {
                            refused = true;
                            return Err(StoreError::Fault(Fault::Database("input refused".into())));
                        }
                        Some(Ok(part)) => {
                            given.push(part);
                            part
                        }
                    }
                };
                k += 1;
                if part.is_empty() {
                    continue;
                }
                let adding = match &mut adding {
                    Some(adding) => adding,
                    None => adding.insert(Adding::begin(c, (batch, spec), now)?),
                };
                adding.part(c, part, &stop, &mut progress)?;
            }
            match adding {
                Some(adding) => adding.finish(c, (batch, now), &given, &stop, &mut progress),
                None => Ok(AddReport::default()),
            }
        });
        match out {
            Err(_) if refused => Ok(None),
            out => out.map(Some),
        }
    }
}
