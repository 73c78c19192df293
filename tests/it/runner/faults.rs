//! Faults from outside: a full disk during `add`, `run` and `requeue`, a
//! read-only file system, the database locked by another program, the
//! store file deleted or replaced under a dashboard, and workers that
//! misbehave (a flood of output, daemons that leave their process group,
//! stdin closed early, invalid UTF-8).
//!
//! Disk-full and read-only need a small file system of their own: a tmpfs,
//! mounted by the test, which needs root: without it those tests say
//! loudly that they did not run and pass, except under CI, where they fail
//! (`support/require.rs`); a mount that fails as root fails them.
//!
//! Covered elsewhere, not repeated: a worker that never exits (timeout kills
//! its group: `runner::basics`), a corrupt or foreign database
//! (`cli::bad_input`), reads that write nothing (`store::readonly`).
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::pty;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::require::{Tool, have};
use common::{Env, add_keys, assert_no_process_left, pids_with, wait_for};

fn p(path: &Path) -> String {
    path.display().to_string()
}

// ---- A small file system of our own ----

/// A tmpfs mounted on a directory; unmounted on drop.
struct Mount {
    dir: PathBuf,
}

impl Mount {
    /// Mounts a tmpfs of `size` (`mount -o size=`) on `dir`. `None` when
    /// not root outside CI (after saying so on stderr: `require.rs`); a
    /// mount that fails as root fails the test.
    fn tmpfs(dir: &Path, size: &str) -> Option<Mount> {
        if !have(Tool::Root) {
            return None;
        }
        std::fs::create_dir_all(dir).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0755")])
            .arg("tmpfs")
            .arg(dir)
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Mount {
                dir: dir.to_path_buf(),
            }),
            other => {
                let why = match other {
                    Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                    Err(e) => e.to_string(),
                };
                panic!("cannot mount a tmpfs on {} ({why})", dir.display());
            }
        }
    }

    /// Gives the file system `size` (room again after it filled up).
    fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "resizing {}", self.dir.display());
    }

    fn remount_read_only(&self) {
        let ok = Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.dir)
            .status()
            .unwrap()
            .success();
        assert!(ok, "remounting {} read-only", self.dir.display());
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        // Lazy: a process of a failed test may still have a file open.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

/// A store inside a fresh tmpfs of `size`, with batch `b` configured. The
/// WAL alone grows to about 4 MB between checkpoints.
fn store_on_tmpfs(size: &str) -> Option<(Env, Mount)> {
    let mut env = Env::bare();
    let dir = env.path("fs");
    let mount = Mount::tmpfs(&dir, size)?;
    env.db = dir.join("nightshift.db");
    env.cmd().arg("init").assert().success();
    std::fs::remove_file(dir.join("nightshift.toml")).unwrap();
    env.write(
        "fs/nightshift.toml",
        "[batch.b]\nconcurrency = 1\nretries = 0\nmax_attempts = 5\n",
    );
    Some((env, mount))
}

/// Fills the file system holding `dir` to the last byte.
fn fill(dir: &Path) -> PathBuf {
    let filler = dir.join("filler");
    // dd stops at ENOSPC and says so: its exit status is not ours to check.
    let _ = Command::new("dd")
        .args(["if=/dev/zero", "bs=4096"])
        .arg(format!("of={}", filler.display()))
        .stderr(Stdio::null())
        .status()
        .unwrap();
    filler
}

/// `PRAGMA integrity_check`, counters equal to a count of the items, no
/// item in an impossible state: the store is intact.
fn assert_intact(env: &Env) {
    let conn = env.sql();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let off: i64 = conn
        .query_row(
            "SELECT count(*) FROM counts c WHERE c.n <> (SELECT count(*) FROM items i
               WHERE i.batch_id = c.batch_id AND
                 (CASE i.status WHEN 'failed' THEN i.tier WHEN 'done' THEN i.outcome
                  ELSE i.status END) = c.bucket)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(off, 0, "counters differ from the items");
    let failed_without_letter: i64 = conn
        .query_row(
            "SELECT count(*) FROM items i WHERE status = 'failed' AND NOT EXISTS (
               SELECT 1 FROM dead_letters d WHERE d.item_id = i.id AND d.attempt = i.attempts)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        failed_without_letter, 0,
        "failed items without a dead letter"
    );
}

