//! The run log: structured events, also used for operator actions.

use postgres::Row;

use super::batches::batch_id;
use super::conn::{Conn, text};
use super::{PgStore, PgTx};
use crate::model::{Event, Millis, NewEvent};
use crate::store::api::{EventFilter, FollowCursor};
use crate::store::dialect::{EventsRead, EventsWrite};
use crate::store::{Result, json_col};

pub(crate) fn insert(c: &mut Conn, e: &NewEvent) -> Result<i64> {
    let batch = match &e.batch {
        Some(name) => Some(batch_id(c, name)?),
        None => None,
    };
    let at = c.tin(e.at);
    let fields = e.fields_text().map(|f| text(&f).into_owned());
    let message = text(&e.message);
    let key = e.key.as_deref();
    Ok(c.one(
        "INSERT INTO events (at, batch_id, run_id, key, item_id, kind, actor, message, fields)
         VALUES ($1, $2, $3, $4::text,
                 (SELECT item_id FROM item_keys WHERE batch_id = $2 AND key = $4::text),
                 $5, $6, $7, $8)
         RETURNING id",
        &[
            &at, &batch, &e.run_id, &key, &e.kind, &e.actor, &message, &fields,
        ],
    )?
    .get(0))
}

/// Events as the arrays a statement `unnest`s: the time (the server's),
/// batch name, run, key, kind, actor, message and fields of each.
pub(crate) struct EventColumns<'a> {
    pub ats: Vec<i64>,
    pub batches: Vec<Option<&'a str>>,
    pub runs: Vec<Option<i64>>,
    pub keys: Vec<Option<&'a str>>,
    pub kinds: Vec<&'a str>,
    pub actors: Vec<Option<&'a str>>,
    pub messages: Vec<String>,
    pub fields: Vec<Option<String>>,
}

impl<'a> EventColumns<'a> {
    pub(crate) fn of(c: &Conn, events: &[&'a NewEvent]) -> EventColumns<'a> {
        EventColumns {
            ats: events.iter().map(|e| c.tin(e.at)).collect(),
            batches: events.iter().map(|e| e.batch.as_deref()).collect(),
            runs: events.iter().map(|e| e.run_id).collect(),
            keys: events.iter().map(|e| e.key.as_deref()).collect(),
            kinds: events.iter().map(|e| e.kind.as_str()).collect(),
            actors: events.iter().map(|e| e.actor.as_deref()).collect(),
            messages: events
                .iter()
                .map(|e| text(&e.message).into_owned())
                .collect(),
            fields: events
                .iter()
                .map(|e| e.fields_text().map(|f| text(&f).into_owned()))
                .collect(),
        }
    }
}

pub(crate) const COLUMNS: &str =
    "e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, e.message, e.fields, i.label";

/// The events with their batch's name and their item's label.
const FROM: &str = "events e LEFT JOIN batches b ON b.id = e.batch_id
                    LEFT JOIN items i ON i.id = e.item_id";

pub(crate) fn event_from_row(c: &Conn, r: &Row) -> Event {
    Event {
        id: r.get(0),
        at: c.tout(r.get(1)),
        batch: r.get(2),
        run_id: r.get(3),
        key: r.get(4),
        kind: r.get(5),
        actor: r.get(6),
        message: r.get(7),
        fields: json_col(r.get(8)).unwrap_or(serde_json::Value::Null),
        label: r.get(9),
    }
}

/// Numbered placeholders for dynamic SQL.
pub(crate) struct Args {
    pub(crate) values: Vec<Box<dyn postgres::types::ToSql + Sync>>,
}

impl Args {
    pub(crate) fn new() -> Args {
        Args { values: Vec::new() }
    }

    /// Adds a value; returns its placeholder (`$n`).
    pub(crate) fn push(&mut self, v: impl postgres::types::ToSql + Sync + 'static) -> String {
        self.values.push(Box::new(v));
        format!("${}", self.values.len())
    }

    pub(crate) fn refs(&self) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
        self.values.iter().map(|v| v.as_ref()).collect()
    }
}

/// The oldest transaction still running (all below it have finished).
const HORIZON: &str = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::int8";
/// Which of the shown ids ($1) belong to transactions at or above a
/// horizon ($2): those a cursor must go on skipping.
const SHOWN_ABOVE: &str =
    "SELECT id FROM events WHERE id = ANY($1::int8[]) AND tx >= ($2::int8)::text::xid8";

/// The `WHERE` conditions of `filter` (its batch given as `batch`, kinds,
/// key, since).
fn conditions(c: &Conn, batch: Option<i64>, filter: &EventFilter, args: &mut Args) -> String {
    let mut cond = String::from("true");
    let mut batch_slot = None;
    if let Some(id) = batch {
        let slot = args.push(id);
        cond.push_str(&format!(" AND e.batch_id = {slot}"));
        batch_slot = Some(slot);
    }
    if !filter.kinds.is_empty() {
        let slot = args.push(filter.kinds.clone());
        cond.push_str(&format!(" AND e.kind = ANY({slot})"));
        cond.push_str(crate::store::dialect::events::rare_kinds_only(
            &filter.kinds,
        ));
    }
    if let Some(key) = &filter.key {
        let k = args.push(key.clone());
        match &batch_slot {
            Some(b) => cond.push_str(&format!(
                " AND e.item_id = (SELECT item_id FROM item_keys WHERE batch_id = {b} AND key = {k})"
            )),
            None => cond.push_str(&format!(
                " AND e.item_id IN (SELECT item_id FROM item_keys WHERE key = {k})"
            )),
        }
    }
    if let Some(since) = filter.since {
        let slot = args.push(c.tin(since));
        cond.push_str(&format!(" AND e.at >= {slot}"));
    }
    cond
}

const KINDS_SINCE: &str = "SELECT coalesce(b.name, ''), e.kind, count(*)::int8 FROM events e
   LEFT JOIN batches b ON b.id = e.batch_id
  WHERE e.at > $1 GROUP BY 1, 2 ORDER BY 1, 2";

// Twin of sqlite/events.rs, kept: following the log is each engine's own (ids there, the transaction horizon here).
impl PgStore {
    /// Starts following the log at the current horizon of finished
    /// transactions (see `follow_next`). Take it before listing what is
    /// already there, then pass the listing to `FollowCursor::shown`.
    pub fn follow_start(&self) -> Result<FollowCursor> {
        let horizon = self.read(|c| Ok(c.one(HORIZON, &[])?.get(0)))?;
        Ok(FollowCursor {
            horizon: Some(horizon),
            ..FollowCursor::default()
        })
    }

