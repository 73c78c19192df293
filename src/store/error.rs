//! Store errors: typed, each one clear line naming the file and what to do.

use std::path::{Path, PathBuf};

use rusqlite::ErrorCode;

use super::refused::RefusedKeys;
use crate::model::Tombstone;
use crate::util::time::rfc3339;

/// A request the store refuses as it stands (exit 2): the user's to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `claim_key` of an item another run holds.
    #[error("item {key:?} is in flight in another run")]
    InFlightClaim { key: String },
    /// `claim_key` of a done item.
    #[error("item {key:?} is already done; requeue it first to run it again")]
    AlreadyDone { key: String },
    /// `claim_key` by a run whose seat was taken over.
    #[error("run {run} no longer holds the lock of batch {batch:?}: another runner took it over")]
    SeatLost { run: i64, batch: String },
    /// Keys named (`requeue B K...`, `skip B K...`) that the command
    /// refuses, every one, grouped by why.
    #[error("{0}")]
    Keys(RefusedKeys),
    #[error(
        "--outcome requeues done items: it cannot be combined with --class, --tier or --all-failed"
    )]
    OutcomeWithFilters,
    #[error(
        "--stale requeues the items done under an older version: it cannot be combined with \
         keys, --class, --tier, --all-failed or --outcome"
    )]
    StaleWithFilters,
    #[error("say which items to requeue: keys, --all-failed, --class, --tier or --outcome")]
    NoSelection,
    /// `cancel` of a done item.
    #[error(
        "item {key:?} is already done: there is nothing to cancel (nothing was changed; \
         `requeue --outcome` runs a done item again)"
    )]
    CancelDone { key: String },
    /// An add keying items otherwise than the batch's were keyed (its
    /// recorded `key::KeySpec`): every item would get another key, and the
    /// items added before, done ones too, would be added and run again.
    #[error(
        "batch {batch:?}: its items were keyed by {recorded}, and this add keys them by {asked}: \
         every item would get another key, so the items already added (done ones too) would be \
         added, and run, again; put key_fields back as it was (or leave --key-fields out), or \
         name a new batch; nothing was added"
    )]
    KeyedOtherwise {
        batch: String,
        recorded: crate::key::KeySpec,
        asked: crate::key::KeySpec,
    },
    /// The same, for a batch an older nightshift filled, which recorded no
    /// spec: its items say they were keyed otherwise (`key`, one of them,
    /// is not the key `asked` gives its payload).
    #[error(
        "batch {batch:?}: its items were keyed otherwise than by {asked} (the item {key:?} would \
         get another key; the nightshift that added them recorded no key spec): every item would \
         get another key, so the items already added (done ones too) would be added, and run, \
         again; put key_fields back as it was (or leave --key-fields out), or name a new batch; \
         nothing was added"
    )]
    KeyedOtherwiseBefore {
        batch: String,
        asked: crate::key::KeySpec,
        key: String,
    },
    /// A second daemon for batches a live one schedules: each fire was
    /// taken by both, recorded twice with outcomes that disagree, and the
    /// loser's run stepped down, a run id each fire.
    #[error(
        "a live daemon ({holder}) already schedules {}: one daemon a batch (stop it first, or \
         give each daemon batches of its own with --batch); nothing was started",
        .batches.iter().map(|b| format!("{b:?}")).collect::<Vec<_>>().join(", ")
    )]
    DaemonLive {
        holder: String,
        batches: Vec<String>,
    },
}

impl Refusal {
    /// An add refused for keying a batch's items otherwise than they were.
    pub fn is_keyed_otherwise(&self) -> bool {
        matches!(
            self,
            Refusal::KeyedOtherwise { .. } | Refusal::KeyedOtherwiseBefore { .. }
        )
    }
}

impl From<Refusal> for StoreError {
    fn from(r: Refusal) -> StoreError {
        StoreError::Refused(r)
    }
}

/// A failure of the store itself (exit 3), as text where its cause is not
/// `Clone`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    /// A group commit lost: nothing in it was kept.
    #[error("{0}")]
    GroupRolledBack(String),
    /// A stored value (or the schema version) this build cannot read.
    #[error("{0}")]
    Unreadable(String),
    #[error("{0}")]
    Encoding(String),
    /// The runner's store thread is gone.
    #[error("the store writer stopped")]
    WriterStopped,
    /// A database error, kept as text (a copy for a group's requests).
    #[error("{0}")]
    Database(String),
}

