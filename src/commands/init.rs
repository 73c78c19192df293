//! `nightshift init`: the store and a commented example config.

use std::path::{Path, PathBuf};

use anyhow::Context;

use serde_json::json;

use super::{Ctx, Exit, out, out_json};
use crate::cli::InitArgs;
use crate::config::{CONFIG_FILE, example};
use crate::store::Store;
use crate::util::{files, sanitize};

pub fn run(ctx: &Ctx, args: &InitArgs) -> anyhow::Result<Exit> {
    // A file named `host=h user=u password=p` is no store anyone meant.
    if crate::store::is_keyword_string(&ctx.db) {
        return Err(super::user_error(format!(
            "--db {}: {}; nothing was created",
            crate::store::place(&ctx.db),
            crate::store::KEYWORDS_HINT
        )));
    }
    let made_dir = store_dir(&ctx.db)?;
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
        let text = example::with_db(&db_line(&ctx.db, &config));
        write_config(&config, &text).with_context(|| format!("writing {}", config.display()))?;
    }
    let made_dir = made_dir.map(|d| sanitize::line(&d.display().to_string()).into_owned());
    if args.json {
        let mut said = json!({
            "store": {"path": db, "created": created},
            "config": {"path": shown, "created": wrote_config},
        });
        if let Some(dir) = made_dir {
            said["store"]["created_directory"] = json!(dir);
        }
        out_json(&said)?;
        return Ok(Exit::Ok);
    }
    if let Some(dir) = made_dir {
        out(format!("created directory {dir}"))?;
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
        if let Some(named) = ctx.config.db.as_deref()
            && crate::store::absolute(named) != crate::store::absolute(&ctx.db)
        {
            let named = sanitize::line(&crate::store::place(named)).into_owned();
            out(format!(
                "note: {shown} names the store {named} (`db`): commands without --db use that one"
            ))?;
        }
    }
    Ok(Exit::Ok)
}

/// Creates the missing directories a store file is to be in (`db =
/// "data/nightshift.db"` in a fresh checkout), where init refused with "No
/// such file or directory" and every other command sent the user back to
/// init. The directory it is in, if any was created (with every one
/// missing above it). One that cannot be made is the store's fault (exit
/// 3), as a store file that cannot be.
fn store_dir(db: &Path) -> anyhow::Result<Option<PathBuf>> {
    if crate::store::is_server(db) {
        return Ok(None);
    }
    let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(None);
    };
    let first = parent
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .last()
        .map(Path::to_path_buf);
    if first.is_none() {
        return Ok(None);
    }
    std::fs::create_dir_all(parent).map_err(|e| {
        crate::store::StoreError::CannotCreate(
            db.to_path_buf(),
            format!("creating its directory {}: {e}", parent.display()),
        )
    })?;
    Ok(Some(parent.to_path_buf()))
}

/// The config's `db` lines for the store at `db`, so that commands that find
/// `config` open that store: its path, relative to the config's directory
/// when it is there, else absolute. A database URL is not written into a
/// file anyone may read (it may hold a password): the config leaves `db`
/// to --db or NIGHTSHIFT_DB.
fn db_line(db: &Path, config: &Path) -> String {
    const GIVE_IT: &str = "keep giving it with --db or NIGHTSHIFT_DB";
    if crate::store::is_server(db) {
        return format!(
            "# This store is a database URL, which may hold a password: {GIVE_IT}.\n\
             # db = \"postgres://user@host/db\""
        );
    }
    let db = crate::store::absolute(db);
    let dir = crate::store::absolute(config)
        .parent()
        .map(Path::to_path_buf);
    let written: PathBuf = match (db.parent(), db.file_name()) {
        (Some(parent), Some(name)) if Some(parent) == dir.as_deref() => PathBuf::from(name),
        _ => db.clone(),
    };
    match written.to_str() {
        Some(path) => format!("db = {}", toml::Value::String(path.into())),
        None => format!("# The store's path is not UTF-8 text: {GIVE_IT}."),
    }
}

/// The config names the commands nightshift runs: whoever can write it can
/// run anything as this user. So it is never group- or world-writable,
/// whatever the umask; it stays readable, since read-only viewers (other
/// users, see the README) read it too. Written whole or not at all: a
/// killed `init` leaves no half a config that every command would refuse.
fn write_config(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    for stale in files::stale_temporaries(path) {
        let _ = std::fs::remove_file(stale);
    }
    let tmp = files::temporary_beside(path);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(text.as_bytes())?;
            f.sync_all()
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if files::publish_new(&tmp, path)? {
        Ok(())
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "another process wrote it meanwhile",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_names_the_store_it_was_made_for() {
        let line = |db: &str, config: &str| db_line(Path::new(db), Path::new(config));
        assert_eq!(line("ns.db", "nightshift.toml"), "db = \"ns.db\"");
        assert_eq!(
            line("/srv/q/x.db", "/srv/q/nightshift.toml"),
            "db = \"x.db\""
        );
        assert_eq!(
            line("/srv/q/x \"1\".db", "/etc/ns.toml"),
            "db = '/srv/q/x \"1\".db'"
        );
        let url = line("postgres://u:secret@h/q", "nightshift.toml");
        assert!(
            url.contains("NIGHTSHIFT_DB") && !url.contains("secret"),
            "{url}"
        );
        // The store beside the file is the example as checked in.
        assert_eq!(
            example::with_db(&line("nightshift.db", "nightshift.toml")),
            example::text()
        );
        // What is written parses back to the same store, or to none.
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("c/nightshift.toml");
        let db = dir.path().join("data/ns.db");
        let parse = |db: &Path| {
            let text = example::with_db(&db_line(db, &config));
            crate::config::Config::parse(&text, &config).unwrap().db
        };
        assert_eq!(parse(&db).as_deref(), Some(db.as_path()));
        assert_eq!(parse(Path::new("postgres://u:secret@h/q")), None);
    }
}
