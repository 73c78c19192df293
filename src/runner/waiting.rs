//! What a batch still holds and why, read from the store: the one reading
//! behind the run summary's "still in the batch" and the dry run's "nothing
//! to run" (the decision itself is `model::waiting`).

use std::path::Path;

use crate::config::BatchConfig;
use crate::model::Millis;
use crate::model::waiting::{self, Holding, Idle, Waiting};
use crate::store::{Result, Store};

/// Who else may be working on the batch.
#[derive(Debug, Clone, Copy)]
pub enum Others {
    /// A run about to start: it steps down when live runners hold all
    /// `seats` of the lock.
    Blocking { seats: u32 },
    /// A run that ended: any live runner left is working on the rest.
    Any,
}

/// The batch's waiting items by reason, when a run took `taken` of those
/// it could run (`cfg`: the batch's config, for its pool and budgets).
pub fn read(
    store: &Store,
    db_path: &Path,
    batch: &str,
    cfg: Option<&BatchConfig>,
    others: Others,
    taken: i64,
    now: Millis,
) -> Result<Vec<Waiting>> {
    let holding = holding(store, db_path, batch, cfg, others, taken, None, now)?;
    Ok(waiting::waiting(&holding, now))
}

/// The batch as far as waiting goes, with no run in question (`status`,
/// `show`): `idle` says what would start the next run.
pub fn idle(
    store: &Store,
    db_path: &Path,
    batch: &str,
    cfg: Option<&BatchConfig>,
    idle: Idle,
    now: Millis,
) -> Result<Holding> {
    holding(store, db_path, batch, cfg, Others::Any, 0, Some(idle), now)
}

#[allow(clippy::too_many_arguments)]
fn holding(
    store: &Store,
    db_path: &Path,
    batch: &str,
    cfg: Option<&BatchConfig>,
    others: Others,
    taken: i64,
    idle: Option<Idle>,
    now: Millis,
) -> Result<Holding> {
    let locks = store.locks(batch)?;
    let judged: Vec<_> = locks.iter().map(|l| crate::store::seat(l, now)).collect();
    let live = judged.iter().filter(|s| s.is_live()).count();
    let lock_held = match others {
        Others::Blocking { seats } => live >= seats.max(1) as usize,
        Others::Any => live > 0,
    };
    let lock_stopping = lock_held && crate::model::all_stopping(&locks, &judged);
    let holding = Holding {
        counts: store.counts(batch)?,
        retry: store.retry_tier(batch, now)?,
        emergency_stop: super::paused_file(db_path).is_some(),
        paused: store.pause(batch)?.is_some(),
        lock_held,
        lock_stopping,
        hold_until: store.hold(batch)?.map(|h| h.until),
        budget_until: match cfg {
            Some(c) => super::budget::held_until(&super::budget::states(store, c, now)?),
            None => None,
        },
        rate_limit: match cfg.and_then(|c| Some((c, c.pool.as_ref()?))) {
            Some((c, p)) => {
                let view = store.pool_view(&super::pool::spec(p), now)?;
                super::pool::limited(&view, super::pool::call_estimate(c), now)
            }
            None => None,
        },
        pool: cfg.and_then(|c| Some(c.pool.as_ref()?.name.clone())),
        paced: cfg.and_then(|c| Some(c.rate_limit?.to_string())),
        pool_waits: store.pool_waiting(batch)?,
        orphaned: if lock_held {
            store.orphaned_claims(batch, &crate::store::live_runs(&locks, &judged))?
        } else {
            0
        },
        retry_waits: store.retry_waiting(batch, now)?,
        taken,
        idle,
    };
    Ok(holding)
}
