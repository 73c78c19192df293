//! The statements the views read (see `ops::views`), and the dashboard's
//! search scan. They read text lossily and cut long messages, so a hostile
//! or huge row cannot stall or break a poll.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::types::Value as V;
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};

use super::items::filter_sql;
use super::{SqliteStore, SqliteTx, parse_col};
use crate::model::Event;
use crate::store::Result;
use crate::store::api::{COUNT_CAP, EventsQuery, ItemFilter, ItemPage, ItemRow, ItemsQuery};
use crate::store::dialect::{DrawnSearch, RowsPage, ViewsRead};

/// Characters of an error message or event message kept for a list row.
const ROW_TEXT: i64 = 512;
/// Store time a dashboard search may take per poll (scanning, then checking
/// matches against the status filter); the poller comes back at once until
/// the search is complete.
const SEARCH_BUDGET: Duration = Duration::from_micros(1_500);
/// Store time a search's poll may have spent, scan included, before it
/// stops counting the matches that pass the filter (the count then says
/// "at least"): with the rest of a poll, under 5 ms.
const SEARCH_COUNT_BUDGET: Duration = Duration::from_micros(2_000);
/// Item ids one query of a search scans (about 0.5 ms).
const SEARCH_STEP: i64 = 1_024;
/// Matches a poll always checks against the filter before the time budget
/// may cut the count short: on a loaded machine the budget can be gone
/// before the first, and a small search must still come out whole.
const SEARCH_COUNT_FLOOR: i64 = 256;

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
use super::sql::lossy;

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