/// (status, count) of every status, sorted.
fn statuses(env: &Env) -> Vec<(String, i64)> {
    let conn = env.sql();
    let mut st = conn
        .prepare(
            "SELECT status || coalesce('/' || tier, ''), count(*) FROM items GROUP BY 1 ORDER BY 1",
        )
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

const DISK_FULL: &str = "is full: nothing was changed";

// ---- Disk full ----

#[test]
fn disk_full_during_add_imports_nothing_and_says_so() {
    let Some((env, _mount)) = store_on_tmpfs("2m") else {
        return;
    };
    add_keys(&env, "b", &["a", "b", "c"]);
    // About 4 MB of items: more than the file system holds.
    let pad = "x".repeat(150);
    let lines: String = (0..25_000)
        .map(|i| format!("{{\"key\":\"big-{i}\",\"pad\":\"{pad}\"}}\n"))
        .collect();
    // The input file lives outside the small file system.
    let file = env.write("big.jsonl", &lines);
    let before = statuses(&env);
    let out = env.cmd().args(["add", "b"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(DISK_FULL), "{err}");
    assert_eq!(
        statuses(&env),
        before,
        "an add that failed imported nothing"
    );
    assert_intact(&env);
    // Room again: the same add goes through whole.
    add_keys(&env, "b", &["d"]);
    assert_eq!(env.int("SELECT count(*) FROM items"), 4);
}

/// A full disk part-way through an add while a runner is live (so the add
/// goes in chunks, which keep the runner from waiting): the chunks before
/// it stay, and the error says exactly how many items were added (not
/// "nothing was changed" about them); that is what the store holds and
/// what the `added` event records, or the error says that the full disk
/// took no event either. With room again, the same add adds the rest.
#[test]
fn disk_full_during_an_add_beside_a_runner_says_exactly_what_was_added() {
    let Some((env, mount)) = store_on_tmpfs("2m") else {
        return;
    };
    env.write(
        "fs/nightshift.toml",
        "[batch.b]\nconcurrency = 1\n[batch.r]\nconcurrency = 1\ngrace = \"30s\"\n",
    );
    add_keys(&env, "r", &["slow"]);
    let (gate, started) = (env.path("gate"), env.path("started"));
    let w = p(&env.script(
        "gated.sh",
        &format!(
            "cat >/dev/null\ntouch {}\nwhile [ ! -e {} ]; do sleep 0.05; done\necho '\"ok\"'",
            p(&started),
            p(&gate)
        ),
    ));
    let mut runner = env.spawn("run", &["run", "r", "--", &w]);
    wait_for("the runner's worker", || started.exists());

    // About 4 MB of items: more than the file system holds.
    let pad = "x".repeat(150);
    let lines: String = (0..25_000)
        .map(|i| format!("{{\"key\":\"big-{i}\",\"pad\":\"{pad}\"}}\n"))
        .collect();
    let file = env.write("big.jsonl", &lines);
    let out = env.cmd().args(["add", "b"]).arg(&file).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let added = env
        .int("SELECT count(*) FROM items i JOIN batches b ON b.id = i.batch_id WHERE b.name = 'b'");
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(added > 0 && added < 25_000, "{added}: {err}");
    let said = format!(
        "nightshift: error: {added} of 25000 items added before the disk holding {} filled up; \
         run it again to add the rest (adding is idempotent)",
        env.db.display()
    );
    // The `added` event fits if the chunk that failed left room for it;
    // how much it left depends on the chunk sizes, which follow the
    // machine's pace. Either way the error says which.
    let events = env.events("b", "added");
    if events.is_empty() {
        assert_eq!(
            err,
            format!(
                "{said} (not recorded in the run log: the disk holding {} is full: \
                 nothing was changed)\n",
                env.db.display()
            )
        );
    } else {
        assert_eq!(err, format!("{said}\n"));
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["fields"]["added"], added);
    }
    assert_intact(&env);

    mount.resize("32m");
    let again = env.cmd().args(["add", "b"]).arg(&file).output().unwrap();
    assert_eq!(
        common::stdout(&again),
        format!("b: added {}, already present {added}\n", 25_000 - added),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_intact(&env);
    common::signal(runner.id(), nix::sys::signal::Signal::SIGTERM);
    std::fs::write(&gate, "").unwrap();
    let _ = runner.wait();
}

#[test]
fn disk_full_during_a_run_stops_it_clearly_and_a_rerun_finishes() {
    let Some((env, mount)) = store_on_tmpfs("16m") else {
        return;
    };
    let keys: Vec<String> = (0..6).map(|i| format!("k{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    add_keys(&env, "b", &keys);
    let effects = env.path("effects.log");
    // The third item's worker fills the disk (once) after its side effect:
    // its own done mark (and everything after it) cannot be written.
    let filler = mount.dir.join("filler");
    let once = env.path("filled");
    let w = p(&env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\necho \"$NIGHTSHIFT_KEY\" >> {effects}\n\
             if [ \"$NIGHTSHIFT_KEY\" = k2 ] && [ ! -e {once} ]; then\n\
             touch {once}; dd if=/dev/zero of={filler} bs=4096 2>/dev/null\nfi\n\
             echo '\"ok\"'",
            effects = p(&effects),
            filler = p(&filler),
            once = p(&once),
        ),
    ));
    let out = env.cmd().args(["run", "b", "--", &w]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(DISK_FULL), "{err}");
    assert!(!err.contains("panick"), "{err}");
    assert_intact(&env);
    // What was recorded before the disk filled stays; k2's success was not
    // recorded, so it is not done (it runs again: never the reverse).
    let done = env.strings("SELECT key FROM items WHERE status = 'done' ORDER BY key");
    assert_eq!(done, ["k0", "k1"]);
    assert_eq!(
        env.int("SELECT count(*) FROM items WHERE status = 'failed'"),
        0
    );

    // Space again: a re-run takes the claim back and finishes the batch.
    std::fs::remove_file(&filler).unwrap();
    env.cmd().args(["run", "b", "--", &w]).assert().success();
    assert_eq!(statuses(&env), [("done".to_string(), 6)]);
    assert_intact(&env);
    // Only the item in flight when the disk filled ran twice.
    let ran = common::tally(&common::lines(&effects));
    let twice: Vec<_> = ran.iter().filter(|(_, n)| **n > 1).collect();
    assert_eq!(twice, [(&"k2".to_string(), &2)], "{ran:?}");
    assert_eq!(ran.len(), 6, "{ran:?}");
}

#[test]
fn disk_full_during_requeue_moves_nothing() {
    let Some((env, mount)) = store_on_tmpfs("16m") else {
        return;
    };
    let keys: Vec<String> = (0..20).map(|i| format!("k{i}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    add_keys(&env, "b", &keys);
    let w = p(&env.script("fail.sh", "cat >/dev/null\necho 'bad input' >&2\nexit 2"));
    env.cmd().args(["run", "b", "--", &w]).assert().code(1);
    let before = statuses(&env);
    assert_eq!(before, [("failed/manual".to_string(), 20)]);
    let filler = fill(&mount.dir);
    let out = env
        .cmd()
        .args(["requeue", "b", "--all-failed"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains(DISK_FULL), "{err}");
    // Reads still work on a full disk.
    env.cmd().arg("status").assert().success();
    std::fs::remove_file(filler).unwrap();
    assert_eq!(statuses(&env), before);
    assert_intact(&env);
    env.cmd()
        .args(["requeue", "b", "--all-failed"])
        .assert()
        .success();
    assert_eq!(statuses(&env), [("pending".to_string(), 20)]);
    assert_intact(&env);
}

// ---- Read-only file system ----

#[test]
fn a_read_only_file_system_reads_fine_and_refuses_writes_clearly() {
    let Some((env, mount)) = store_on_tmpfs("4m") else {
        return;
    };
    add_keys(&env, "b", &["a", "b"]);
    let fp = env.fingerprint();
    mount.remount_read_only();
    let out = env.cmd().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"pending\":2"));
    let file = env.write("more.jsonl", "{\"key\":\"c\"}\n");
    let w = p(&env.script("w.sh", "cat >/dev/null\necho '\"ok\"'"));
    for args in [
        vec!["add".to_string(), "b".into(), p(&file)],
        vec!["run".into(), "b".into(), "--".into(), w],
        vec!["requeue".into(), "b".into(), "--all-failed".into()],
        vec!["pause".into(), "b".into(), "--reason".into(), "x".into()],
    ] {
        let out = env.cmd().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {err}");
        assert!(err.contains("read-only file system"), "{args:?}: {err}");
        assert!(!err.contains("panick"), "{args:?}: {err}");
    }
    assert_eq!(env.fingerprint(), fp);
}

// ---- Another program holds the database ----

/// Decided: a writer waits for another program's lock (up to the store's
/// busy timeout, 60 s) rather than fail a cron job over a backup or a
/// `sqlite3` session that holds it for a while; readers never wait (WAL).
/// Past the timeout the command fails with "locked by another program".
/// The one test of the suite that waits 30 s.
#[test]
fn a_database_locked_by_another_program_for_30_s_is_waited_for() {
    require!(Tool::Python3);
    let env = Env::new();
    env.config("[batch.b]\nconcurrency = 2\nretries = 0\n");
    add_keys(&env, "b", &["a", "b", "c"]);
    let fail = p(&env.script("fail.sh", "cat >/dev/null\nexit 2"));
    env.cmd()
        .args(["run", "b", "--key", "c", "--", &fail])
        .assert()
        .code(1);
    let script = "import sqlite3, sys, time\n\
                  c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
                  c.execute('BEGIN EXCLUSIVE')\n\
                  print('locked', flush=True)\n\
                  time.sleep(30)\n\
                  c.execute('ROLLBACK')\n";
    let mut holder = common::Background(
        Command::new("python3")
            .args(["-c", script])
            .arg(&env.db)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 (holds the lock)"),
    );
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "locked");

    let w = p(&env.script("w.sh", "cat >/dev/null\necho '\"ok\"'"));
    let more = env.write("more.jsonl", "{\"key\":\"d\"}\n");
    let mut add = env.spawn("add", &["add", "b", &p(&more)]);
    let mut requeue = env.spawn("requeue", &["requeue", "b", "--all-failed"]);
    // Readers go on meanwhile.
    let out = env.cmd().args(["status", "--json"]).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        holder.try_wait().unwrap().is_none(),
        "the lock was held while status read"
    );
    let status = holder.wait().unwrap();
    assert!(status.success());
    for (tag, child) in [("add", &mut add), ("requeue", &mut requeue)] {
        let code = child.wait().unwrap().code();
        let (_, err) = env.output_of(tag);
        assert_eq!(code, Some(0), "{tag}: {err}");
        assert!(!err.to_lowercase().contains("lock"), "{tag}: {err}");
    }
    env.cmd().args(["run", "b", "--", &w]).assert().success();
    assert_eq!(statuses(&env), [("done".to_string(), 4)]);
}

// ---- The store file under a running dashboard ----

#[test]
fn a_dashboard_shows_stale_when_the_store_goes_and_recovers_when_it_is_back() {
    let env = Env::new();
    add_keys(&env, "b", &["a", "b", "c"]);
    let mut dash = pty::Dash::open(
        &common::bin(),
        env.dir.path(),
        &env.db,
        &["watch", "--interval", "200ms"],
        (100, 30),
    );
    dash.wait_loaded();
    let side = |ext: &str| PathBuf::from(format!("{}{ext}", env.db.display()));
    for f in [env.db.clone(), side("-wal"), side("-shm")] {
        let _ = std::fs::remove_file(f);
    }
    dash.wait_text("stale");
    assert!(!env.db.exists(), "the dashboard must not create a store");

    // Replaced by another store (with other items) at the same path.
    let other = Env::new();
    add_keys(&other, "fresh", &["x", "y"]);
    std::fs::copy(&other.db, &env.db).unwrap();
    dash.wait_for("the new store", |s| {
        !s.contains("stale") && s.contains("fresh")
    });
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert!(dash.wait_restored());
}

// ---- Workers that misbehave ----

/// Peak resident memory of a live process, in KiB.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn a_worker_writing_100_mb_to_stdout_and_stderr_is_capped() {
    let env = Env::new();
    add_keys(&env, "b", &["flood"]);
    let marker = env.path("written");
    let w = p(&env.script(
        "flood.sh",
        &format!(
            "cat >/dev/null\nhead -c 100000000 /dev/zero | tr '\\0' x\n\
             head -c 100000000 /dev/zero | tr '\\0' y >&2\n\
             touch {}\nsleep 2",
            p(&marker)
        ),
    ));
    let mut runner = env.spawn("run", &["run", "b", "--", &w]);
    wait_for("the flood to be written", || marker.exists());
    // The runner has read all 200 MB by now (the pipes hold 64 KiB).
    let peak = peak_kib(runner.id()).expect("the runner is still waiting for its worker");
    assert!(
        runner.wait().unwrap().success(),
        "{:?}",
        env.output_of("run")
    );
    assert!(
        peak < 64 * 1024,
        "the runner's memory followed the worker's output: peak {peak} KiB"
    );
    let out = env
        .cmd()
        .args(["show", "b", "flood", "--json"])
        .output()
        .unwrap();
    let item: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = &item["item"]["result"];
    assert_eq!(result["truncated"], true, "{result}");
    assert!(result.to_string().len() < 2 << 20);
}

