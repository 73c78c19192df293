//! The statements the views read (see `ops::views`). A search is one
//! query here (no scan spread over polls, as SQLite's).

use postgres::Row;

use super::PgTx;
use super::conn::{Conn, parse_col_text};
use super::events::{Args, event_from_row};
use super::items::filter_sql;
use crate::model::Event;
use crate::store::Result;
use crate::store::api::{EventsQuery, ItemFilter, ItemPage, ItemRow, ItemsQuery};
use crate::store::dialect::{DrawnSearch, RowsPage, ViewsRead};

/// Characters of an error message or event message kept for a list row.
const ROW_TEXT: i64 = 512;

fn item_row(c: &Conn, r: &Row) -> Result<ItemRow> {
    Ok(ItemRow {
        key: r.get(0),
        label: r.get(1),
        status: parse_col_text(r.get(2))?,
        tier: r
            .get::<_, Option<&str>>(3)
            .map(parse_col_text)
            .transpose()?,
        outcome: r
            .get::<_, Option<&str>>(4)
            .map(parse_col_text)
            .transpose()?,
        attempts: r.get::<_, i64>(5) as u32,
        error_class: r.get(6),
        error_message: r.get(7),
        updated_at: c.tout(r.get(8)),
    })
}

/// The conditions of a page's filter on `i`, with their values added to
/// `args`. The items pane searches keys and labels only (as the SQLite
/// store's scan does); the class view also searches error messages.
fn page_sql(q: &ItemsQuery, keys_only: bool, args: &mut Args) -> String {
    let mut filter = q.filter();
    if !keys_only {
        return filter_sql(&filter, args);
    }
    filter.search = None;
    let mut cond = filter_sql(&filter, args);
    if !q.search.is_empty() {
        let search = DrawnSearch::new(&q.search);
        let place = args.push(search.text.clone());
        cond.push_str(&format!(
            " AND {}",
            search.cond("strpos", ["i.key", "i.label"], &place)
        ));
    }
    cond
}

const ITEMS_CLAIMED_EXCEPT: &str = concat!(
    "SELECT ",
    attempts_used!(),
    "::int8 AS used, count(*) FROM items
  WHERE batch_id = $1 AND status = 'claimed' AND lease_run <> ALL($2)
  GROUP BY used ORDER BY used"
);
const CLASS_COUNT: &str = "SELECT coalesce(sum(n), 0)::int8 FROM failed_classes
  WHERE batch_id = $1 AND error_class = $2";
const ITEMS_FAILED_AMONG: &str = "SELECT i.key FROM item_keys k JOIN items i ON i.id = k.item_id
  WHERE k.batch_id = $1 AND k.key = ANY($2) AND i.status = 'failed'
  ORDER BY i.id";
const EVENTS_OF_ITEM: &str =
    "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, e.message, NULL::text, i.label
   FROM events e LEFT JOIN batches b ON b.id = e.batch_id
        LEFT JOIN items i ON i.id = e.item_id
  WHERE e.item_id = $1 ORDER BY e.id DESC LIMIT $2";