/// What to do about a store not found at `path`: create one, or, for a
/// libpq keyword string given where a URL belongs, give the URL.
fn not_found_hint(path: &std::path::Path) -> &'static str {
    if super::location::is_keyword_string(path) {
        super::location::KEYWORDS_HINT
    } else {
        "run `nightshift init` there first, or pass --db PATH"
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("no store at {}: {}", super::place(.0), not_found_hint(.0))]
    NotFound(PathBuf),
    #[error("{0} is not a nightshift store (run `nightshift init` to create one)")]
    NotNightshift(PathBuf),
    /// A SQLite file of another program (or made by hand): `init` would
    /// refuse it too, so the words send the user to another path.
    #[error(
        "{0} is a SQLite database but not a nightshift store (another program's, or made by \
         hand): it was left untouched; give the store a path of its own (--db PATH, where \
         `nightshift init` creates it)"
    )]
    Foreign(PathBuf),
    /// A directory, a FIFO, a device...: SQLite would hang or fail obscurely.
    #[error("{} is {what}{hint}", path.display())]
    NotAFile {
        path: PathBuf,
        what: String,
        hint: String,
    },
    #[error(
        "{0} is empty (0 bytes; an interrupted `nightshift init` leaves one): \
         run `nightshift init` to make it a store"
    )]
    Empty(PathBuf),
    /// The path no longer names the store a long-lived process opened.
    #[error(
        "{0}: the store was deleted or replaced under this run; it stopped at once \
         and wrote nothing more"
    )]
    Replaced(PathBuf),
    #[error("{0} is not a valid SQLite database (corrupt or not a database file): {1}")]
    Corrupt(PathBuf, String),
    #[error(
        "{path} was written by a newer nightshift (schema v{found}; this build knows up to v{supported}): \
         upgrade nightshift; it was left as it was"
    )]
    NewerSchema {
        path: PathBuf,
        found: i32,
        supported: i32,
    },
    /// A read-only open cannot migrate; reading an older layout with this
    /// build's statements would fail at some column, so it is refused whole.
    #[error(
        "{path} has an older layout (schema v{found}; this build reads v{supported}), which a \
         read-only open cannot upgrade: any command that writes it upgrades it first \
         (`nightshift init` upgrades it and changes nothing else); nothing was changed"
    )]
    OlderSchema {
        path: PathBuf,
        found: i32,
        supported: i32,
    },
    /// A writable open of an older layout while a runner (of the build
    /// that wrote it) holds a seat: see `store::upgrade`.
    #[error(
        "{path} has an older layout (schema v{found}; this build writes v{supported}) and a \
         runner is using it ({runners}): upgrading the layout under a running older nightshift \
         could leave its counts wrong, so nothing was changed; let that run end, or stop it with \
         the nightshift that started it (or `kill` its pid), then try again"
    )]
    UpgradeUnderRunner {
        path: PathBuf,
        found: i32,
        supported: i32,
        runners: String,
    },
    #[error("{0} is opened read-only; this action writes")]
    ReadOnlyStore(PathBuf),
    #[error("cannot write {0}: the file or its directory is read-only ({1})")]
    ReadOnlyFile(PathBuf, String),
    #[error("cannot write {0}: the database lets this session only read ({1})")]
    ReadOnlyDatabase(PathBuf, String),
    #[error("cannot open {0}: {1}")]
    CannotOpen(PathBuf, String),
    #[error("cannot create the store {0}: {1}")]
    CannotCreate(PathBuf, String),
    #[error("the disk holding {0} is full: nothing was changed")]
    DiskFull(PathBuf),
    #[error("{0} is locked by another program and stayed locked: try again later")]
    Busy(PathBuf),
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("unknown batch {name:?}{}", known_list(.known))]
    UnknownBatch { name: String, known: Vec<String> },
    #[error("no item {key:?} in batch {batch:?}")]
    UnknownKey { batch: String, key: String },
    /// The key's item was done and pruned: only its tombstone is left.
    #[error(
        "item {:?} of batch {batch:?} was pruned on {} (done on {}, outcome {}): only its key \
         is kept, so adding it again does not run it again",
        .tombstone.key, rfc3339(.tombstone.pruned_at), rfc3339(.tombstone.done_at),
        .tombstone.outcome
    )]
    Pruned { batch: String, tombstone: Tombstone },
    /// A signal stopped a write before anything of it committed.
    #[error("interrupted by {0}: nothing was changed")]
    Interrupted(String),
    /// A write in chunks stopped part-way: what committed stays.
    #[error("{0}")]
    CutShort(Box<CutShort>),
    /// What the user asked cannot be done to the store as it is: exit 2,
    /// nothing changed.
    #[error("{0}")]
    Refused(Refusal),
    /// The store failed, not the user: exit 3.
    #[error("{0}")]
    Fault(Fault),
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// An error from a PostgreSQL server (see `store::pg`).
    #[error("PostgreSQL error{}: {message}", on_target(.target))]
    Postgres {
        target: Option<PathBuf>,
        /// The SQLSTATE, or empty when the error did not come from the server.
        code: String,
        message: String,
    },
}