#[test]
fn daemons_a_worker_starts_are_killed_even_outside_its_process_group() {
    let env = Env::new();
    env.config("[batch.b]\nconcurrency = 2\nitem_timeout = \"1m\"\n");
    add_keys(&env, "b", &["holds-pipes", "closed-pipes", "plain"]);
    let marker = format!("daemon-of-{}", env.dir.path().display());
    // A daemon in a new session (out of the worker's group): one keeps the
    // worker's stdout and stderr, one closes them like a proper daemon; a
    // plain background child stays in the group.
    let w = p(&env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\ncase \"$NIGHTSHIFT_KEY\" in\n\
             holds-pipes) setsid sh -c 'sleep 1000' {marker} & ;;\n\
             closed-pipes) setsid sh -c 'sleep 1000' {marker} </dev/null >/dev/null 2>&1 & ;;\n\
             plain) sh -c 'sleep 1000' {marker} & ;;\n\
             esac\nsleep 0.3\necho '\"ok\"'"
        ),
    ));
    // Without the kill, the daemon holding the pipes would hold the run
    // for its 1,000 s (the command's timeout only guards a hung test).
    env.cmd()
        .args(["run", "b", "--", &w])
        .timeout(Duration::from_secs(120))
        .assert()
        .success();
    assert_eq!(statuses(&env), [("done".to_string(), 3)]);
    assert_no_process_left(&marker);
    assert!(pids_with(&marker).is_empty());
}

