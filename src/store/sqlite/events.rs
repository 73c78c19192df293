//! The run log: structured events, also used for operator actions.

use rusqlite::{Connection, Row, params, params_from_iter, types::Value as V};

use super::batches::batch_id;
use super::{SqliteStore, SqliteTx};
use crate::model::{Event, Millis, NewEvent};
use crate::store::api::{EventFilter, FollowCursor};
use crate::store::dialect::events::rare_kinds_only;
use crate::store::dialect::sql::kept;
use crate::store::dialect::{EventsRead, EventsWrite};
use crate::store::{Result, json_col};

pub(crate) fn insert(conn: &Connection, e: &NewEvent) -> Result<i64> {
    let batch_id = match &e.batch {
        Some(name) => Some(batch_id(conn, name)?),
        None => None,
    };
    let mut st = conn.prepare_cached(
        "INSERT INTO events (at, batch_id, run_id, key, item_id, kind, actor, message, fields)
         VALUES (?1, ?2, ?3, ?4, (SELECT item_id FROM item_keys WHERE batch_id = ?2 AND key = ?4),
                 ?5, ?6, ?7, ?8)",
    )?;
    st.execute(params![
        e.at,
        batch_id,
        e.run_id,
        e.key,
        e.kind,
        e.actor,
        kept(&e.message),
        e.fields_text().as_deref().map(kept)
    ])?;
    Ok(conn.last_insert_rowid())
}

fn event_from_row(r: &Row<'_>) -> rusqlite::Result<Event> {
    Ok(Event {
        id: r.get(0)?,
        at: r.get(1)?,
        batch: r.get(2)?,
        run_id: r.get(3)?,
        key: r.get(4)?,
        kind: r.get(5)?,
        actor: r.get(6)?,
        message: r.get(7)?,
        fields: json_col(r.get(8)?).unwrap_or(serde_json::Value::Null),
        label: r.get(9)?,
    })
}

/// See [`EventsRead::events_page`].
fn page(
    c: &Connection,
    batch: Option<i64>,
    filter: &EventFilter,
    limit: usize,
) -> Result<Vec<Event>> {
    let mut args: Vec<V> = Vec::new();
    let mut cond = String::from("1 = 1");
    if let Some(id) = batch {
        args.push(V::Integer(id));
        cond.push_str(&format!(" AND e.batch_id = ?{}", args.len()));
    }
    if !filter.kinds.is_empty() {
        let mut slots = Vec::new();
        for k in &filter.kinds {
            args.push(V::Text(k.clone()));
            slots.push(format!("?{}", args.len()));
        }
        cond.push_str(&format!(" AND e.kind IN ({})", slots.join(", ")));
        cond.push_str(rare_kinds_only(&filter.kinds));
    }
    if let Some(key) = &filter.key {
        // Through the item's id (see the schema): with the batch, one
        // index lookup; without it, the item in any batch.
        args.push(V::Text(key.clone()));
        let k = args.len();
        if batch.is_some() {
            cond.push_str(&format!(
                " AND e.item_id = (SELECT item_id FROM item_keys WHERE batch_id = ?1 AND key = ?{k})"
            ));
        } else {
            cond.push_str(&format!(
                " AND e.item_id IN (SELECT item_id FROM item_keys WHERE key = ?{k})"
            ));
        }
    }
    if let Some(since) = filter.since {
        args.push(V::Integer(since));
        cond.push_str(&format!(" AND e.at >= ?{}", args.len()));
    }
    let mut order = "DESC";
    if let Some(after) = filter.after_id {
        args.push(V::Integer(after));
        cond.push_str(&format!(" AND e.id > ?{}", args.len()));
        order = "ASC";
    }
    let sql = format!(
        "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, e.message, e.fields,
                i.label
           FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                LEFT JOIN items i ON i.id = e.item_id
          WHERE {cond} ORDER BY e.id {order} LIMIT {limit}"
    );
    let mut st = c.prepare_cached(&sql)?;
    let rows = st
        .query_map(params_from_iter(args), event_from_row)?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

const KINDS_SINCE: &str = "SELECT coalesce(b.name, ''), e.kind, count(*) FROM events e
      LEFT JOIN batches b ON b.id = e.batch_id
     WHERE e.at > ?1 GROUP BY 1, 2 ORDER BY 1, 2";

/// Following by id: an event is visible once its transaction committed, and
/// SQLite's single writer commits ids in order.
impl SqliteStore {
    /// Starts following the log: take the cursor before listing what is
    /// already there, then pass the listing to `FollowCursor::shown`.
    pub fn follow_start(&self) -> Result<FollowCursor> {
        let after_id = self.read(|c| {
            Ok(c.prepare_cached("SELECT coalesce(max(id), 0) FROM events")?
                .query_row([], |r| r.get(0))?)
        })?;
        Ok(FollowCursor {
            after_id,
            ..FollowCursor::default()
        })
    }

    /// The events matching `filter` that appeared since the cursor (all of
    /// them, oldest first), moving the cursor past them.
    pub fn follow_next(
        &self,
        filter: &EventFilter,
        cursor: &mut FollowCursor,
    ) -> Result<Vec<Event>> {
        const PAGE: usize = 1000;
        let mut events = Vec::new();
        loop {
            let page = self.read(|c| {
                let batch = match &filter.batch {
                    Some(name) => Some(batch_id(c, name)?),
                    None => None,
                };
                let after = EventFilter {
                    after_id: Some(cursor.after_id),
                    ..filter.clone()
                };
                page(c, batch, &after, PAGE)
            })?;
            let Some(last) = page.last() else { break };
            cursor.after_id = last.id;
            let full = page.len() == PAGE;
            events.extend(page);
            if !full {
                break;
            }
        }
        Ok(events)
    }
}

impl EventsRead for SqliteTx<'_> {
    fn events_page(
        &mut self,
        batch: Option<i64>,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<Vec<Event>> {
        page(self.conn, batch, filter, limit)
    }

    fn event_kinds_since(&mut self, since: Millis) -> Result<Vec<(String, String, i64)>> {
        let mut st = self.conn.prepare_cached(KINDS_SINCE)?;
        let rows = st
            .query_map([since], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(rows)
    }
}

impl EventsWrite for SqliteTx<'_> {
    fn event_insert(&mut self, event: &NewEvent) -> Result<i64> {
        insert(self.conn, event)
    }
}
