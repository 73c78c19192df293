//! Access: another user reading a store they cannot write (0444 files owned
//! by root, a directory they cannot write) changes not a byte, with every
//! read command and the dashboard; their write commands fail clearly and
//! change nothing. What nightshift creates is private to its owner whatever
//! the umask, and no payload or environment secret reaches the log files,
//! the events or the alert hook.
//!
//! The other-user tests need root and `setpriv` (to become `nobody`):
//! `support/require.rs` skips them loudly without, and fails them under CI.
#![cfg(unix)]

use crate::support as common;
use crate::support::pty;
use crate::support::require::Tool;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Env, Ran, fingerprint, ran};

const NOBODY: u32 = 65534;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn side(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

/// `nightshift ARGS` as user `nobody` (no groups), on `env`'s store.
fn as_nobody(env: &Env, args: &[&str]) -> Ran {
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ])
        .arg(common::bin())
        .args(args)
        .current_dir(env.dir.path())
        .env("NIGHTSHIFT_DB", &env.db)
        .env("HOME", env.dir.path())
        .env("XDG_STATE_HOME", env.path("nobody-state"))
        .env("USER", "nobody")
        .env("NO_COLOR", "1")
        .env_remove("NIGHTSHIFT_CONFIG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    ran(out)
}

/// A store with a finished failing run, a writer connection holding
/// uncheckpointed changes (so `-wal` and `-shm` exist), and all three files
/// 0444 owned by root in a directory `nobody` can enter but not write.
fn locked_down_store() -> (Env, rusqlite::Connection) {
    let env = Env::new();
    env.failing_batch("b");
    std::fs::remove_file(env.path("nightshift.toml")).unwrap();
    let writer = env.sql();
    writer
        .execute_batch(
            "PRAGMA wal_autocheckpoint = 0;
             INSERT INTO events (at, batch_id, kind, message)
             VALUES (CAST(unixepoch('subsec') * 1000 AS INTEGER), 1, 'daemon', 'in the WAL only');",
        )
        .unwrap();
    for suffix in ["", "-wal", "-shm"] {
        let f = side(&env.db, suffix);
        assert!(f.exists(), "{f:?}");
        chmod(&f, 0o444);
    }
    chmod(env.dir.path(), 0o755);
    (env, writer)
}

/// Every read command, as `nobody`, on 0444 root-owned files: success, and
/// the three files byte for byte as they were (with a root writer holding
/// the WAL open). Then every write command: exit 3, one clear line naming
/// the store, nothing changed.
#[test]
fn another_user_reads_a_0444_store_and_changes_nothing() {
    require!(Tool::RootWithSetpriv);
    let (env, writer) = locked_down_store();
    let before = fingerprint(&env.db);
    let worker = env.path("failing-worker.sh");
    let w = worker.to_str().unwrap();
    let reads: &[&[&str]] = &[
        &["status"],
        &["status", "--json"],
        &["status", "--short"],
        &["status", "--prometheus"],
        &["items", "b"],
        &["items", "b", "--json", "--status", "failed"],
        &["show", "b", "k1"],
        &["show", "b", "k5", "--json"],
        &["dlq", "b"],
        &["dlq", "b", "--json"],
        &["dlq", "b", "--jsonl"],
        &["log"],
        &["log", "b", "--json", "--kind", "daemon"],
        &["run", "b", "--dry-run", "--", w],
        &["requeue", "b", "--all-failed", "--dry-run"],
        &["prune", "--older-than", "1s", "--dry-run"],
        &["schedule", "b"],
    ];
    for args in reads {
        let r = as_nobody(&env, args);
        if args[0] == "schedule" {
            // No schedule configured: a usage error, still no write.
            r.code(2);
        } else {
            r.code(0);
        }
        assert_eq!(fingerprint(&env.db), before, "{args:?} changed the store");
    }
    // Following the log for a few polls writes nothing either.
    let mut follow = Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
        ])
        .arg(common::bin())
        .args(["log", "--follow"])
        .current_dir(env.dir.path())
        .env("NIGHTSHIFT_DB", &env.db)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(follow.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(!first.is_empty());
    std::thread::sleep(std::time::Duration::from_millis(1200)); // two polls
    follow.kill().unwrap();
    follow.wait().unwrap();
    assert_eq!(
        fingerprint(&env.db),
        before,
        "log --follow changed the store"
    );
    // The uncheckpointed write is visible to the other user.
    let held = as_nobody(&env, &["log", "b", "--json", "--kind", "daemon"]).json_lines();
    assert_eq!(held.len(), 1);

    let items = env.path("more.jsonl");
    std::fs::write(&items, "{\"key\":\"new\"}\n").unwrap();
    chmod(&items, 0o444);
    let writes: &[&[&str]] = &[
        &["pause", "b"],
        &["unpause", "b"],
        &["requeue", "b", "--all-failed"],
        &["skip", "b", "k1", "--reason", "x"],
        &["add", "b", items.to_str().unwrap()],
        &["run", "b", "--", w],
        &["prune", "--older-than", "1s"],
    ];
    for args in writes {
        let r = as_nobody(&env, args);
        r.code(3);
        let line = r.error_line();
        assert!(
            line.contains(env.db.to_str().unwrap()) && line.contains("read-only"),
            "{args:?}: {line}"
        );
        assert_eq!(fingerprint(&env.db), before, "{args:?} changed the store");
    }
    drop(writer);
}

