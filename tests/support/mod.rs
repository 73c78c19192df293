//! Shared helpers for both test binaries (`it` and `soak`, each includes
//! this module once): a temp-dir store, the real binary, and file
//! fingerprints. Each binary uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

pub mod fixture;
pub mod pg;
pub mod pty;
#[macro_use]
pub mod require;
pub mod tmux;

/// Each test once per backend, in modules `sqlite` and `postgres`:
/// `fn name(env) { body }` runs `body` with a fresh initialised
/// [`Env::for_backend`] (the PostgreSQL one is skipped, with a message,
/// where no server is installed and none is required). Defined
/// before every test module (`#[macro_use] mod support;` in each `main.rs`).
#[allow(unused_macros)]
macro_rules! both_backends {
    ($( $(#[$meta:meta])* fn $name:ident($env:ident) $body:block )*) => {
        mod sqlite {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[$meta])*
                #[test]
                fn $name() {
                    let $env = crate::support::Env::for_backend(crate::support::Backend::Sqlite).unwrap();
                    $body
                }
            )*
        }
        mod postgres {
            #[allow(unused_imports)]
            use super::*;
            $(
                $(#[$meta])*
                #[test]
                fn $name() {
                    let Some($env) = crate::support::Env::for_backend(crate::support::Backend::Pg) else {
                        return;
                    };
                    $body
                }
            )*
        }
    };
}

/// Which store an [`Env`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `nightshift.db` in the temp dir.
    Sqlite,
    /// A fresh database of this test binary's private PostgreSQL server
    /// (`pg.rs`), given to the binary as a `postgresql://` URL.
    Pg,
}

/// A fresh store in its own temporary directory (the working directory of
/// every command; for PostgreSQL the store is a database of its own).
pub struct Env {
    pub dir: TempDir,
    /// The store's location: a file path, or a database URL.
    pub db: PathBuf,
    pub backend: Backend,
}

impl Env {
    /// An initialised store with no config file.
    pub fn new() -> Env {
        Env::init(Env::bare())
    }

