//! The store's file, its paths and the files beside it:
//! - what is not a regular file (a FIFO, a directory, a FIFO named like
//!   the `-wal`) is refused at once, naming what it is;
//! - `init` SIGKILLed at random moments leaves a store `init` finishes (or
//!   none), and an empty file is made a store by `init`;
//! - a run whose store is deleted or replaced under it stops at once, exit
//!   3, writing nothing more (SQLite: `rm`, `mv`; PostgreSQL: the database
//!   dropped, or made anew under its name);
//! - a clock before 1970 gives exit 3 and one line, and a clock set back
//!   under a run panics nothing (needs `faketime`);
//! - event logs are never written through a link planted in a log
//!   directory another user may write, or into one at all;
//! - a store file writable in a directory that is not is watched
//!   read-only, with its real counts (as `nobody`: needs root);
//! - PostgreSQL without `log_dir`: no directory named after the URL;
//! - `init --db PATH` writes a config naming that store.
//!
//! A missing prerequisite (root, `setpriv`, `faketime`, a PostgreSQL
//! server) skips the test loudly, and fails it under CI
//! (`support/require.rs`).
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::pty;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::require::{Tool, faketime_lib, have};
use common::{Backend, Background, Env, Ran, add_keys, ran, wait_for};

const NOBODY: u32 = 65534;

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn side(db: &Path, suffix: &str) -> PathBuf {
    let mut p = db.as_os_str().to_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// Waits for `child` to end; one that hangs fails the test (the deadline
/// only bounds a hang, it is no performance assertion).
fn finish(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after 60 s: it hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `nightshift ARGS` in `env`'s directory, failing the test if it hangs.
fn bounded(env: &Env, args: &[&str]) -> Ran {
    let mut child = env
        .std_cmd()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(&mut child);
    ran(child.wait_with_output().unwrap())
}

fn sha(path: &Path) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(path).unwrap()).to_vec()
}

// ---- Item 8: anything but a regular file ----

#[test]
fn what_is_not_a_regular_file_is_refused_at_once() {
    let env = Env::bare();
    let fifo = env.path("f.db");
    mkfifo(&fifo);
    let items = env.write("items.jsonl", "{\"key\":\"a\"}\n");
    let worker = env.script("w.sh", "cat >/dev/null; echo '{}'");
    let f = fifo.to_str().unwrap();
    let commands: &[&[&str]] = &[
        &["status"],
        &["items", "b"],
        &["dlq", "b"],
        &["run", "b", "--", worker.to_str().unwrap()],
        &["add", "b", items.to_str().unwrap()],
        &["init"],
    ];
    for args in commands {
        let r = bounded(&env, &[&["--db", f][..], args].concat());
        r.code(3);
        assert_eq!(
            r.error_line(),
            format!("nightshift: error: {f} is a FIFO (named pipe), not a store file"),
            "{args:?}"
        );
    }

    let dir = env.path("data");
    std::fs::create_dir(&dir).unwrap();
    for args in [&["status"][..], &["init"]] {
        let r = bounded(&env, &[&["--db", dir.to_str().unwrap()][..], args].concat());
        r.code(3);
        assert_eq!(
            r.error_line(),
            format!(
                "nightshift: error: {} is a directory, not a store file; did you mean {}?",
                dir.display(),
                dir.join("nightshift.db").display()
            )
        );
    }
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    // A FIFO named like the write-ahead log would hang SQLite as well:
    // refused for readers and writers, the store left as it is.
    let env = Env::new();
    env.config("[batch.b]\n");
    add_keys(&env, "b", &["a"]);
    let before = sha(&env.db);
    let wal = side(&env.db, "-wal");
    mkfifo(&wal);
    for args in [&["status"][..], &["pause", "b"], &["init"]] {
        let r = bounded(&env, args);
        r.code(3);
        assert_eq!(
            r.error_line(),
            format!(
                "nightshift: error: {} is a FIFO (named pipe), not a store file",
                wal.display()
            )
        );
    }
    assert_eq!(sha(&env.db), before);
}