/// The dashboard as `nobody` in a terminal: read-only by itself (and with
/// `--read-only`), the write keys refused, every pane visited, the files
/// unchanged, the terminal restored.
#[test]
fn another_user_watches_read_only() {
    require!(Tool::RootWithSetpriv);
    let (env, writer) = locked_down_store();
    let before = fingerprint(&env.db);
    let bin = common::bin();
    for extra in [&[][..], &["--read-only"][..]] {
        let mut args = vec![
            format!("--reuid={NOBODY}"),
            format!("--regid={NOBODY}"),
            "--clear-groups".to_string(),
            bin.display().to_string(),
            "watch".to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut dash = pty::Dash::open(
            Path::new("/usr/bin/setpriv"),
            env.dir.path(),
            &env.db,
            &args,
            (80, 24),
        );
        dash.wait_text("READ-ONLY");
        dash.wait_loaded();
        for pane in ["1", "2", "3", "4", "5"] {
            dash.key(pane);
            for k in ["j", "\r", "R", "A", "x", "p", "r", "y", "\x1b", "\x1b"] {
                dash.key(k);
            }
        }
        dash.key("3");
        dash.key("x");
        dash.wait_text("read-only: x (skip) is disabled");
        dash.key("q");
        assert_eq!(dash.wait_exit(), 0);
        assert!(dash.wait_restored(), "{}", dash.screen());
        assert_eq!(fingerprint(&env.db), before, "watch {extra:?} wrote");
    }
    drop(writer);
}

/// With a umask of 000: the store, its `-wal` and `-shm` while a run
/// writes, and the event log files are 0600; the log directory is 0700.
#[test]
fn created_files_are_private_whatever_the_umask() {
    let env = Env::bare();
    env.config("log_dir = \"logs\"\n[batch.b]\nretries = 0\n");
    let sh = |cmd: &str| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("umask 000; {cmd}"))
            .current_dir(env.dir.path())
            .env("NIGHTSHIFT_DB", &env.db)
            .env("NO_COLOR", "1")
            .env_remove("NIGHTSHIFT_CONFIG")
            .output()
            .unwrap();
        assert!(out.status.success(), "{cmd}: {out:?}");
    };
    let bin = common::bin().display().to_string();
    std::fs::remove_file(env.path("nightshift.toml")).unwrap();
    sh(&format!("'{bin}' init"));
    assert_eq!(mode(&env.path("nightshift.toml")), 0o644);
    env.config("log_dir = \"logs\"\n[batch.b]\nretries = 0\n");
    env.add_items("b", 3);
    // The worker reports the modes of the side files while the run has
    // the store open.
    let w = env.script(
        "w.sh",
        "cat >/dev/null; stat -c '%a' \"$NIGHTSHIFT_DB-wal\" \"$NIGHTSHIFT_DB-shm\" > \"$NIGHTSHIFT_KEY.modes\"; echo '{}'",
    );
    sh(&format!("'{bin}' run b -- '{}'", w.display()));
    assert_eq!(mode(&env.db), 0o600);
    // The config names the commands to run: never writable by others.
    assert_eq!(mode(&env.path("nightshift.toml")), 0o644);
    let modes = std::fs::read_to_string(env.path("k1.modes")).unwrap();
    assert_eq!(modes.split_whitespace().collect::<Vec<_>>(), ["600", "600"]);
    let logs = env.path("logs");
    assert_eq!(mode(&logs), 0o700);
    let files: Vec<PathBuf> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!files.is_empty());
    for f in files {
        assert_eq!(mode(&f), 0o600, "{f:?}");
    }
}

