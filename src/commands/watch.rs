//! `nightshift watch` (and `nightshift` alone): the dashboard.

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use super::{Ctx, Exit, user_error};
use crate::cli::WatchArgs;
use crate::store::{Access, Store};
use crate::tui::{self, Ended, app::Setup, theme::Palette};

/// Polling faster than this costs more than it shows.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

pub fn run(ctx: &Ctx, args: &WatchArgs) -> anyhow::Result<Exit> {
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
    drop(store);
    let db = std::path::absolute(&ctx.db).unwrap_or_else(|_| ctx.db.clone());
    let read_only = args.read_only || !writable(&db);
    // `ctx.color` is off for --no-color and NO_COLOR (stdout is a terminal here).
    let palette = if ctx.color {
        Palette::detect(false)
    } else {
        Palette::Mono
    };
    let display = std::fs::canonicalize(&db).unwrap_or_else(|_| db.clone());
    let mut setup = Setup::new(
        &display.display().to_string(),
        &crate::util::identity::host(),
        read_only,
        palette,
    )
    .with_config(&ctx.config);
    setup.batch = args.batch.clone();
    let ended = tui::run(tui::Options {
        db,
        config: ctx.config.file.clone(),
        setup,
        interval: args.interval,
        state_dir: tui::visits::state_dir(),
    })?;
    Ok(match ended {
        Ended::Signal(sig) if sig != nix::sys::signal::Signal::SIGHUP as i32 => Exit::Interrupted,
        _ => Exit::Ok,
    })
}

/// Whether this user may write the database file.
#[cfg(unix)]
fn writable(db: &Path) -> bool {
    nix::unistd::access(db, nix::unistd::AccessFlags::W_OK).is_ok()
}

#[cfg(not(unix))]
fn writable(db: &Path) -> bool {
    std::fs::metadata(db).is_ok_and(|m| !m.permissions().readonly())
}