    /// A directory with no store yet.
    pub fn bare() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nightshift.db");
        Env {
            dir,
            db,
            backend: Backend::Sqlite,
        }
    }

    /// An initialised store of `backend`, with no config file; `None` when
    /// PostgreSQL is not installed and not required (`pg::server`).
    pub fn for_backend(backend: Backend) -> Option<Env> {
        Some(Env::init(Env::bare_for(backend)?))
    }

    /// As [`Env::bare`]: for PostgreSQL an empty database (no schema).
    pub fn bare_for(backend: Backend) -> Option<Env> {
        let mut env = Env::bare();
        if backend == Backend::Pg {
            env.db = PathBuf::from(pg::server()?.database());
            env.backend = Backend::Pg;
        }
        Some(env)
    }

    fn init(env: Env) -> Env {
        env.cmd().arg("init").assert().success();
        std::fs::remove_file(env.dir.path().join("nightshift.toml")).unwrap();
        env
    }

    /// A direct connection to the PostgreSQL store, with the nightshift
    /// schema first on the search path (so the SQLite queries of the
    /// helpers below mostly read the same).
    pub fn pg_sql(&self) -> postgres::Client {
        assert_eq!(self.backend, Backend::Pg, "pg_sql on a SQLite store");
        let mut c = postgres::Client::connect(self.db.to_str().unwrap(), postgres::NoTls).unwrap();
        c.batch_execute("SET search_path = nightshift, pg_catalog")
            .unwrap();
        c
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The real binary, pointed at this store, in this directory.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::cargo_bin("nightshift").unwrap();
        cmd.current_dir(self.dir.path())
            .env("NIGHTSHIFT_DB", &self.db)
            .env_remove("NIGHTSHIFT_CONFIG")
            .env_remove("NIGHTSHIFT_HOST")
            .env("NO_COLOR", "1");
        cmd
    }

    /// The same as [`Env::cmd`] as a plain `std::process::Command`, for
    /// long-lived children (the daemon) that a test signals and waits for.
    pub fn spawn_cmd(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_nightshift"));
        cmd.current_dir(self.dir.path())
            .env("NIGHTSHIFT_DB", &self.db)
            .env_remove("NIGHTSHIFT_CONFIG")
            .env_remove("NIGHTSHIFT_HOST")
            .env("NO_COLOR", "1");
        cmd
    }

    /// Events of `batch` of one kind (`nightshift log --json`), oldest first.
    pub fn events(&self, batch: &str, kind: &str) -> Vec<serde_json::Value> {
        let out = self
            .cmd()
            .args(["log", batch, "--json", "-n", "100000", "--kind", kind])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn write(&self, name: &str, content: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    /// Writes an executable shell script.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.write(name, &format!("#!/bin/sh\n{body}\n"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path
    }

    /// A worker (`w.sh`) that touches `started/KEY` (see
    /// [`Env::started`]), runs `wait` in a child carrying `marker` (so
    /// `assert_no_process_left` finds one left behind; a `wait` of one
    /// command ends in `; :`, so the shell does not exec it and lose the
    /// marker), and succeeds.
    pub fn waiting_worker(&self, wait: &str, marker: &str) -> String {
        let started = self.path("started");
        std::fs::create_dir_all(&started).unwrap();
        let script = format!(
            "cat >/dev/null\ntouch {}/$NIGHTSHIFT_KEY\nsh -c '{wait}' {marker}\necho '\"ok\"'",
            started.display()
        );
        self.script("w.sh", &script).display().to_string()
    }

    /// Whether the worker of [`Env::waiting_worker`] started on `key`.
    pub fn started(&self, key: &str) -> bool {
        self.path("started").join(key).exists()
    }

    /// Adds `n` items with keys `k1..kn` to `batch`.
    pub fn add_items(&self, batch: &str, n: usize) {
        let lines: String = (1..=n)
            .map(|i| format!("{{\"key\":\"k{i}\",\"n\":{i}}}\n"))
            .collect();
        let file = self.write(&format!("{batch}-items.jsonl"), &lines);
        self.cmd().args(["add", batch]).arg(file).assert().success();
    }

    /// `status --json` parsed.
    pub fn status(&self) -> serde_json::Value {
        let out = self.cmd().args(["status", "--json"]).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `status --json`, or `None` when the read failed: for waits beside a
    /// daemon that is creating or opening the store, where a loaded machine
    /// can make a read find it half made (it retries for 5 s, then exits
    /// non-zero); such a read counts as "not yet".
    pub fn status_when_readable(&self) -> Option<serde_json::Value> {
        let out = self.cmd().args(["status", "--json"]).output().unwrap();
        out.status
            .success()
            .then(|| serde_json::from_slice(&out.stdout).unwrap())
    }

    /// One batch's entry of `status --json`.
    pub fn batch_status(&self, name: &str) -> serde_json::Value {
        let status = self.status();
        let found = status["batches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .cloned();
        found.unwrap_or_else(|| panic!("no batch {name:?} in {status}"))
    }

    /// SHA-256 of the store and its `-wal`/`-shm` (None where absent).
    pub fn fingerprint(&self) -> Vec<(String, Option<String>)> {
        fingerprint(&self.db)
    }

    /// A direct read-write SQLite connection for checking invariants.
    pub fn sql(&self) -> rusqlite::Connection {
        assert_eq!(
            self.backend,
            Backend::Sqlite,
            "sql() opens SQLite: use int/strings/item or pg_sql"
        );
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        conn
    }
}

/// Copies a program to `to` in a `cp` of its own, as an installer would.
/// A copy made here would hold `to` open for writing in this harness,
/// whose other tests fork all the while: a child forked then keeps that
/// descriptor until its `exec`, and an `exec` of `to` meanwhile fails
/// with "Text file busy".
pub fn copy_program(from: &Path, to: &Path) {
    let out = std::process::Command::new("cp")
        .arg(from)
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "cp {from:?} {to:?}: {out:?}");
}

pub fn fingerprint(db: &Path) -> Vec<(String, Option<String>)> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| {
            let mut p = db.as_os_str().to_os_string();
            p.push(suffix);
            let hash = std::fs::read(PathBuf::from(&p)).ok().map(|bytes| {
                Sha256::digest(bytes)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            });
            (suffix.to_string(), hash)
        })
        .collect()
}

