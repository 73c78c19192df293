//! Reads for the views: everything one dashboard poll shows, in one read
//! snapshot, and the "since you last looked" summary.

use std::collections::BTreeMap;

use super::batches::info;
use super::liveness;
use crate::model::{BatchInfo, EventKind, Millis, RunState, Status};
use crate::store::api::{
    BatchView, COUNT_CAP, DashQuery, Dashboard, ItemDetail, ItemPage, ItemRow, ItemsQuery,
    SinceSummary, counted,
};
use crate::store::dialect::{Read, RowsPage};
use crate::store::{Result, Store};

/// Events of one item shown in its detail.
const DETAIL_EVENTS: usize = 200;
/// Attempts whose stderr the item detail reads (16 KiB each at most).
const DETAIL_ATTEMPTS: i64 = 5;
/// Keys checked by one statement of `failed_among`.
const KEYS_CHUNK: usize = 10_000;

impl Store {
    /// Everything one dashboard poll shows, in one read snapshot.
    pub fn dashboard(&self, q: &DashQuery, now: Millis) -> Result<Dashboard> {
        self.read_tx(|tx| {
            let mut out = Dashboard::default();
            let mut selected = None;
            for name in tx.batch_names()? {
                let b = tx.batch_id(&name)?;
                let view = BatchView {
                    minutes: tx.minute_counts(b, now, q.minutes)?,
                    created_at: tx.batch_created_at(b)?,
                    info: info(tx, b, name, now)?,
                };
                if q.batch.as_deref() == Some(view.info.name.as_str()) {
                    selected = Some((b, out.batches.len()));
                }
                out.batches.push(view);
            }
            // A configured batch with no rows yet has nothing more to read.
            if let Some((b, idx)) = selected {
                let info = &out.batches[idx].info;
                out.runs = tx.runs_recent(b, q.runs)?;
                out.retry = Some((info.name.clone(), super::items::retry_tier(tx, b, now)?));
                out.pool_waiting = tx.pool_waiting(b)?;
                out.retry_waiting = tx.retry_waiting(b, now)?;
                if q.dlq {
                    out.dlq = super::dead_letters::groups(tx, b, now)?;
                }
                if let Some(iq) = &q.items {
                    out.items = Some(match tx.search_page(b, iq)? {
                        Some(page) => page,
                        None => item_page(tx, b, info, iq, true)?,
                    });
                }
                if let Some(iq) = &q.class_items {
                    out.class_items = Some(item_page(tx, b, info, iq, false)?);
                }
                if let Some(key) = &q.detail {
                    out.detail = Some(detail(tx, b, key)?);
                }
            } else if let (Some(_), Some(iq)) = (&q.batch, &q.items) {
                // Its items, read: none, where no page said "loading…"
                // for as long as the dashboard stayed open.
                out.items = Some(ItemPage {
                    offset: iq.offset,
                    rows: Vec::new(),
                    total: 0,
                    capped: false,
                    searching: None,
                });
            }
            // Budget windows are keyed by name, not by a batch's rows: the
            // pools' (the Pools pane) are read whichever batch is selected.
            for k in &q.spend {
                out.spent.push((k.clone(), tx.spend_of(k)?));
            }
            if let Some(eq) = &q.events {
                // The events of a batch not made yet: none.
                let batch = match &eq.batch {
                    None => Some(None),
                    Some(name) => tx.batch_seen(name)?.map(Some),
                };
                if let Some(batch) = batch {
                    out.events = tx.events_rows(batch, eq)?;
                }
            }
            out.daemons = liveness::daemon_infos(tx.daemons_all()?, now);
            for spec in &q.pools {
                out.pools.push(super::pools::view(tx, spec, now)?);
            }
            Ok(out)
        })
    }

    /// Keys of the failed items a dashboard filter (or error class) shows:
    /// what "requeue all" would move.
    pub fn failed_keys(&self, batch: &str, q: &ItemsQuery) -> Result<Vec<String>> {
        self.read_tx(|tx| {
            // A batch the store has not seen (the config names it): none.
            let Some(b) = tx.batch_seen(batch)? else {
                return Ok(Vec::new());
            };
            let mut filter = q.filter();
            filter.status = Some(Status::Failed);
            tx.items_keys(b, &filter)
        })
    }