#[test]
fn a_worker_that_closes_stdin_before_reading_its_payload_is_fine() {
    let env = Env::new();
    // A payload far larger than a pipe's buffer.
    let pad = "p".repeat(1 << 20);
    let file = env.write(
        "big.jsonl",
        &format!("{{\"key\":\"k\",\"pad\":\"{pad}\"}}\n"),
    );
    env.cmd().args(["add", "b"]).arg(file).assert().success();
    let w = p(&env.script("w.sh", "exec 0<&-\necho '\"ok\"'"));
    env.cmd().args(["run", "b", "--", &w]).assert().success();
    assert_eq!(env.item("k").0, "done");
}

#[test]
fn invalid_utf8_from_a_worker_is_stored_and_shown_without_harm() {
    let env = Env::new();
    env.config("[batch.b]\nretries = 0\n");
    add_keys(&env, "b", &["good", "bad"]);
    let w = p(&env.script(
        "w.sh",
        "cat >/dev/null\nprintf 'out \\377\\376 \\303\\n'\n\
         if [ \"$NIGHTSHIFT_KEY\" = bad ]; then printf 'err \\377 \\303(\\n' >&2; exit 2; fi",
    ));
    env.cmd().args(["run", "b", "--", &w]).assert().code(1);
    assert_eq!(env.item("good").0, "done");
    assert_eq!(env.item("bad").1.as_deref(), Some("manual"));
    for args in [
        vec!["show", "b", "good"],
        vec!["show", "b", "bad", "--json"],
        vec!["items", "b"],
        vec!["dlq", "b"],
    ] {
        let out = env.cmd().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(std::str::from_utf8(&out.stdout).is_ok(), "{args:?}");
    }
    let out = env.cmd().args(["dlq", "b", "--jsonl"]).output().unwrap();
    let line: serde_json::Value =
        serde_json::from_str(String::from_utf8(out.stdout).unwrap().trim()).unwrap();
    assert!(
        line["message"].as_str().unwrap().contains("err \u{fffd}"),
        "{line}"
    );
    assert_intact(&env);
}

