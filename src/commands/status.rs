//! `nightshift status`: counts per batch as a table, JSON, one tmux line, or
//! Prometheus metrics.

use serde_json::{Value, json};

use super::scene::Scene;
pub use super::scene::short_line;
use super::table::Table;
use super::{Ctx, Exit, out, out_json};
use crate::cli::StatusArgs;
use crate::model::waiting;
use crate::model::{BatchInfo, Counts, DaemonInfo, LockInfo, Millis, Run, RunSeen, RunState, Seat};
use crate::schedule::seen::Configured;
use crate::schedule::{ScheduleSeen, describe, fire_seen};
use crate::store::{ItemFilter, Store, StoreError};
use crate::util::noun;
use crate::util::sanitize;
use crate::util::time::{now_ms, relative, rfc3339};

pub fn run(ctx: &Ctx, args: &StatusArgs) -> anyhow::Result<Exit> {
    let store = ctx.open_read()?;
    // Every read in one snapshot: one open of a read-only file, not one
    // per read (each parses the whole schema), and figures that agree.
    let shown = store.snapshot(|store| shown(ctx, store, args))??;
    match shown {
        Shown::Json(value) => out_json(&value)?,
        Shown::Lines(lines) => {
            for line in lines {
                out(line)?;
            }
        }
    }
    Ok(Exit::Ok)
}

/// What `status` prints: one JSON value, or lines.
enum Shown {
    Json(Value),
    Lines(Vec<String>),
}

fn shown(ctx: &Ctx, store: &Store, args: &StatusArgs) -> anyhow::Result<Shown> {
    let infos = gather(ctx, store, args.batch.as_deref())?;
    let now = now_ms();
    let scene = Scene::read(ctx, store, now)?;
    if args.json {
        let batches = infos
            .iter()
            .map(|i| {
                let (pruned, stale) = (
                    pruned_keys(store, &i.name)?,
                    stale_done(ctx, store, &i.name)?,
                );
                let waiting = waiting_of(ctx, store, &scene, i)?;
                let mut b = batch_json(ctx, &scene, i, pruned, stale);
                b["waiting"] = waiting::to_status_json(&waiting);
                if let Some(r) = &i.last_run {
                    let usage = store.run_usage(r.id)?;
                    let over = super::pools::over_estimate(&usage, ctx.config.batch(&i.name));
                    b["last_run"]["usage"] = super::pools::usage_json(&usage);
                    b["last_run"]["usage"]["over_estimate"] =
                        super::pools::over_estimate_json(over.as_ref());
                }
                b["limit"] = ctx
                    .config
                    .batch(&i.name)
                    .and_then(|b| b.limit.clone())
                    .into();
                let budgets = super::budgets::of_batch(ctx, store, &i.name, now)?;
                b["budget"] = super::budgets::batch_json(&budgets);
                Ok(b)
            })
            .collect::<anyhow::Result<Vec<Value>>>()?;
        let pools = super::pools::views(ctx, store, now)?;
        let mut pools_json = Vec::with_capacity(pools.len());
        for p in &pools {
            let call = crate::runner::pool::largest_call(&ctx.config, &p.name);
            let mut j = super::pools::pool_json(p, call, now);
            j["budget"] = super::budgets::pool_json(ctx, store, &p.name, now)?;
            pools_json.push(j);
        }
        return Ok(Shown::Json(json!({
            "store": store.place(),
            "emergency_stop": scene.emergency.as_ref().map(|f| f.display().to_string()),
            "daemons": scene.daemons.iter().map(daemon_json).collect::<Vec<_>>(),
            "batches": batches,
            "pools": pools_json,
        })));
    }
    if args.short {
        return Ok(Shown::Lines(vec![short_line(ctx, &infos, &scene)]));
    }
    if args.prometheus {
        return Ok(Shown::Lines(vec![super::metrics::render(
            ctx, store, &infos, &scene,
        )?]));
    }
    let mut lines = Vec::new();
    if let Some(file) = &scene.emergency {
        lines.push(format!(
            "EMERGENCY STOP: {} exists; nothing runs (runs and schedule fires step down) until it is removed",
            sanitize::line(&file.display().to_string())
        ));
    }
    if let Some(line) = daemon_line(ctx, &infos, &scene) {
        lines.push(sanitize::line(&line).into_owned());
    }
    human(ctx, store, &infos, &scene, &mut lines)?;
    Ok(Shown::Lines(lines))
}