    /// Which of these keys are failed now (a requeue confirmed a moment
    /// ago moves only those).
    pub fn failed_among(&self, batch: &str, keys: &[String]) -> Result<Vec<String>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            let mut out = Vec::with_capacity(keys.len());
            for chunk in keys.chunks(KEYS_CHUNK) {
                out.extend(tx.failed_among(b, chunk)?);
            }
            Ok(out)
        })
    }

    /// The items whose label is exactly `label`, oldest first, at most
    /// `limit` (`show BATCH LABEL`). Labels are not indexed: this reads the
    /// batch's items once.
    pub fn labelled(&self, batch: &str, label: &str, limit: usize) -> Result<Vec<ItemRow>> {
        self.read_tx(|tx| {
            let b = tx.batch_id(batch)?;
            tx.items_labelled(b, label, limit)
        })
    }

    /// What happened since `since`: new dead letters by class and tier,
    /// runs by state (every run that overlaps the time since: one that
    /// began before and ended after, or still runs, too), lock takeovers,
    /// schedule fires by outcome. A run stored as running is counted as it
    /// is at `now` (crashed, silent), as the Batches pane says.
    pub fn since(&self, since: Millis, now: Millis) -> Result<SinceSummary> {
        self.read_tx(|tx| {
            let mut out = SinceSummary {
                since,
                ..SinceSummary::default()
            };
            for name in tx.batch_names()? {
                let b = tx.batch_id(&name)?;
                for (class, tier, n) in tx.dead_letter_counts_since(b, since)? {
                    out.failures.push((name.clone(), class, tier, n));
                }
            }
            let stored = tx.run_states_since(since)?;
            out.runs = runs_as_seen(tx, stored, now)?;
            out.takeovers = tx.event_counts_since(EventKind::LockTakeover.as_str(), since)?;
            // Fire outcomes are read from the fields here: a malformed
            // fields text must not fail the whole read.
            let mut fires: BTreeMap<(String, String), i64> = BTreeMap::new();
            for (batch, fields) in tx.event_fields_since(EventKind::Fire.as_str(), since)? {
                let outcome = fields
                    .and_then(|f| serde_json::from_str::<serde_json::Value>(&f).ok())
                    .and_then(|v| v.get("outcome").and_then(|o| o.as_str()).map(String::from))
                    .unwrap_or_else(|| "?".into());
                *fires.entry((batch, outcome)).or_default() += 1;
            }
            out.fires = fires.into_iter().map(|((b, o), n)| (b, o, n)).collect();
            Ok(out)
        })
    }
}

/// (batch, state, runs) with each run stored as running judged at `now`
/// by the one liveness rule: one whose process is gone is `crashed`, one
/// whose holder went silent is `silent`.
fn runs_as_seen(
    tx: &mut dyn Read,
    stored: Vec<(String, String, i64)>,
    now: Millis,
) -> Result<Vec<(String, String, i64)>> {
    let running = RunState::Running.as_str();
    let mut seen: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (batch, state, n) in stored {
        if state != running {
            *seen.entry((batch, state)).or_default() += n;
            continue;
        }
        let b = tx.batch_id(&batch)?;
        let locks = tx.seats(b, &batch)?;
        let seats: Vec<_> = locks.iter().map(|l| liveness::seat(l, now)).collect();
        for run in tx.runs_open(b)? {
            let state = liveness::running_seen(run.id, &run.holder, &locks, &seats);
            *seen
                .entry((batch.clone(), state.as_str().to_string()))
                .or_default() += 1;
        }
    }
    Ok(seen.into_iter().map(|((b, s), n)| (b, s, n)).collect())
}

/// Items matching a page's filter; cheap (from the counters) unless it
/// searches.
fn count_items(
    tx: &mut dyn Read,
    b: i64,
    info: &BatchInfo,
    q: &ItemsQuery,
    keys_only: bool,
) -> Result<(i64, bool)> {
    if q.search.is_empty() {
        if let (None, Some(n)) = (&q.class, counted(&info.counts, q)) {
            return Ok((n, false));
        }
        if let Some(class) = &q.class {
            return Ok((tx.class_count(b, class)?, false));
        }
    }
    let n = tx.items_count_capped(b, q, keys_only, COUNT_CAP)?;
    Ok((n, n > COUNT_CAP))
}

/// A page of items, with how many match.
fn item_page(
    tx: &mut dyn Read,
    b: i64,
    info: &BatchInfo,
    q: &ItemsQuery,
    keys_only: bool,
) -> Result<ItemPage> {
    let searching = !q.search.is_empty();
    // A search scans the table anyway: count only when the page is full.
    let (mut total, mut capped) = if searching {
        (0, false)
    } else {
        count_items(tx, b, info, q, keys_only)?
    };
    // Dense: no filter, a common status, a search. A rare status or
    // class is cheaper through an index.
    let dense = searching || total * 50 >= info.counts.total();
    // Past the middle, read from the end backwards (`G` on a million items).
    let backwards = !searching && q.offset as i64 > total / 2;
    let offset = if backwards {
        let end = (q.offset + q.limit).min(total as usize);
        total as usize - end
    } else {
        q.offset
    };
    let page = RowsPage {
        limit: q.limit,
        offset,
        backwards,
        dense,
    };
    let mut rows = tx.item_rows(b, q, keys_only, page)?;
    if searching {
        (total, capped) = if q.offset == 0 && rows.len() < q.limit {
            (rows.len() as i64, false)
        } else {
            count_items(tx, b, info, q, keys_only)?
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

/// One item, its failures and its newest events. A row this build cannot
/// read (e.g. invalid UTF-8) spoils the detail, not the whole poll.
fn detail(tx: &mut dyn Read, b: i64, key: &str) -> Result<Result<ItemDetail, String>> {
    let item = match tx.item_by_key(b, key) {
        Ok(Some(item)) => item,
        Ok(None) => return Ok(Err(format!("no item {key:?} (pruned?)"))),
        Err(e) => return Ok(Err(format!("cannot read item {key:?}: {e}"))),
    };
    let failures = match super::dead_letters::failed_attempts(tx, item.id) {
        Ok(f) => f,
        Err(e) => return Ok(Err(format!("cannot read the failures of {key:?}: {e}"))),
    };
    let attempt_logs = tx.attempt_logs(item.id, DETAIL_ATTEMPTS)?;
    let events = tx.events_of_item(item.id, DETAIL_EVENTS)?;
    Ok(Ok(ItemDetail {
        item,
        failures,
        events,
        attempt_logs,
    }))
}
