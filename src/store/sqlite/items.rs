//! Statements on items outside the hot paths (add, claim with its lease
//! and fencing token, and complete are in `hot.rs`).
//!
//! Every transition that ends a claim is conditional on the lease token, so
//! a runner that lost its lease cannot overwrite a newer claim.

use rusqlite::{Row, params_from_iter};

use super::{SqliteTx, parse_col};
use crate::model::Item;
use crate::model::Tombstone;
use crate::store::Result;
use crate::store::api::{ItemFilter, Requeue, Selection};
use crate::store::dialect::ItemsRead;
use crate::store::dialect::items::item_from_row;
use crate::store::rows::item_columns;

pub(crate) const ITEM_COLUMNS: &str = item_columns!();

/// Appends numbered placeholders (`?2`, `?3`, ...) after `?1`, the batch id.
pub(crate) fn filter_sql(filter: &ItemFilter, args: &mut Vec<rusqlite::types::Value>) -> String {
    use rusqlite::types::Value as V;
    let mut sql = String::new();
    let bind = |args: &mut Vec<V>, value: V| {
        args.push(value);
        args.len()
    };
    // Status, tier and outcome are fixed words, written into the SQL: the
    // planner can then use the partial index of failed items.
    if let Some(s) = filter.status {
        sql.push_str(&format!(" AND i.status = '{}'", s.as_str()));
    }
    if let Some(t) = filter.tier {
        sql.push_str(&format!(" AND i.tier = '{}'", t.as_str()));
    }
    if let Some(o) = filter.outcome {
        sql.push_str(&format!(" AND i.outcome = '{}'", o.as_str()));
    }
    if let Some(c) = &filter.error_class {
        let n = bind(args, V::Text(c.clone()));
        sql.push_str(&format!(" AND i.error_class = ?{n}"));
    }
    if let Some(q) = filter.search.as_ref().filter(|q| !q.is_empty()) {
        let n = bind(args, V::Text(q.clone()));
        sql.push_str(&format!(
            " AND (instr(i.key, ?{n}) > 0 OR instr(i.label, ?{n}) > 0 \
               OR instr(coalesce(i.error_message, ''), ?{n}) > 0)"
        ));
    }
    if let Some(v) = &filter.stale {
        let n = bind(args, V::Text(v.clone()));
        sql.push_str(&crate::store::api::stale_sql(&format!("?{n}")));
    }
    if let Some(c) = filter.claimable {
        let n = bind(args, V::Integer(c.at));
        sql.push_str(&crate::store::rows::claimable_sql(
            &format!("?{n}"),
            c.reclaim,
        ));
    }
    sql
}

fn selection_sql(sel: &Selection, args: &mut Vec<rusqlite::types::Value>) -> String {
    use rusqlite::types::Value as V;
    let version = sel.stale.as_ref().map_or(String::new(), |v| {
        args.push(V::Text(v.clone()));
        format!("?{}", args.len())
    });
    let mut sql = sel.moves_sql(&version);
    if let Some(c) = &sel.class {
        args.push(V::Text(c.clone()));
        sql.push_str(&format!(" AND i.error_class = ?{}", args.len()));
    }
    if let Some(t) = sel.tier {
        args.push(V::Text(t.as_str().into()));
        sql.push_str(&format!(" AND i.tier = ?{}", args.len()));
    }
    sql
}
const ITEMS_FOR_REQUEUE: &str =
    "SELECT i.id, i.key, i.label, i.tier, i.outcome, i.error_class, i.attempts
       FROM items i WHERE i.batch_id = ?1";

/// The item of a row of `ITEMS_FOR_REQUEUE`. Tier and outcome are parsed
/// where they lie, not copied first: a requeue of 100,000 items reads
/// them all.
fn requeue_only(r: &Row<'_>) -> rusqlite::Result<(i64, Requeue)> {
    fn parsed<T: std::str::FromStr<Err = String>>(
        r: &Row<'_>,
        idx: usize,
    ) -> rusqlite::Result<Option<T>> {
        r.get_ref(idx)?
            .as_str_or_null()?
            .map(|t| parse_col(idx, t))
            .transpose()
    }
    Ok((
        r.get(0)?,
        Requeue {
            key: r.get(1)?,
            label: r.get(2)?,
            tier: parsed(r, 3)?,
            outcome: parsed(r, 4)?,
            error_class: r.get(5)?,
            attempts: r.get(6)?,
        },
    ))
}

impl ItemsRead for SqliteTx<'_> {
    fn item_tombstone(&mut self, batch: i64, key: &str) -> Result<Option<Tombstone>> {
        super::tombstones::find(self.conn, batch, key)
    }

    fn items_list(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<Item>> {
        let mut args = vec![rusqlite::types::Value::Integer(batch)];
        let where_sql = filter_sql(filter, &mut args);
        let limit = filter.limit.map_or(-1, |l| l as i64);
        let sql = format!(
            "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
              WHERE i.batch_id = ?1{where_sql} ORDER BY {} LIMIT {limit} OFFSET {}",
            crate::store::rows::order_sql(filter),
            filter.offset
        );
        self.all_built(&sql, params_from_iter(args), item_from_row)
    }

    fn items_count(&mut self, batch: i64, filter: &ItemFilter) -> Result<i64> {
        let mut args = vec![rusqlite::types::Value::Integer(batch)];
        let where_sql = filter_sql(filter, &mut args);
        let sql = format!("SELECT count(*) FROM items i WHERE i.batch_id = ?1{where_sql}");
        Ok(self
            .conn
            .query_row(&sql, params_from_iter(args), |r| r.get(0))?)
    }

    fn items_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<(i64, Requeue)>> {
        let mut args = vec![rusqlite::types::Value::Integer(batch)];
        let cond = selection_sql(sel, &mut args);
        let mut st = self.conn.prepare(&format!("{ITEMS_FOR_REQUEUE}{cond}"))?;
        let rows = st
            .query_map(params_from_iter(args), requeue_only)?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }

    fn ids_for_requeue(&mut self, batch: i64, sel: &Selection) -> Result<Vec<i64>> {
        let mut args = vec![rusqlite::types::Value::Integer(batch)];
        let cond = selection_sql(sel, &mut args);
        let mut st = self.conn.prepare(&format!(
            "SELECT i.id FROM items i WHERE i.batch_id = ?1{cond}"
        ))?;
        let ids = st
            .query_map(params_from_iter(args), |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(ids)
    }
}
