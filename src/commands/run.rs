//! `nightshift run`: one cycle of a batch.

use std::io::IsTerminal;
use std::path::Path;

use serde_json::json;

use super::table::Table;
use super::{Ctx, Exit, out, out_json, user_error};
use crate::cli::RunArgs;
use crate::model::waiting;
use crate::runner::{self, RunOptions, StopReason};
use crate::util::noun;
use crate::util::time::{now_ms, relative, utc_clock};
use crate::util::{sanitize, stdio};

/// Whether the summary line was said before the alert ran.
static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says the summary line as soon as the run is recorded (see
/// `RunOptions::before_alert`). A run's lines are best effort: with its
/// stdout gone (`run | head`, a closed terminal) it goes on, and its exit
/// code is the run's.
fn say_summary(report: &runner::RunReport) {
    stdio::out_line(&sanitize::line(&report.line()));
    SAID.store(true, std::sync::atomic::Ordering::SeqCst);
}

pub fn run(ctx: &Ctx, args: &RunArgs) -> anyhow::Result<Exit> {
    let mut opts = options(ctx, args)?;
    if !args.json {
        opts.before_alert = Some(say_summary);
    }
    if args.detached {
        detach();
    }
    if args.dry_run {
        return dry_run(ctx, &opts, args.json);
    }
    // One cycle in this process: what its workers leave behind is ours.
    runner::adopt_orphans();
    // Our workers are stopped, should this process be killed outright.
    runner::start_guard();
    let report = runner::run_blocking(&ctx.db, opts);
    runner::close_file_log();
    let report = report?;
    if args.json {
        let value = json!({
            "run_id": report.run_id,
            "state": report.state,
            "summary": report.summary,
            "counts": report.counts,
            "stopped": report.stopped.as_ref().map(StopReason::cause),
            "hooks_failed": report.hooks_failed,
            "waiting": waiting::to_json(&report.waiting),
        });
        stdio::out_line(&sanitize::json(value.to_string()));
    } else if !SAID.load(std::sync::atomic::Ordering::SeqCst) {
        stdio::out_line(&sanitize::line(&report.line()));
    }
    // On the terminal, not only in the log: which hook, how, and why.
    for failure in &report.hooks_failed {
        stdio::err_line(&format!(
            "nightshift: {}",
            sanitize::line(&failure.to_string())
        ));
    }
    // The code says what the recorded state says (`RunState::ended`): a
    // run a signal or `nightshift stop` ended is 130 whatever failed
    // before the stop (the summary and the alert tell of the failures);
    // one its `max_duration` or `max_cost` stopped is 0 unless something
    // failed in it.
    Ok(if report.interrupted() {
        Exit::Interrupted
    } else if report.exit_failed() {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

/// A new session with no controlling terminal: the hangup of the
/// dashboard's terminal never reaches this run.
#[cfg(unix)]
fn detach() {
    let _ = nix::unistd::setsid();
}

#[cfg(not(unix))]
fn detach() {}

/// The cycle's options: config, then command-line overrides.
pub fn options(ctx: &Ctx, args: &RunArgs) -> anyhow::Result<RunOptions> {
    let in_config = ctx.config.batch(&args.batch).is_some();
    if !in_config {
        // A batch must exist somewhere: a typo must not start an empty run.
        let store = ctx.open_read()?;
        store.check_batch(&args.batch)?;
    }
    let mut config = ctx.batch_config(&args.batch);
    // In range: `cli::parse_concurrency_arg`.
    if let Some(n) = args.concurrency {
        config.concurrency = n;
    }
    if let Some(d) = args.max_duration {
        config.max_duration = Some(d);
    }
    // A config found as plain `nightshift.toml` has the empty parent, which
    // means the current directory (and cannot be a process's cwd).
    let work_dir = ctx
        .config
        .file
        .as_deref()
        .and_then(Path::parent)
        // `nightshift.toml` found as a bare relative name has the parent
        // "": that is the current directory, and `chdir("")` would fail.
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(Path::to_path_buf);
    let from_config = args.worker.is_empty();
    let worker = if from_config {
        config.worker.clone().ok_or_else(|| {
            user_error(format!(
                "batch {} has no worker: set `worker = [...]` in {} of nightshift.toml, \
                 or give one after `--`: nightshift run {} -- ./worker.sh",
                crate::batch_name::shown(&args.batch),
                crate::batch_name::toml_table(&args.batch),
                sanitize::shell_word(&args.batch)
            ))
        })?
    } else {
        args.worker.clone()
    };
    // Said where it was set: the config's line (a daemon of many batches
    // names the one), or the command line.
    if let Err(problem) = runner::child::startable::check(&worker[0], work_dir.as_deref()) {
        return Err(
            match ctx
                .config
                .invalid(&args.batch, "worker", problem.clone())
                .filter(|_| from_config)
            {
                Some(e) => e.into(),
                None if from_config => user_error(format!(
                    "{problem} (check the `worker` of batch {})",
                    crate::batch_name::shown(&args.batch)
                )),
                None => user_error(format!("{problem} (check the command after `--`)")),
            },
        );
    }
    // Unless configured: `logs` beside the store's file; a database server
    // has no directory, so beside the config file, or no file logs at all
    // (the events are in the store: `nightshift log`).
    let log_dir = ctx
        .config
        .log_dir
        .clone()
        .or_else(|| crate::store::beside_file(&ctx.db, "logs"))
        .or_else(|| {
            let config = ctx.config.file.as_deref()?;
            Some(config.parent().unwrap_or(Path::new("")).join("logs"))
        });
    Ok(RunOptions {
        batch: args.batch.clone(),
        config,
        worker,
        work_dir,
        config_file: ctx.config.file.clone(),
        limit: args.limit,
        // The key as the batch holds it (`named::keyed`); as given where
        // the store does not open (the run says why).
        key: match (&args.key, ctx.open_read()) {
            (Some(name), Ok(store)) => Some(super::named::keyed(&store, &args.batch, name)?),
            (key, _) => key.clone(),
        },
        wait: args.wait,
        trigger: args.trigger.into(),
        // Whoever started this process: you, the dashboard's user (its `r`
        // starts this command), or the daemon's.
        actor: Some(crate::util::identity::actor()),
        verbose: args.verbose,
        progress: !args.verbose && !args.json && std::io::stderr().is_terminal(),
        log_dir,
        before_alert: None,
    })
}

/// What would still stop a paused batch's run once unpaused: its
/// retry-after hold, its pool's wait, a budget reached (each until when).
fn still_stopped(plan: &runner::DryRun, now: crate::model::Millis) -> Vec<String> {
    let mut stops: Vec<String> = plan.hold.iter().map(|h| hold_wait(h, now)).collect();
    stops.extend(plan.pool_wait.iter().map(|w| pool_wait(w, now)));
    let budgets = plan.estimate.iter().flat_map(|e| &e.budgets);
    stops.extend(
        budgets
            .filter(|b| b.state.reached)
            .map(|b| b.state.describe(now)),
    );
    stops
}

/// A retry-after hold as a run would wait for it: `until 13:46:23Z (in
/// 42m57s) for the retry-after hold from KEY`.
fn hold_wait(hold: &crate::model::Hold, now: crate::model::Millis) -> String {
    let from = hold
        .source()
        .map_or_else(String::new, |s| format!(" from {s}"));
    format!(
        "until {} ({}) for the retry-after hold{from}",
        utc_clock(hold.until, now),
        relative(hold.until, now)
    )
}

/// A pool's wait as a run would wait for it: `until 13:46:23Z (in
/// 42m57s) for pool openai (requests/min)`, without the time when none is
/// known; a retry-after's hold as every view says it (`held_words`):
/// `held until 13:46:23Z (retry-after for pool openai), in 42m57s`.
fn pool_wait(w: &crate::model::waiting::RateLimited, now: crate::model::Millis) -> String {
    if w.is_hold() {
        let left = w
            .next_slot
            .map_or_else(String::new, |t| format!(", {}", relative(t, now)));
        return format!(
            "{}{left}",
            waiting::held_words(w.next_slot, Some(&w.pool), now)
        );
    }
    let until = w.next_slot.map_or_else(String::new, |t| {
        format!("until {} ({}) ", utc_clock(t, now), relative(t, now))
    });
    format!("{until}for pool {} ({})", w.pool, w.dimension)
}

fn dry_run(ctx: &Ctx, opts: &RunOptions, json: bool) -> anyhow::Result<Exit> {
    let plan = runner::dry_run(&ctx.db, opts)?;
    if json {
        out_json(&plan)?;
        return Ok(Exit::Ok);
    }
    let name = sanitize::line(&plan.batch).into_owned();
    let now = now_ms();
    let waits = sanitize::line(&waiting::describe(&plan.waiting, now)).into_owned();
    if let Some(reason) = &plan.paused {
        out(format!(
            "{name}: paused ({}): a run would do nothing",
            sanitize::line(reason)
        ))?;
        // Unpausing lifts only the pause: say what would still stop it.
        for stop in still_stopped(&plan, now) {
            out(
                sanitize::line(&format!("  once unpaused it would still wait: {stop}"))
                    .into_owned(),
            )?;
        }
        if !waits.is_empty() {
            out(format!("waiting: {waits}"))?;
        }
        return Ok(Exit::Ok);
    }
    if let Some(hold) = &plan.hold {
        let (until, left) = (utc_clock(hold.until, now), relative(hold.until, now));
        let from = hold
            .source()
            .map_or_else(String::new, |s| format!(" from {s}"));
        out(sanitize::line(
            &if plan.items.is_empty() && plan.source.is_none() {
                format!(
                    "{name}: held until {until} ({left}) by the retry-after{from}; nothing is due to run anyway"
                )
            } else {
                format!(
                    "{name}: would wait {}: no call starts before (`nightshift unpause {}` lifts it)",
                    hold_wait(hold, now),
                    sanitize::shell_word(&plan.batch)
                )
            },
        ))?;
    }
    if let Some(w) = plan
        .pool_wait
        .as_ref()
        .filter(|_| !plan.items.is_empty() || plan.source.is_some())
    {
        let wait = pool_wait(w, now);
        out(sanitize::line(&if w.is_hold() {
            format!("{name}: {wait}: no call starts before")
        } else {
            format!("{name}: would wait {wait}: no call starts before")
        }))?;
    }
    if let Some(holder) = &plan.lock_held_by {
        out(format!(
            "{name}: a runner ({holder}) holds the lock: a run would step down (or wait with --wait)"
        ))?;
        // Stepping down, it runs nothing, not even its source: what it
        // would have run is what the holder takes (listing it as "would
        // run" beside "waits for the runner that holds the lock" said both).
        if !opts.wait {
            if !waits.is_empty() {
                out(format!("nothing to run now: {waits}"))?;
            }
            return Ok(Exit::Ok);
        }
        out(format!(
            "{name}: with --wait, once the lock is free, as the batch stands now:"
        ))?;
    }
    if let Some(source) = &plan.source {
        out(format!(
            "would first run the source: {}",
            sanitize::line(&source.join(" "))
        ))?;
    }
    out(format!(
        "{name}: would run {} with {} ({})",
        noun::count(plan.items.len(), "item"),
        sanitize::line(&plan.worker.join(" ")),
        match plan.mode {
            "persistent" => "persistent mode: one long-lived worker per slot",
            _ => "process mode: one worker process per item",
        }
    ))?;
    if !plan.items.is_empty() {
        let mut table = Table::new(&["KEY", "LABEL", "ATTEMPT", "WHY"]);
        for i in &plan.items {
            table.row(vec![
                i.key.clone(),
                crate::key::label_column(&i.key, &i.label).to_string(),
                i.attempt.to_string(),
                i.why.to_string(),
            ]);
        }
        out(table.render())?;
    }
    if let Some(e) = plan.estimate.as_ref().filter(|_| !plan.items.is_empty()) {
        for line in e.lines(now) {
            out(sanitize::line(&line).into_owned())?;
        }
    }
    // Why not more: what waits, or that nothing is left.
    let c = &plan.counts;
    if !waits.is_empty() {
        let lead = if plan.items.is_empty() {
            "nothing to run now"
        } else {
            "not in this run"
        };
        out(format!("{lead}: {waits}"))?;
    } else if let (Some(key), Some(state)) = (&opts.key, &plan.key_state) {
        out(format!(
            "nothing to run: item {} is {state}",
            sanitize::line(key)
        ))?;
    } else if plan.items.is_empty() && opts.key.is_none() {
        out(if c.total() == 0 {
            format!(
                "nothing to run: the batch has no items yet (nightshift add {} FILE)",
                sanitize::shell_word(&plan.batch)
            )
        } else {
            format!(
                "nothing to run: {} finished ({} done, {} empty, {} skipped)",
                if c.total() == 1 {
                    "the one item is".to_string()
                } else {
                    format!("all {} items are", c.total())
                },
                c.done,
                c.empty,
                c.skipped
            )
        })?;
    }
    Ok(Exit::Ok)
}
