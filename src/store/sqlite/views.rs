//! Reads for the dashboard: everything one poll shows, in one short read
//! transaction, and the "since you last looked" summary. Built from the
//! per-table queries of the sibling modules; the few queries of its own read
//! text lossily and cut long messages, so a hostile or huge row cannot stall
//! or break a poll.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::types::{Value as V, ValueRef};
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};

use super::batches::{batch_id, names};
use super::items::{ITEM_COLUMNS, filter_sql, item_from_row};
use super::{SqliteStore, SqliteTx, dead_letters, parse_col};
use crate::model::{BatchInfo, Event, Millis, Status, Tier};
use crate::store::Result;
use crate::store::api::{
    BatchView, COUNT_CAP, DashQuery, Dashboard, EventsQuery, ItemDetail, ItemPage, ItemRow,
    ItemsQuery, SinceSummary, counted,
};

/// Characters of an error message or event message kept for a list row.
const ROW_TEXT: i64 = 512;
/// Events of one item shown in its detail.
const DETAIL_EVENTS: usize = 200;
/// Attempts whose stderr the item detail reads (16 KiB each at most).
const DETAIL_ATTEMPTS: i64 = 5;
/// Store time a dashboard search may take per poll (scanning, then checking
/// matches against the status filter); the poller comes back at once until
/// the search is complete.
const SEARCH_BUDGET: Duration = Duration::from_micros(1_500);
/// Item ids one query of a search scans (about 0.5 ms).
const SEARCH_STEP: i64 = 1_024;

/// A dashboard search in progress: the items whose key or label contain the
/// text, among the ids scanned so far. Keys and labels never change, so the
/// matches stay true and each poll scans only further ids (items added
/// later too); status and class, which do change, are checked when a page
/// is read.
#[derive(Debug, Default)]
pub(crate) struct SearchScan {
    batch_id: i64,
    text: String,
    scanned_to: i64,
    hits: Vec<i64>,
}

/// Text of a column, invalid UTF-8 replaced rather than failing the read.
fn lossy(r: &Row<'_>, idx: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(idx)? {
        ValueRef::Null => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

fn item_row(r: &Row<'_>) -> rusqlite::Result<ItemRow> {
    let opt_enum = |idx: usize| -> rusqlite::Result<Option<String>> { lossy(r, idx) };
    Ok(ItemRow {
        key: lossy(r, 0)?.unwrap_or_default(),
        label: lossy(r, 1)?.unwrap_or_default(),
        status: parse_col(2, &lossy(r, 2)?.unwrap_or_default())?,
        tier: opt_enum(3)?.map(|t| parse_col(3, &t)).transpose()?,
        outcome: opt_enum(4)?.map(|t| parse_col(4, &t)).transpose()?,
        attempts: r.get(5)?,
        error_class: lossy(r, 6)?,
        error_message: lossy(r, 7)?,
        updated_at: r.get(8)?,
    })
}

fn event_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: r.get(0)?,
        at: r.get(1)?,
        batch: lossy(r, 2)?,
        run_id: r.get(3)?,
        key: lossy(r, 4)?,
        kind: lossy(r, 5)?.unwrap_or_default(),
        actor: lossy(r, 6)?,
        message: lossy(r, 7)?.unwrap_or_default(),
        fields: serde_json::Value::Null,
        label: lossy(r, 8)?,
    })
}

/// Items matching a filter; cheap (from the counters) unless it searches.
fn count_items(c: &Connection, id: i64, info: &BatchInfo, q: &ItemsQuery) -> Result<(i64, bool)> {
    let counts = &info.counts;
    if q.search.is_empty() {
        if let (None, Some(n)) = (&q.class, counted(counts, q)) {
            return Ok((n, false));
        }
        if let Some(class) = &q.class {
            let n: i64 = c.query_row(
                "SELECT coalesce(sum(n), 0) FROM failed_classes WHERE batch_id = ?1 AND error_class = ?2",
                params![id, class],
                |r| r.get(0),
            )?;
            return Ok((n, false));
        }
    }
    let mut args = vec![V::Integer(id)];
    let cond = filter_sql(&q.filter(), &mut args);
    let n: i64 = c.query_row(
        &format!(
            "SELECT count(*) FROM (SELECT 1 FROM items i WHERE i.batch_id = ?1{cond} LIMIT {})",
            COUNT_CAP + 1
        ),
        params_from_iter(args),
        |r| r.get(0),
    )?;
    Ok((n, n > COUNT_CAP))
}

