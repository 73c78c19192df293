//! What `status` (text, `--json`, `--short`, `--prometheus`) says beside
//! the counts, read once per call: the emergency stop, the scheduler
//! daemons, and each batch's schedule as it is (`schedule::seen`). The
//! runners' liveness comes with each batch (`BatchInfo::runners`).

use std::path::PathBuf;

use super::Ctx;
use crate::model::waiting::{Holding, Idle};
use crate::model::{BatchInfo, DaemonInfo, Millis};
use crate::schedule::ScheduleSeen;
use crate::schedule::seen::{Configured, seen};
use crate::store::Store;
use crate::util::{sanitize, text};

/// The store-wide facts of one `status` call.
pub struct Scene {
    pub now: Millis,
    /// The `PAUSED` file beside the store, if it is there.
    pub emergency: Option<PathBuf>,
    pub daemons: Vec<DaemonInfo>,
    /// Each configured batch's budgets as they stand (its own, its pool's).
    pub budgets: std::collections::BTreeMap<String, Vec<crate::runner::budget::BudgetState>>,
    /// Each configured pool a retry-after holds: until when.
    pub pool_holds: std::collections::BTreeMap<String, Millis>,
}

impl Scene {
    pub fn read(ctx: &Ctx, store: &Store, now: Millis) -> anyhow::Result<Scene> {
        let mut budgets = std::collections::BTreeMap::new();
        for (name, cfg) in &ctx.config.batches {
            let states = crate::runner::budget::states(store, cfg, now)?;
            if !states.is_empty() {
                budgets.insert(name.clone(), states);
            }
        }
        let mut pool_holds = std::collections::BTreeMap::new();
        for name in ctx.config.limits.keys() {
            if let Some(h) = store.pool_hold(name, now)? {
                pool_holds.insert(name.clone(), h.until);
            }
        }
        Ok(Scene {
            now,
            emergency: crate::runner::paused_file(&ctx.db),
            daemons: store.daemons(now)?,
            budgets,
            pool_holds,
        })
    }

    /// The batch's schedule as it is, if the config or a live daemon
    /// gives it one.
    pub fn schedule(&self, ctx: &Ctx, info: &BatchInfo) -> Option<ScheduleSeen<'_>> {
        let config = ctx.config.batch(&info.name).and_then(Configured::of);
        seen(info, config, &self.daemons, self.now)
    }

    /// What would start the batch's next run: a live daemon firing its
    /// schedule, or nothing (a schedule no daemon fires starts nothing).
    pub fn idle(&self, ctx: &Ctx, info: &BatchInfo) -> Idle {
        Idle::from_fire(self.schedule(ctx, info).and_then(|s| s.live_fire()))
    }

    /// The batch as far as its waiting items go (`None`: only configured,
    /// no items yet).
    pub fn holding(
        &self,
        ctx: &Ctx,
        store: &Store,
        info: &BatchInfo,
    ) -> anyhow::Result<Option<Holding>> {
        let idle = self.idle(ctx, info);
        let cfg = ctx.config.batch(&info.name);
        match crate::runner::waiting::idle(store, &ctx.db, &info.name, cfg, idle, self.now) {
            Err(crate::store::StoreError::UnknownBatch { .. }) => Ok(None),
            other => Ok(Some(other?)),
        }
    }

    /// Until when a reached budget holds the batch, if one does.
    pub fn budget_held(&self, batch: &str) -> Option<Millis> {
        crate::runner::budget::held_until(self.budgets.get(batch).into_iter().flatten())
    }

    /// Until when a retry-after holds the batch's pool, if one does (every
    /// batch of the pool waits for it).
    pub fn pool_held(&self, ctx: &Ctx, batch: &str) -> Option<Millis> {
        let pool = ctx.config.batch(batch)?.limit.as_deref()?;
        self.pool_holds.get(pool).copied()
    }

    /// Paused by its flag, or by the emergency stop.
    pub fn paused(&self, info: &BatchInfo) -> bool {
        info.pause.is_some() || self.emergency.is_some()
    }

    /// Why a live daemon's fire of the batch runs nothing, if it does not:
    /// the daemon records it skipped (`schedule::daemon`'s pause check).
    pub fn fire_skipped(&self, info: &BatchInfo) -> Option<String> {
        if self.emergency.is_some() {
            return Some("the emergency stop file exists, so every fire is skipped".into());
        }
        info.pause
            .as_ref()
            .map(|_| "the batch is paused, so its fires are skipped".into())
    }
}

/// The most cells of a batch's name a line of text shows (`status
/// --short`, `log`): a longer one is cut with `…`.
pub(super) const NAME_CELLS: usize = 32;

/// `articles 812✓ 3✗ 185… ▶` per batch, for a tmux status bar: finished,
/// failed and to do ([`Counts`](crate::model::Counts)), which add up to the
/// batch's items; then what the batch is doing (see the README's legend).
/// The emergency stop comes first.
pub fn short_line(ctx: &Ctx, infos: &[BatchInfo], scene: &Scene) -> String {
    let parts: Vec<String> = infos
        .iter()
        .map(|i| {
            let c = &i.counts;
            // A tmux status line: a long name is cut, with `…`, so the
            // marks after it stay in view.
            let name = sanitize::line(&i.name);
            let mut s = format!("{} {}✓", text::cut(&name, NAME_CELLS), c.finished());
            if c.failed() > 0 {
                s.push_str(&format!(" {}✗", c.failed()));
            }
            if c.to_do() > 0 {
                s.push_str(&format!(" {}…", c.to_do()));
            }
            if i.running() {
                s.push_str(" ▶");
                if i.stop_asked_by().is_some() {
                    s.push_str(" stopping");
                }
            }
            if let Some(dead) = i.dead_runner() {
                s.push_str(&format!(" {dead}"));
            }
            if let Some(limit) = i.stopped_at_limit() {
                s.push_str(&format!(" {limit}"));
            }
            if scene.paused(i) {
                s.push_str(" ⏸");
            }
            if i.held(scene.now).is_some() || scene.pool_held(ctx, &i.name).is_some() {
                s.push_str(" held");
            }
            if scene.budget_held(&i.name).is_some() {
                s.push_str(" budget");
            }
            if let Some(sched) = scene.schedule(ctx, i).filter(|s| !s.live) {
                s.push_str(match sched.daemon {
                    Some(d) if d.live() => " daemon stopping",
                    _ => " no daemon",
                });
                match sched.overdue {
                    Some(o) if o.more => s.push_str(&format!(" {}+ missed", o.count)),
                    Some(o) => s.push_str(&format!(" {} missed", o.count)),
                    None => {}
                }
                if let Some(l) = sched.late {
                    s.push_str(&format!(" {} late", l.count));
                }
            }
            s
        })
        .collect();
    let line = if parts.is_empty() {
        "nightshift: no batches".to_string()
    } else {
        parts.join("  ")
    };
    if scene.emergency.is_some() {
        format!("⛔ EMERGENCY STOP  {line}")
    } else {
        line
    }
}