// ---- Runner helpers (real processes, real signals) ----

/// Path of the real binary, for processes a test starts in the background.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("nightshift")
}

impl Env {
    /// Writes `nightshift.toml` beside the store (picked up by every command).
    pub fn config(&self, body: &str) -> PathBuf {
        self.write("nightshift.toml", body)
    }

    /// The real binary as a `std` command (for `spawn`), set up like `cmd`.
    pub fn std_cmd(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(bin());
        cmd.current_dir(self.dir.path())
            .env("NIGHTSHIFT_DB", &self.db)
            .env_remove("NIGHTSHIFT_CONFIG")
            .env_remove("NIGHTSHIFT_HOST")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null());
        cmd
    }

    /// Starts `nightshift ARGS` in the background; stdout and stderr go to
    /// files in the temp dir named after `tag`.
    pub fn spawn(&self, tag: &str, args: &[&str]) -> Background {
        self.spawn_with(tag, args, &[])
    }

    /// Like `spawn`, with extra environment variables.
    pub fn spawn_with(&self, tag: &str, args: &[&str], vars: &[(&str, &str)]) -> Background {
        let out = std::fs::File::create(self.path(&format!("{tag}.out"))).unwrap();
        let err = std::fs::File::create(self.path(&format!("{tag}.err"))).unwrap();
        let mut cmd = self.std_cmd();
        cmd.args(args).stdout(out).stderr(err);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        Background(cmd.spawn().unwrap())
    }

    /// What a background process started with `tag` printed.
    pub fn output_of(&self, tag: &str) -> (String, String) {
        let read = |ext: &str| {
            std::fs::read_to_string(self.path(&format!("{tag}.{ext}"))).unwrap_or_default()
        };
        (read("out"), read("err"))
    }

    /// One integer from a SQL query (read through a fresh connection).
    pub fn int(&self, query: &str) -> i64 {
        if self.backend == Backend::Pg {
            let row = self
                .pg_sql()
                .query_one(&format!("SELECT ({query})::int8"), &[])
                .unwrap_or_else(|e| panic!("{query}: {e}"));
            return row.get(0);
        }
        self.sql()
            .query_row(query, [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("{query}: {e}"))
    }

    /// The first column of every row of a query, as text.
    pub fn strings(&self, query: &str) -> Vec<String> {
        if self.backend == Backend::Pg {
            return self
                .pg_sql()
                .query(query, &[])
                .unwrap_or_else(|e| panic!("{query}: {e}"))
                .iter()
                .map(|r| r.get(0))
                .collect();
        }
        let conn = self.sql();
        let mut st = conn.prepare(query).unwrap();
        st.query_map([], |r| r.get::<_, String>(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// (status, tier, attempts) of one item.
    pub fn item(&self, key: &str) -> (String, Option<String>, i64) {
        if self.backend == Backend::Pg {
            let r = self
                .pg_sql()
                .query_one(
                    "SELECT status, tier, attempts FROM items WHERE key = $1",
                    &[&key],
                )
                .unwrap_or_else(|e| panic!("item {key}: {e}"));
            return (r.get(0), r.get(1), r.get(2));
        }
        self.sql()
            .query_row(
                "SELECT status, tier, attempts FROM items WHERE key = ?1",
                [key],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap_or_else(|e| panic!("item {key}: {e}"))
    }

    /// Kinds of the events of a batch, oldest first.
    pub fn event_kinds(&self) -> Vec<String> {
        self.strings("SELECT kind FROM events ORDER BY id")
    }

    /// States of the runs, oldest first.
    pub fn run_states(&self) -> Vec<String> {
        self.strings("SELECT state FROM runs ORDER BY id")
    }
}

/// The value of the sample `name{labels}` in `--prometheus` text.
pub fn metric(metrics: &str, sample: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(sample)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {sample} in {metrics}"))
        .parse()
        .unwrap_or_else(|e| panic!("{sample}: {e}"))
}

/// Lines of a file (empty when it does not exist).
pub fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// How often each line occurs.
pub fn tally(lines: &[String]) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for l in lines {
        *m.entry(l.clone()).or_insert(0) += 1;
    }
    m
}

/// Invariants of any store after any sequence of runs, kills and requeues,
/// in SQL both engines accept: (what, a query that counts violations).
pub const STORE_INVARIANTS: [(&str, &str); 4] = [
    (
        "items in an inconsistent state",
        "SELECT count(*) FROM items WHERE NOT (
            (status = 'pending' AND tier IS NULL AND outcome IS NULL AND lease_run IS NULL)
         OR (status = 'claimed' AND tier IS NULL AND outcome IS NULL AND lease_run IS NOT NULL)
         OR (status = 'done' AND outcome IS NOT NULL AND tier IS NULL AND lease_run IS NULL)
         OR (status = 'failed' AND outcome IS NULL AND lease_run IS NULL AND error_class IS NOT NULL
             AND (tier = 'manual' OR (tier = 'retry' AND next_attempt_at IS NOT NULL))))",
    ),
    (
        "failed items without their dead letter",
        "SELECT count(*) FROM items i WHERE status = 'failed' AND NOT EXISTS (
            SELECT 1 FROM dead_letters d WHERE d.item_id = i.id AND d.tier = i.tier
               AND d.error_class = i.error_class AND d.attempt = i.attempts)",
    ),
    (
        "run counters that differ from accepted completions",
        "SELECT (SELECT coalesce(sum(done + empty), 0) FROM runs)
              - (SELECT count(*) FROM events WHERE kind IN ('done', 'empty'))",
    ),
    // Claims may outlive only a run that was killed (still `running`, or
    // marked `crashed` by a re-run that was itself killed before taking
    // them back); a run that ended by itself leaves none.
    (
        "claims held by a run that ended",
        "SELECT count(*) FROM items i JOIN runs r ON r.id = i.lease_run
          WHERE i.status = 'claimed' AND r.state NOT IN ('running', 'crashed')",
    ),
];

/// Polls `cond` until it holds. The deadline only bounds a hung test (it
/// is generous, never a performance assertion). Every 20 ms for the first
/// second, then every 100 ms: many conditions run the binary, and a test
/// waiting seconds for a heartbeat or a refill need not start it fifty
/// times a second beside the tests running at the same time.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    let deadline = start + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        let pause = if start.elapsed() < std::time::Duration::from_secs(1) {
            20
        } else {
            100
        };
        std::thread::sleep(std::time::Duration::from_millis(pause));
    }
}

