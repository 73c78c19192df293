//! Reading a live WAL database without writing a single byte.
//!
//! A plain `mode=ro` connection still writes read marks into `-shm`, and on a
//! database with no `-wal`/`-shm` it creates them. So:
//! - when `-shm` exists (a writer is or was active), open with
//!   `readonly_shm=1`: SQLite maps the shared memory read-only and never
//!   writes it;
//! - when neither `-wal` nor `-shm` exists, the database is fully
//!   checkpointed and nobody writes it: open `immutable=1` (no locks, no
//!   side files) and check afterwards that no writer appeared meanwhile
//!   (file size, mtime, side files); if one did, read again the first way;
//! - a `-wal` without `-shm` needs recovery by a writer, which we cannot do
//!   without writing: say so; unless the `-wal` is empty (nothing to
//!   recover), which a read racing a writer's close can leave behind: SQLite
//!   opens the WAL with O_CREAT even on a read-only connection. That empty
//!   file is the one byte-level trace a reader can leave.
//!
//! A fresh connection per read: a long-lived one would keep mapping an old
//! `-shm` after the writer deleted and recreated it.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use rusqlite::{Connection, OpenFlags};

use super::file::side;
use super::schema;
use crate::store::{Result, StoreError};

#[derive(PartialEq, Eq)]
struct Fingerprint {
    len: u64,
    modified: Option<SystemTime>,
    wal: bool,
    shm: bool,
}

fn fingerprint(path: &Path) -> Result<Fingerprint> {
    let meta = std::fs::metadata(path).map_err(|e| StoreError::Io(path.to_path_buf(), e))?;
    Ok(Fingerprint {
        len: meta.len(),
        modified: meta.modified().ok(),
        wal: side(path, "-wal").exists(),
        shm: side(path, "-shm").exists(),
    })
}

fn wal_is_empty(path: &Path) -> bool {
    std::fs::metadata(side(path, "-wal")).is_ok_and(|m| m.len() == 0)
}

/// Percent-encodes a path for an SQLite `file:` URI.
fn uri(path: &Path, query: &str) -> String {
    let mut out = String::from("file:");
    for b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/._-~".contains(b) {
            out.push(*b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    format!("{out}?{query}")
}

fn open(path: &Path, query: &str) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        uri(path, query),
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| StoreError::from_sqlite(e, path))?;
    // Before `query_only`, which refuses even a temporary view.
    let version: i32 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| StoreError::from_sqlite(e, path))?;
    schema::shim_reader(&conn, version).map_err(|e| StoreError::from_sqlite(e, path))?;
    schema::configure_reader(&conn).map_err(|e| StoreError::from_sqlite(e, path))?;
    Ok(conn)
}

fn run<T>(conn: &Connection, path: &Path, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
    let tx = conn
        .unchecked_transaction()
        .map_err(|e| StoreError::from_sqlite(e, path))?;
    let out = f(&tx).map_err(|e| e.with_path(path))?;
    tx.finish().map_err(|e| StoreError::from_sqlite(e, path))?;
    Ok(out)
}

/// Changes whenever a transaction commits: the files' sizes and times,
/// and the head of the WAL index (its change counter and last frame). Read
/// without opening the database, so it costs two `stat`s and 48 bytes.
/// Only for a process with no connection to the store open: see
/// `Store::change_marker`.
pub(super) fn change_marker(path: &Path) -> Vec<u8> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut out = file_marker(path);
    let mut head = [0u8; 48];
    // Non-blocking: a FIFO put there must not hang the poll.
    let shm = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(side(path, "-shm"));
    if let Ok(mut f) = shm {
        let n = f.read(&mut head).unwrap_or(0);
        out.extend(&head[..n]);
    }
    out
}

/// Sizes and times of the database and its WAL (`stat` only).
pub(super) fn file_marker(path: &Path) -> Vec<u8> {
    let mut out = Vec::with_capacity(96);
    for p in [path.to_path_buf(), side(path, "-wal")] {
        match std::fs::metadata(&p) {
            Ok(m) => {
                out.extend(m.len().to_le_bytes());
                let t = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                    .unwrap_or_default();
                out.extend(t.as_nanos().to_le_bytes());
            }
            Err(_) => out.push(0),
        }
    }
    out
}

/// How long a read keeps retrying while a writer is opening or closing the
/// store (its `-wal` and `-shm` appear and vanish one after the other, and
/// a read-only reader cannot use them half made).
/// As long as the busy timeout: on a loaded machine a writer can be
/// descheduled between creating `-wal` and `-shm`.
const SETTLE: Duration = Duration::from_secs(5);

pub(super) fn read<T>(path: &Path, f: impl Fn(&Connection) -> Result<T>) -> Result<T> {
    session(path, |conn| run(&conn, path, &f))
}

/// Opens a fresh read-only connection the way [`read`] does and hands it to
/// `g`, which owns it for as long as it reads (a [`super::SqliteStore`]
/// snapshot keeps it for all of one command's reads). `g` runs again when
/// the first way of reading turns out torn, so it may only compute from
/// what it reads.
pub(super) fn session<T>(path: &Path, g: impl Fn(Connection) -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(2);
    loop {
        match read_once(path, &g) {
            // A reader never writes: "read-only" here means the WAL index
            // is being built or recovered by a writer that just opened.
            Err(StoreError::CannotOpen(..) | StoreError::ReadOnlyFile(..))
                if start.elapsed() < SETTLE =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

fn read_once<T>(path: &Path, g: &impl Fn(Connection) -> Result<T>) -> Result<T> {
    let before = fingerprint(path)?;
    if !before.wal && !before.shm {
        let out = g(open(path, "mode=ro&immutable=1")?);
        if fingerprint(path)? == before {
            return out;
        }
        // A writer appeared during the read, so the result may be torn:
        // read again through the writer's shared memory.
    }
    let now = fingerprint(path)?;
    if now.wal && !now.shm && wal_is_empty(path) {
        // An empty WAL holds no frames: the database file is complete. One
        // is left when a read-only open races a writer's close (SQLite opens
        // the WAL with O_CREAT even on a read-only connection, re-creating
        // the file the writer just deleted); the next writer uses it as
        // usual. Read the file as if there were none, and if a writer
        // appeared meanwhile, let `read` try again.
        let out = g(open(path, "mode=ro&immutable=1")?);
        if fingerprint(path)? == now && wal_is_empty(path) {
            return out;
        }
        return Err(StoreError::CannotOpen(
            path.to_path_buf(),
            "a writer opened it during the read".into(),
        ));
    }
    if now.wal && !now.shm {
        return Err(StoreError::CannotOpen(
            path.to_path_buf(),
            format!(
                "it has a write-ahead log ({}) but no shared-memory file, and recovering it needs a write. \
                 Run any nightshift command once without --read-only as a user who can write it",
                side(path, "-wal").display()
            ),
        ));
    }
    g(open(path, "mode=ro&readonly_shm=1")?)
}