/// `daemon: running on …` or `daemon: not running (last seen …)`, when a
/// batch shown has a schedule or a daemon was ever recorded.
fn daemon_line(ctx: &Ctx, infos: &[BatchInfo], scene: &Scene) -> Option<String> {
    let live: Vec<&DaemonInfo> = scene.daemons.iter().filter(|d| d.live()).collect();
    if !live.is_empty() {
        let each: Vec<String> = live
            .iter()
            .map(|d| {
                format!(
                    "{}, scheduling {}",
                    d.describe(scene.now),
                    d.daemon.batches.join(", ")
                )
            })
            .collect();
        return Some(format!("daemon: {}", each.join("; ")));
    }
    let scheduled = infos.iter().any(|i| scene.schedule(ctx, i).is_some());
    match scene.daemons.first() {
        // Newest beat first: the one last heard of.
        Some(d) => Some(format!("daemon: {}", d.describe(scene.now))),
        None if scheduled => Some(
            "daemon: not running (never started here: `nightshift daemon` fires the schedules)"
                .to_string(),
        ),
        None => None,
    }
}

fn daemon_json(d: &DaemonInfo) -> Value {
    json!({
        "host": d.daemon.holder.host,
        "pid": d.daemon.holder.pid,
        "state": d.state.as_str(),
        "live": d.live(),
        "started_at": rfc3339(d.daemon.started_at),
        "last_seen": rfc3339(d.last_seen()),
        "stopped_at": d.daemon.stopped_at.map(rfc3339),
        "stopping_at": d.daemon.stopping_at.map(rfc3339),
        "batches": d.daemon.batches,
    })
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

fn lock_json(l: &LockInfo, seat: Option<Seat>, now: Millis) -> serde_json::Value {
    let seat = seat.unwrap_or(Seat::Live);
    json!({
        "holder": l.holder.to_string(),
        "run_id": l.run_id,
        "expires_at": rfc3339(l.expires_at),
        "expired": l.expires_at < now,
        "state": match seat {
            Seat::Live => "live",
            Seat::Crashed => "crashed",
            Seat::Silent { .. } => "silent",
        },
        "held": seat.is_live(),
        "stop_asked_by": l.stop_by.as_ref().filter(|_| seat.is_live()),
        "silent_since": match seat {
            Seat::Silent { since } => Some(rfc3339(since)),
            _ => None,
        },
    })
}

fn empty_info(name: &str) -> BatchInfo {
    BatchInfo::empty(name)
}

/// What the file's schedule says, while a live daemon fires another
/// (`config` in `--json`): `null` when they agree.
pub(super) fn file_schedule_json(
    seen: &crate::schedule::ScheduleSeen<'_>,
    configured: Option<Configured<'_>>,
) -> serde_json::Value {
    if !seen.config_differs {
        return serde_json::Value::Null;
    }
    json!({
        "schedule": configured.map(|c| c.schedule.expr.clone()),
        "timezone": configured.map(|c| c.tz.name()),
    })
}

/// The next fire times from the config's schedule, in UTC millis (for a
/// daemon just started from that file; the views read `schedule::seen`).
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

/// Every item not finished and not being worked, by its one reason.
fn waiting_of(
    ctx: &Ctx,
    store: &Store,
    scene: &Scene,
    info: &BatchInfo,
) -> anyhow::Result<Vec<waiting::Waiting>> {
    Ok(scene
        .holding(ctx, store, info)?
        .map(|h| waiting::waiting(&h, scene.now))
        .unwrap_or_default())
}

/// Items done under an older version than the batch's `version` (or
/// before it had one); `None` when the batch sets no version.
fn stale_done(ctx: &Ctx, store: &Store, batch: &str) -> anyhow::Result<Option<i64>> {
    let Some(version) = ctx.config.batch(batch).and_then(|c| c.version.clone()) else {
        return Ok(None);
    };
    let filter = ItemFilter {
        stale: Some(version),
        ..ItemFilter::default()
    };
    match store.count_items(batch, &filter) {
        Err(StoreError::UnknownBatch { .. }) => Ok(Some(0)),
        other => Ok(Some(other?)),
    }
}

/// A run as `--json` says it: `state` as it is (`crashed` or `silent` when
/// its runner is gone though the store still says running), beside the
/// state recorded.
fn run_json(r: &Run, seen: RunSeen, now: Millis) -> Value {
    json!({
        "id": r.id,
        "state": seen.as_str(),
        "recorded_state": r.state,
        "stopped": r.stopped,
        "why": seen.why(now),
        "trigger": r.trigger,
        "actor": r.actor,
        "started_at": rfc3339(r.started_at),
        "ended_at": r.ended_at.map(rfc3339),
        "summary": r.summary,
        "counts": r.counts,
    })
}

fn batch_json(
    ctx: &Ctx,
    scene: &Scene,
    info: &BatchInfo,
    pruned_keys: i64,
    stale: Option<i64>,
) -> Value {
    let now = scene.now;
    let c = &info.counts;
    let cfg = ctx.config.batch(&info.name);
    let seen = scene.schedule(ctx, info);
    let seen = seen.as_ref();
    let configured = cfg.and_then(Configured::of);
    let seat = |i: usize| info.runners.seats.get(i).copied();
    let run_seen = info.last_run_seen();
    let next_fire = seen.map(|s| {
        json!({
            "at": s.next.map(|t| rfc3339(t.timestamp_millis())),
            "fires": s.live && scene.fire_skipped(info).is_none(),
            "why": s.no_daemon(now).or_else(|| scene.fire_skipped(info)),
            "config_differs": s.config_differs,
            "config": file_schedule_json(s, configured),
        })
    });
    let mut batch = json!({
        "name": info.name,
        "pending": c.pending,
        "claimed": c.claimed,
        "done": c.done,
        "empty": c.empty,
        "skipped": c.skipped,
        "finished": c.finished(),
        "retry": c.retry,
        "manual": c.manual,
        "failed": c.failed(),
        "to_do": c.to_do(),
        "total": c.total(),
        "pruned_keys": pruned_keys,
        "version": cfg.and_then(|b| b.version.clone()),
        "stale": stale,
        "paused": info.pause.is_some(),
        "paused_reason": info.pause.as_ref().map(|p| p.reason.clone()),
        "paused_by": info.pause.as_ref().map(|p| p.by.clone()),
        "paused_at": info.pause.as_ref().map(|p| rfc3339(p.at)),
        "emergency_stop": scene.emergency.is_some(),
        "hold_until": info.held(now).map(|h| rfc3339(h.until)),
        "hold_by": info.held(now).and_then(|h| h.key.clone()),
        "hold_label": info.held(now).and_then(|h| h.label.clone()),
        "running": info.running(),
        "orphaned": info.runners.orphaned(),
        "lock": info.lock().map(|l| lock_json(l, seat(0), now)),
        "locks": info.locks.iter().enumerate().map(|(i, l)| lock_json(l, seat(i), now)).collect::<Vec<_>>(),
        "last_run": info.last_run.as_ref().map(|r| run_json(r, run_seen.unwrap_or(RunSeen::Stored(r.state)), now)),
        "stepped_down": info.stepped_down.as_ref().map(|r| run_json(r, RunSeen::Stored(r.state), now)),
        // The rule the fires come by: a live daemon's, else the file's.
        "schedule": seen.map(|s| s.rule.schedule.expr.clone()),
        "timezone": seen.map(|s| s.rule.tz.name().to_string()),
        "next_fires": seen.map(|s| s.upcoming(3).into_iter().map(|t| rfc3339(t.timestamp_millis())).collect::<Vec<_>>()),
        "next_fire": next_fire,
        "daemon": seen.and_then(|s| s.daemon).map(|d| json!({
            "live": d.live(),
            "state": d.state.as_str(),
            "host": d.daemon.holder.host,
            "pid": d.daemon.holder.pid,
            "last_seen": rfc3339(d.last_seen()),
        })),
        "missed": seen.map_or(Value::Null, missed_json),
        "last_fire": fire_seen(info, &scene.daemons, now).map(|f| json!({
            "at": rfc3339(f.at),
            "outcome": f.outcome,
            "reason": f.reason,
            "run_id": f.run_id,
        })),
    });
    // Beside `orphaned` (the macro's recursion limit holds no more keys).
    batch["orphaned_to_quarantine"] = info
        .runners
        .orphans_used_up(ctx.config.max_attempts_of(&info.name))
        .into();
    // How its items were keyed: an add keying them otherwise is refused.
    batch["keyed_by"] = info
        .keyed_by
        .as_ref()
        .map_or(Value::Null, crate::key::KeySpec::json);
    batch["late"] = seen.map_or(Value::Null, late_json);
    batch
}

/// `missed`: the fire times passed unfired more than `ON_TIME` ago, as
/// `status --json` and `schedule --json` give them.
pub(super) fn missed_json(seen: &ScheduleSeen<'_>) -> Value {
    seen.overdue.map_or(Value::Null, |o| {
        json!({
            "count": o.count,
            "more": o.more,
            "first": rfc3339(o.first.timestamp_millis()),
            "last": rfc3339(o.last.timestamp_millis()),
            "catch_up": o.catch_up.map(|t| rfc3339(t.timestamp_millis())),
        })
    })
}

/// `late`: those passed unfired under `ON_TIME` ago, which a daemon back
/// now runs once (the latest).
pub(super) fn late_json(seen: &ScheduleSeen<'_>) -> Value {
    seen.late.map_or(Value::Null, |l| {
        json!({
            "count": l.count,
            "first": rfc3339(l.first.timestamp_millis()),
            "last": rfc3339(l.last.timestamp_millis()),
        })
    })
}

/// The schedule, the next three fire times (or that no daemon fires them,
/// and what it missed) and the last fire's outcome in plain words, times
/// on the batch's wall clock.
fn schedule_lines(ctx: &Ctx, info: &BatchInfo, scene: &Scene, now: Millis) -> Vec<String> {
    let mut lines = Vec::new();
    let seen = scene.schedule(ctx, info);
    let seen = seen.as_ref();
    let cfg = ctx.config.batch(&info.name);
    // On the wall clock the fires come by: the live daemon's zone.
    let tz = seen.map(|s| s.rule.tz).or(cfg.map(|c| c.timezone));
    let local = |ms: Millis| match tz {
        Some(tz) => super::schedule::local(&crate::util::time::to_datetime(ms), tz),
        None => rfc3339(ms),
    };
    if let Some(seen) = seen {
        let (head, list) = match seen.no_daemon(now) {
            Some(why) => (format!("{why}, so nothing fires"), "its next fire times"),
            None => match scene.fire_skipped(info) {
                Some(why) => (why, "its next fire times"),
                None => (String::new(), "next fires"),
            },
        };
        let rule = format!(
            "schedule `{}` in {}",
            seen.rule.schedule.expr,
            seen.rule.tz.name()
        );
        if head.is_empty() {
            lines.push(format!("{rule}; {list}:"));
        } else {
            lines.push(format!("{rule}: {head}; {list}:"));
        }
        for at in seen.upcoming(3) {
            let at = at.timestamp_millis();
            lines.push(format!("  {} ({})", local(at), relative(at, now)));
        }
        // The live daemon fires what it read, not what the file says.
        if let Some(note) = seen.config_note(cfg.and_then(Configured::of)) {
            lines.push(format!("  {note}"));
        }
        lines.extend(seen.unfired_text(|t| local(t.timestamp_millis())));
    }
    if let Some(f) = fire_seen(info, &scene.daemons, now) {
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

fn percent(c: &Counts) -> String {
    c.percent().map_or("-".into(), |p| format!("{p}%"))
}

/// `#7 ok (schedule, ops@box, 5m ago): articles: 40 done, …`: its state
/// as it is (`seen`), how, by whom, when, and its summary (or why it is
/// not what the store says).
fn run_text(r: &Run, seen: RunSeen, now: Millis) -> String {
    let summary = seen
        .why(now)
        .or_else(|| r.summary.clone())
        .unwrap_or_else(|| match r.state {
            RunState::Running => "in progress".into(),
            other => other.to_string(),
        });
    let mut how = vec![r.trigger.to_string()];
    how.extend(r.actor.clone());
    how.push(relative(r.started_at, now));
    format!(
        "#{} {} ({}): {summary}",
        r.id,
        seen.as_str(),
        how.join(", ")
    )
}

fn human(
    ctx: &Ctx,
    store: &Store,
    infos: &[BatchInfo],
    scene: &Scene,
    out: &mut Vec<String>,
) -> anyhow::Result<()> {
    let now = scene.now;
    if infos.is_empty() {
        out.push(format!(
            "no batches in {} yet: add items with `nightshift add BATCH FILE`",
            sanitize::line(&crate::store::place(&ctx.db))
        ));
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
    out.push(table.render());
    let pools = super::pools::views(ctx, store, now)?;
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
                sanitize::shell_word(&i.name)
            ));
        }
        let cfg = ctx.config.batch(&i.name);
        let limit = cfg.and_then(|b| b.limit.as_deref());
        if let Some(p) = pools.iter().find(|p| Some(p.name.as_str()) == limit) {
            let call = cfg.map_or(0, crate::runner::pool::call_estimate);
            lines.push(super::pools::pool_line(p, call, now));
        }
        let budgets = super::budgets::of_batch(ctx, store, &i.name, now)?;
        lines.extend(super::budgets::lines(&budgets, now));
        for (n, l) in i.locks.iter().enumerate() {
            lines.push(seat_line(l, i.runners.seats.get(n).copied(), now));
        }
        if i.runners.orphaned() > 0 {
            let n = i.runners.orphaned();
            let max = ctx.config.max_attempts_of(&i.name);
            lines.push(format!(
                "orphaned: {}, taken back by the next run{}",
                noun::count(n, "claimed item"),
                i.runners.orphans_fate(max)
            ));
        }
        match &i.last_run {
            Some(r) => {
                let seen = i.last_run_seen().unwrap_or(RunSeen::Stored(r.state));
                lines.push(format!("last run {}", run_text(r, seen, now)));
                let usage = store.run_usage(r.id)?;
                if let Some(u) = super::pools::usage_line(&usage) {
                    lines.push(format!("  {u}"));
                }
                if let Some(over) = super::pools::over_estimate(&usage, ctx.config.batch(&i.name)) {
                    lines.push(format!("  {}", super::pools::over_estimate_line(&over)));
                }
            }
            None if i.stepped_down.is_some() => lines.push("last run: none that did work".into()),
            None => {}
        }
        // A step-down never hides the run that did work; a recent one is said.
        if let Some(r) = i.recent_step_down(now) {
            lines.push(format!(
                "then {}",
                run_text(r, RunSeen::Stored(r.state), now)
            ));
        }
        lines.extend(schedule_lines(ctx, i, scene, now));
        let waits = waiting_of(ctx, store, scene, i)?;
        if !waits.is_empty() {
            lines.push(format!("waiting: {}", waiting::describe(&waits, now)));
        }
        if let Some(n) = stale_done(ctx, store, &i.name)?.filter(|n| *n > 0) {
            lines.push(format!(
                "{n} done under an older version: `nightshift requeue {} --stale` runs {} again",
                sanitize::shell_word(&i.name),
                if n == 1 { "it" } else { "them" }
            ));
        }
        let pruned = pruned_keys(store, &i.name)?;
        if pruned > 0 {
            lines.push(format!(
                "pruned: the keys of {pruned} done items are kept, so adding them again does not run them"
            ));
        }
        if !lines.is_empty() {
            out.push(format!("\n{}:", sanitize::line(&i.name)));
            out.extend(lines.iter().map(|l| format!("  {}", sanitize::line(l))));
        }
    }
    Ok(())
}

/// One seat of the lock in plain words: held (and for how long), its
/// runner gone, or its holder silent past the expiry.
fn seat_line(l: &LockInfo, seat: Option<Seat>, now: Millis) -> String {
    let seat = seat.unwrap_or(Seat::Live);
    let line = seat_state(l, seat, now);
    match &l.stop_by {
        Some(by) if seat.is_live() => {
            format!("{line}; stopping (asked by {by}): no new items, in-flight ones finish")
        }
        _ => line,
    }
}

fn seat_state(l: &LockInfo, seat: Seat, now: Millis) -> String {
    match seat {
        Seat::Live if l.expires_at >= now => format!(
            "running: lock held by {} ({} left)",
            l.holder,
            crate::util::time::compact(((l.expires_at - now) / 1000) as u64)
        ),
        // Its process runs here: live, whatever the clock says.
        Seat::Live => format!(
            "running: lock held by {} (past its expiry; its process runs)",
            l.holder
        ),
        Seat::Crashed => format!(
            "crashed: runner {} is gone; the lock is not held (the next run takes it over)",
            l.holder
        ),
        Seat::Silent { since } => format!(
            "lock expired, holder silent since {} ({}): {}",
            rfc3339(since),
            relative(since, now),
            l.holder
        ),
    }
}