// ---- Item 9: init killed at random moments; an empty file ----

/// The reproduction: `init` SIGKILLed 0–60 ms after it starts, 40
/// times, each in a fresh directory. After each, `init` must succeed
/// (making the store, or finding it whole) and `status` must work; no
/// draft of a killed `init` is left behind.
#[test]
fn init_killed_at_random_moments_leaves_a_store_init_can_finish() {
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let env = Env::bare();
        let mut init = env
            .std_cmd()
            .arg("init")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(fastrand::u64(0..60_000)));
        let _ = init.kill();
        init.wait().unwrap();
        let killed_with_store = env.db.exists();

        let again = env.run(&["init"]);
        again.code(0);
        let said = if again.stdout.contains("created store") {
            "created"
        } else {
            assert!(again.stdout.contains("already exists"), "{again:#?}");
            "existed"
        };
        *outcomes.entry((killed_with_store, said)).or_insert(0) += 1;
        assert!(
            !(killed_with_store && said == "created"),
            "init created a store over the one it found: {again:#?}"
        );
        env.run(&["status", "--json"]).code(0);
        let left: Vec<String> = std::fs::read_dir(env.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "drafts left behind: {left:?}");
    }
    eprintln!("(store found after the kill, what init said): {outcomes:?}");
}

#[test]
fn an_empty_file_is_made_a_store_by_init() {
    let env = Env::bare();
    std::fs::write(&env.db, "").unwrap();
    for args in [&["status"][..], &["pause", "b"]] {
        let r = env.run(args);
        r.code(3);
        assert_eq!(
            r.error_line(),
            format!(
                "nightshift: error: {} is empty (0 bytes; an interrupted `nightshift init` \
                 leaves one): run `nightshift init` to make it a store",
                env.db.display()
            )
        );
    }
    let r = env.run(&["init"]);
    r.code(0);
    assert!(r.stdout.contains("created store"), "{r:#?}");
    std::fs::remove_file(env.path("nightshift.toml")).unwrap();
    add_keys(&env, "b", &["a"]);
    assert_eq!(env.status()["batches"][0]["pending"], 1);
}

// ---- Item 10: the store deleted or replaced under a run ----

/// Batch `b`, five items, one at a time; the worker, at `k2`, says so and
/// waits for a file `go`: the store is changed while the run is inside a
/// worker. A heartbeat every third of the 1 s lock TTL.
fn run_held_at_k2(env: &Env) -> Background {
    env.config(
        "[batch.b]\nworker = [\"./w.sh\"]\nconcurrency = 1\nretries = 0\nlock_ttl = \"1s\"\n",
    );
    env.script(
        "w.sh",
        "cat >/dev/null\n\
         if [ \"$NIGHTSHIFT_KEY\" = k2 ]; then touch at-k2; while [ ! -e go ]; do sleep 0.05; done; fi\n\
         echo '{}'",
    );
    add_keys(env, "b", &["k1", "k2", "k3", "k4", "k5"]);
    let run = env.spawn("run", &["run", "b"]);
    wait_for("the run to reach k2", || env.path("at-k2").exists());
    run
}

/// The run ends by itself with exit 3 and says why, once; no summary.
#[track_caller]
fn assert_stopped_for_its_store(env: &Env, mut run: Background) {
    let status = finish(&mut run);
    let (out, err) = env.output_of("run");
    assert_eq!(status.code(), Some(3), "stdout: {out}\nstderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].starts_with("nightshift: error: ")
            && lines[0].contains("the store was deleted or replaced under this run"),
        "{err}"
    );
    assert!(!out.contains("done"), "a summary was printed: {out}");
}

#[test]
fn a_run_stops_when_its_store_file_is_deleted() {
    let env = Env::new();
    let run = run_held_at_k2(&env);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(side(&env.db, suffix));
    }
    assert_stopped_for_its_store(&env, run);
    for suffix in ["", "-wal", "-shm"] {
        assert!(!side(&env.db, suffix).exists(), "{suffix} was made again");
    }
}