/// What a bulk write in chunks (an add or a requeue while a runner is live)
/// did before it stopped: `done` of `total` committed, chunk by chunk.
#[derive(Debug)]
pub struct CutShort {
    pub done: u64,
    pub total: u64,
    /// What `done` counts, after "N of M": "items added".
    pub what: String,
    /// How to finish: "run it again to add the rest".
    pub next: String,
    pub cause: StoreError,
    /// Why the run log has no record of the part that committed, if it
    /// has none (the disk still full).
    pub unlogged: Option<String>,
}

impl std::fmt::Display for CutShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} {} before {}; {}",
            self.done,
            self.total,
            self.what,
            self.cause.as_cause(),
            self.next
        )?;
        if let Some(why) = &self.unlogged {
            write!(f, " (not recorded in the run log: {why})")?;
        }
        Ok(())
    }
}

fn on_target(target: &Option<PathBuf>) -> String {
    target
        .as_ref()
        .map(|t| format!(" on {}", t.display()))
        .unwrap_or_default()
}

/// Whether the file system holding `path` has no space left for us.
#[cfg(unix)]
#[allow(clippy::useless_conversion)] // the field types differ between platforms
fn disk_full(path: &Path) -> bool {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    nix::sys::statvfs::statvfs(dir).is_ok_and(|s| {
        // Less than a WAL's worth of pages (SQLite grows files by pages).
        u64::from(s.blocks_available()) * u64::from(s.fragment_size()) < 64 * 1024
    })
}

#[cfg(not(unix))]
fn disk_full(_path: &Path) -> bool {
    false
}

/// Whether `path` (or its directory) is on a file system mounted read-only.
#[cfg(unix)]
pub(super) fn read_only_fs(path: &Path) -> bool {
    use nix::sys::statvfs::{FsFlags, statvfs};
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    [path, dir]
        .iter()
        .any(|p| statvfs(*p).is_ok_and(|s| s.flags().contains(FsFlags::ST_RDONLY)))
}

#[cfg(not(unix))]
pub(super) fn read_only_fs(_path: &Path) -> bool {
    false
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        " (the store has no batches yet: add items with `nightshift add BATCH FILE`)".to_string()
    } else {
        format!(" (known: {})", known.join(", "))
    }
}

