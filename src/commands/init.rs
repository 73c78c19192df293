//! `nightshift init`: the store and a commented example config.

use anyhow::Context;

use serde_json::json;

use super::{Ctx, Exit, out, out_json};
use crate::cli::InitArgs;
use crate::config::{CONFIG_FILE, EXAMPLE};
use crate::store::Store;
use crate::util::sanitize;

pub fn run(ctx: &Ctx, args: &InitArgs) -> anyhow::Result<Exit> {
    let (_store, created) = Store::create(&ctx.db)?;
    // Paths are shown inert: a directory name may hold anything.
    let db = sanitize::line(&crate::store::place(&ctx.db)).into_owned();
    let config = ctx
        .config
        .file
        .clone()
        .unwrap_or_else(|| crate::store::beside(&ctx.db, CONFIG_FILE));
    let shown = sanitize::line(&config.display().to_string()).into_owned();
    let wrote_config = !config.exists();
    if wrote_config {
        // A database URL is not written into a file anyone may read (it
        // may hold a password): the config leaves `db` to --db or
        // NIGHTSHIFT_DB.
        let text = if crate::store::is_server(&ctx.db) {
            EXAMPLE.replace(
                "\ndb = \"nightshift.db\"\n",
                "\n# This store was given by --db or NIGHTSHIFT_DB; keep giving it that way.\n\
                 # db = \"nightshift.db\"\n",
            )
        } else {
            EXAMPLE.to_string()
        };
        write_config(&config, &text).with_context(|| format!("writing {}", config.display()))?;
    }
    if args.json {
        out_json(&json!({
            "store": {"path": db, "created": created},
            "config": {"path": shown, "created": wrote_config},
        }))?;
        return Ok(Exit::Ok);
    }
    if created {
        out(format!("created store {db}"))?;
    } else {
        out(format!("store {db} already exists (left as it is)"))?;
    }
    if wrote_config {
        out(format!(
            "wrote example config {shown} (edit it: every key is explained)"
        ))?;
    } else {
        out(format!("config {shown} already exists (left as it is)"))?;
    }
    Ok(Exit::Ok)
}

/// The config names the commands nightshift runs: whoever can write it can
/// run anything as this user. So it is never group- or world-writable,
/// whatever the umask; it stays readable, since read-only viewers (other
/// users, see the README) read it too.
fn write_config(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o644);
    options.open(path)?.write_all(text.as_bytes())
}
