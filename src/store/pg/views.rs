//! Reads for the dashboard (see `store::views`): everything one poll shows,
//! in one read-only snapshot.

use postgres::Row;

use super::PgStore;
use super::batches::{batch_id, names};
use super::conn::{Conn, parse_col_text};
use super::events::Args;
use super::items::{ITEM_COLUMNS, filter_sql, item_from_row};
use crate::model::{BatchInfo, Event, Millis, Status, Tier};
use crate::store::Result;
use crate::store::api::{
    BatchView, COUNT_CAP, DashQuery, Dashboard, EventsQuery, ItemDetail, ItemFilter, ItemPage,
    ItemRow, ItemsQuery, SinceSummary,
};

/// Characters of an error message or event message kept for a list row.
const ROW_TEXT: i64 = 512;
/// Events of one item shown in its detail.
const DETAIL_EVENTS: i64 = 200;
/// Attempts whose stderr the item detail reads (16 KiB each at most).
const DETAIL_ATTEMPTS: i64 = 5;

fn filter_of(q: &ItemsQuery) -> ItemFilter {
    ItemFilter {
        status: if q.class.is_some() {
            Some(Status::Failed)
        } else {
            q.status
        },
        outcome: q.outcome,
        error_class: q.class.clone(),
        search: (!q.search.is_empty()).then(|| q.search.clone()),
        ..ItemFilter::default()
    }
}

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

fn event_row(c: &Conn, r: &Row) -> Event {
    Event {
        id: r.get(0),
        at: c.tout(r.get(1)),
        batch: r.get(2),
        run_id: r.get(3),
        key: r.get(4),
        kind: r.get(5),
        actor: r.get(6),
        message: r.get(7),
        fields: serde_json::Value::Null,
        label: r.get(8),
    }
}

/// The conditions of a page's filter on `i`, with their values added to
/// `args`. The items pane searches keys and labels only (as the SQLite
/// store's scan does); the class view also searches error messages.
fn page_sql(q: &ItemsQuery, keys_only: bool, args: &mut Args) -> String {
    let mut filter = filter_of(q);
    if !keys_only {
        return filter_sql(&filter, args);
    }
    filter.search = None;
    let mut cond = filter_sql(&filter, args);
    if !q.search.is_empty() {
        let n = args.push(q.search.clone());
        cond.push_str(&format!(
            " AND (strpos(i.key, {n}) > 0 OR strpos(i.label, {n}) > 0)"
        ));
    }
    cond
}

/// Items matching a filter; from the counters unless it searches.
fn count_items(
    c: &mut Conn,
    id: i64,
    info: &BatchInfo,
    q: &ItemsQuery,
    keys_only: bool,
) -> Result<(i64, bool)> {
    let counts = &info.counts;
    if q.search.is_empty() {
        if let (None, Some(n)) = (&q.class, crate::store::api::counted(counts, q)) {
            return Ok((n, false));
        }
        if let Some(class) = &q.class {
            let n: i64 = c
                .one(
                    "SELECT coalesce(sum(n), 0)::int8 FROM failed_classes
                      WHERE batch_id = $1 AND error_class = $2",
                    &[&id, class],
                )?
                .get(0);
            return Ok((n, false));
        }
    }
    let mut args = Args::new();
    args.push(id);
    let cond = page_sql(q, keys_only, &mut args);
    let n: i64 = c
        .one(
            &format!(
                "SELECT count(*)::int8 FROM (SELECT 1 FROM items i WHERE i.batch_id = $1{cond}
                  LIMIT {}) x",
                COUNT_CAP + 1
            ),
            &args.refs(),
        )?
        .get(0);
    Ok((n, n > COUNT_CAP))
}