impl StoreError {
    /// Classifies a SQLite error so the user reads what happened to which file.
    pub fn from_sqlite(e: rusqlite::Error, path: &Path) -> StoreError {
        let path = path.to_path_buf();
        let code = e.sqlite_error_code();
        let detail = e.to_string();
        match code {
            Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase) => {
                StoreError::Corrupt(path, detail)
            }
            Some(ErrorCode::DiskFull) => StoreError::DiskFull(path),
            // A full disk also shows as an I/O error where SQLite grows a
            // file outside a transaction's page writes (the WAL index, the
            // WAL itself): "disk I/O error" alone would not say what to do.
            Some(ErrorCode::SystemIoFailure) if disk_full(&path) => StoreError::DiskFull(path),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StoreError::Busy(path),
            Some(ErrorCode::ReadOnly) => StoreError::ReadOnlyFile(path, detail),
            // SQLite says "unable to open database file" when it cannot
            // create the WAL on a read-only mount: name the cause.
            Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied) if read_only_fs(&path) => {
                StoreError::ReadOnlyFile(path, "read-only file system".into())
            }
            Some(ErrorCode::CannotOpen | ErrorCode::PermissionDenied) => {
                StoreError::CannotOpen(path, detail)
            }
            _ => StoreError::Sqlite(e),
        }
    }

    /// Adds the path to a bare SQLite error raised inside a transaction.
    pub(crate) fn with_path(self, path: &Path) -> StoreError {
        match self {
            StoreError::Sqlite(e) => StoreError::from_sqlite(e, path),
            other => other,
        }
    }

    /// Bad input from the user (exit 2) rather than a store fault (exit 3).
    pub fn is_user_error(&self) -> bool {
        match self {
            StoreError::CutShort(c) => c.cause.is_user_error(),
            other => matches!(
                other,
                StoreError::UnknownBatch { .. }
                    | StoreError::UnknownKey { .. }
                    | StoreError::Pruned { .. }
                    | StoreError::Refused(_)
            ),
        }
    }

    /// Stopped by a signal (exit 130), with or without a part committed.
    pub fn is_interrupted(&self) -> bool {
        match self {
            StoreError::Interrupted(_) => true,
            StoreError::CutShort(c) => c.cause.is_interrupted(),
            _ => false,
        }
    }

    /// What stopped a write part-way, as the end of "... before ___".
    pub(crate) fn as_cause(&self) -> String {
        match self {
            StoreError::DiskFull(p) => format!("the disk holding {} filled up", p.display()),
            StoreError::Interrupted(signal) => signal.clone(),
            StoreError::Busy(p) => format!("{} stayed locked by another program", p.display()),
            other => format!("an error ({other})"),
        }
    }
}