/// A page of a search's matches, scanning on from where the last poll
/// stopped, for at most [`SEARCH_BUDGET`]. A full scan of a million items
/// takes about 250 ms: done at once it would stall every poll that long.
fn search_page(
    c: &Connection,
    id: i64,
    q: &ItemsQuery,
    scan: &Mutex<SearchScan>,
) -> Result<ItemPage> {
    let started = Instant::now();
    let mut scan = scan
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if scan.batch_id != id || scan.text != q.search {
        *scan = SearchScan {
            batch_id: id,
            text: q.search.clone(),
            ..SearchScan::default()
        };
    }
    // Bare `max(id)`: SQLite reads it from the end of the table only in
    // this form (wrapped in `coalesce` it scans the table).
    let max_id: i64 = c
        .query_row("SELECT max(id) FROM items", [], |r| {
            r.get::<_, Option<i64>>(0)
        })?
        .unwrap_or(0);
    {
        // By rowid range (NOT INDEXED: else SQLite prefers an index on
        // batch_id and reads every item of the batch).
        let mut st = c.prepare_cached(
            "SELECT id FROM items NOT INDEXED WHERE id > ?1 AND id <= ?2 AND batch_id = ?3
                AND (instr(key, ?4) > 0 OR instr(label, ?4) > 0) ORDER BY id",
        )?;
        while scan.scanned_to < max_id && started.elapsed() < SEARCH_BUDGET {
            let to = (scan.scanned_to + SEARCH_STEP).min(max_id);
            let found = st
                .query_map(params![scan.scanned_to, to, id, q.search], |r| {
                    r.get::<_, i64>(0)
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            scan.hits.extend(found);
            scan.scanned_to = to;
        }
    }
    let searching = (scan.scanned_to < max_id)
        .then(|| (scan.scanned_to * 100 / max_id.max(1)).clamp(0, 99) as u8);
    // The matches that pass the status (or class) filter now, in order:
    // the page's rows, and a count (cut short when time runs out).
    let mut filter = q.filter();
    filter.search = None;
    let mut args = vec![V::Integer(id)];
    let cond = filter_sql(&filter, &mut args);
    args.push(V::Null);
    let slot = args.len();
    let mut st = c.prepare_cached(&format!(
        "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                substr(i.error_message, 1, {ROW_TEXT}), i.updated_at
           FROM items i WHERE i.id = ?{slot} AND i.batch_id = ?1{cond}"
    ))?;
    let (mut rows, mut total, mut capped) = (Vec::new(), 0i64, false);
    for &hit in &scan.hits {
        let wanted = total as usize >= q.offset && rows.len() < q.limit;
        if !wanted && (total > COUNT_CAP || started.elapsed() >= SEARCH_BUDGET * 2) {
            capped = true;
            break;
        }
        args[slot - 1] = V::Integer(hit);
        let Some(row) = st
            .query_row(params_from_iter(args.iter()), item_row)
            .optional()?
        else {
            continue;
        };
        if wanted {
            rows.push(row);
        }
        total += 1;
    }
    Ok(ItemPage {
        offset: q.offset,
        rows,
        total,
        capped,
        searching,
    })
}

fn item_page(c: &Connection, id: i64, info: &BatchInfo, q: &ItemsQuery) -> Result<ItemPage> {
    let searching = !q.search.is_empty();
    // A search scans the table anyway: count only when the page is full.
    let (mut total, mut capped) = if searching {
        (0, false)
    } else {
        count_items(c, id, info, q)?
    };
    let mut args = vec![V::Integer(id)];
    let cond = filter_sql(&q.filter(), &mut args);
    // Rows come in id order. When the matches are dense (no filter, a
    // common status, a search) walking the table in rowid order finds a
    // page in a few rows; through an index SQLite would sort every match
    // first. A rare status or class is cheaper through the index.
    let dense = searching || total * 50 >= info.counts.total();
    let scan = if dense { "NOT INDEXED" } else { "" };
    // Past the middle, read from the end backwards (`G` on a million items).
    let backwards = !searching && q.offset as i64 > total / 2;
    let (order, offset) = if backwards {
        let end = (q.offset + q.limit).min(total as usize);
        ("DESC", total as usize - end)
    } else {
        ("ASC", q.offset)
    };
    let sql = format!(
        "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                substr(i.error_message, 1, {ROW_TEXT}), i.updated_at
           FROM items i {scan} WHERE i.batch_id = ?1{cond} ORDER BY i.id {order} LIMIT {} OFFSET {offset}",
        q.limit
    );
    let mut rows: Vec<ItemRow> = c
        .prepare_cached(&sql)?
        .query_map(params_from_iter(args), item_row)?
        .collect::<rusqlite::Result<_>>()?;
    if searching {
        (total, capped) = if q.offset == 0 && rows.len() < q.limit {
            (rows.len() as i64, false)
        } else {
            count_items(c, id, info, q)?
        };
    }
    if backwards {
        rows.reverse();
        // The last page may be short: it starts where its first row is.
        let first = (total as usize).saturating_sub(offset + rows.len());
        return Ok(ItemPage {
            offset: first,
            rows,
            total,
            capped,
            searching: None,
        });
    }
    Ok(ItemPage {
        offset: q.offset,
        rows,
        total,
        capped,
        searching: None,
    })
}

fn events(c: &Connection, q: &EventsQuery) -> Result<Vec<Event>> {
    let mut args: Vec<V> = Vec::new();
    let mut cond = String::from("1 = 1");
    if let Some(name) = &q.batch {
        match c
            .query_row("SELECT id FROM batches WHERE name = ?1", [name], |r| {
                r.get::<_, i64>(0)
            })
            .optional()?
        {
            Some(id) => {
                args.push(V::Integer(id));
                cond.push_str(&format!(" AND e.batch_id = ?{}", args.len()));
            }
            None => return Ok(Vec::new()),
        }
    }
    if !q.kinds.is_empty() {
        let mut slots = Vec::new();
        for k in &q.kinds {
            args.push(V::Text(k.clone()));
            slots.push(format!("?{}", args.len()));
        }
        cond.push_str(&format!(" AND e.kind IN ({})", slots.join(", ")));
    }
    if let Some(up_to) = q.up_to {
        args.push(V::Integer(up_to));
        cond.push_str(&format!(" AND e.id <= ?{}", args.len()));
    }
    let sql = format!(
        "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, substr(e.message, 1, {ROW_TEXT}),
                i.label
           FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                LEFT JOIN items i ON i.id = e.item_id
          WHERE {cond} ORDER BY e.id DESC LIMIT {}",
        q.limit
    );
    let mut rows: Vec<Event> = c
        .prepare_cached(&sql)?
        .query_map(params_from_iter(args), event_row)?
        .collect::<rusqlite::Result<_>>()?;
    rows.reverse();
    Ok(rows)
}

fn detail(c: &Connection, id: i64, key: &str) -> Result<std::result::Result<ItemDetail, String>> {
    let item = c
        .query_row(
            &format!(
                "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
                  WHERE i.batch_id = ?1 AND i.key = ?2"
            ),
            params![id, key],
            item_from_row,
        )
        .optional();
    let item = match item {
        Ok(Some(item)) => item,
        Ok(None) => return Ok(Err(format!("no item {key:?} (pruned?)"))),
        // A row this build cannot read (e.g. invalid UTF-8) spoils the
        // detail, not the whole poll.
        Err(e) => return Ok(Err(format!("cannot read item {key:?}: {e}"))),
    };
    let failures = match dead_letters::of_item(c, item.id) {
        Ok(f) => f,
        Err(e) => return Ok(Err(format!("cannot read the failures of {key:?}: {e}"))),
    };
    let attempt_logs = super::attempts::of_item(c, item.id, DETAIL_ATTEMPTS)?;
    let mut events: Vec<Event> = c
        .prepare_cached(&format!(
            "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, e.message, i.label
               FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                    LEFT JOIN items i ON i.id = e.item_id
              WHERE e.item_id = ?1 ORDER BY e.id DESC LIMIT {DETAIL_EVENTS}"
        ))?
        .query_map([item.id], event_row)?
        .collect::<rusqlite::Result<_>>()?;
    events.reverse();
    Ok(Ok(ItemDetail {
        item,
        failures,
        attempt_logs,
        events,
    }))
}

impl SqliteStore {
    /// A value that differs after any commit to the store: a poller that
    /// sees the same marker twice can skip reading (an idle dashboard then
    /// costs two `stat`s a second, whatever it shows).
    ///
    /// A store with a connection must not open `-shm` itself: POSIX locks
    /// belong to the process, and closing any descriptor of the file drops
    /// every lock SQLite holds on it in this process (another connection's
    /// write lock, the "still in use" lock), so another process could write
    /// or recover the WAL at the same time and corrupt the store. It asks
    /// its connection for `data_version` instead.
    pub fn change_marker(&self) -> Vec<u8> {
        match &self.conn {
            Some(conn) => {
                let mut out = super::readonly::file_marker(&self.file);
                let version: i64 = conn
                    .query_row("PRAGMA data_version", [], |r| r.get(0))
                    .unwrap_or(-1);
                out.extend(version.to_le_bytes());
                out
            }
            None => super::readonly::change_marker(&self.file),
        }
    }

    /// Everything one dashboard poll shows, in one read transaction.
    pub fn dashboard(&self, q: &DashQuery, now: Millis) -> Result<Dashboard> {
        self.read(|c| {
            let mut out = Dashboard::default();
            let mut selected = None;
            for name in names(c)? {
                let id = batch_id(c, &name)?;
                let view = BatchView {
                    minutes: super::batches::minutes(c, id, now, q.minutes)?,
                    created_at: super::batches::created_at(c, id)?,
                    info: super::batches::info(c, id, name, now)?,
                };
                if q.batch.as_deref() == Some(view.info.name.as_str()) {
                    selected = Some((id, out.batches.len()));
                }
                out.batches.push(view);
            }
            // A configured batch with no rows yet has nothing more to read.
            if let Some((id, idx)) = selected {
                let info = &out.batches[idx].info;
                out.runs = super::runs::recent(c, id, q.runs)?;
                let tier =
                    crate::store::dialect::ItemsRead::retry_tier(&mut SqliteTx::new(c), id, now)?;
                out.retry = Some((info.name.clone(), tier));
                if q.dlq {
                    out.dlq =
                        crate::store::ops::dead_letters::groups(&mut SqliteTx::new(c), id, now)?;
                }
                if let Some(iq) = &q.items {
                    out.items = Some(if iq.search.is_empty() {
                        item_page(c, id, info, iq)?
                    } else {
                        search_page(c, id, iq, &self.search)?
                    });
                }
                if let Some(iq) = &q.class_items {
                    out.class_items = Some(item_page(c, id, info, iq)?);
                }
                if let Some(key) = &q.detail {
                    out.detail = Some(detail(c, id, key)?);
                }
            }
            if let Some(eq) = &q.events {
                out.events = events(c, eq)?;
            }
            out.daemons = super::daemons::all(c, now)?;
            Ok(out)
        })
    }

    /// Keys of the failed items a dashboard filter (or error class) shows:
    /// what "requeue all" would move.
    pub fn failed_keys(&self, batch: &str, q: &ItemsQuery) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut filter = q.filter();
            filter.status = Some(Status::Failed);
            let mut args = vec![V::Integer(id)];
            let cond = filter_sql(&filter, &mut args);
            let keys = c
                .prepare(&format!(
                    "SELECT i.key FROM items i WHERE i.batch_id = ?1{cond} ORDER BY i.id"
                ))?
                .query_map(params_from_iter(args), |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            Ok(keys)
        })
    }

    /// The items whose label is exactly `label`, oldest first, at most
    /// `limit` (`show BATCH LABEL`). Labels are not indexed: this reads the
    /// batch's items once.
    pub fn labelled(&self, batch: &str, label: &str, limit: usize) -> Result<Vec<ItemRow>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let rows = c
                .prepare_cached(&format!(
                    "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                            substr(i.error_message, 1, {ROW_TEXT}), i.updated_at
                       FROM items i WHERE i.batch_id = ?1 AND i.label = ?2
                      ORDER BY i.id LIMIT ?3"
                ))?
                .query_map(params![id, label, limit as i64], item_row)?
                .collect::<rusqlite::Result<_>>()?;
            Ok(rows)
        })
    }

    /// Which of these keys are failed now (a requeue confirmed a moment
    /// ago moves only those).
    pub fn failed_among(&self, batch: &str, keys: &[String]) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut out = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(10_000) {
                let list = serde_json::to_string(chunk).unwrap_or_else(|_| "[]".into());
                let mut st = c.prepare_cached(
                    "SELECT i.key FROM json_each(?2) j
                       JOIN items i ON i.batch_id = ?1 AND i.key = j.value AND i.status = 'failed'
                      ORDER BY i.id",
                )?;
                let rows = st.query_map(params![id, list], |r| r.get::<_, String>(0))?;
                for r in rows {
                    out.push(r?);
                }
            }
            Ok(out)
        })
    }

    /// What happened since `since`: new dead letters by class and tier,
    /// runs by state (every run that overlaps the time since: one that
    /// began before and ended after, or still runs, too), lock takeovers,
    /// schedule fires by outcome.
    pub fn since(&self, since: Millis) -> Result<SinceSummary> {
        self.read(|c| {
            let mut out = SinceSummary {
                since,
                ..SinceSummary::default()
            };
            let mut st = c.prepare_cached(
                "SELECT error_class, tier, count(*) FROM dead_letters
                  WHERE batch_id = ?1 AND failed_at > ?2 GROUP BY 1, 2 ORDER BY 3 DESC, 1",
            )?;
            for name in names(c)? {
                let id = batch_id(c, &name)?;
                let mut rows = st.query(params![id, since])?;
                while let Some(r) = rows.next()? {
                    let tier: Tier = parse_col(1, &lossy(r, 1)?.unwrap_or_default())?;
                    out.failures.push((
                        name.clone(),
                        lossy(r, 0)?.unwrap_or_default(),
                        tier,
                        r.get(2)?,
                    ));
                }
            }
            out.runs = c
                .prepare_cached(
                    "SELECT b.name, r.state, count(*) FROM runs r JOIN batches b ON b.id = r.batch_id
                      WHERE r.started_at > ?1 OR r.ended_at > ?1 OR r.ended_at IS NULL
                      GROUP BY 1, 2 ORDER BY 1, 2",
                )?
                .query_map([since], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<_>>()?;
            out.takeovers = c
                .prepare_cached(
                    "SELECT coalesce(b.name, ''), count(*) FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                      WHERE e.kind = 'lock-takeover' AND e.at > ?1 GROUP BY 1 ORDER BY 1",
                )?
                .query_map([since], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            out.fires = c
                .prepare_cached(
                    "SELECT coalesce(b.name, ''),
                            coalesce(CASE WHEN json_valid(e.fields) THEN json_extract(e.fields, '$.outcome') END, '?'),
                            count(*)
                       FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                      WHERE e.kind = 'fire' AND e.at > ?1 GROUP BY 1, 2 ORDER BY 1, 2",
                )?
                .query_map([since], |r| {
                    Ok((r.get(0)?, lossy(r, 1)?.unwrap_or_default(), r.get(2)?))
                })?
                .collect::<rusqlite::Result<_>>()?;
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NewItem;

    fn store(n: usize) -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = SqliteStore::create(&dir.path().join("s.db")).unwrap();
        let items: Vec<NewItem> = (0..n)
            .map(|i| NewItem {
                key: format!("k{i:03}"),
                label: format!("l{i}"),
                payload: "{}".into(),
            })
            .collect();
        store.add_items("b", &items, 0, |_| {}).unwrap();
        (dir, store)
    }

    fn page(store: &SqliteStore, iq: ItemsQuery) -> ItemPage {
        let q = DashQuery {
            batch: Some("b".into()),
            items: Some(iq),
            ..DashQuery::default()
        };
        store.dashboard(&q, 0).unwrap().items.unwrap()
    }

    #[test]
    fn pages_read_forwards_and_backwards_agree() {
        let (_dir, store) = store(100);
        for (offset, limit) in [(0, 10), (45, 10), (60, 10), (95, 10), (99, 30), (51, 49)] {
            let p = page(
                &store,
                ItemsQuery {
                    offset,
                    limit,
                    ..ItemsQuery::default()
                },
            );
            assert_eq!(p.total, 100);
            assert!(p.offset <= offset, "{offset}: starts at {}", p.offset);
            for (i, row) in p.rows.iter().enumerate() {
                assert_eq!(row.key, format!("k{:03}", p.offset + i), "offset {offset}");
            }
            assert!(
                p.offset + p.rows.len() >= (offset + limit).min(100),
                "{offset} not covered"
            );
        }
    }

    /// Polls a search until it has scanned everything, as the poller does.
    /// Polls as the dashboard does until the scan and the count are whole
    /// (each poll has a time budget: a busy machine takes more polls).
    fn search_to_end(store: &SqliteStore, iq: &ItemsQuery) -> (ItemPage, usize) {
        for polls in 1..100_000 {
            let p = page(store, iq.clone());
            if p.searching.is_none() && !p.capped {
                return (p, polls);
            }
        }
        panic!("the search never ended");
    }

    /// A search of many items goes on over several polls, each a short
    /// scan, and then finds what one full scan finds; items added later
    /// are found too, and the status filter applies to the status now.
    #[test]
    fn a_long_search_continues_from_poll_to_poll() {
        let (_dir, mut store) = store(30_000);
        let iq = ItemsQuery {
            search: "l2999".into(),
            limit: 50,
            ..ItemsQuery::default()
        };
        // (How many polls it takes depends on the machine's speed.)
        let (p, _) = search_to_end(&store, &iq);
        let keys: Vec<&str> = p.rows.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "k2999", "k29990", "k29991", "k29992", "k29993", "k29994", "k29995", "k29996",
                "k29997", "k29998", "k29999"
            ]
        );
        assert_eq!(p.total, 11);

        let more = [NewItem {
            key: "new".into(),
            label: "l2999-again".into(),
            payload: "{}".into(),
        }];
        store.add_items("b", &more, 0, |_| {}).unwrap();
        store
            .conn
            .as_ref()
            .unwrap()
            .execute_batch(
                "UPDATE items SET status = 'done', outcome = 'done' WHERE key = 'k29990'",
            )
            .unwrap();
        let (p, _) = search_to_end(&store, &iq);
        assert_eq!(p.total, 12, "the new item is found");
        assert_eq!(p.rows.last().unwrap().key, "new");
        let pending = ItemsQuery {
            status: Some(Status::Pending),
            ..iq.clone()
        };
        let (p, _) = search_to_end(&store, &pending);
        assert_eq!(p.total, 11, "k29990 is done now");
        assert!(p.rows.iter().all(|r| r.key != "k29990"));
    }

    /// The items of one error class are read through the partial index of
    /// failed items, not by scanning every failed item.
    #[test]
    fn a_class_is_read_through_the_failed_items_index() {
        let (_dir, store) = store(10);
        let mut args = vec![V::Integer(1)];
        let filter = ItemsQuery {
            class: Some("Rare".into()),
            ..ItemsQuery::default()
        }
        .filter();
        let cond = filter_sql(&filter, &mut args);
        let plan: Vec<String> = store
            .conn
            .as_ref()
            .unwrap()
            .prepare(&format!(
                "EXPLAIN QUERY PLAN SELECT i.key FROM items i WHERE i.batch_id = ?1{cond} ORDER BY i.id LIMIT 54"
            ))
            .unwrap()
            .query_map(params_from_iter(args), |r| r.get(3))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        assert!(
            plan.iter().any(|p| p.contains("USING INDEX items_failed")),
            "{plan:?}"
        );
        assert!(!plan.iter().any(|p| p.contains("TEMP B-TREE")), "{plan:?}");
    }

    /// A runner killed writes nothing: the watch a poll kept notices it
    /// gone, so the poller reads again although the store is unchanged.
    #[test]
    fn the_alive_watch_notices_a_runner_dying() {
        let (_dir, store) = store(1);
        let mut store = crate::store::Store::Sqlite(store);
        let mut c = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let holder = crate::model::Holder {
            host: crate::util::identity::host(),
            pid: c.id(),
            pid_start: crate::util::identity::pid_start(c.id()),
        };
        let now = crate::util::time::now_ms();
        store
            .acquire_lock("b", "t", &holder, None, now + 3_600_000, now, &[], 1)
            .unwrap();
        let d = store.dashboard(&DashQuery::default(), now).unwrap();
        assert!(d.batches[0].info.running());
        let watch = d.alive_watch();
        assert!(!watch.changed(now));
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(watch.changed(now));
        let d = store.dashboard(&DashQuery::default(), now).unwrap();
        assert!(!d.batches[0].info.running());
        assert!(!d.alive_watch().changed(now));
    }

    #[test]
    fn searches_count_what_they_find() {
        let (_dir, store) = store(100);
        let (p, _) = search_to_end(
            &store,
            &ItemsQuery {
                search: "k09".into(),
                limit: 50,
                ..ItemsQuery::default()
            },
        );
        assert_eq!((p.total, p.rows.len()), (10, 10));
        let (p, _) = search_to_end(
            &store,
            &ItemsQuery {
                search: "k".into(),
                limit: 5,
                ..ItemsQuery::default()
            },
        );
        assert_eq!((p.total, p.rows.len()), (100, 5));
        let (p, _) = search_to_end(
            &store,
            &ItemsQuery {
                search: "l1".into(),
                offset: 5,
                limit: 5,
                ..ItemsQuery::default()
            },
        );
        assert_eq!(p.total, 11);
        assert_eq!(p.rows[0].key, "k014");
    }
}