    /// The events matching `filter` written by transactions that finished
    /// since the cursor, oldest id first, moving the cursor past them.
    /// Ids alone would lose events: a transaction holding id 7 can commit
    /// after one holding id 8 was shown. So: first the new horizon (every
    /// transaction below it has finished), then the events of transactions
    /// between the old horizon and the new, which no later commit can add
    /// to. A long write transaction anywhere on the server holds the
    /// horizon back and delays (never loses) what follows it.
    pub fn follow_next(
        &self,
        filter: &EventFilter,
        cursor: &mut FollowCursor,
    ) -> Result<Vec<Event>> {
        self.read(|c| {
            let from = cursor.horizon.unwrap_or(0);
            let to: i64 = c.one(HORIZON, &[])?.get(0);
            if to <= from {
                return Ok((Vec::new(), from, Vec::new()));
            }
            let batch = match &filter.batch {
                Some(name) => Some(batch_id(c, name)?),
                None => None,
            };
            let mut args = Args::new();
            let mut cond = conditions(c, batch, filter, &mut args);
            let (f, t) = (args.push(from), args.push(to));
            let skip = args.push(cursor.shown.clone());
            cond.push_str(&format!(
                " AND e.tx >= ({f}::int8)::text::xid8 AND e.tx < ({t}::int8)::text::xid8
                   AND e.id <> ALL({skip}::int8[])"
            ));
            let sql = format!("SELECT {COLUMNS} FROM {FROM} WHERE {cond} ORDER BY e.id");
            let rows = c.q(&sql, &args.refs())?;
            // Shown ids of transactions the new horizon has not passed yet
            // (a listing's can be above it): a later call must skip them.
            let mut still_above = Vec::new();
            if !cursor.shown.is_empty() {
                let rows = c.q(SHOWN_ABOVE, &[&cursor.shown, &to])?;
                still_above = rows.iter().map(|r| r.get(0)).collect();
            }
            let events = rows.iter().map(|r| event_from_row(c, r)).collect();
            Ok((events, to, still_above))
        })
        .map(|(events, to, still_above): (Vec<Event>, i64, Vec<i64>)| {
            if Some(to) > cursor.horizon {
                cursor.horizon = Some(to);
                cursor.shown = still_above;
            }
            events
        })
    }
}

impl EventsRead for PgTx<'_> {
    fn events_page(
        &mut self,
        batch: Option<i64>,
        filter: &EventFilter,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let mut args = Args::new();
        let mut cond = conditions(self.c, batch, filter, &mut args);
        let mut order = "DESC";
        if let Some(after) = filter.after_id {
            let slot = args.push(after);
            cond.push_str(&format!(" AND e.id > {slot}"));
            order = "ASC";
        }
        let sql = format!(
            "SELECT {COLUMNS} FROM {FROM} WHERE {cond} ORDER BY e.id {order} LIMIT {limit}"
        );
        let rows = self.c.q(&sql, &args.refs())?;
        Ok(rows.iter().map(|r| event_from_row(self.c, r)).collect())
    }

    fn event_kinds_since(&mut self, since: Millis) -> Result<Vec<(String, String, i64)>> {
        let since = self.c.tin(since);
        Ok(self
            .c
            .q(KINDS_SINCE, &[&since])?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }
}

impl EventsWrite for PgTx<'_> {
    fn event_insert(&mut self, event: &NewEvent) -> Result<i64> {
        insert(self.c, event)
    }
}