/// A secret in a payload and one in the environment: neither reaches the
/// event log files, the events, the runs, or the alert hook's input, and
/// the worker (which needs them) still gets both.
#[test]
fn no_secret_in_logs_events_or_alerts() {
    let env = Env::new();
    env.config(
        "log_dir = \"logs\"\n[batch.b]\nretries = 0\nalert = [\"sh\", \"-c\", \"cat > alert.stdin\"]\n",
    );
    let items = "{\"key\":\"ok\",\"token\":\"PAYLOAD-SECRET-1\"}\n\
                 {\"key\":\"bad\",\"token\":\"PAYLOAD-SECRET-1\"}\n";
    let file = env.write("items.jsonl", items);
    env.cmd().args(["add", "b"]).arg(&file).assert().success();
    let w = env.script(
        "w.sh",
        r#"grep -q PAYLOAD-SECRET-1 && [ "$API_TOKEN" = ENV-SECRET-2 ] || exit 3
case "$NIGHTSHIFT_KEY" in
  bad) echo '{"error_class":"Nope","transient":false,"message":"rejected"}' >&2; exit 1 ;;
esac
echo '{"posted":true}'"#,
    );
    env.cmd()
        .args(["run", "b", "--verbose", "--"])
        .arg(&w)
        .env("API_TOKEN", "ENV-SECRET-2")
        .assert()
        .code(1);
    assert_eq!(env.item("ok").0, "done", "the worker got both secrets");
    assert_eq!(
        env.strings("SELECT error_class FROM items WHERE key = 'bad'"),
        ["Nope"]
    );
    let mut texts = vec![std::fs::read_to_string(env.path("alert.stdin")).unwrap()];
    for f in std::fs::read_dir(env.path("logs")).unwrap() {
        texts.push(std::fs::read_to_string(f.unwrap().path()).unwrap());
    }
    texts.extend(
        env.strings("SELECT kind || ' ' || message || ' ' || coalesce(fields, '') FROM events"),
    );
    texts.extend(env.strings("SELECT coalesce(summary, '') FROM runs"));
    assert!(texts.len() > 5, "{texts:?}");
    for t in &texts {
        assert!(
            !t.contains("SECRET"),
            "a secret was written where it was not asked for: {t}"
        );
    }
}

/// A private store (the default, 0600) refuses another user with a clear
/// line and exit 3; shared with a group as the README says (0640, the
/// user in that group), the same user reads it, read-only, byte for byte.
#[test]
fn a_private_store_refuses_others_and_a_group_share_works() {
    require!(Tool::RootWithSetpriv);
    let env = Env::new();
    env.add_items("b", 2);
    chmod(env.dir.path(), 0o755);
    assert_eq!(mode(&env.db), 0o600);
    let r = as_nobody(&env, &["status"]);
    r.code(3);
    let line = r.error_line();
    assert!(line.contains("permission denied"), "{line}");
    assert!(line.contains(env.db.to_str().unwrap()), "{line}");

    // Shared with nobody's group (no other user need exist for the test).
    nix::unistd::chown(&env.db, None, Some(nix::unistd::Gid::from_raw(NOBODY))).unwrap();
    chmod(&env.db, 0o640);
    let before = fingerprint(&env.db);
    let out = Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--init-groups",
        ])
        .arg(common::bin())
        .args(["status", "--json"])
        .current_dir(env.dir.path())
        .env("NIGHTSHIFT_DB", &env.db)
        .output()
        .unwrap();
    let r = ran(out);
    r.code(0);
    assert_eq!(r.json()["batches"][0]["pending"], 2);
    assert_eq!(fingerprint(&env.db), before);
}