/// Sends a signal to a process.
#[cfg(unix)]
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
}

/// The database a store URL of this server names, and a URL for the
/// server's `postgres` database beside it (to administer the other).
pub fn pg_database_of(url: &str) -> (String, String) {
    let db = url
        .split('/')
        .nth(3)
        .and_then(|rest| rest.split('?').next())
        .expect("a URL of this server")
        .to_string();
    let admin = url.replacen(&format!("/{db}"), "/postgres", 1);
    (db, admin)
}

/// SIGKILLs a runner and, first, the guard that would stop its workers
/// when it dies (`runner::child::guard`): the case a later run on this
/// host must cover, where the workers outlive both.
#[cfg(target_os = "linux")]
pub fn kill_runner_and_guard(pid: u32) {
    kill_guard(pid);
    signal(pid, nix::sys::signal::Signal::SIGKILL);
}

/// SIGKILLs the guard of runner `pid` (`runner::child::guard`), which
/// stops its workers when it dies or is stopped past its seat: the case
/// where nothing but the lease token fences what they answer late.
#[cfg(target_os = "linux")]
pub fn kill_guard(pid: u32) {
    let guards: Vec<u32> = pids_with("--guard-runner")
        .into_iter()
        .filter(|g| {
            std::fs::read_to_string(format!("/proc/{g}/stat")).is_ok_and(|stat| {
                let rest = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
                rest.split_whitespace().nth(1) == Some(&pid.to_string())
            })
        })
        .collect();
    assert_eq!(guards.len(), 1, "runner {pid} has one guard");
    signal(guards[0], nix::sys::signal::Signal::SIGKILL);
}