#[test]
fn a_run_stops_when_another_store_is_moved_in() {
    let env = Env::new();
    let other = env.path("other.db");
    env.run(&["--db", other.to_str().unwrap(), "init"]).code(0);
    let other_bytes = sha(&other);
    let run = run_held_at_k2(&env);
    let aside = env.path("aside.db");
    std::fs::rename(&env.db, &aside).unwrap();
    std::fs::rename(&other, &env.db).unwrap();
    assert_stopped_for_its_store(&env, run);

    // Not a byte of the store moved in was written, and nothing reads the
    // run's write-ahead log as part of it.
    assert_eq!(sha(&env.db), other_bytes);
    assert_eq!(env.int("SELECT count(*) FROM items"), 0);
    assert_eq!(env.int("SELECT count(*) FROM runs"), 0);
    // The store moved aside holds the run's work: resuming it finishes.
    std::fs::write(env.path("go"), "").unwrap();
    let r = env.run(&["--db", aside.to_str().unwrap(), "run", "b"]);
    r.code(0);
    let aside_env = Env {
        dir: tempfile::tempdir().unwrap(),
        db: aside.clone(),
        backend: Backend::Sqlite,
    };
    assert_eq!(
        aside_env.int("SELECT count(*) FROM items WHERE status = 'done'"),
        5
    );
    assert_eq!(
        aside_env.strings("SELECT state FROM runs ORDER BY id"),
        ["crashed", "ok"]
    );
}

/// The PostgreSQL database's name in a test URL (`postgres:///NAME?...`).
fn database_name(env: &Env) -> String {
    let url = env.db.to_str().unwrap();
    let rest = url.split_once(":///").unwrap().1;
    rest.split('?').next().unwrap().to_string()
}

fn pg_admin() -> postgres::Client {
    let server = common::pg::server().unwrap();
    postgres::Client::connect(&server.url("postgres"), postgres::NoTls).unwrap()
}

#[test]
fn a_run_stops_when_its_database_is_dropped() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    let run = run_held_at_k2(&env);
    let name = database_name(&env);
    pg_admin()
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .unwrap();
    assert_stopped_for_its_store(&env, run);
}

/// The database renamed away and another made and initialised under its
/// name: the run's sessions, reopened, would land in the new store.
#[test]
fn a_run_stops_when_its_database_is_replaced() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    let run = run_held_at_k2(&env);
    let name = database_name(&env);
    let mut admin = pg_admin();
    admin
        .batch_execute(&format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false"))
        .unwrap();
    // Terminated sessions take a moment to go; and a session that was
    // starting when connections were closed (the runner reopens its own)
    // can appear after a first round of terminations: each try ends
    // whatever is there.
    wait_for("the runner's sessions to end", || {
        admin
            .batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
            ))
            .unwrap();
        admin
            .batch_execute(&format!("ALTER DATABASE {name} RENAME TO {name}_old"))
            .is_ok()
    });
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
    env.run(&["init"]).code(0);
    assert_stopped_for_its_store(&env, run);
    assert_eq!(env.int("SELECT count(*) FROM runs"), 0);
    assert_eq!(env.int("SELECT count(*) FROM items"), 0);

    // The store renamed away holds the run's work: resuming it finishes.
    admin
        .batch_execute(&format!("ALTER DATABASE {name}_old ALLOW_CONNECTIONS true"))
        .unwrap();
    let old = env
        .db
        .to_str()
        .unwrap()
        .replace(&format!("///{name}?"), &format!("///{name}_old?"));
    std::fs::write(env.path("go"), "").unwrap();
    env.cmd()
        .env("NIGHTSHIFT_DB", &old)
        .args(["run", "b"])
        .assert()
        .code(0);
    let mut c = postgres::Client::connect(&old, postgres::NoTls).unwrap();
    let done: i64 = c
        .query_one(
            "SELECT count(*) FROM nightshift.items WHERE status = 'done'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(done, 5);
}

// ---- Item 11: the clock before 1970 ----

/// libfaketime: the real clock calls of the real binary, answered with
/// another time (`.ci/run` installs it).
fn faketime() -> Option<&'static str> {
    have(Tool::Faketime).then(|| faketime_lib().unwrap())
}

