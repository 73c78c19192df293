//! A private PostgreSQL server for the tests: one per test binary, started
//! on first use with `initdb` into a temporary directory, listening only on
//! a unix socket in that directory (no TCP port, nothing shared with other
//! test binaries or a system server). Each test gets its own database.
//!
//! Needs the PostgreSQL server binaries (Debian: `apt-get install
//! postgresql`; found on PATH, in `/usr/lib/postgresql/*/bin`, or in
//! `NIGHTSHIFT_PG_BIN`). Without them the PostgreSQL tests follow
//! `require.rs`: skipped with a message on a developer's machine, failed
//! under CI (`CI` set) or with `NIGHTSHIFT_REQUIRE_PG=1`.
//!
//! `NIGHTSHIFT_PG_OPTS` adds server settings (`-c name=value ...`).
//!
//! The server stops, and its directory is removed, when the test process
//! exits: a watchdog shell beside it waits for the process to go away.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::require::{Tool, have};

pub struct PgServer {
    /// The directory holding the unix socket.
    socket_dir: PathBuf,
}

/// The server's binaries directory, or why there is none.
pub fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("NIGHTSHIFT_PG_BIN") {
        let dir = PathBuf::from(dir);
        if dir.join("initdb").is_file() && dir.join("postgres").is_file() {
            return Ok(dir);
        }
        return Err(format!(
            "PostgreSQL server binaries (initdb, postgres) not found in NIGHTSHIFT_PG_BIN={}",
            dir.display()
        ));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").is_file() && dir.join("postgres").is_file() {
                return Ok(dir);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "PostgreSQL server binaries (initdb, postgres) not found on PATH, in \
         /usr/lib/postgresql/*/bin or in NIGHTSHIFT_PG_BIN: install them \
         (Debian: apt-get install postgresql)"
            .to_string()
    })
}

/// The server of this test binary; `None` (after saying so) when the
/// binaries are missing and PostgreSQL is not required (`require.rs`).
pub fn server() -> Option<&'static PgServer> {
    if !have(Tool::Postgres) {
        return None;
    }
    static SERVER: OnceLock<Result<PgServer, String>> = OnceLock::new();
    match SERVER.get_or_init(start) {
        Ok(s) => Some(s),
        Err(why) => panic!("the PostgreSQL tests need a server and could not start one: {why}"),
    }
}

/// The user the server runs as: PostgreSQL refuses to run as root.
fn server_user() -> Option<(u32, u32)> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    let user = nix::unistd::User::from_name("postgres").ok().flatten()?;
    Some((user.uid.as_raw(), user.gid.as_raw()))
}

fn as_server_user(cmd: &mut Command) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    if nix::unistd::geteuid().is_root() {
        let (uid, gid) = server_user().ok_or(
            "running as root, and there is no `postgres` user to run the server as \
             (the postgresql package creates it)",
        )?;
        cmd.uid(uid).gid(gid);
    }
    Ok(())
}

fn start() -> Result<PgServer, String> {
    let bin = bin_dir()?;
    // Under root the server runs as `postgres`, which must reach the
    // directory: /tmp rather than a TMPDIR that may be private to root.
    let parent = if server_user().is_some() {
        PathBuf::from("/tmp")
    } else {
        std::env::temp_dir()
    };
    let base = tempfile::Builder::new()
        .prefix("nightshift-pg-")
        .tempdir_in(&parent)
        .map_err(|e| format!("temporary directory in {}: {e}", parent.display()))?
        .keep();
    let data = base.join("data");
    let socket_dir = base.join("sock");
    for dir in [&data, &socket_dir] {
        std::fs::create_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    if let Some((uid, gid)) = server_user() {
        for dir in [&base, &data, &socket_dir] {
            nix::unistd::chown(
                dir.as_path(),
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .map_err(|e| format!("chown {}: {e}", dir.display()))?;
        }
    }
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ])
        .arg("-D")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    as_server_user(&mut initdb)?;
    let out = initdb.output().map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // The watchdog: runs the server, and stops it and removes its directory
    // once this test process is gone (a static is never dropped).
    let script = r#"
        "$1/postgres" -D "$2/data" -k "$2/sock" -c listen_addresses='' \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
            -c max_connections=300 -c shared_buffers=32MB $4 \
            >"$2/server.log" 2>&1 &
        pg=$!
        while [ -d "/proc/$3" ] && kill -0 "$pg" 2>/dev/null; do sleep 0.5; done
        kill -INT "$pg" 2>/dev/null
        wait "$pg"
        rm -rf "$2"
    "#;
    let mut watchdog = Command::new("sh");
    watchdog
        .args(["-c", script, "watchdog"])
        .arg(&bin)
        .arg(&base)
        .arg(std::process::id().to_string())
        // Extra server settings (benchmarks): later `-c`s win.
        .arg(std::env::var("NIGHTSHIFT_PG_OPTS").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    as_server_user(&mut watchdog)?;
    watchdog
        .spawn()
        .map_err(|e| format!("starting postgres: {e}"))?;
    let server = PgServer { socket_dir };
    let started = Instant::now();
    loop {
        match postgres::Client::connect(&server.url("postgres"), postgres::NoTls) {
            Ok(_) => return Ok(server),
            Err(e) if started.elapsed() > Duration::from_secs(60) => {
                let log = std::fs::read_to_string(base.join("server.log")).unwrap_or_default();
                return Err(format!("the server did not start: {e}; its log: {log}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

impl PgServer {
    /// A URL for database `db` on this server, over its unix socket.
    pub fn url(&self, db: &str) -> String {
        // An empty host and a socket directory: never TCP, never another
        // server.
        format!(
            "postgres:///{db}?host={}&user=postgres",
            self.socket_dir.display()
        )
    }

    /// A fresh, empty database; returns its URL.
    pub fn database(&self) -> String {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .expect("connect to the test server");
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .expect("create a test database");
        self.url(&name)
    }
}
