//! `nightshift status`: counts per batch as a table, JSON, one tmux line, or
//! Prometheus metrics.

use serde_json::{Value, json};

use super::table::Table;
use super::{Ctx, Exit, out, out_json};
use crate::cli::StatusArgs;
use crate::model::{BatchInfo, Counts, LockInfo, Millis, RunState};
use crate::runner;
use crate::schedule::describe;
use crate::store::{Store, StoreError};
use crate::util::sanitize;
use crate::util::time::{now_ms, relative, rfc3339};

pub fn run(ctx: &Ctx, args: &StatusArgs) -> anyhow::Result<Exit> {
    let store = ctx.open_read()?;
    let infos = gather(ctx, &store, args.batch.as_deref())?;
    let now = now_ms();
    let emergency = runner::paused_file(&ctx.db);
    if args.json {
        let batches = infos
            .iter()
            .map(|i| Ok(batch_json(ctx, i, pruned_keys(&store, &i.name)?, now)))
            .collect::<anyhow::Result<Vec<Value>>>()?;
        out_json(&json!({
            "store": store.place(),
            "emergency_stop": emergency.as_ref().map(|f| f.display().to_string()),
            "batches": batches,
        }))?;
    } else if args.short {
        out(short_line(&infos))?;
    } else if args.prometheus {
        out(super::metrics::render(&store, &infos, now)?)?;
    } else {
        if let Some(file) = &emergency {
            out(format!(
                "EMERGENCY STOP: {} exists; nothing runs (runs and schedule fires step down) until it is removed",
                sanitize::line(&file.display().to_string())
            ))?;
        }
        print_human(ctx, &store, &infos, now)?;
    }
    Ok(Exit::Ok)
}

/// The store's batches plus configured ones that have no rows yet.
pub fn gather(ctx: &Ctx, store: &Store, only: Option<&str>) -> anyhow::Result<Vec<BatchInfo>> {
    if let Some(name) = only {
        if ctx.config.batch(name).is_some() && !store.batch_names()?.iter().any(|n| n == name) {
            return Ok(vec![empty_info(name)]);
        }
        return Ok(store.batch_infos(Some(name))?);
    }
    let mut infos = store.batch_infos(None)?;
    for name in ctx.config.batches.keys() {
        if !infos.iter().any(|i| &i.name == name) {
            infos.push(empty_info(name));
        }
    }
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(infos)
}

fn lock_json(l: &LockInfo, now: Millis) -> serde_json::Value {
    json!({
        "holder": l.holder.to_string(),
        "run_id": l.run_id,
        "expires_at": rfc3339(l.expires_at),
        "expired": l.expires_at < now,
    })
}

fn empty_info(name: &str) -> BatchInfo {
    BatchInfo {
        name: name.to_string(),
        counts: Counts::default(),
        pause: None,
        next_fire: None,
        last_fire: None,
        locks: Vec::new(),
        last_run: None,
        hold: None,
    }
}

/// The next fire times from the config's schedule, in UTC millis.
pub fn next_fires(ctx: &Ctx, batch: &str, now: Millis, n: usize) -> Vec<Millis> {
    let Some(cfg) = ctx.config.batch(batch) else {
        return Vec::new();
    };
    let Some(schedule) = &cfg.schedule else {
        return Vec::new();
    };
    let after = crate::util::time::to_datetime(now);
    schedule
        .upcoming(after, cfg.timezone, n)
        .into_iter()
        .map(|t| t.timestamp_millis())
        .collect()
}

/// Keys of pruned done items the batch keeps (none for a batch only
/// configured so far).
fn pruned_keys(store: &Store, batch: &str) -> anyhow::Result<i64> {
    match store.pruned_keys(batch) {
        Err(StoreError::UnknownBatch { .. }) => Ok(0),
        other => Ok(other?),
    }
}

fn batch_json(ctx: &Ctx, info: &BatchInfo, pruned_keys: i64, now: Millis) -> Value {
    let c = &info.counts;
    let cfg = ctx.config.batch(&info.name);
    let schedule = cfg.and_then(|b| b.schedule.as_ref());
    json!({
        "name": info.name,
        "pending": c.pending,
        "claimed": c.claimed,
        "done": c.done,
        "failed": c.failed,
        "retry": c.retry,
        "manual": c.manual,
        "empty": c.empty,
        "skipped": c.skipped,
        "total": c.total(),
        "pruned_keys": pruned_keys,
        "paused": info.pause.is_some(),
        "paused_reason": info.pause.as_ref().map(|p| p.reason.clone()),
        "paused_by": info.pause.as_ref().map(|p| p.by.clone()),
        "paused_at": info.pause.as_ref().map(|p| rfc3339(p.at)),
        "hold_until": info.held(now).map(|h| rfc3339(h.until)),
        "hold_by": info.held(now).and_then(|h| h.key.clone()),
        "hold_label": info.held(now).and_then(|h| h.label.clone()),
        "lock": info.lock().map(|l| lock_json(l, now)),
        "locks": info.locks.iter().map(|l| lock_json(l, now)).collect::<Vec<_>>(),
        "last_run": info.last_run.as_ref().map(|r| json!({
            "id": r.id,
            "state": r.state,
            "trigger": r.trigger,
            "actor": r.actor,
            "started_at": rfc3339(r.started_at),
            "ended_at": r.ended_at.map(rfc3339),
            "summary": r.summary,
            "counts": r.counts,
        })),
        "schedule": schedule.map(|s| s.expr.clone()),
        "timezone": cfg.filter(|_| schedule.is_some()).map(|b| b.timezone.name().to_string()),
        "next_fires": schedule.map(|_| next_fires(ctx, &info.name, now, 3).into_iter().map(rfc3339).collect::<Vec<_>>()),
        "last_fire": info.last_fire.as_ref().map(|f| json!({
            "at": rfc3339(f.at),
            "outcome": f.outcome,
            "reason": f.reason,
            "run_id": f.run_id,
        })),
    })
}