/// Pids of live processes whose command line contains `marker` (a /proc
/// scan, like `pgrep -f`).
pub fn pids_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .is_some_and(|s| s == "Z");
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            out.push(pid);
        }
    }
    out
}

/// Adds items with the given keys (payload `{"key": K, "n": i}`).
/// Keeps a test that needs the UTC day (a budget's window) from running
/// into its end: waits while 00:00Z is under two minutes away.
/// The next 00:00Z, as RFC 3339: where a daily budget resets.
pub fn next_midnight() -> String {
    const DAY_MS: i64 = 86_400_000;
    // One reading of the clock: two, a millisecond apart, made it
    // 23:59:59.999Z.
    let now = nightshift::util::time::now_ms();
    let end = now - now.rem_euclid(DAY_MS) + DAY_MS;
    chrono::DateTime::from_timestamp_millis(end)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

pub fn away_from_midnight() {
    const DAY_MS: i64 = 86_400_000;
    let now = || nightshift::util::time::now_ms();
    while now().rem_euclid(DAY_MS) > DAY_MS - 120_000 {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

/// A worker that reports `cost` on stderr and answers `{"ok":1}`.
pub fn cost_worker(env: &Env, cost: &str) -> PathBuf {
    env.script(
        "w.sh",
        &format!("cat >/dev/null\necho '@nightshift cost={cost}' >&2\necho '{{\"ok\":1}}'"),
    )
}

pub fn add_keys(env: &Env, batch: &str, keys: &[&str]) {
    let lines: String = keys
        .iter()
        .enumerate()
        .map(|(i, k)| format!("{{\"key\":\"{k}\",\"n\":{i}}}\n"))
        .collect();
    let file = env.write("keys.jsonl", &lines);
    env.cmd().args(["add", batch]).arg(file).assert().success();
}

/// A finished command's stdout as text.
pub fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until no process whose command line holds `marker` is left. The
/// runner kills worker groups before it returns, so this is short when
/// things work; a leak fails after `wait_for`'s (generous) deadline.
pub fn assert_no_process_left(marker: &str) {
    wait_for(&format!("no process with {marker} left"), || {
        pids_with(marker).is_empty()
    });
}

/// A process a test started in the background; killed (SIGKILL, even if
/// stopped) if the test ends, or fails, while it still runs.
pub struct Background(pub std::process::Child);

impl std::ops::Deref for Background {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Background {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // A group it leads goes with it (`sh -c 'sleep 300; :'` in a
            // group of its own leaves its sleep otherwise); a pid leads a
            // group only if it made that group.
            let group = nix::unistd::Pid::from_raw(-(self.0.id() as i32));
            let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Processes (other than zombies) whose working directory or command line
/// is inside `dir`: the demo's runner, daemon and workers. Linux `/proc`;
/// elsewhere nothing is found.
pub fn processes_in(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    let needle = dir.to_string_lossy().to_string();
    for e in entries.flatten() {
        let pid = e.file_name().to_string_lossy().to_string();
        if !pid.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        if stat
            .rfind(')')
            .and_then(|i| stat.get(i + 2..i + 3))
            .is_some_and(|state| state == "Z")
        {
            continue;
        }
        let cmd =
            String::from_utf8_lossy(&std::fs::read(e.path().join("cmdline")).unwrap_or_default())
                .replace('\0', " ");
        let in_dir = std::fs::read_link(e.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir));
        if in_dir || cmd.contains(&needle) {
            found.push(format!("{pid}: {cmd}"));
        }
    }
    found
}

// ---- Foundation tests: outputs, config, a batch with failures ----

/// What a finished command printed and how it ended.
#[derive(Debug)]
pub struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// Asserts the exit code, showing both streams when it is wrong.
    #[track_caller]
    pub fn code(&self, expected: i32) -> &Ran {
        assert_eq!(self.code, expected, "exit code; {self:#?}");
        self
    }

    /// The one error line: asserts there is exactly one line on stderr (an
    /// error is one clear line, never a panic or a backtrace) and returns it.
    #[track_caller]
    pub fn error_line(&self) -> &str {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert!(
            !self.stderr.contains("panicked") && !self.stderr.contains("RUST_BACKTRACE"),
            "a panic: {self:#?}"
        );
        assert_eq!(lines.len(), 1, "one error line expected: {self:#?}");
        lines[0]
    }

    /// stdout as JSON.
    #[track_caller]
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }

    /// stdout as JSON lines.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
            .collect()
    }
}

/// The worker of [`Env::failing_batch`]: fails some keys on purpose.
pub const FAILING_WORKER: &str = r#"cat >/dev/null
case "$NIGHTSHIFT_KEY" in
  k1|k2) echo '{"error_class":"BadInput","transient":false,"message":"title missing"}' >&2; exit 1 ;;
  k3) exit 75 ;;
  k4) echo 'plain failure' >&2; exit 1 ;;
  k5) echo '@nightshift op_id=op-555' >&2; echo '{"posted":5}' ;;
  *) echo "{\"posted\":\"$NIGHTSHIFT_KEY\"}" ;;
