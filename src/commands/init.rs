//! `nightshift init`: the store and a commented example config.

use anyhow::Context;

use super::{Ctx, Exit, out};
use crate::config::{CONFIG_FILE, EXAMPLE};
use crate::store::Store;
use crate::util::sanitize;

pub fn run(ctx: &Ctx) -> anyhow::Result<Exit> {
    let (_store, created) = Store::create(&ctx.db)?;
    // Paths are shown inert: a directory name may hold anything.
    let db = sanitize::line(&ctx.db.display().to_string()).into_owned();
    if created {
        out(format!("created store {db}"))?;
    } else {
        out(format!("store {db} already exists (left as it is)"))?;
    }
    let dir = ctx
        .db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let config = ctx
        .config
        .file
        .clone()
        .unwrap_or_else(|| dir.join(CONFIG_FILE));
    let shown = sanitize::line(&config.display().to_string()).into_owned();
    if config.exists() {
        out(format!("config {shown} already exists (left as it is)"))?;
    } else {
        write_config(&config).with_context(|| format!("writing {}", config.display()))?;
        out(format!(
            "wrote example config {shown} (edit it: every key is explained)"
        ))?;
    }
    Ok(Exit::Ok)
}

/// The config names the commands nightshift runs: whoever can write it can
/// run anything as this user. So it is never group- or world-writable,
/// whatever the umask; it stays readable, since read-only viewers (other
/// users, see the README) read it too.
fn write_config(path: &std::path::Path) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o644);
    options.open(path)?.write_all(EXAMPLE.as_bytes())
}