/// A page of items. A search is one query here (no scan spread over polls,
/// as the SQLite store does), so `searching` is always None.
fn item_page(
    c: &mut Conn,
    id: i64,
    info: &BatchInfo,
    q: &ItemsQuery,
    keys_only: bool,
) -> Result<ItemPage> {
    let searching = !q.search.is_empty();
    let (mut total, mut capped) = if searching {
        (0, false)
    } else {
        count_items(c, id, info, q, keys_only)?
    };
    let mut args = Args::new();
    args.push(id);
    let cond = page_sql(q, keys_only, &mut args);
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
                left(i.error_message, {ROW_TEXT}), i.updated_at
           FROM items i WHERE i.batch_id = $1{cond} ORDER BY i.id {order}
          LIMIT {} OFFSET {offset}",
        q.limit
    );
    let mut rows: Vec<ItemRow> = c
        .q(&sql, &args.refs())?
        .iter()
        .map(|r| item_row(c, r))
        .collect::<Result<_>>()?;
    if searching {
        (total, capped) = if q.offset == 0 && rows.len() < q.limit {
            (rows.len() as i64, false)
        } else {
            count_items(c, id, info, q, keys_only)?
        };
    }
    if backwards {
        rows.reverse();
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

fn events(c: &mut Conn, q: &EventsQuery) -> Result<Vec<Event>> {
    let mut args = Args::new();
    let mut cond = String::from("true");
    if let Some(name) = &q.batch {
        match c.opt("SELECT id FROM batches WHERE name = $1", &[name])? {
            Some(r) => {
                let slot = args.push(r.get::<_, i64>(0));
                cond.push_str(&format!(" AND e.batch_id = {slot}"));
            }
            None => return Ok(Vec::new()),
        }
    }
    if !q.kinds.is_empty() {
        let slot = args.push(q.kinds.clone());
        cond.push_str(&format!(" AND e.kind = ANY({slot})"));
    }
    if let Some(up_to) = q.up_to {
        let slot = args.push(up_to);
        cond.push_str(&format!(" AND e.id <= {slot}"));
    }
    let sql = format!(
        "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, left(e.message, {ROW_TEXT}),
                i.label
           FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                LEFT JOIN items i ON i.id = e.item_id
          WHERE {cond} ORDER BY e.id DESC LIMIT {}",
        q.limit
    );
    let mut rows: Vec<Event> = c
        .q(&sql, &args.refs())?
        .iter()
        .map(|r| event_row(c, r))
        .collect();
    rows.reverse();
    Ok(rows)
}

fn detail(c: &mut Conn, id: i64, key: &str) -> Result<std::result::Result<ItemDetail, String>> {
    let row = c.opt(
        &format!(
            "SELECT {ITEM_COLUMNS} FROM items i JOIN batches b ON b.id = i.batch_id
              WHERE i.batch_id = $1 AND i.key = $2"
        ),
        &[&id, &key],
    )?;
    let item = match row.map(|r| item_from_row(c, &r)) {
        Some(Ok(item)) => item,
        None => return Ok(Err(format!("no item {key:?} (pruned?)"))),
        Some(Err(e)) => return Ok(Err(format!("cannot read item {key:?}: {e}"))),
    };
    let failures = match super::dead_letters::of_item(c, item.id) {
        Ok(f) => f,
        Err(e) => return Ok(Err(format!("cannot read the failures of {key:?}: {e}"))),
    };
    let attempt_logs = super::attempts::of_item(c, item.id, DETAIL_ATTEMPTS)?;
    let mut events: Vec<Event> = c
        .q(
            "SELECT e.id, e.at, b.name, e.run_id, e.key, e.kind, e.actor, e.message, i.label
               FROM events e LEFT JOIN batches b ON b.id = e.batch_id
                    LEFT JOIN items i ON i.id = e.item_id
              WHERE e.item_id = $1 ORDER BY e.id DESC LIMIT $2",
            &[&item.id, &DETAIL_EVENTS],
        )?
        .iter()
        .map(|r| event_row(c, r))
        .collect();
    events.reverse();
    Ok(Ok(ItemDetail {
        item,
        failures,
        attempt_logs,
        events,
    }))
}

impl PgStore {
    /// Everything one dashboard poll shows, in one read-only snapshot.
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
            if let Some((id, idx)) = selected {
                let info = out.batches[idx].info.clone();
                out.runs = super::runs::recent(c, id, q.runs)?;
                let tier = crate::store::dialect::ItemsRead::retry_tier(
                    &mut super::PgTx::new(c),
                    id,
                    now,
                )?;
                out.retry = Some((info.name.clone(), tier));
                if q.dlq {
                    out.dlq =
                        crate::store::ops::dead_letters::groups(&mut super::PgTx::new(c), id, now)?;
                }
                if let Some(iq) = &q.items {
                    out.items = Some(item_page(c, id, &info, iq, true)?);
                }
                if let Some(iq) = &q.class_items {
                    out.class_items = Some(item_page(c, id, &info, iq, false)?);
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

    /// Keys of the failed items a dashboard filter (or error class) shows.
    pub fn failed_keys(&self, batch: &str, q: &ItemsQuery) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut filter = filter_of(q);
            filter.status = Some(Status::Failed);
            let mut args = Args::new();
            args.push(id);
            let cond = filter_sql(&filter, &mut args);
            Ok(c.q(
                &format!("SELECT i.key FROM items i WHERE i.batch_id = $1{cond} ORDER BY i.id"),
                &args.refs(),
            )?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })
    }

    /// Which of these keys are failed now.
    /// The items whose label is exactly `label` (see `Store::labelled`).
    pub fn labelled(&self, batch: &str, label: &str, limit: usize) -> Result<Vec<ItemRow>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let rows = c.q(
                &format!(
                    "SELECT i.key, i.label, i.status, i.tier, i.outcome, i.attempts, i.error_class,
                            left(i.error_message, {ROW_TEXT}), i.updated_at
                       FROM items i WHERE i.batch_id = $1 AND i.label = $2
                      ORDER BY i.id LIMIT $3"
                ),
                &[&id, &label, &(limit as i64)],
            )?;
            rows.iter().map(|r| item_row(c, r)).collect()
        })
    }

    pub fn failed_among(&self, batch: &str, keys: &[String]) -> Result<Vec<String>> {
        self.read(|c| {
            let id = batch_id(c, batch)?;
            let mut out = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(10_000) {
                let chunk = chunk.to_vec();
                for r in c.q(
                    "SELECT i.key FROM items i
                      WHERE i.batch_id = $1 AND i.key = ANY($2) AND i.status = 'failed'
                      ORDER BY i.id",
                    &[&id, &chunk],
                )? {
                    out.push(r.get(0));
                }
            }
            Ok(out)
        })
    }

    /// What happened since `since` (see `Store::since`).
    pub fn since(&self, since: Millis) -> Result<SinceSummary> {
        self.read(|c| {
            let mut out = SinceSummary {
                since,
                ..SinceSummary::default()
            };
            let at = c.tin(since);
            for name in names(c)? {
                let id = batch_id(c, &name)?;
                for r in c.q(
                    "SELECT error_class, tier, count(*)::int8 FROM dead_letters
                      WHERE batch_id = $1 AND failed_at > $2 GROUP BY 1, 2 ORDER BY 3 DESC, 1",
                    &[&id, &at],
                )? {
                    let tier: Tier = parse_col_text(r.get(1))?;
                    out.failures.push((name.clone(), r.get(0), tier, r.get(2)));
                }
            }
            out.runs = c
                .q(
                    "SELECT b.name, r.state, count(*)::int8 FROM runs r
                       JOIN batches b ON b.id = r.batch_id
                      WHERE r.started_at > $1 OR r.ended_at > $1 OR r.ended_at IS NULL
                      GROUP BY 1, 2 ORDER BY 1, 2",
                    &[&at],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            out.takeovers = c
                .q(
                    "SELECT coalesce(b.name, ''), count(*)::int8 FROM events e
                       LEFT JOIN batches b ON b.id = e.batch_id
                      WHERE e.kind = 'lock-takeover' AND e.at > $1 GROUP BY 1 ORDER BY 1",
                    &[&at],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            // Fire outcomes are read from the fields in Rust: a malformed
            // fields text must not fail the whole read.
            let mut fires: std::collections::BTreeMap<(String, String), i64> = Default::default();
            for r in c.q(
                "SELECT coalesce(b.name, ''), e.fields FROM events e
                   LEFT JOIN batches b ON b.id = e.batch_id
                  WHERE e.kind = 'fire' AND e.at > $1",
                &[&at],
            )? {
                let outcome = r
                    .get::<_, Option<&str>>(1)
                    .and_then(|f| serde_json::from_str::<serde_json::Value>(f).ok())
                    .and_then(|v| v.get("outcome").and_then(|o| o.as_str()).map(String::from))
                    .unwrap_or_else(|| "?".into());
                *fires.entry((r.get(0), outcome)).or_default() += 1;
            }
            out.fires = fires.into_iter().map(|((b, o), n)| (b, o, n)).collect();
            Ok(out)
        })
    }
}
