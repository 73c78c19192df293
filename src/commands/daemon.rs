//! `nightshift daemon`: runs scheduled batches at their fire times until
//! SIGTERM/SIGINT, reloading its config on SIGHUP (see `schedule::daemon`
//! for the loop).

use tokio::sync::watch;

use super::schedule::{scheduled_batch, scheduled_names};
use super::{Ctx, Exit, user_error};
use crate::cli::{DaemonArgs, RunArgs, TriggerArg};
use crate::schedule::daemon::{self, Setup, Target};
use crate::schedule::{Plan, Stored};
use crate::util::time::now_ms;

pub fn run(ctx: &Ctx, args: &DaemonArgs) -> anyhow::Result<Exit> {
    let names = names(ctx, args)?;
    let setup = setup(ctx, &names, args.verbose)?;
    let load: daemon::Load<'_> = Box::new(|| reloaded(ctx, args));
    // Our workers are stopped, should this process be killed outright.
    crate::runner::start_guard();
    let log_dir = setup.targets.first().and_then(|t| t.opts.log_dir.clone());
    if let Some(dir) = &log_dir {
        crate::runner::start_file_log(dir);
    }
    // Absolute, so the PAUSED file it names in the log and status is clear.
    let db = crate::store::absolute(&ctx.db);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let (tx, rx) = watch::channel(0u32);
        let (reload_tx, asked) = watch::channel(0u64);
        let signals = tokio::spawn(count_signals(tx, reload_tx));
        let result = daemon::run(&db, setup, rx, daemon::Reload { asked, load }).await;
        signals.abort();
        result
    });
    crate::runner::close_file_log();
    result?;
    Ok(Exit::Ok)
}

/// The batches to schedule: those named, else every one with a schedule.
fn names(ctx: &Ctx, args: &DaemonArgs) -> anyhow::Result<Vec<String>> {
    let names = if args.batches.is_empty() {
        let names = scheduled_names(ctx);
        if names.is_empty() {
            return Err(user_error(format!(
                "no batch has a schedule in {}: add `schedule` and `timezone` to a [batch.NAME] table",
                ctx.config
                    .file
                    .as_ref()
                    .map_or("nightshift.toml (none found)".to_string(), |f| f
                        .display()
                        .to_string())
            )));
        }
        names
    } else {
        for name in &args.batches {
            scheduled_batch(ctx, name)?;
        }
        let mut names = args.batches.clone();
        names.sort();
        names.dedup();
        names
    };
    Ok(names)
}

/// Each batch's plan, resumed from the stored schedule state, and the
/// options its cycles run with (the config's, as `nightshift run` would).
fn targets(ctx: &Ctx, names: &[String], verbose: bool) -> anyhow::Result<Vec<Target>> {
    // Every batch's options first: one that cannot run refuses the daemon
    // before the store records any of them.
    let options = names
        .iter()
        .map(|name| {
            let mut opts = super::run::options(ctx, &run_args(name, verbose))?;
            opts.progress = false;
            Ok(opts)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut store = ctx.open_write()?;
    let now = now_ms();
    let mut targets = Vec::with_capacity(names.len());
    for (name, opts) in names.iter().zip(options) {
        let (cfg, _) = scheduled_batch(ctx, name)?;
        store.ensure_batch(name, now)?;
        let info = store
            .batch_infos(Some(name))?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("batch {name} vanished from the store"))?;
        let stored = Stored::of(&info);
        let plan = Plan::new(cfg, stored, crate::util::time::now())
            .ok_or_else(|| anyhow::anyhow!("batch {name} has no schedule"))?;
        targets.push(Target { plan, opts });
    }
    Ok(targets)
}

/// The daemon's [`Setup`]: the targets of `names`, and every batch the
/// config schedules.
fn setup(ctx: &Ctx, names: &[String], verbose: bool) -> anyhow::Result<Setup> {
    Ok(Setup {
        targets: targets(ctx, names, verbose)?,
        scheduled: scheduled_names(ctx),
    })
}

/// What `nightshift run NAME --trigger schedule` would be given.
fn run_args(batch: &str, verbose: bool) -> RunArgs {
    RunArgs {
        batch: batch.to_string(),
        concurrency: None,
        limit: None,
        key: None,
        dry_run: false,
        max_duration: None,
        wait: false,
        verbose,
        json: false,
        detached: false,
        trigger: TriggerArg::Schedule,
        worker: Vec::new(),
    }
}

/// Counts SIGINT/SIGTERM (the first stops firing and lets cycles stop
/// gracefully, the second stops their workers at once) and SIGHUP (reload).
async fn count_signals(tx: watch::Sender<u32>, reload: watch::Sender<u64>) {
    crate::util::signals::count_stops_and_reloads(
        |n| {
            tx.send_replace(n);
        },
        || {
            reload.send_modify(|n| *n += 1);
        },
    )
    .await;
}

/// The targets from the config file as it is now (a SIGHUP): the same
/// checks as at start, on the same store. A config that names another
/// store is refused (that takes a restart).
fn reloaded(ctx: &Ctx, args: &DaemonArgs) -> anyhow::Result<Setup> {
    let file = ctx
        .config
        .file
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("the daemon started without a config file"))?;
    let config = crate::config::Config::load(file)?;
    if config.db != ctx.config.db {
        return Err(user_error(format!(
            "{} now names another store; restart the daemon to use it",
            file.display()
        )));
    }
    let ctx = Ctx {
        db: ctx.db.clone(),
        config,
        color: ctx.color,
    };
    let names = names(&ctx, args)?;
    setup(&ctx, &names, args.verbose)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;
    use crate::config::Config;
    use crate::model::Trigger;
    use crate::store::Store;

    #[test]
    fn scheduled_cycles_get_the_batch_policy() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nightshift.db");
        Store::create(&db).unwrap();
        let config = Config::parse(
            "[batch.b]\nworker = [\"sh\", \"-c\", \"cat\"]\nschedule = \"0 2 * * *\"\n\
             timezone = \"Asia/Tokyo\"\nmax_duration = \"45m\"\nconcurrency = 3\n",
            &dir.path().join("nightshift.toml"),
        )
        .unwrap();
        let ctx = Ctx {
            db,
            config,
            color: false,
        };
        let targets = targets(&ctx, &["b".to_string()], false).unwrap();
        let opts = &targets[0].opts;
        assert_eq!(opts.config.max_duration, Some(Duration::from_mins(45)));
        assert_eq!(opts.config.concurrency, 3);
        assert_eq!(opts.trigger, Trigger::Schedule);
        assert!(!opts.progress);
        assert_eq!(opts.work_dir.as_deref(), Some(dir.path()));
        assert_eq!(targets[0].plan.tz.name(), "Asia/Tokyo");
        assert!(Path::new(&opts.worker[0]).ends_with("sh"));
    }
}