// ---- Locks of this process stay put ----

/// A dashboard that may write polls `change_marker` while its other thread
/// holds the write lock. Opening and closing `-shm` there (as it did)
/// dropped this process's POSIX locks, and another program could then write
/// at the same time: the chaos soak ended with "database disk image is
/// malformed".
#[test]
fn polling_for_changes_keeps_this_process_s_write_lock() {
    require!(Tool::Python3);
    use nightshift::store::{Access, Store};
    let env = Env::new();
    add_keys(&env, "b", &["a"]);
    let store = Store::open(&env.db, Access::ReadWrite).unwrap();
    let holder = env.sql();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    holder
        .execute("UPDATE items SET updated_at = updated_at + 1", [])
        .unwrap();
    let _ = store.change_marker();
    let _ = store.change_marker();
    let script = "import sqlite3, sys\n\
                  c = sqlite3.connect(sys.argv[1], timeout=0.3, isolation_level=None)\n\
                  try:\n    c.execute('BEGIN IMMEDIATE')\n    print('wrote')\n\
                  except sqlite3.OperationalError as e:\n    print(e)\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&env.db)
        .output()
        .expect("python3");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "database is locked",
        "another program got the write lock this process holds"
    );
    holder.execute_batch("ROLLBACK").unwrap();
}