/// Every command, with the system clock at 1969-06-01: exit 3 and one
/// line saying so, no panic.
#[test]
fn a_clock_before_1970_is_refused_in_one_line() {
    let Some(lib) = faketime() else { return };
    let env = Env::new();
    env.config("[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"* * * * *\"\ntimezone = \"UTC\"\n");
    env.script("w.sh", "cat >/dev/null; echo '{}'");
    add_keys(&env, "b", &["a"]);
    let commands: &[&[&str]] = &[
        &["status"],
        &["status", "--json"],
        &["items", "b"],
        &["dlq", "b"],
        &["run", "b"],
        &["watch"],
        &["daemon"],
        &["add", "b", "keys.jsonl"],
        &["init"],
        &["demo", "--headless"],
    ];
    for args in commands {
        let r = ran(env
            .cmd()
            .args(*args)
            .env("LD_PRELOAD", lib)
            .env("FAKETIME", "@1969-06-01 00:00:00")
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap());
        r.code(3);
        assert_eq!(
            r.error_line(),
            "nightshift: error: the system clock reads 1969-06-01T00:00:00Z, before 1970: \
             nightshift cannot time leases, locks or schedules by it; set the clock (e.g. \
             enable NTP) and try again",
            "{args:?}"
        );
    }
    assert_eq!(env.item("a").0, "pending");
}

/// The clock set back to 1969 in the middle of a run: nothing panics, the
/// run finishes its items.
#[test]
fn a_clock_set_back_under_a_run_panics_nothing() {
    let Some(lib) = faketime() else { return };
    let env = Env::new();
    let run = {
        let clock = env.write("clock", "+0\n");
        env.config("[batch.b]\nworker = [\"./w.sh\"]\nconcurrency = 1\nlock_ttl = \"1s\"\n");
        env.script(
            "w.sh",
            "cat >/dev/null\n\
             if [ \"$NIGHTSHIFT_KEY\" = k2 ]; then touch at-k2; while [ ! -e go ]; do sleep 0.05; done; fi\n\
             echo '{}'",
        );
        add_keys(&env, "b", &["k1", "k2", "k3"]);
        let run = env.spawn_with(
            "run",
            &["run", "b"],
            &[
                ("LD_PRELOAD", lib),
                ("FAKETIME_TIMESTAMP_FILE", clock.to_str().unwrap()),
                ("FAKETIME_NO_CACHE", "1"),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ],
        );
        wait_for("the run to reach k2", || env.path("at-k2").exists());
        std::fs::write(&clock, "@1969-06-01 00:00:00\n").unwrap();
        // A heartbeat on the 1969 clock: the lock renewed to expire then.
        wait_for("a lock renewed on the 1969 clock", || {
            env.int("SELECT coalesce(min(expires_at), 0) FROM locks") < 0
        });
        std::fs::write(env.path("go"), "").unwrap();
        run
    };
    let mut run = run;
    let status = finish(&mut run);
    let (out, err) = env.output_of("run");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("b: 3 done"), "{out}");
}

// ---- Item 13: no event log through another user's link ----

/// Today's and tomorrow's log file names (UTC): the run may cross midnight.
fn log_names() -> Vec<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    [now, now + 86_400]
        .iter()
        .map(|t| {
            let days = t / 86_400;
            // Civil date from days since 1970 (Howard Hinnant's algorithm).
            let z = days + 719_468;
            let era = z.div_euclid(146_097);
            let doe = z - era * 146_097;
            let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
            let mp = (5 * doy + 2) / 153;
            let d = doy - (153 * mp + 2) / 5 + 1;
            let m = if mp < 10 { mp + 3 } else { mp - 9 };
            let y = yoe + era * 400 + i64::from(m <= 2);
            format!("nightshift.jsonl.{y:04}-{m:02}-{d:02}")
        })
        .collect()
}

