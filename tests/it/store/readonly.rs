//! Read commands open the store read-only and never change a byte of the
//! database, its `-wal` or its `-shm`: with no writer around (no side files
//! exist), while a writer keeps uncheckpointed changes in the WAL, and on a
//! read-only file in a read-only directory.

use crate::support as common;

use std::path::Path;

use common::{Env, fingerprint};

/// Every command that only reads, in every output format.
fn read_commands(worker: &Path) -> Vec<Vec<String>> {
    let w = worker.to_str().unwrap();
    [
        vec!["status"],
        vec!["status", "--json"],
        vec!["status", "--short"],
        vec!["status", "--prometheus"],
        vec!["status", "b", "--json"],
        vec!["items", "b"],
        vec!["items", "b", "--json", "--status", "failed"],
        vec!["show", "b", "k1"],
        vec!["show", "b", "k5", "--json"],
        vec!["dlq", "b"],
        vec!["dlq", "b", "--json"],
        vec!["dlq", "b", "--jsonl"],
        vec!["dlq", "b", "--since", "1h"],
        vec!["log"],
        vec!["log", "b", "--json", "--kind", "quarantined"],
        vec!["log", "--key", "k1"],
        vec!["run", "b", "--dry-run", "--", w],
        vec!["run", "b", "--dry-run", "--json", "--", w],
        vec!["requeue", "b", "--all-failed", "--dry-run"],
        vec!["requeue", "b", "k1", "--dry-run", "--json"],
        vec!["prune", "--older-than", "1s", "--dry-run"],
        vec![
            "prune",
            "--older-than",
            "1s",
            "--include-failed",
            "--dry-run",
        ],
    ]
    .iter()
    .map(|args| args.iter().map(|s| s.to_string()).collect())
    .collect()
}

/// Runs every read command, asserting each succeeds and changes nothing.
fn assert_reads_change_nothing(env: &Env, worker: &Path) {
    let before = fingerprint(&env.db);
    for args in read_commands(worker) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = env.run(&args);
        ran.code(0);
        assert!(!ran.stdout.is_empty(), "{args:?} printed nothing");
        assert_eq!(fingerprint(&env.db), before, "{args:?} changed the store");
    }
}

fn side_files_exist(db: &Path) -> (bool, bool) {
    let side = |s: &str| {
        let mut p = db.as_os_str().to_os_string();
        p.push(s);
        Path::new(&p).exists()
    };
    (side("-wal"), side("-shm"))
}

#[test]
fn reads_without_a_writer_create_no_side_files() {
    let env = Env::new();
    let worker = env.failing_batch("b");
    assert_eq!(
        side_files_exist(&env.db),
        (false, false),
        "checkpointed and closed"
    );
    assert_reads_change_nothing(&env, &worker);
    assert_eq!(
        side_files_exist(&env.db),
        (false, false),
        "no -wal or -shm appeared"
    );
}

#[test]
fn reads_while_a_writer_holds_uncheckpointed_changes() {
    let env = Env::new();
    let worker = env.failing_batch("b");
    // A writer with changes only in the WAL, connection kept open.
    let writer = env.sql();
    writer
        .execute_batch(
            "PRAGMA wal_autocheckpoint = 0;
             INSERT INTO events (at, batch_id, kind, message)
             VALUES (CAST(unixepoch('subsec') * 1000 AS INTEGER), 1, 'daemon', 'written, not checkpointed');",
        )
        .unwrap();
    assert_eq!(side_files_exist(&env.db), (true, true));

    // Readers see the uncheckpointed write (they read through the WAL)...
    let held = env
        .run(&["log", "b", "--json", "--kind", "daemon"])
        .code(0)
        .json_lines();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0]["message"], "written, not checkpointed");
    // ...and leave the database, -wal and -shm exactly as they were.
    assert_reads_change_nothing(&env, &worker);

    // So does following the log for a while.
    let before = fingerprint(&env.db);
    let mut follow = env
        .spawnable()
        .args(["log", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(follow.stdout.as_mut().unwrap()),
        &mut first,
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200)); // two polls
    follow.kill().unwrap();
    follow.wait().unwrap();
    assert!(!first.is_empty());
    assert_eq!(
        fingerprint(&env.db),
        before,
        "log --follow changed the store"
    );
    drop(writer);
}

#[cfg(unix)]
#[test]
fn a_read_only_file_in_a_read_only_directory() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let worker_dir = tempfile::tempdir().unwrap();
    let worker = worker_dir.path().join("w.sh");
    std::fs::write(&worker, "#!/bin/sh\ncat >/dev/null\n").unwrap();
    std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
    env.failing_batch("b");
    std::fs::remove_file(env.path("nightshift.toml")).unwrap();
    for f in std::fs::read_dir(env.dir.path()).unwrap() {
        let f = f.unwrap().path();
        if f.is_dir() {
            std::fs::remove_dir_all(&f).unwrap(); // logs/
        } else if f != env.db {
            std::fs::remove_file(&f).unwrap();
        }
    }
    std::fs::set_permissions(&env.db, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let restore = || {
        std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap()
    };

    // As root, permissions restrict nothing: the reads must still write
    // nothing, which is what the fingerprint checks either way.
    let root = nix::unistd::geteuid().is_root();
    let result = std::panic::catch_unwind(|| {
        assert_reads_change_nothing(&env, &worker);
        assert_eq!(side_files_exist(&env.db), (false, false));
        if !root {
            // A write is refused with a clear error, and changes nothing.
            let before = fingerprint(&env.db);
            let ran = env.run(&["pause", "b"]);
            ran.code(3);
            assert!(
                ran.error_line().contains(env.db.to_str().unwrap()),
                "{ran:?}"
            );
            assert_eq!(fingerprint(&env.db), before);
        }
    });
    restore();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// A read racing a writer's close can leave an empty `-wal` and no `-shm`
/// (SQLite opens the WAL with O_CREAT even read-only). Reads must go on
/// working from the complete database file, changing nothing, and the next
/// writer must carry on as usual.
#[test]
fn an_empty_wal_left_without_shared_memory_does_not_block_reads() {
    let env = Env::new();
    env.add_items("b", 3);
    assert_eq!(side_files_exist(&env.db), (false, false));
    let mut wal = env.db.as_os_str().to_os_string();
    wal.push("-wal");
    std::fs::write(&wal, b"").unwrap();
    let before = fingerprint(&env.db);
    let status = env.status();
    assert_eq!(status["batches"][0]["pending"], 3, "{status}");
    env.cmd().args(["items", "b"]).assert().success();
    assert_eq!(fingerprint(&env.db), before, "a read changed the store");
    // A writer adopts the empty WAL and cleans up when it closes.
    env.add_items("c", 2);
    assert_eq!(env.status()["batches"][1]["pending"], 2);
    assert_eq!(side_files_exist(&env.db), (false, false));
}