// ---- The PostgreSQL server going away mid-run ----

/// The PostgreSQL server drops every session of the store while two
/// workers are on their items, and takes none for a while (a restart): the
/// answers they give meanwhile are kept once the server is back, not lost
/// with an aborted run and paid for again. Each key's worker runs once and
/// the run ends `ok`. What nobody waits for is kept too: each answer's
/// cost in the budget's ledger, each attempt's stderr.
#[test]
fn answers_given_while_the_server_restarts_are_kept_once_it_is_back() {
    let Some(env) = Env::for_backend(common::Backend::Pg) else {
        return;
    };
    env.config("[batch.b]\nconcurrency = 2\nbudget = \"100.0/day\"\n");
    let dir = p(env.dir.path());
    let w = env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\n\
             touch {dir}/started-$NIGHTSHIFT_KEY\n\
             while [ ! -e {dir}/go ]; do sleep 0.02; done\n\
             echo $NIGHTSHIFT_KEY >> {dir}/calls\n\
             echo \"呼出 $NIGHTSHIFT_KEY\" >&2\n\
             echo '{{\"cost\": 0.25}}'\n"
        ),
    );
    add_keys(&env, "b", &["k1", "k2", "k3", "k4"]);
    let mut run = env.spawn("run", &["run", "b", "--", &p(&w)]);
    wait_for("two workers on their items", || {
        env.path("started-k1").exists() && env.path("started-k2").exists()
    });

    let (db, admin_url) = common::pg_database_of(env.db.to_str().unwrap());
    let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS false"))
        .unwrap();
    let dropped = admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = $1 AND backend_type = 'client backend'",
            &[&db],
        )
        .unwrap();
    assert!(!dropped.is_empty(), "the runner's sessions were dropped");
    // The workers answer while no session can be had.
    std::fs::write(env.path("go"), "").unwrap();
    wait_for("both answers", || {
        common::lines(&env.path("calls")).len() >= 2
    });
    wait_for("the runner to find the server gone", || {
        env.output_of("run").1.contains("lost the store's session")
            || run.try_wait().unwrap().is_some()
    });
    admin
        .batch_execute(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"))
        .unwrap();

    let status = run.wait().unwrap();
    let (out, err) = env.output_of("run");
    assert!(status.success(), "{out}{err}");
    assert!(out.contains("4 done"), "{out}{err}");
    let mut calls = common::lines(&env.path("calls"));
    calls.sort();
    assert_eq!(
        calls,
        ["k1", "k2", "k3", "k4"],
        "each key's worker ran once"
    );
    for k in ["k1", "k2"] {
        assert_eq!(env.item(k), ("done".into(), None, 1), "{k}");
    }
    assert_eq!(
        (
            env.int("SELECT sum(micros) FROM spend WHERE scope = 'batch'"),
            env.int("SELECT sum(attempts) FROM spend WHERE scope = 'batch'")
        ),
        (1_000_000, 4),
        "every answer's cost in the ledger, those given meanwhile too"
    );
    let mut said = env.strings("SELECT stderr FROM attempt_logs");
    said.sort();
    assert_eq!(
        said,
        ["呼出 k1\n", "呼出 k2\n", "呼出 k3\n", "呼出 k4\n"],
        "each attempt's stderr kept"
    );
    env.assert_counts_consistent();
}

