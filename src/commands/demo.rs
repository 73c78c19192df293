//! `nightshift demo`: set up the demo store, then either run the scenario
//! headless and print what happened, or run it behind the dashboard.

use std::io::IsTerminal;
use std::time::Duration;

use super::watch::{self, Hosted};
use super::{Ctx, Exit, out};
use crate::cli::{DemoArgs, RunArgs, StatusArgs, TriggerArg, WatchArgs};
use crate::config::Config;
use crate::demo;
use crate::model::{Status, Tier};
use crate::runner;
use crate::store::{EventFilter, ItemFilter};
use crate::tui::effects::Runners;
use crate::util::stdio;
use crate::util::time::now_ms;

/// Cycles of `articles` the headless demo runs at most (redrives included).
const MAX_CYCLES: usize = 6;

pub fn agent() -> Exit {
    match demo::agent::run() {
        0 => Exit::Ok,
        1 => Exit::Failed,
        _ => Exit::TempFail,
    }
}

pub fn run(args: &DemoArgs, no_color: bool) -> anyhow::Result<Exit> {
    let interactive = !args.headless && terminal();
    let mut demo = demo::setup(args.dir.as_deref())?;
    let kept = args.keep || args.dir.is_some();
    if kept {
        demo.keep();
    }
    out(format!(
        "demo store: {} (config: {})",
        demo.db.display(),
        demo.config.display()
    ))?;
    let ctx = Ctx {
        db: demo.db.clone(),
        config: Config::load(&demo.config)?,
        // As `Ctx::from_cli`; the headless output uses no colour.
        color: interactive
            && !no_color
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    let result = if interactive {
        in_front(&ctx, &demo)
    } else {
        headless(&ctx, &demo)
    };
    // Said after the demo ended, best effort: its outcome is the exit code.
    if kept {
        stdio::out_line(&format!(
            "the demo's directory is kept: {}\n  look around: nightshift --db {} status   (or: dlq articles, log, watch)",
            crate::util::sanitize::line(&demo.dir.display().to_string()),
            crate::util::sanitize::shell_word(&demo.db.display().to_string())
        ));
    } else {
        stdio::out_line("(the demo directory is removed on exit; keep it with --keep)");
    }
    result
}

/// A terminal a dashboard can take over: stdin and stdout are terminals,
/// and not a dumb one.
fn terminal() -> bool {
    std::io::stdin().is_terminal()
        && std::io::stdout().is_terminal()
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

/// Concurrency of the background run: half the config's, so the counts
/// rise at a pace one can watch (about half a minute for `articles`).
const WATCHABLE_CONCURRENCY: &str = "2";

/// The interactive demo: a runner on `articles` and the daemon for
/// `reports` in the background, the dashboard in front. Quitting it (q,
/// Ctrl-C, SIGTERM, a hangup) stops everything the demo started.
fn in_front(ctx: &Ctx, demo: &demo::Demo) -> anyhow::Result<Exit> {
    let runners = Runners::default();
    // Stops what `r` started even if what follows fails.
    let _stop_runners = StopRunners(runners.clone());
    let mut runner = demo::Child::spawn(
        demo,
        "runner",
        &["run", "articles", "--concurrency", WATCHABLE_CONCURRENCY],
    )?;
    let mut daemon = demo::Child::spawn(demo, "daemon", &["daemon", "--batch", "reports"])?;
    let items = |batch: &str| -> anyhow::Result<i64> {
        let store = ctx.open_read()?;
        Ok(store
            .batch_infos(Some(batch))?
            .first()
            .map_or(0, |b| b.counts.total()))
    };
    out(format!(
        "started: a runner on `articles` ({} items, {WATCHABLE_CONCURRENCY} at a time, through a flaky \
         simulated agent) and the daemon for `reports` ({} items, a fire every 20 s)",
        items("articles")?,
        items("reports")?
    ))?;
    let ended = watch::show(
        ctx,
        &WatchArgs::default(),
        Hosted {
            state_dir: Some(demo.dir.join("state")),
            runners: Some(runners.clone()),
            greeting: Some(
                "demo: articles runs in the background, reports every 20 s · ? keys · q ends it"
                    .into(),
            ),
        },
    );
    // The terminal may be gone (a hangup): nothing said from here on may
    // stop the stopping or change the exit code.
    stdio::out_line("stopping the demo's runner and daemon…");
    let runner_ended = runner.exit_code();
    // All at once: each lets its in-flight items finish within its grace.
    runner.terminate();
    daemon.terminate();
    runners.stop_all(STOP_GRACE);
    runner.stop(STOP_GRACE);
    daemon.stop(STOP_GRACE);
    if let Some(Some(code)) = runner_ended
        && code > 1
    {
        stdio::out_line(&format!(
            "  the background runner had ended with status {code}: see {}",
            demo.dir.join("runner.log").display()
        ));
    }
    stdio::out_line("stopped; nothing of the demo is running");
    if let Ok(store) = ctx.open_read()
        && let Ok(infos) = super::status::gather(ctx, &store, None)
        && let Ok(scene) = super::scene::Scene::read(ctx, &store, now_ms())
    {
        stdio::out_line(&format!(
            "  {}",
            super::status::short_line(ctx, &infos, &scene)
        ));
    }
    Ok(watch::exit_for(ended?))
}

/// How long each part of the demo gets to stop before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Stops the runners the dashboard's `r` started when dropped.
struct StopRunners(Runners);

impl Drop for StopRunners {
    fn drop(&mut self) {
        self.0.stop_all(STOP_GRACE);
    }
}

fn cycle(ctx: &Ctx, batch: &str) -> anyhow::Result<runner::RunReport> {
    let args = RunArgs {
        batch: batch.to_string(),
        concurrency: None,
        limit: None,
        key: None,
        dry_run: false,
        max_duration: None,
        wait: true,
        verbose: false,
        json: false,
        detached: false,
        trigger: TriggerArg::Manual,
        worker: Vec::new(),
    };
    let mut opts = super::run::options(ctx, &args)?;
    opts.progress = false;
    runner::run_blocking(&ctx.db, opts)
}

/// Waits until the earliest retry-tier item of `batch` is due.
fn wait_for_redrive(ctx: &Ctx, batch: &str) -> anyhow::Result<bool> {
    let store = ctx.open_read()?;
    let waiting = store.items(
        batch,
        &ItemFilter {
            status: Some(Status::Failed),
            tier: Some(Tier::Retry),
            ..ItemFilter::default()
        },
    )?;
    let Some(due) = waiting.iter().filter_map(|i| i.next_attempt_at).min() else {
        return Ok(false);
    };
    let wait = (due - now_ms()).max(0) as u64;
    out(format!(
        "  {} item(s) wait in the retry tier; the next cycle in {:.1}s redrives them",
        waiting.len(),
        wait as f64 / 1000.0
    ))?;
    std::thread::sleep(Duration::from_millis(wait + 50));
    Ok(true)
}

/// Waits until the daemon has run `reports` once (or gives up).
fn wait_for_scheduled_run(
    ctx: &Ctx,
    daemon: &mut demo::Child,
    limit: Duration,
) -> anyhow::Result<Option<String>> {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if daemon.exited() {
            anyhow::bail!(
                "the demo's daemon stopped unexpectedly (see daemon.log in the demo directory)"
            );
        }
        let store = ctx.open_read()?;
        let runs = store.runs("reports", 5)?;
        if let Some(run) = runs
            .iter()
            .find(|r| r.trigger == crate::model::Trigger::Schedule && r.ended_at.is_some())
        {
            return Ok(Some(run.summary.clone().unwrap_or_default()));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Ok(None)
}

fn headless(ctx: &Ctx, demo: &demo::Demo) -> anyhow::Result<Exit> {
    // The scheduled batch runs under the real daemon, in the background;
    // `articles` here, whose workers are stopped should we be killed.
    runner::start_guard();
    let mut daemon = demo::Child::spawn(demo, "daemon", &["daemon", "--batch", "reports"])?;
    let next = super::status::next_fires(ctx, "reports", now_ms(), 1);
    if let Some(at) = next.first() {
        out(format!(
            "daemon started for `reports` (schedule */20 s, Asia/Tokyo): next fire {}",
            crate::util::time::relative(*at, now_ms())
        ))?;
    }
    for n in 1..=MAX_CYCLES {
        out(format!("\n== articles, cycle {n}"))?;
        let report = cycle(ctx, "articles")?;
        out(format!("  {}", crate::util::sanitize::line(&report.line())))?;
        if !wait_for_redrive(ctx, "articles")? {
            break;
        }
    }
    out("\n== reports, run by the daemon at its fire time")?;
    match wait_for_scheduled_run(ctx, &mut daemon, Duration::from_secs(90))? {
        Some(summary) => out(format!("  {summary}"))?,
        None => out("  (the daemon did not fire within 90 s)")?,
    }
    daemon.stop(Duration::from_secs(10));
    out("  daemon stopped")?;

    out("\n== status")?;
    super::status::run(
        ctx,
        &StatusArgs {
            batch: None,
            json: false,
            short: false,
            prometheus: false,
        },
    )?;
    out("\n== dead letters of articles, by class")?;
    super::dlq::run(
        ctx,
        &crate::cli::DlqArgs {
            batch: "articles".into(),
            since: None,
            class: None,
            jsonl: false,
            json: false,
        },
    )?;

    out("\n== the long operation: timed out once, then resumed from its op id")?;
    let store = ctx.open_read()?;
    let key = crate::key::hash_key("blog:ai:a-very-long-essay");
    for e in store.events(&EventFilter {
        batch: Some("articles".into()),
        key: Some(key.clone()),
        limit: 50,
        ..EventFilter::default()
    })? {
        out(format!(
            "  {}",
            super::log::format_event(&e, super::log::Columns::of(["articles"]))
        ))?;
    }
    if let Ok(item) = store.item("articles", &key) {
        out(format!(
            "  result: {}",
            item.result.map(|r| r.to_string()).unwrap_or_default()
        ))?;
    }
    Ok(Exit::Ok)
}
