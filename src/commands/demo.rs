//! `nightshift demo`: set up the demo store, then either run the scenario
//! headless and print what happened, or run it behind the dashboard.

use std::time::Duration;

use super::{Ctx, Exit, out};
use crate::cli::{DemoArgs, RunArgs, StatusArgs, TriggerArg};
use crate::config::Config;
use crate::demo;
use crate::model::{Status, Tier};
use crate::runner;
use crate::store::{EventFilter, ItemFilter};
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

pub fn run(args: &DemoArgs) -> anyhow::Result<Exit> {
    let mut demo = demo::setup(args.dir.as_deref())?;
    if args.keep || args.dir.is_some() {
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
        color: false,
    };
    let result = headless(&ctx, &demo);
    if !(args.keep || args.dir.is_some()) {
        out("(the demo directory is removed on exit; keep it with --keep)")?;
    }
    result
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
    // The scheduled batch runs under the real daemon, in the background.
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
        out(format!("  {}", report.summary))?;
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
        out(format!("  {}", super::log::format_event(&e)))?;
    }
    if let Ok(item) = store.item("articles", &key) {
        out(format!(
            "  result: {}",
            item.result.map(|r| r.to_string()).unwrap_or_default()
        ))?;
    }
    Ok(Exit::Ok)
}