/// A log directory anyone may write, with links named like today's log
/// file planted to a file of the operator's: the run warns, in one line
/// naming the directory and why, and writes no log there; the operator's
/// file is untouched. The same links in a private directory are not
/// followed either.
#[test]
fn event_logs_never_follow_a_planted_link() {
    let env = Env::new();
    let logs = env.path("logs");
    std::fs::create_dir(&logs).unwrap();
    let bashrc = env.write("bashrc", "# the operator's\n");
    for name in log_names() {
        std::os::unix::fs::symlink(&bashrc, logs.join(name)).unwrap();
    }
    env.config("log_dir = \"logs\"\n[batch.b]\nworker = [\"./w.sh\"]\nretries = 0\n");
    env.script(
        "w.sh",
        "cat >/dev/null; echo '{\"error_class\":\"X\",\"transient\":false,\"message\":\"$(touch pwned)\"}' >&2; exit 1",
    );
    add_keys(&env, "b", &["k1"]);

    chmod(&logs, 0o777);
    let r = env.run(&["run", "b"]);
    r.code(1);
    assert_eq!(
        r.stderr.trim(),
        format!(
            "nightshift: warning: cannot write logs to {}: {} is writable by other users \
             (mode 0777): anyone who can write there could plant a link and make nightshift \
             write to another file; chmod go-w it",
            logs.display(),
            std::fs::canonicalize(&logs).unwrap().display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "# the operator's\n"
    );

    chmod(&logs, 0o700);
    env.run(&["requeue", "b", "--all-failed"]).code(0);
    let r = env.run(&["run", "b"]);
    r.code(1);
    assert!(
        r.stderr.starts_with(&format!(
            "nightshift: warning: cannot write logs to {}: {}/nightshift.jsonl.",
            logs.display(),
            logs.display()
        )) && r
            .stderr
            .trim_end()
            .ends_with(" is a symbolic link: not followed"),
        "{r:#?}"
    );
    assert_eq!(
        std::fs::read_to_string(&bashrc).unwrap(),
        "# the operator's\n"
    );
    assert!(!env.path("pwned").exists());
    // The events are in the store all the same.
    assert_eq!(env.events("b", "quarantined").len(), 2);
}

/// A log directory that belongs to another user is refused too.
#[test]
fn a_log_directory_of_another_user_is_refused() {
    require!(Tool::Root);
    let env = Env::new();
    let logs = env.path("logs");
    std::fs::create_dir(&logs).unwrap();
    chmod(&logs, 0o700);
    nix::unistd::chown(&logs, Some(nix::unistd::Uid::from_raw(NOBODY)), None).unwrap();
    env.config("log_dir = \"logs\"\n[batch.b]\nworker = [\"./w.sh\"]\n");
    env.script("w.sh", "cat >/dev/null; echo '{}'");
    add_keys(&env, "b", &["k1"]);
    let r = env.run(&["run", "b"]);
    r.code(0);
    assert!(
        r.stderr
            .contains(&format!("belongs to another user (uid {NOBODY})")),
        "{r:#?}"
    );
    assert_eq!(std::fs::read_dir(&logs).unwrap().count(), 0);
}

// ---- Item 15: writable file, unwritable directory ----

/// As `nobody`: the store file is theirs and writable, its directory is
/// root's and not writable (SQLite could not make the `-wal` and `-shm`).
/// `status` works; the dashboard opens read-only by itself, shows the real
/// counts (not "stale"), and writes nothing; a write command says why.
#[test]
fn a_store_in_a_directory_you_cannot_write_is_watched_read_only() {
    require!(Tool::RootWithSetpriv);
    let env = Env::new();
    env.config("[batch.b]\n");
    add_keys(&env, "b", &["k1", "k2", "k3"]);
    std::fs::remove_file(env.path("nightshift.toml")).unwrap();
    nix::unistd::chown(&env.db, Some(nix::unistd::Uid::from_raw(NOBODY)), None).unwrap();
    chmod(&env.db, 0o600);
    chmod(env.dir.path(), 0o755);
    let before = common::fingerprint(&env.db);
    let as_nobody = |args: &[&str]| {
        ran(Command::new("setpriv")
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
            .env("NO_COLOR", "1")
            .env_remove("NIGHTSHIFT_CONFIG")
            .stdin(Stdio::null())
            .output()
            .unwrap())
    };
    assert_eq!(
        as_nobody(&["status", "--json"]).code(0).json()["batches"][0]["pending"],
        3
    );

    let bin = common::bin().display().to_string();
    let mut dash = pty::Dash::open(
        Path::new("/usr/bin/setpriv"),
        env.dir.path(),
        &env.db,
        &[
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            &bin,
            "watch",
        ],
        (100, 30),
    );
    dash.wait_text("READ-ONLY");
    let screen = dash.wait_loaded();
    assert!(!screen.contains("stale"), "{screen}");
    dash.wait_text("0/3 finished");
    dash.key("p");
    dash.wait_text("read-only");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert_eq!(common::fingerprint(&env.db), before, "the dashboard wrote");

    let r = as_nobody(&["pause", "b"]);
    r.code(3);
    let line = r.error_line();
    assert!(
        line.contains(env.db.to_str().unwrap()) && line.contains("read-only"),
        "{line}"
    );
    assert_eq!(common::fingerprint(&env.db), before);
}

// ---- Item 18: PostgreSQL and the log directory ----

/// Without `log_dir`, a run on PostgreSQL writes no file logs and makes no
/// directory (least of all one named after the URL); with a config file
/// and no `log_dir`, its logs go to `logs` beside that file.
#[test]
fn no_log_directory_is_named_after_a_url() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    let w = env.script("w.sh", "cat >/dev/null; echo '{}'");
    add_keys(&env, "b", &["k1"]);
    let listing = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(env.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let before = listing();
    let r = env.run(&["run", "b", "--", w.to_str().unwrap()]);
    r.code(0);
    assert_eq!(listing(), before, "{r:#?}");

    env.config("[batch.b]\nworker = [\"./w.sh\"]\n");
    add_keys(&env, "b", &["k2"]);
    env.run(&["run", "b"]).code(0);
    let logs: Vec<_> = std::fs::read_dir(env.path("logs")).unwrap().collect();
    assert_eq!(logs.len(), 1);
    assert!(!listing().iter().any(|n| n.starts_with("postgres")));
}

// ---- Item 19: the config init writes names its store ----

#[test]
fn init_with_db_writes_a_config_that_names_that_store() {
    let env = Env::bare();
    let plain = |args: &[&str]| {
        let mut cmd = env.cmd();
        cmd.env_remove("NIGHTSHIFT_DB");
        ran(cmd.args(args).output().unwrap())
    };
    plain(&["--db", "ns.db", "init"]).code(0);
    let config = std::fs::read_to_string(env.path("nightshift.toml")).unwrap();
    assert!(config.lines().any(|l| l == "db = \"ns.db\""), "{config}");
    let items = env.write("items.jsonl", "{\"key\":\"a\"}\n{\"key\":\"b\"}\n");
    plain(&["--db", "ns.db", "add", "b", items.to_str().unwrap()]).code(0);
    // Plain `status` beside it opens ns.db, and nightshift.db was never made.
    let pending = |status: serde_json::Value| {
        status["batches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == "b")
            .unwrap_or_else(|| panic!("{status}"))["pending"]
            .clone()
    };
    assert_eq!(pending(plain(&["status", "--json"]).code(0).json()), 2);
    assert!(!env.path("nightshift.db").exists());

    // In another directory: the config beside the store names it relative
    // to itself, and finds it from anywhere.
    std::fs::create_dir(env.path("data")).unwrap();
    plain(&["--db", "data/q.db", "init"]).code(0);
    let config = std::fs::read_to_string(env.path("data/nightshift.toml")).unwrap();
    assert!(config.lines().any(|l| l == "db = \"q.db\""), "{config}");
    plain(&["--db", "data/q.db", "add", "b", items.to_str().unwrap()]).code(0);
    let r = plain(&["--config", "data/nightshift.toml", "status", "--json"]);
    assert_eq!(pending(r.code(0).json()), 2);
}
