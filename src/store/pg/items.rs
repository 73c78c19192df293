//! Statements on items outside the hot paths (add, claim and complete are
//! in `hot.rs`).
//!
//! Claims take pending rows `FOR UPDATE SKIP LOCKED`: runners on several
//! hosts claim disjoint items without waiting for each other. Fencing
//! tokens come from one sequence. Every transition that ends a claim is
//! conditional on the lease token, so a runner that lost its lease cannot
//! overwrite a newer claim.

use postgres::Row;

use super::PgTx;
use super::events::Args;
use super::tombstones;
use crate::model::Tombstone;
use crate::model::{Claim, Item, Status};
use crate::store::Result;
use crate::store::api::{Claimable, ItemFilter, Requeue, Selection};
use crate::store::dialect::ItemsRead;
use crate::store::dialect::items::{item_from_row, requeue_from_row};
use crate::store::rows::item_columns;

pub(crate) const ITEM_COLUMNS: &str = item_columns!();

/// The filter's conditions on `i`, with their values added to `args`.
pub(crate) fn filter_sql(filter: &ItemFilter, args: &mut Args) -> String {
    let mut sql = String::new();
    // The status word in the SQL, not a parameter: a generic plan cannot
    // prove `items_queue`'s predicate (`status <> 'pending' OR ...`) from
    // `status = $n`. Pending items are in two partial indexes, claimable
    // ones in `items_claimable`, those with a not-before time in
    // `items_queue`: the condition names both (always true of a pending
    // row), so the planner may read the two and join them (a BitmapOr).
    match filter.status {
        Some(Status::Pending) => sql.push_str(
            " AND i.status = 'pending' AND (i.next_attempt_at IS NOT NULL \
               OR (i.tier IS NULL AND i.next_attempt_at IS NULL))",
        ),
        Some(s) => sql.push_str(&format!(" AND i.status = '{}'", s.as_str())),
        None => {}
    }
    if let Some(t) = filter.tier {
        sql.push_str(&format!(" AND i.tier = {}", args.push(t.as_str())));
    }
    if let Some(o) = filter.outcome {
        sql.push_str(&format!(" AND i.outcome = {}", args.push(o.as_str())));
    }
    if let Some(c) = &filter.error_class {
        sql.push_str(&format!(" AND i.error_class = {}", args.push(c.clone())));
    }
    if let Some(q) = filter.search.as_ref().filter(|q| !q.is_empty()) {
        let n = args.push(q.clone());
        sql.push_str(&format!(
            " AND (strpos(i.key, {n}) > 0 OR strpos(i.label, {n}) > 0 \
               OR strpos(coalesce(i.error_message, ''), {n}) > 0)"
        ));
    }
    if let Some(v) = &filter.stale {
        sql.push_str(&crate::store::api::stale_sql(&args.push(v.clone())));
    }
    if let Some(c) = filter.claimable {
        let n = args.push(c.at);
        sql.push_str(&crate::store::rows::claimable_sql(&n, c.reclaim));
    }
    sql
}

impl super::PgStore {
    /// How PostgreSQL plans `items_count` of `filter` (`EXPLAIN`), one line
    /// per row: for the test that keeps the pending filter on the indexes.
    #[doc(hidden)]
    pub fn items_count_plan(&self, batch: &str, filter: &ItemFilter) -> Result<Vec<String>> {
        self.read(|c| {
            let mut args = Args::new();
            args.push(super::batches::batch_id(c, batch)?);
            let cond = filter_sql(filter, &mut args);
            let sql = format!("EXPLAIN SELECT count(*) FROM items i WHERE i.batch_id = $1{cond}");
            Ok(c.q(&sql, &args.refs())?.iter().map(|r| r.get(0)).collect())
        })
    }
}

pub(super) fn claim_from_row(r: &Row) -> Claim {
    Claim {
        item_id: r.get(0),
        key: r.get(1),
        label: r.get(2),
        payload: r.get(3),
        attempt: r.get::<_, i64>(4) as u32,
        op_id: r.get(5),
        token: r.get(6),
    }
}
/// The condition on `i` of a requeue's selection, after `i.batch_id = $1`
/// (`batch`), and its arguments.
fn selection_cond(batch: i64, sel: &Selection) -> (String, Args) {
    let mut args = Args::new();
    args.push(batch);
    let version = sel
        .stale
        .as_ref()
        .map_or(String::new(), |v| args.push(v.clone()));
    let mut cond = sel.moves_sql(&version);
    if let Some(class) = &sel.class {
        cond.push_str(&format!(
            " AND i.error_class = {}",
            args.push(class.clone())
        ));
    }
    if let Some(t) = sel.tier {
        cond.push_str(&format!(" AND i.tier = {}", args.push(t.as_str())));
    }
    (cond, args)
}

/// An item as a requeue lists it, with its status as stored.
const ITEMS_FOR_REQUEUE: &str =
    "SELECT i.id, i.key, i.label, i.tier, i.outcome, i.error_class, i.attempts, i.status
       FROM items i WHERE i.batch_id = $1";
impl ItemsRead for PgTx<'_> {
    fn item_tombstone(&mut self, batch: i64, key: &str) -> Result<Option<Tombstone>> {
        tombstones::find(self.c, batch, key)
    }

    fn items_list(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<Item>> {
        let mut args = Args::new();
        args.push(batch);
        // Times in the SQL are on the database's clock.
        let filter = &ItemFilter {
            claimable: filter.claimable.map(|c| Claimable {
                at: self.c.tin(c.at),
                ..c
            }),
            ..filter.clone()
        };
        let cond = filter_sql(filter, &mut args);
        let limit = filter
            .limit
            .map_or_else(|| "ALL".to_string(), |l| l.to_string());
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
              WHERE i.batch_id = $1{cond} ORDER BY {} LIMIT {limit} OFFSET {}",
            crate::store::rows::order_sql(filter),
            filter.offset
        );
        self.all_built(&sql, &args.refs(), item_from_row)
    }

    fn items_count(&mut self, batch: i64, filter: &ItemFilter) -> Result<i64> {
        let mut args = Args::new();
        args.push(batch);
        // Times in the SQL are on the database's clock.
        let filter = &ItemFilter {
            claimable: filter.claimable.map(|c| Claimable {
                at: self.c.tin(c.at),
                ..c
            }),
            ..filter.clone()
        };
        let cond = filter_sql(filter, &mut args);
        let sql = format!("SELECT count(*)::int8 FROM items i WHERE i.batch_id = $1{cond}");
        Ok(self.c.one(&sql, &args.refs())?.get(0))
    }

    fn items_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<(i64, Requeue)>> {
        let (cond, args) = selection_cond(batch, sel);
        let sql = format!("{ITEMS_FOR_REQUEUE}{cond}");
        self.all_built(&sql, &args.refs(), |r| {
            requeue_from_row(r).map(|(id, req, _)| (id, req))
        })
    }

    fn ids_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<i64>> {
        let (cond, args) = selection_cond(batch, sel);
        let sql = format!("SELECT i.id FROM items i WHERE i.batch_id = $1{cond}");
        self.all_built(&sql, &args.refs(), |r| r.int(0))
    }
}