impl StoreError {
    /// A copy for every request of a failed group commit (SQLite and I/O
    /// errors are not `Clone`; their text is kept).
    pub fn duplicate(&self) -> StoreError {
        match self {
            StoreError::NotFound(p) => StoreError::NotFound(p.clone()),
            StoreError::NotNightshift(p) => StoreError::NotNightshift(p.clone()),
            StoreError::Foreign(p) => StoreError::Foreign(p.clone()),
            StoreError::NotAFile { path, what, hint } => StoreError::NotAFile {
                path: path.clone(),
                what: what.clone(),
                hint: hint.clone(),
            },
            StoreError::Empty(p) => StoreError::Empty(p.clone()),
            StoreError::Replaced(p) => StoreError::Replaced(p.clone()),
            StoreError::Corrupt(p, d) => StoreError::Corrupt(p.clone(), d.clone()),
            StoreError::NewerSchema {
                path,
                found,
                supported,
            } => StoreError::NewerSchema {
                path: path.clone(),
                found: *found,
                supported: *supported,
            },
            StoreError::OlderSchema {
                path,
                found,
                supported,
            } => StoreError::OlderSchema {
                path: path.clone(),
                found: *found,
                supported: *supported,
            },
            StoreError::UpgradeUnderRunner {
                path,
                found,
                supported,
                runners,
            } => StoreError::UpgradeUnderRunner {
                path: path.clone(),
                found: *found,
                supported: *supported,
                runners: runners.clone(),
            },
            StoreError::ReadOnlyStore(p) => StoreError::ReadOnlyStore(p.clone()),
            StoreError::ReadOnlyFile(p, d) => StoreError::ReadOnlyFile(p.clone(), d.clone()),
            StoreError::ReadOnlyDatabase(p, d) => {
                StoreError::ReadOnlyDatabase(p.clone(), d.clone())
            }
            StoreError::CannotOpen(p, d) => StoreError::CannotOpen(p.clone(), d.clone()),
            StoreError::CannotCreate(p, d) => StoreError::CannotCreate(p.clone(), d.clone()),
            StoreError::DiskFull(p) => StoreError::DiskFull(p.clone()),
            StoreError::Busy(p) => StoreError::Busy(p.clone()),
            StoreError::Io(p, e) => {
                StoreError::Io(p.clone(), std::io::Error::new(e.kind(), e.to_string()))
            }
            StoreError::UnknownBatch { name, known } => StoreError::UnknownBatch {
                name: name.clone(),
                known: known.clone(),
            },
            StoreError::UnknownKey { batch, key } => StoreError::UnknownKey {
                batch: batch.clone(),
                key: key.clone(),
            },
            StoreError::Pruned { batch, tombstone } => StoreError::Pruned {
                batch: batch.clone(),
                tombstone: tombstone.clone(),
            },
            StoreError::Interrupted(s) => StoreError::Interrupted(s.clone()),
            StoreError::CutShort(c) => StoreError::CutShort(Box::new(CutShort {
                done: c.done,
                total: c.total,
                what: c.what.clone(),
                next: c.next.clone(),
                cause: c.cause.duplicate(),
                unlogged: c.unlogged.clone(),
            })),
            StoreError::Refused(r) => StoreError::Refused(r.clone()),
            StoreError::Fault(f) => StoreError::Fault(f.clone()),
            // Not `Clone`: its text, still a fault of the store.
            StoreError::Sqlite(e) => {
                StoreError::Fault(Fault::Database(format!("database error: {e}")))
            }
            StoreError::Postgres {
                target,
                code,
                message,
            } => StoreError::Postgres {
                target: target.clone(),
                code: code.clone(),
                message: message.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_of_each() -> Vec<StoreError> {
        let p = || PathBuf::from("s.db");
        let tombstone = Tombstone {
            key: "k".into(),
            outcome: crate::model::Outcome::Done,
            done_at: 0,
            pruned_at: 1,
        };
        let sqlite = rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
            None,
        );
        let mut all = vec![
            StoreError::NotFound(p()),
            StoreError::NotNightshift(p()),
            StoreError::Foreign(p()),
            StoreError::NotAFile {
                path: p(),
                what: "a directory".into(),
                hint: String::new(),
            },
            StoreError::Empty(p()),
            StoreError::Replaced(p()),
            StoreError::Corrupt(p(), "x".into()),
            StoreError::NewerSchema {
                path: p(),
                found: 9,
                supported: 8,
            },
            StoreError::OlderSchema {
                path: p(),
                found: 1,
                supported: 8,
            },
            StoreError::UpgradeUnderRunner {
                path: p(),
                found: 1,
                supported: 8,
                runners: "run 1 of batch b, pid 2 on h".into(),
            },
            StoreError::ReadOnlyStore(p()),
            StoreError::ReadOnlyFile(p(), "x".into()),
            StoreError::ReadOnlyDatabase(p(), "x".into()),
            StoreError::CannotOpen(p(), "x".into()),
            StoreError::CannotCreate(p(), "x".into()),
            StoreError::DiskFull(p()),
            StoreError::Busy(p()),
            StoreError::Io(p(), std::io::Error::other("x")),
            StoreError::UnknownBatch {
                name: "b".into(),
                known: vec![],
            },
            StoreError::UnknownKey {
                batch: "b".into(),
                key: "k".into(),
            },
            StoreError::Pruned {
                batch: "b".into(),
                tombstone,
            },
            StoreError::Interrupted("SIGINT".into()),
            StoreError::Refused(Refusal::NoSelection),
            StoreError::Fault(Fault::WriterStopped),
            StoreError::Sqlite(sqlite),
            StoreError::Postgres {
                target: None,
                code: "XX000".into(),
                message: "x".into(),
            },
        ];
        let cut = |cause| {
            StoreError::CutShort(Box::new(CutShort {
                done: 1,
                total: 2,
                what: "items added".into(),
                next: "run it again".into(),
                cause,
                unlogged: None,
            }))
        };
        all.push(cut(StoreError::UnknownBatch {
            name: "b".into(),
            known: vec![],
        }));
        all.push(cut(StoreError::Sqlite(
            rusqlite::Error::QueryReturnedNoRows,
        )));
        all
    }

    /// A failed group commit hands each request a copy of its error: the
    /// copy must exit as the original would (a database error copied as a
    /// user error exited 2 instead of 3).
    #[test]
    fn a_copy_is_the_same_kind_of_error() {
        for e in one_of_each() {
            let copy = e.duplicate();
            assert_eq!(
                copy.is_user_error(),
                e.is_user_error(),
                "{e:?} copied as {copy:?}"
            );
            assert_eq!(copy.is_interrupted(), e.is_interrupted(), "{e:?}");
            assert_eq!(copy.to_string(), e.to_string(), "{e:?}");
        }
    }
}