// Twin of sqlite/views.rs, kept: the item pages' filters are built per dialect (SQLite writes
// status words into the SQL for its partial index, searches over polls and loops where this
// binds `ANY` arrays).
impl ViewsRead for PgTx<'_> {
    fn claimed_attempts(&mut self, batch: i64, except: &[i64]) -> Result<Vec<(i64, i64)>> {
        let rows = self.c.q(ITEMS_CLAIMED_EXCEPT, &[&batch, &except])?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    fn class_count(&mut self, batch: i64, class: &str) -> Result<i64> {
        Ok(self.c.one(CLASS_COUNT, &[&batch, &class])?.get(0))
    }

    fn items_count_capped(
        &mut self,
        batch: i64,
        q: &ItemsQuery,
        keys_only: bool,
        cap: i64,
    ) -> Result<i64> {
        let mut args = Args::new();
        args.push(batch);
        let cond = page_sql(q, keys_only, &mut args);
        Ok(self
            .c
            .one(
                &format!(
                    "SELECT count(*)::int8 FROM (SELECT 1 FROM items i WHERE i.batch_id = $1{cond}
                      LIMIT {}) x",
                    cap + 1
                ),
                &args.refs(),
            )?
            .get(0))
    }

    fn item_rows(
        &mut self,
        batch: i64,
        q: &ItemsQuery,
        keys_only: bool,
        page: RowsPage,
    ) -> Result<Vec<ItemRow>> {
        let mut args = Args::new();
        args.push(batch);
        let cond = page_sql(q, keys_only, &mut args);
        let order = if page.backwards { "DESC" } else { "ASC" };
        let sql = format!(
            "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                    left(i.error_message, {ROW_TEXT}), i.updated_at
               FROM items i WHERE i.batch_id = $1{cond} ORDER BY i.id {order}
              LIMIT {} OFFSET {}",
            page.limit, page.offset
        );
        let c = &mut *self.c;
        c.q(&sql, &args.refs())?
            .iter()
            .map(|r| item_row(c, r))
            .collect()
    }

    fn search_page(&mut self, _batch: i64, _q: &ItemsQuery) -> Result<Option<ItemPage>> {
        Ok(None)
    }

    fn items_labelled(&mut self, batch: i64, label: &str, limit: usize) -> Result<Vec<ItemRow>> {
        let c = &mut *self.c;
        let rows = c.q(
            &format!(
                "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                        left(i.error_message, {ROW_TEXT}), i.updated_at
                   FROM items i WHERE i.batch_id = $1 AND i.label = $2
                  ORDER BY i.id LIMIT $3"
            ),
            &[&batch, &label, &(limit as i64)],
        )?;
        rows.iter().map(|r| item_row(c, r)).collect()
    }

    fn items_keys(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<String>> {
        let mut args = Args::new();
        args.push(batch);
        let cond = filter_sql(filter, &mut args);
        Ok(self
            .c
            .q(
                &format!("SELECT i.key FROM items i WHERE i.batch_id = $1{cond} ORDER BY i.id"),
                &args.refs(),
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    fn failed_among(&mut self, batch: i64, keys: &[String]) -> Result<Vec<String>> {
        let keys = keys.to_vec();
        Ok(self
            .c
            .q(ITEMS_FAILED_AMONG, &[&batch, &keys])?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    fn events_rows(&mut self, batch: Option<i64>, q: &EventsQuery) -> Result<Vec<Event>> {
        let mut args = Args::new();
        let mut cond = String::from("true");
        if let Some(id) = batch {
            let slot = args.push(id);
            cond.push_str(&format!(" AND e.batch_id = {slot}"));
        }
        if !q.kinds.is_empty() {
            let slot = args.push(q.kinds.clone());
            cond.push_str(&format!(" AND e.kind = ANY({slot})"));
            cond.push_str(crate::store::dialect::events::rare_kinds_only(&q.kinds));
        }
        if let Some(up_to) = q.up_to {
            let slot = args.push(up_to);
            cond.push_str(&format!(" AND e.id <= {slot}"));
        }
        let sql = format!(
            "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, left(e.message, {ROW_TEXT}),
                    NULL::text, i.label
               FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                    LEFT JOIN items i ON i.id = e.item_id
              WHERE {cond} ORDER BY e.id DESC LIMIT {}",
            q.limit
        );
        let c = &mut *self.c;
        let mut rows: Vec<Event> = c
            .q(&sql, &args.refs())?
            .iter()
            .map(|r| event_from_row(c, r))
            .collect();
        rows.reverse();
        Ok(rows)
    }

    fn events_of_item(&mut self, item: i64, limit: usize) -> Result<Vec<Event>> {
        let c = &mut *self.c;
        let mut events: Vec<Event> = c
            .q(EVENTS_OF_ITEM, &[&item, &(limit as i64)])?
            .iter()
            .map(|r| event_from_row(c, r))
            .collect();
        events.reverse();
        Ok(events)
    }
}