/// The schedule, the next three fire times and the last fire's outcome in
/// plain words, times on the batch's wall clock.
fn schedule_lines(ctx: &Ctx, info: &BatchInfo, now: Millis) -> Vec<String> {
    let mut lines = Vec::new();
    let cfg = ctx.config.batch(&info.name);
    let local = |ms: Millis| match cfg {
        Some(c) => super::schedule::local(&crate::util::time::to_datetime(ms), c),
        None => rfc3339(ms),
    };
    if let Some((cfg, schedule)) = cfg.and_then(|c| c.schedule.as_ref().map(|s| (c, s))) {
        lines.push(format!(
            "schedule `{}` in {}; next fires:",
            schedule.expr,
            cfg.timezone.name()
        ));
        for at in next_fires(ctx, &info.name, now, 3) {
            lines.push(format!("  {} ({})", local(at), relative(at, now)));
        }
    }
    if let Some(f) = &info.last_fire {
        let run = f.run_id.map(|r| format!(" (run {r})")).unwrap_or_default();
        lines.push(format!(
            "last fire {} ({}): {}{run}",
            local(f.at),
            relative(f.at, now),
            describe(&f.outcome, f.reason.as_deref())
        ));
    }
    lines
}

/// `articles 812✓ 3✗ 185…` per batch, for a tmux status bar: done, failed
/// (both tiers) and not yet run (pending or in flight), which add up to the
/// batch's items.
pub fn short_line(infos: &[BatchInfo]) -> String {
    let now = now_ms();
    let parts: Vec<String> = infos
        .iter()
        .map(|i| {
            let c = &i.counts;
            let mut s = format!("{} {}✓", sanitize::line(&i.name), c.done);
            if c.failed > 0 {
                s.push_str(&format!(" {}✗", c.failed));
            }
            let waiting = c.pending + c.claimed;
            if waiting > 0 {
                s.push_str(&format!(" {waiting}…"));
            }
            if i.running(now) {
                s.push_str(" ▶");
            }
            if i.pause.is_some() {
                s.push_str(" ⏸");
            }
            if i.held(now).is_some() {
                s.push_str(" held");
            }
            s
        })
        .collect();
    if parts.is_empty() {
        "nightshift: no batches".to_string()
    } else {
        parts.join("  ")
    }
}

fn percent(c: &Counts) -> String {
    if c.total() == 0 {
        "-".into()
    } else {
        format!("{}%", c.done * 100 / c.total())
    }
}

fn print_human(ctx: &Ctx, store: &Store, infos: &[BatchInfo], now: Millis) -> anyhow::Result<()> {
    if infos.is_empty() {
        out(format!(
            "no batches in {} yet: add items with `nightshift add BATCH FILE`",
            sanitize::line(&ctx.db.display().to_string())
        ))?;
        return Ok(());
    }
    let mut table = Table::new(&[
        "BATCH", "PENDING", "CLAIMED", "DONE", "EMPTY", "SKIPPED", "RETRY", "MANUAL", "PROGRESS",
    ]);
    for i in infos {
        let c = &i.counts;
        table.row(vec![
            i.name.clone(),
            c.pending.to_string(),
            c.claimed.to_string(),
            c.done.to_string(),
            c.empty.to_string(),
            c.skipped.to_string(),
            c.retry.to_string(),
            c.manual.to_string(),
            percent(c),
        ]);
    }
    out(table.render())?;
    for i in infos {
        let mut lines = Vec::new();
        if let Some(p) = &i.pause {
            lines.push(format!(
                "PAUSED — {} ({}, {})",
                p.reason,
                p.by,
                relative(p.at, now)
            ));
        }
        if let Some(h) = i.held(now) {
            lines.push(format!(
                "{}; {} left, no call starts before it ends; `nightshift unpause {}` lifts it",
                h.describe(now),
                crate::util::time::compact(((h.until - now) / 1000) as u64),
                i.name
            ));
        }
        for l in &i.locks {
            let left = if l.expires_at >= now {
                format!(
                    "{} left",
                    crate::util::time::compact(((l.expires_at - now) / 1000) as u64)
                )
            } else {
                "expired".into()
            };
            lines.push(format!("running: lock held by {} ({left})", l.holder));
        }
        if let Some(r) = &i.last_run {
            let summary = r.summary.clone().unwrap_or_else(|| match r.state {
                RunState::Running => "in progress".into(),
                other => other.to_string(),
            });
            // `schedule, ops@box, 5m ago`: how, by whom, when.
            let mut how = vec![r.trigger.to_string()];
            how.extend(r.actor.clone());
            how.push(relative(r.started_at, now));
            lines.push(format!(
                "last run #{} {} ({}): {summary}",
                r.id,
                r.state,
                how.join(", ")
            ));
        }
        lines.extend(schedule_lines(ctx, i, now));
        let pruned = pruned_keys(store, &i.name)?;
        if pruned > 0 {
            lines.push(format!(
                "pruned: the keys of {pruned} done items are kept, so adding them again does not run them"
            ));
        }
        if !lines.is_empty() {
            out(format!("\n{}:", sanitize::line(&i.name)))?;
            for l in lines {
                out(format!("  {}", sanitize::line(&l)))?;
            }
        }
    }
    Ok(())
}