esac"#;

impl Env {
    /// Runs the binary with `args` and collects what it printed.
    pub fn run(&self, args: &[&str]) -> Ran {
        ran(self.cmd().args(args).output().unwrap())
    }

    /// Batch `batch` with items k1..k8 run once through [`FAILING_WORKER`]
    /// (no immediate retries): k1, k2 failed/manual `BadInput`; k3
    /// failed/retry `TempFail`; k4 failed/manual `Exit1`; k5..k8 done (k5
    /// reported op id `op-555`).
    pub fn failing_batch(&self, batch: &str) -> PathBuf {
        self.config(&format!("[batch.{batch}]\nretries = 0\n"));
        self.add_items(batch, 8);
        let worker = self.script("failing-worker.sh", FAILING_WORKER);
        let out = self
            .cmd()
            .args(["run", batch, "--"])
            .arg(&worker)
            .output()
            .unwrap();
        ran(out).code(1);
        worker
    }

    /// Status counters per bucket as stored, and as counted from the rows:
    /// they must agree after every command.
    #[track_caller]
    pub fn assert_counts_consistent(&self) {
        if self.backend == Backend::Pg {
            // Counters are sharded per connection: summed, as the store reads them.
            let mut c = self.pg_sql();
            let rows = |c: &mut postgres::Client, q: &str| -> Vec<(i64, String, i64)> {
                c.query(q, &[])
                    .unwrap()
                    .iter()
                    .map(|r| (r.get(0), r.get(1), r.get(2)))
                    .collect()
            };
            let stored = rows(
                &mut c,
                "SELECT batch_id, bucket, sum(n)::int8 FROM counts GROUP BY 1, 2
                  HAVING sum(n) <> 0 ORDER BY 1, 2",
            );
            let counted = rows(
                &mut c,
                "SELECT batch_id, CASE status WHEN 'failed' THEN tier WHEN 'done' THEN outcome
                        ELSE status END AS bucket, count(*)::int8
                   FROM items GROUP BY 1, 2 ORDER BY 1, 2",
            );
            assert_eq!(stored, counted, "counters disagree with the items");
            return;
        }
        let conn = self.sql();
        let stored: Vec<(i64, String, i64)> = conn
            .prepare("SELECT batch_id, bucket, n FROM counts WHERE n <> 0 ORDER BY 1, 2")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let counted: Vec<(i64, String, i64)> = conn
            .prepare(
                "SELECT batch_id, CASE status WHEN 'failed' THEN tier WHEN 'done' THEN outcome
                        ELSE status END AS bucket, count(*)
                   FROM items GROUP BY 1, 2 ORDER BY 1, 2",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(stored, counted, "counters disagree with the items");
        let by_class = |sql: &str| -> Vec<(i64, String, String, i64)> {
            conn.prepare(sql)
                .unwrap()
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(
            by_class(
                "SELECT batch_id, error_class, tier, n FROM failed_classes WHERE n <> 0 ORDER BY 1, 2, 3"
            ),
            by_class(
                "SELECT batch_id, error_class, tier, count(*) FROM items WHERE status = 'failed'
                  GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
            ),
            "failed-class counters disagree with the items"
        );
    }
}

pub fn ran(out: std::process::Output) -> Ran {
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

impl Env {
    /// Like [`Env::cmd`], as a `std::process::Command`: for commands the
    /// test spawns and reads while they run.
    pub fn spawnable(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("nightshift"));
        cmd.current_dir(self.dir.path())
            .env("NIGHTSHIFT_DB", &self.db)
            .env_remove("NIGHTSHIFT_CONFIG")
            .env_remove("NIGHTSHIFT_HOST")
            .env("NO_COLOR", "1");
        cmd
    }
}

// ---- SQL on either backend ----

impl Env {
    /// Runs one statement that writes (SQL both engines accept); returns
    /// the rows it changed.
    pub fn exec(&self, statement: &str) -> u64 {
        if self.backend == Backend::Pg {
            return self
                .pg_sql()
                .execute(statement, &[])
                .unwrap_or_else(|e| panic!("{statement}: {e}"));
        }
        self.sql()
            .execute(statement, [])
            .unwrap_or_else(|e| panic!("{statement}: {e}")) as u64
    }

    /// Every row of a query, each column as text (`None` for NULL).
    pub fn rows(&self, query: &str) -> Vec<Vec<Option<String>>> {
        if self.backend == Backend::Pg {
            // The simple protocol answers every value as text.
            return self
                .pg_sql()
                .simple_query(query)
                .unwrap_or_else(|e| panic!("{query}: {e}"))
                .iter()
                .filter_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(r) => {
                        Some((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect())
                    }
                    _ => None,
                })
                .collect();
        }
        use rusqlite::types::ValueRef;
        let conn = self.sql();
        let mut st = conn.prepare(query).unwrap();
        let n = st.column_count();
        st.query_map([], |r| {
            (0..n)
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        ValueRef::Null => None,
                        ValueRef::Integer(v) => Some(v.to_string()),
                        ValueRef::Real(v) => Some(v.to_string()),
                        ValueRef::Text(t) | ValueRef::Blob(t) => {
                            Some(String::from_utf8_lossy(t).into_owned())
                        }
                    })
                })
                .collect()
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{query}: {e}"))
    }

    /// What a command that must write nothing may not change. SQLite: the
    /// bytes of the store, its `-wal` and `-shm` ([`Env::fingerprint`]).
    /// PostgreSQL: the contents of every table and sequence of the
    /// nightshift schema.
    pub fn snapshot(&self) -> Vec<(String, Option<String>)> {
        if self.backend == Backend::Sqlite {
            return self.fingerprint();
        }
        let mut c = self.pg_sql();
        let relations: Vec<(String, String)> = c
            .query(
                "SELECT c.relname::text, c.relkind::text FROM pg_class c
                   JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = 'nightshift' AND c.relkind IN ('r', 'S')
                  ORDER BY 1",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        relations
            .into_iter()
            .map(|(name, kind)| {
                let q = if kind == "S" {
                    format!(
                        "SELECT last_value::text || ' ' || is_called::text FROM nightshift.{name}"
                    )
                } else {
                    format!(
                        "SELECT md5(coalesce(string_agg(t::text, E'\\n' ORDER BY t::text), ''))
                           FROM nightshift.{name} t"
                    )
                };
                (name, c.query_one(&q, &[]).unwrap().get(0))
            })
            .collect()
    }
}

/// (batch, key, start ms, attempt) per worker start, by start time, from
/// the `starts.log` a test's recording worker appends `BATCH KEY MS ATTEMPT` to.
pub fn starts(env: &Env) -> Vec<(String, String, i64, i64)> {
    let mut out: Vec<_> = lines(&env.path("starts.log"))
        .iter()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (
                w[0].to_string(),
                w[1].to_string(),
                w[2].parse().unwrap(),
                w[3].parse().unwrap(),
            )
        })
        .collect();
    out.sort_by_key(|s| s.2);
    out
}
