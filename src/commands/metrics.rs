//! `status --prometheus`: the Prometheus text exposition format, for
//! node_exporter's textfile collector.

use std::fmt::Write;

use super::Ctx;
use super::scene::Scene;
use crate::model::BatchInfo;
use crate::store::Store;

/// Label values escaped as the exposition format requires, control and
/// bidi characters first made inert (shown as `\x1b`, which the format
/// then reads as the literal text).
fn label(value: &str) -> String {
    crate::util::sanitize::line(value)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Family<'a> {
    name: &'a str,
    help: &'a str,
    samples: Vec<(String, f64)>,
}

pub fn render(
    ctx: &Ctx,
    store: &Store,
    infos: &[BatchInfo],
    scene: &Scene,
) -> anyhow::Result<String> {
    let now = scene.now;
    let mut items = Family {
        name: "nightshift_items",
        help: "Items by batch, status and tier (failed) or outcome (done); the samples add up to the batch.",
        samples: Vec::new(),
    };
    let emergency = Family {
        name: "nightshift_emergency_stop",
        help: "1 if the PAUSED file beside the store stops every batch.",
        samples: vec![(
            String::new(),
            f64::from(u8::from(scene.emergency.is_some())),
        )],
    };
    let mut paused = Family {
        name: "nightshift_batch_paused",
        help: "1 if the batch is paused (its flag, or the emergency stop).",
        samples: Vec::new(),
    };
    let mut hold = Family {
        name: "nightshift_batch_hold_seconds",
        help: "Seconds left of a retry-after hold on the batch or its limit pool (0 if none): no call starts before.",
        samples: Vec::new(),
    };
    let mut budget_spent = Family {
        name: "nightshift_budget_spent",
        help: "What the budget's window has spent so far (the workers' cost unit), per budget of the batch (scope batch or pool).",
        samples: Vec::new(),
    };
    let mut budget_limit = Family {
        name: "nightshift_budget_limit",
        help: "The budget per window; at it no call of the batch starts until the window ends.",
        samples: Vec::new(),
    };
    let mut budget_reset = Family {
        name: "nightshift_budget_reset_seconds",
        help: "Seconds until the budget's window ends (UTC-aligned) and its spend starts again from 0.",
        samples: Vec::new(),
    };
    let mut lock = Family {
        name: "nightshift_lock_held",
        help: "1 if a live runner holds the batch lock (0 once it crashed or went silent).",
        samples: Vec::new(),
    };
    let mut crashed = Family {
        name: "nightshift_runner_dead",
        help: "1 if a seat of the batch lock is held by a runner that crashed (here) or went silent (elsewhere).",
        samples: Vec::new(),
    };
    let mut orphaned = Family {
        name: "nightshift_orphaned_items",
        help: "Claimed items whose runner crashed or went silent (taken back by the next run).",
        samples: Vec::new(),
    };
    let mut daemon_up = Family {
        name: "nightshift_daemon_up",
        help: "1 if a live daemon schedules the batch (scheduled batches only).",
        samples: Vec::new(),
    };
    let mut daemon_seen = Family {
        name: "nightshift_daemon_last_seen_timestamp_seconds",
        help: "Last heartbeat of the daemon that schedules the batch (Unix seconds).",
        samples: Vec::new(),
    };
    let mut missed = Family {
        name: "nightshift_missed_fires",
        help: "Fire times missed: passed unfired more than a minute ago, with no live daemon to fire them (scheduled batches only).",
        samples: Vec::new(),
    };
    let mut late = Family {
        name: "nightshift_late_fires",
        help: "Fire times passed unfired less than a minute ago, with no live daemon to fire them: a daemon back now runs the latest once for them (scheduled batches only).",
        samples: Vec::new(),
    };
    let mut last_run_time = Family {
        name: "nightshift_last_run_timestamp_seconds",
        help: "Start time of the last run that did work (Unix seconds); runs that stepped down are left out.",
        samples: Vec::new(),
    };
    let mut last_run_ok = Family {
        name: "nightshift_last_run_success",
        help: "1 if the last run that did work ended ok (also when its max_duration or max_cost stopped it: label stopped), 0 otherwise (none while it runs).",
        samples: Vec::new(),
    };
    let mut waiting = Family {
        name: "nightshift_waiting_items",
        help: "Open items not being worked, by batch and the one reason each waits (as status says it; every reason, 0 where none waits for it).",
        samples: Vec::new(),
    };
    let mut oldest = Family {
        name: "nightshift_oldest_pending_age_seconds",
        help: "Age of the oldest pending item (0 if none).",
        samples: Vec::new(),
    };
    for info in infos {
        let b = label(&info.name);
        let c = &info.counts;
        for (status, extra, n) in [
            ("pending", "", c.pending),
            ("claimed", "", c.claimed),
            ("done", ",outcome=\"done\"", c.done),
            ("done", ",outcome=\"empty\"", c.empty),
            ("done", ",outcome=\"skipped\"", c.skipped),
            ("failed", ",tier=\"retry\"", c.retry),
            ("failed", ",tier=\"manual\"", c.manual),
        ] {
            items.samples.push((
                format!("batch=\"{b}\",status=\"{status}\"{extra}"),
                n as f64,
            ));
        }
        let one = |yes: bool| (format!("batch=\"{b}\""), f64::from(u8::from(yes)));
        paused.samples.push(one(scene.paused(info)));
        // A pool's hold holds the batch as its own does (`status --short`
        // says `held`): an alert on this metric missed it.
        let until = info
            .held(now)
            .map(|h| h.until)
            .max(scene.pool_held(ctx, &info.name));
        hold.samples.push((
            format!("batch=\"{b}\""),
            until.map_or(0.0, |t| (t - now) as f64 / 1000.0),
        ));
        for s in scene.budgets.get(&info.name).into_iter().flatten() {
            let l = format!(
                "batch=\"{b}\",scope=\"{}\",name=\"{}\"",
                s.scope.as_str(),
                label(&s.name)
            );
            budget_spent.samples.push((l.clone(), s.spent));
            budget_limit.samples.push((l.clone(), s.limit));
            budget_reset
                .samples
                .push((l, (s.window_end - now).max(0) as f64 / 1000.0));
        }
        lock.samples.push(one(info.running()));
        crashed.samples.push(one(info.runners.dead().is_some()));
        orphaned
            .samples
            .push((format!("batch=\"{b}\""), info.runners.orphaned() as f64));
        if let Some(seen) = scene.schedule(ctx, info) {
            daemon_up.samples.push(one(seen.live));
            if let Some(d) = seen.daemon {
                daemon_seen
                    .samples
                    .push((format!("batch=\"{b}\""), d.last_seen() as f64 / 1000.0));
            }
            missed
                .samples
                .push((format!("batch=\"{b}\""), seen.missed() as f64));
            late.samples.push((
                format!("batch=\"{b}\""),
                seen.late.map_or(0, |l| l.count) as f64,
            ));
        }
        if let (Some(run), Some(state)) = (&info.last_run, info.last_run_seen()) {
            last_run_time
                .samples
                .push((format!("batch=\"{b}\""), run.started_at as f64 / 1000.0));
            // A crashed run counts at once, recorded or not.
            if !state.is_running() {
                let ok = state == crate::model::RunSeen::Stored(crate::model::RunState::Ok);
                // Why it stopped early, if it did: an `ok` run its
                // `max_duration` ended says so beside its success.
                let stopped = run
                    .stopped
                    .filter(|_| matches!(state, crate::model::RunSeen::Stored(_)))
                    .map(|c| format!(",stopped=\"{c}\""))
                    .unwrap_or_default();
                last_run_ok.samples.push((
                    format!("batch=\"{b}\",state=\"{}\"{stopped}", state.as_str()),
                    f64::from(u8::from(ok)),
                ));
            }
        }
        let reasons = match scene.holding(ctx, store, info)? {
            Some(h) => crate::model::waiting::waiting(&h, now),
            None => Vec::new(),
        };
        for reason in crate::model::waiting::WaitReason::ALL {
            let n: i64 = reasons
                .iter()
                .filter(|w| w.reason == *reason)
                .map(|w| w.items)
                .sum();
            waiting
                .samples
                .push((format!("batch=\"{b}\",reason=\"{reason}\""), n as f64));
        }
        let age = if store.batch_names()?.contains(&info.name) {
            store
                .oldest_pending(&info.name)?
                .map_or(0.0, |t| (now - t).max(0) as f64 / 1000.0)
        } else {
            0.0
        };
        oldest.samples.push((format!("batch=\"{b}\""), age));
    }
    let mut out = String::new();
    for family in [
        items,
        emergency,
        paused,
        hold,
        budget_spent,
        budget_limit,
        budget_reset,
        lock,
        crashed,
        orphaned,
        last_run_time,
        last_run_ok,
        waiting,
        oldest,
        daemon_up,
        daemon_seen,
        missed,
        late,
    ] {
        let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} gauge", family.name);
        for (labels, value) in family.samples {
            if labels.is_empty() {
                let _ = writeln!(out, "{} {value}", family.name);
            } else {
                let _ = writeln!(out, "{}{{{labels}}} {value}", family.name);
            }
        }
    }
    Ok(out.trim_end().to_string())
}
