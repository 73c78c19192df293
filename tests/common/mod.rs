//! Shared helpers for the integration tests: a temp-dir store, the real
//! binary, and file fingerprints. Each test binary uses a subset.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use sha2::{Digest, Sha256};
use tempfile::TempDir;

/// A fresh store in its own temporary directory.
pub struct Env {
    pub dir: TempDir,
    pub db: PathBuf,
}

impl Env {
    /// An initialised store with no config file.
    pub fn new() -> Env {
        let env = Env::bare();
        env.cmd().arg("init").assert().success();
        std::fs::remove_file(env.dir.path().join("nightshift.toml")).unwrap();
        env
    }

    /// A directory with no store yet.
    pub fn bare() -> Env {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nightshift.db");
        Env { dir, db }
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

    /// SHA-256 of the store and its `-wal`/`-shm` (None where absent).
    pub fn fingerprint(&self) -> Vec<(String, Option<String>)> {
        fingerprint(&self.db)
    }

    /// A direct read-write SQLite connection for checking invariants.
    pub fn sql(&self) -> rusqlite::Connection {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        conn.busy_timeout(std::time::Duration::from_secs(30))
            .unwrap();
        conn
    }
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