/// While the store's session is gone, a second signal ends the run now:
/// it waited out the whole outage window (60 s) first, whatever the
/// signals said.
#[test]
fn a_second_signal_ends_a_run_waiting_for_a_lost_store() {
    let Some(env) = Env::for_backend(common::Backend::Pg) else {
        return;
    };
    env.config("[batch.b]\nconcurrency = 1\n");
    let dir = p(env.dir.path());
    let w = env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\ntouch {dir}/started-$NIGHTSHIFT_KEY\n\
             while [ ! -e {dir}/go ]; do sleep 0.02; done\necho '{{\"ok\": 1}}'\n"
        ),
    );
    add_keys(&env, "b", &["k1", "k2"]);
    let mut run = env.spawn("run", &["run", "b", "--", &p(&w)]);
    wait_for("the worker on k1", || env.path("started-k1").exists());
    let (db, admin_url) = common::pg_database_of(env.db.to_str().unwrap());
    let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS false"))
        .unwrap();
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = $1 AND backend_type = 'client backend'",
            &[&db],
        )
        .unwrap();
    std::fs::write(env.path("go"), "").unwrap();
    wait_for("the runner to find the server gone", || {
        env.output_of("run").1.contains("lost the store's session")
    });
    common::signal(run.id(), nix::sys::signal::Signal::SIGTERM);
    wait_for("the first signal heard", || {
        env.output_of("run").1.contains("nightshift: stopping:")
    });
    common::signal(run.id(), nix::sys::signal::Signal::SIGTERM);
    // Well inside the 60 s the outage is waited for.
    wait_for("the run to end", || run.try_wait().unwrap().is_some());
    admin
        .batch_execute(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"))
        .unwrap();
}

/// The defect: a run an outage ended (the server gone past the 60 s a run
/// waits) was recorded `aborted` with no word of why, or not at all (left
/// open, read as crashed), and said only the store's error. It says when
/// it gave up, and once the store answers again records why it ended:
/// its summary, `stopped`, and the line it exits 3 with.
#[test]
fn a_run_an_outage_ended_says_why_in_its_summary() {
    let Some(env) = Env::for_backend(common::Backend::Pg) else {
        return;
    };
    env.config("[batch.b]\nconcurrency = 1\n");
    let dir = p(env.dir.path());
    let w = env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\ntouch {dir}/started-$NIGHTSHIFT_KEY\n\
             while [ $NIGHTSHIFT_KEY = k2 ] && [ ! -e {dir}/go ]; do sleep 0.02; done\n\
             echo '{{\"ok\": 1}}'\n"
        ),
    );
    add_keys(&env, "b", &["k1", "k2"]);
    let mut run = env.spawn("run", &["run", "b", "--", &p(&w)]);
    // One slot: k1 is done once k2's worker starts.
    wait_for("the worker on k2", || env.path("started-k2").exists());
    let (db, admin_url) = common::pg_database_of(env.db.to_str().unwrap());
    let mut admin = postgres::Client::connect(&admin_url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS false"))
        .unwrap();
    admin
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
              WHERE datname = $1 AND backend_type = 'client backend'",
            &[&db],
        )
        .unwrap();
    std::fs::write(env.path("go"), "").unwrap();
    // The run waits out its 60 s, then gives up: no deadline shorter than
    // that wait, and the store comes back only once it has given up.
    let gave_up = "could not be reached for 60s (since ";
    // (`the run ends`: said once the run's own write gave up.)
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while !env.output_of("run").1.contains(gave_up) {
        assert!(
            run.try_wait().unwrap().is_none(),
            "{:?}",
            env.output_of("run")
        );
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            env.output_of("run")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    admin
        .batch_execute(&format!("ALTER DATABASE {db} ALLOW_CONNECTIONS true"))
        .unwrap();
    let status = run.wait().unwrap();
    let (out, err) = env.output_of("run");
    assert_eq!(status.code(), Some(3), "{out}{err}");
    assert!(
        err.contains("run 1 of b stopped: the store could not be reached since "),
        "{err}"
    );
    let status = env.status();
    let last = &status["batches"][0]["last_run"];
    assert_eq!(last["state"], "aborted", "{status} {err}");
    assert_eq!(last["stopped"], "store-failed", "{last}");
    let summary = last["summary"].as_str().unwrap();
    assert!(
        summary.contains("; stopped: the store could not be reached since "),
        "{summary}"
    );
    let text = env.run(&["status", "b"]).code(0).stdout.clone();
    assert!(
        text.contains("the store could not be reached since "),
        "{text}"
    );
}
