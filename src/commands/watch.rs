//! `nightshift watch` (and `nightshift` alone): the dashboard.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use super::{Ctx, Exit, user_error};
use crate::cli::WatchArgs;
use crate::store::{Access, Store};
use crate::tui::{
    self, Ended, app::Setup, config_file::ConfigFile, effects::Runners, theme::Palette,
};

/// Polling faster than this costs more than it shows.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

pub fn run(ctx: &Ctx, args: &WatchArgs) -> anyhow::Result<Exit> {
    let ended = show(
        ctx,
        args,
        Hosted {
            state_dir: tui::visits::state_dir(),
            ..Hosted::default()
        },
    )?;
    Ok(exit_for(ended))
}

/// What a host of the dashboard (the demo) changes about it.
#[derive(Default)]
pub struct Hosted {
    /// Where the last visit and the runner log are kept.
    pub state_dir: Option<PathBuf>,
    /// Track the runners `r` starts so the host can stop them; `None`:
    /// they outlive the dashboard.
    pub runners: Option<Runners>,
    /// A hint in the footer when the dashboard opens.
    pub greeting: Option<String>,
}

/// The exit status for how the dashboard ended: a hangup is a normal end
/// (the SSH link dropped), other signals an interruption.
pub fn exit_for(ended: Ended) -> Exit {
    match ended {
        Ended::Signal(sig) if sig != nix::sys::signal::Signal::SIGHUP as i32 => Exit::Interrupted,
        _ => Exit::Ok,
    }
}

/// Opens the dashboard on `ctx`'s store until it ends.
pub fn show(ctx: &Ctx, args: &WatchArgs, hosted: Hosted) -> anyhow::Result<Ended> {
    if args.interval < MIN_INTERVAL {
        return Err(user_error("--interval must be at least 100ms"));
    }
    if !std::io::stdin().is_terminal() || !std::io::stdout().is_terminal() {
        return Err(user_error(
            "the dashboard needs a terminal; in scripts use `nightshift status` (see `nightshift --help`)",
        ));
    }
    // Refuse a missing or foreign store before the screen is taken over.
    let store = Store::open(&ctx.db, Access::ReadOnly)?;
    if let Some(batch) = &args.batch
        && ctx.config.batch(batch).is_none()
    {
        store.check_batch(batch)?;
    }
    let read_only = args.read_only || !store.writable();
    drop(store);
    let db = crate::store::absolute(&ctx.db);
    // `ctx.color` is off for --no-color and NO_COLOR (stdout is a terminal here).
    let palette = if ctx.color {
        Palette::detect(false)
    } else {
        Palette::Mono
    };
    let display = match std::fs::canonicalize(&db) {
        Ok(file) => file.display().to_string(),
        Err(_) => crate::store::place(&db),
    };
    let mut setup = Setup::new(&display, &crate::util::identity::host(), read_only, palette)
        .with_config(&ctx.config);
    setup.batch = args.batch.clone();
    setup.greeting = hosted.greeting;
    // With no config file, the one a command would find if written later.
    let config_file = ctx
        .config
        .file
        .clone()
        .unwrap_or_else(|| crate::config::beside_store(&ctx.db));
    tui::run(tui::Options {
        config_file: Some(ConfigFile::new(config_file, &ctx.config, &db)),
        db,
        config: ctx.config.file.clone(),
        setup,
        interval: args.interval,
        state_dir: hosted.state_dir,
        runners: hosted.runners,
    })
}
