//! `run --dry-run`: what a cycle would do, from a read-only store. Writes
//! nothing at all (not even the WAL's shared memory).

use std::path::Path;

use serde::Serialize;

use super::RunOptions;
use crate::model::waiting::{RateLimited, Waiting};
use crate::model::{Counts, Hold, Item, Status};
use crate::store::{Access, Claimable, ItemFilter, Store, StoreError};
use crate::util::time::{now_ms, rfc3339};

#[derive(Debug, Serialize)]
pub struct DryRunItem {
    pub key: String,
    pub label: String,
    /// The attempt number this run would start.
    pub attempt: u32,
    /// Why it would run: pending, redrive (due retry-tier failure),
    /// reclaim (claim left by a dead run), or key (named with --key).
    pub why: &'static str,
}

#[derive(Debug, Serialize)]
pub struct DryRun {
    pub batch: String,
    pub paused: Option<String>,
    pub lock_held_by: Option<String>,
    /// A retry-after hold still on: a run would start no call before it
    /// ends (RFC 3339), nor would any other.
    pub hold_until: Option<String>,
    /// The key whose answer asked for it, and its label.
    pub hold_by: Option<String>,
    pub hold_label: Option<String>,
    /// The hold in words (`held until ... by a retry-after from ...`).
    #[serde(skip)]
    pub hold: Option<Hold>,
    pub worker: Vec<String>,
    /// `process` (one worker process per item) or `persistent`.
    pub mode: &'static str,
    pub source: Option<Vec<String>>,
    pub items: Vec<DryRunItem>,
    /// With `--key`, the item's state when a run would not run it.
    pub key_state: Option<String>,
    pub counts: Counts,
    /// What the batch holds that this run would not run, and why.
    #[serde(serialize_with = "waiting_json")]
    pub waiting: Vec<Waiting>,
    /// What the items listed would cost, against the budgets left.
    pub estimate: Option<super::estimate::Estimate>,
    /// The batch's limit pool with no room now (held, every place in
    /// flight taken, a rate drawn to its limit): a run would wait for it
    /// before its first call (`{"pool", "dimension", "until"}`).
    #[serde(serialize_with = "pool_wait_json")]
    pub pool_wait: Option<RateLimited>,
}

fn pool_wait_json<S: serde::Serializer>(w: &Option<RateLimited>, s: S) -> Result<S::Ok, S::Error> {
    w.as_ref()
        .map(|w| {
            serde_json::json!({
                "pool": w.pool,
                "dimension": w.dimension,
                "until": w.next_slot.map(rfc3339),
            })
        })
        .serialize(s)
}

fn waiting_json<S: serde::Serializer>(w: &[Waiting], s: S) -> Result<S::Ok, S::Error> {
    crate::model::waiting::to_json(w).serialize(s)
}

fn entry(item: &Item, why: &'static str) -> DryRunItem {
    DryRunItem {
        key: item.key.clone(),
        label: item.label.clone(),
        attempt: item.attempts + 1,
        why,
    }
}

/// Why a run would claim `item`, one of the claimable ones.
fn why(item: &Item) -> &'static str {
    match item.status {
        Status::Claimed => "reclaim",
        Status::Failed => "redrive",
        _ => "pending",
    }
}

pub fn dry_run(db_path: &Path, opts: &RunOptions) -> anyhow::Result<DryRun> {
    let store = Store::open(db_path, Access::ReadOnly)?;
    let now = now_ms();
    let batch = &opts.batch;
    let known = store.batch_names()?.contains(batch);
    let mut out = DryRun {
        batch: batch.clone(),
        paused: None,
        lock_held_by: None,
        hold_until: None,
        hold_by: None,
        hold_label: None,
        hold: None,
        worker: opts.worker.clone(),
        mode: opts.config.mode.as_str(),
        source: opts.config.source.clone(),
        items: Vec::new(),
        key_state: None,
        counts: Counts::default(),
        waiting: Vec::new(),
        estimate: None,
        pool_wait: None,
    };
    if !known {
        // A batch with no items yet has not this one, unless its source
        // may add it: as the run says.
        if let Some(key) = opts.key.as_ref().filter(|_| opts.config.source.is_none()) {
            return Err(StoreError::UnknownKey {
                batch: batch.clone(),
                key: key.clone(),
            }
            .into());
        }
        return Ok(out);
    }
    out.counts = store.counts(batch)?;
    out.paused = store.pause(batch)?.map(|p| p.reason).or_else(|| {
        super::paused_file(db_path).map(|f| format!("emergency stop file {} exists", f.display()))
    });
    if let Some(p) = &opts.config.pool {
        let view = store.pool_view(&super::pool::spec(p), now)?;
        let call = super::pool::call_estimate(&opts.config);
        out.pool_wait = super::pool::limited(&view, call, now);
    }
    if let Some(h) = store.hold(batch)?.filter(|h| h.active(now)) {
        out.hold_until = Some(rfc3339(h.until));
        out.hold_by.clone_from(&h.key);
        out.hold_label.clone_from(&h.label);
        out.hold = Some(h);
    }
    let live: Vec<_> = store
        .locks(batch)?
        .into_iter()
        .filter(|l| crate::store::seat(l, now).is_live())
        .collect();
    if live.len() >= opts.config.runners as usize {
        out.lock_held_by = live.first().map(|l| l.holder.to_string());
    }
    if let Some(key) = &opts.key {
        let item = store.item(batch, key)?;
        if item.status != Status::Done && item.status != Status::Claimed {
            out.items.push(entry(&item, "key"));
        } else {
            out.key_state = Some(crate::model::state_word(
                item.status,
                item.tier,
                item.outcome,
            ));
        }
        return Ok(out);
    }
    let limit = opts.limit.unwrap_or(usize::MAX);
    // One read in the claims' order: a redriven item, and a claim taken
    // back, are claimed at their priority's place, not first. A run that
    // gets the lock takes back every claim (claims need the lock, so they
    // were left by a dead or cut-off run).
    let claimable = store.items(
        batch,
        &ItemFilter {
            claimable: Some(Claimable {
                at: now,
                reclaim: out.lock_held_by.is_none(),
            }),
            limit: Some(limit.min(1_000_000)),
            ..ItemFilter::default()
        },
    )?;
    out.items = claimable.iter().map(|i| entry(i, why(i))).collect();
    // A paused batch, or one whose lock is held, runs nothing now.
    let taken = if out.paused.is_some() || out.lock_held_by.is_some() {
        0
    } else {
        out.items.len() as i64
    };
    let others = super::waiting::Others::Blocking {
        seats: opts.config.runners,
    };
    out.estimate = Some(super::estimate::read(
        &store,
        &opts.config,
        out.items.len() as i64,
        now,
    )?);
    out.waiting = super::waiting::read(
        &store,
        db_path,
        batch,
        Some(&opts.config),
        others,
        taken,
        now,
    )?;
    Ok(out)
}