/// A page of a search's matches, scanning on from where the last poll
/// stopped, for at most [`SEARCH_BUDGET`]. A full scan of a million items
/// takes about 250 ms: done at once it would stall every poll that long.
fn search_page(
    c: &Connection,
    id: i64,
    q: &ItemsQuery,
    scan: &Mutex<SearchScan>,
    started: Instant,
) -> Result<ItemPage> {
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
        .query_row(MAX_ITEM_ID, [], |r| r.get::<_, Option<i64>>(0))?
        .unwrap_or(0);
    {
        // By rowid range (NOT INDEXED: else SQLite prefers an index on
        // batch_id and reads every item of the batch).
        let search = DrawnSearch::new(&q.search);
        let mut st = c.prepare_cached(&format!(
            "SELECT id FROM items NOT INDEXED WHERE id > ?1 AND id <= ?2 AND batch_id = ?3
                AND {} ORDER BY id",
            search.cond("instr", ["key", "label"], "?4")
        ))?;
        // At least one step per poll, whatever the clock says: a thread
        // descheduled past the budget before its first query would
        // otherwise report "searching 0%" for ever on a busy machine.
        let mut first = true;
        while scan.scanned_to < max_id && (first || started.elapsed() < SEARCH_BUDGET) {
            first = false;
            let to = (scan.scanned_to + SEARCH_STEP).min(max_id);
            let found = st
                .query_map(params![scan.scanned_to, to, id, search.text], |r| {
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
        let out_of_time = total >= SEARCH_COUNT_FLOOR && started.elapsed() >= SEARCH_COUNT_BUDGET;
        if !wanted && (total > COUNT_CAP || out_of_time) {
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

pub(super) const ITEMS_CLAIMED_BY: &str = concat!(
    "SELECT ",
    attempts_used!(),
    " AS used, count(*) FROM items
  WHERE batch_id = ?1 AND status = 'claimed' AND lease_run = ?2 GROUP BY used"
);
pub(super) const ITEMS_CLAIMED: &str = concat!(
    "SELECT ",
    attempts_used!(),
    " AS used, count(*) FROM items
  WHERE batch_id = ?1 AND status = 'claimed' GROUP BY used"
);
const CLASS_COUNT: &str = "SELECT coalesce(sum(n), 0) FROM failed_classes
  WHERE batch_id = ?1 AND error_class = ?2";
const MAX_ITEM_ID: &str = "SELECT max(id) FROM items";
const ITEMS_FAILED_AMONG: &str = "SELECT i.key FROM json_each(?2) j
   JOIN item_keys k ON k.batch_id = ?1 AND k.key = j.value
   JOIN items i ON i.id = k.item_id AND i.status = 'failed'
  ORDER BY i.id";
const EVENTS_OF_ITEM: &str =
    "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, e.message, i.label
   FROM events e LEFT JOIN batches b ON b.id = e.batch_id
        LEFT JOIN items i ON i.id = e.item_id
  WHERE e.item_id = ?1 ORDER BY e.id DESC LIMIT ?2";

/// The conditions of a page's filter on `i`, with their values added to
/// `args`; `keys_only` searches keys and labels only.
fn page_cond(q: &ItemsQuery, keys_only: bool, args: &mut Vec<V>) -> String {
    let mut filter = q.filter();
    if !keys_only || q.search.is_empty() {
        return filter_sql(&filter, args);
    }
    filter.search = None;
    let mut cond = filter_sql(&filter, args);
    let search = DrawnSearch::new(&q.search);
    let place = format!("?{}", args.len() + 1);
    cond.push_str(&format!(
        " AND {}",
        search.cond("instr", ["i.key", "i.label"], &place)
    ));
    args.push(V::Text(search.text));
    cond
}

impl ViewsRead for SqliteTx<'_> {
    fn claimed_attempts(&mut self, batch: i64, except: &[i64]) -> Result<Vec<(i64, i64)>> {
        // Every claim, less those of each run left out: two reads of the
        // claims' index (a few rows), no `NOT IN` list to build.
        let mut by = std::collections::BTreeMap::new();
        let mut add = |st: &mut rusqlite::CachedStatement<'_>,
                       args: &[&dyn rusqlite::ToSql],
                       sign: i64| {
            let rows = st.query_map(args, |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (attempts, n) = row?;
                *by.entry(attempts).or_insert(0) += sign * n;
            }
            Ok::<_, rusqlite::Error>(())
        };
        add(
            &mut self.conn.prepare_cached(ITEMS_CLAIMED)?,
            params![batch],
            1,
        )?;
        let mut st = self.conn.prepare_cached(ITEMS_CLAIMED_BY)?;
        for run in except {
            add(&mut st, params![batch, run], -1)?;
        }
        Ok(by.into_iter().filter(|(_, n)| *n > 0).collect())
    }

    fn class_count(&mut self, batch: i64, class: &str) -> Result<i64> {
        Ok(self
            .conn
            .query_row(CLASS_COUNT, params![batch, class], |r| r.get(0))?)
    }

    fn items_count_capped(
        &mut self,
        batch: i64,
        q: &ItemsQuery,
        keys_only: bool,
        cap: i64,
    ) -> Result<i64> {
        let mut args = vec![V::Integer(batch)];
        let cond = page_cond(q, keys_only, &mut args);
        Ok(self.conn.query_row(
            &format!(
                "SELECT count(*) FROM (SELECT 1 FROM items i WHERE i.batch_id = ?1{cond} LIMIT {})",
                cap + 1
            ),
            params_from_iter(args),
            |r| r.get(0),
        )?)
    }

    fn item_rows(
        &mut self,
        batch: i64,
        q: &ItemsQuery,
        keys_only: bool,
        page: RowsPage,
    ) -> Result<Vec<ItemRow>> {
        let mut args = vec![V::Integer(batch)];
        let cond = page_cond(q, keys_only, &mut args);
        let scan = if page.dense { "NOT INDEXED" } else { "" };
        let order = if page.backwards { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                    substr(i.error_message, 1, {ROW_TEXT}), i.updated_at
               FROM items i {scan} WHERE i.batch_id = ?1{cond} ORDER BY i.id {order} LIMIT {} OFFSET {}",
            page.limit, page.offset
        );
        Ok(self
            .conn
            .prepare_cached(&sql)?
            .query_map(params_from_iter(args), item_row)?
            .collect::<rusqlite::Result<_>>()?)
    }

    fn search_page(&mut self, batch: i64, q: &ItemsQuery) -> Result<Option<ItemPage>> {
        match self.search {
            Some(scan) if !q.search.is_empty() => {
                search_page(self.conn, batch, q, scan, Instant::now()).map(Some)
            }
            _ => Ok(None),
        }
    }

    fn items_labelled(&mut self, batch: i64, label: &str, limit: usize) -> Result<Vec<ItemRow>> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                        substr(i.error_message, 1, {ROW_TEXT}), i.updated_at
                   FROM items i WHERE i.batch_id = ?1 AND i.label = ?2
                  ORDER BY i.id LIMIT ?3"
            ))?
            .query_map(params![batch, label, limit as i64], item_row)?
            .collect::<rusqlite::Result<_>>()?)
    }

    fn items_keys(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<String>> {
        let mut args = vec![V::Integer(batch)];
        let cond = filter_sql(filter, &mut args);
        Ok(self
            .conn
            .prepare(&format!(
                "SELECT i.key FROM items i WHERE i.batch_id = ?1{cond} ORDER BY i.id"
            ))?
            .query_map(params_from_iter(args), |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?)
    }

    fn failed_among(&mut self, batch: i64, keys: &[String]) -> Result<Vec<String>> {
        let list = serde_json::to_string(keys).unwrap_or_else(|_| "[]".into());
        Ok(self
            .conn
            .prepare_cached(ITEMS_FAILED_AMONG)?
            .query_map(params![batch, list], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<_>>()?)
    }

    fn events_rows(&mut self, batch: Option<i64>, q: &EventsQuery) -> Result<Vec<Event>> {
        let mut args: Vec<V> = Vec::new();
        let mut cond = String::from("1 = 1");
        if let Some(id) = batch {
            args.push(V::Integer(id));
            cond.push_str(&format!(" AND e.batch_id = ?{}", args.len()));
        }
        if !q.kinds.is_empty() {
            let mut slots = Vec::new();
            for k in &q.kinds {
                args.push(V::Text(k.clone()));
                slots.push(format!("?{}", args.len()));
            }
            cond.push_str(&format!(" AND e.kind IN ({})", slots.join(", ")));
            cond.push_str(crate::store::dialect::events::rare_kinds_only(&q.kinds));
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
        let mut rows: Vec<Event> = self
            .conn
            .prepare_cached(&sql)?
            .query_map(params_from_iter(args), event_row)?
            .collect::<rusqlite::Result<_>>()?;
        rows.reverse();
        Ok(rows)
    }

    fn events_of_item(&mut self, item: i64, limit: usize) -> Result<Vec<Event>> {
        let mut events: Vec<Event> = self
            .conn
            .prepare_cached(EVENTS_OF_ITEM)?
            .query_map(params![item, limit as i64], event_row)?
            .collect::<rusqlite::Result<_>>()?;
        events.reverse();
        Ok(events)
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{NewItem, Status};
    use crate::store::{DashQuery, Store};

    fn store(n: usize) -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = Store::create(&dir.path().join("s.db")).unwrap();
        let items: Vec<NewItem> = (0..n)
            .map(|i| NewItem {
                key: format!("k{i:03}"),
                label: format!("l{i}"),
                payload: "{}".into(),
                ..Default::default()
            })
            .collect();
        store.add_items("b", &items, 0, |_| {}).unwrap();
        (dir, store)
    }

    fn conn(store: &Store) -> &Connection {
        match store {
            Store::Sqlite(s) => s.conn.as_ref().unwrap(),
            Store::Pg(_) => unreachable!("a SQLite store"),
        }
    }

    fn page(store: &Store, iq: ItemsQuery) -> ItemPage {
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

    /// A poll whose budget is gone before it starts (a descheduled thread
    /// on a busy machine) still scans a step and counts what it found, so
    /// a small search ends in one poll and a long one always advances.
    #[test]
    fn a_poll_past_its_budget_still_moves_the_search_on() {
        let (_dir, store) = store(3_000);
        let scan = Mutex::new(SearchScan::default());
        let late = Instant::now() - Duration::from_secs(1);
        let iq = ItemsQuery {
            search: "k".into(),
            limit: 10,
            ..ItemsQuery::default()
        };
        let batch: i64 = conn(&store)
            .query_row("SELECT id FROM batches WHERE name = 'b'", [], |r| r.get(0))
            .unwrap();
        let first = search_page(conn(&store), batch, &iq, &scan, late).unwrap();
        assert_eq!(first.searching, Some(34), "one step of 1,024 ids of 3,000");
        assert_eq!((first.rows.len(), first.total), (10, SEARCH_COUNT_FLOOR));
        assert!(first.capped, "the count is cut short, and says so");
        let mut polls = 1;
        let last = loop {
            let p = search_page(conn(&store), batch, &iq, &scan, late).unwrap();
            polls += 1;
            if p.searching.is_none() {
                break p;
            }
        };
        assert_eq!(polls, 3, "three steps cover 3,000 ids");
        assert_eq!(last.rows[0].key, "k000");
    }

    /// Polls a search until it has scanned everything, as the poller does.
    /// Polls as the dashboard does until the scan and the count are whole
    /// (each poll has a time budget: a busy machine takes more polls).
    fn search_to_end(store: &Store, iq: &ItemsQuery) -> (ItemPage, usize) {
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
            ..Default::default()
        }];
        store.add_items("b", &more, 0, |_| {}).unwrap();
        conn(&store)
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
        let plan: Vec<String> = conn(&store)
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
        let (_dir, mut store) = store(1);
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
        let watch = d.alive_watch(now);
        assert!(!watch.changed(now));
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(watch.changed(now));
        let d = store.dashboard(&DashQuery::default(), now).unwrap();
        assert!(!d.batches[0].info.running());
        assert!(!d.alive_watch(now).changed(now));
    }

    /// A wait that ends writes nothing either (a hold, a retry falling
    /// due): the watch says a poll past its end reads again, where the
    /// view kept "held until …" or "next at 07:36Z" up to a minute after.
    #[test]
    fn the_alive_watch_notices_a_wait_ending() {
        let (_dir, mut store) = store(1);
        let now = crate::util::time::now_ms();
        store.set_hold("b", now + 5_000, None).unwrap();
        let q = DashQuery {
            batch: Some("b".into()),
            ..DashQuery::default()
        };
        let watch = store.dashboard(&q, now).unwrap().alive_watch(now);
        assert!(!watch.changed(now + 4_999));
        assert!(watch.changed(now + 5_000));
        // Read after its end, an ended hold is nothing to wait for.
        let later = store
            .dashboard(&q, now + 6_000)
            .unwrap()
            .alive_watch(now + 6_000);
        assert!(!later.changed(now + 60_000));
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
