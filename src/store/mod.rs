//! The store: a SQLite file (`sqlite`) or a PostgreSQL database (`pg`)
//! holding items, dead letters, runs, the run log, locks and schedule
//! state. Every SQL statement of the program lives under this module;
//! callers speak in `crate::model` types and the contract types of `api`
//! to [`Store`]: a SQLite file ([`SqliteStore`]) or a PostgreSQL database
//! ([`PgStore`], for a `postgres://` URL), as its location
//! names. Its operations are decided once in `ops`, over the statements
//! of `dialect`; `engine` holds what stays each engine's own (accessors,
//! engine mechanisms, the hot paths). Both backends keep the same
//! semantics (`tests/it/store/contract/`).
//!
//! On SQLite, writes are short `BEGIN IMMEDIATE` transactions and reads
//! short deferred ones, never held open (a long reader stops WAL
//! checkpoints). A read-only store never writes the database, its `-wal`
//! or its `-shm` (`sqlite::readonly`). What is at a file's path is judged
//! before SQLite opens it, and a new store appears whole (`sqlite::file`);
//! a long-lived user notices its store deleted or replaced (`identity`).

/// The attempts a claim has used, in SQL: its first attempt, counted at
/// the claim, is not used while its call waits for a place in its pool
/// (a retry counts its attempt once admitted). The one rule of the
/// take-back and of the views that say what it will do;
/// `model::attempts_used` says the same in Rust.
macro_rules! attempts_used {
    () => {
        "(attempts - CASE WHEN pool_wait_since IS NOT NULL AND retry_at IS NULL THEN 1 ELSE 0 END)"
    };
}

/// The attempts a claim leaves counted when it is given up: one fewer
/// when `$flag` (an SQL integer) is not 0, its counted call not having
/// started (or cut short where that is not counted), unless it waited to
/// retry (`retry_at`): a retry counts its attempt only when its call
/// begins, so what is counted then ran to its end. The one rule of the
/// release, and of a cancel to `pending` or to `manual`.
macro_rules! attempts_given_back {
    ($flag:literal) => {
        concat!(
            "CASE WHEN CAST(",
            $flag,
            " AS BIGINT) <> 0 AND retry_at IS NULL AND attempts > 0 THEN attempts - 1 ELSE attempts END"
        )
    };
}

mod api;
mod chunks;
mod dialect;
mod engine;
mod error;
mod identity;
mod location;
mod older;
mod ops;
pub mod pg;
mod refused;
mod rows;
pub mod sqlite;
mod upgrade;

use std::path::Path;

use pg::PgStore;

pub use api::{
    Access, AddFeed, Admission, AliveWatch, AttemptLog, AttemptUsage, BatchView, COUNT_CAP,
    CancelOutcome, CancelSettled, CancelTo, CancelledWhile, Claimable, Completion, DashQuery,
    Dashboard, EventFilter, EventsQuery, Failure, FeedRefused, FollowCursor, GonePlaces,
    ItemDetail, ItemFilter, ItemPage, ItemRow, ItemsQuery, LockOutcome, OpenRun, PoolCall, PoolDim,
    PoolDimView, PoolHold, PoolItem, PoolSpec, PoolView, PoolWait, PruneReport, Requeue, Retrying,
    RunEnd, Selection, SinceSummary, SpendAdd, SpendKey, SpendScope, Spent, Steering, StopAsked,
    Unpaused, UsageSum, place_key, place_runner,
};
pub use error::{CutShort, Fault, Refusal, StoreError};
pub use identity::{StoreIdentity, Verdict};
pub use location::{
    KEYWORDS_HINT, absolute, beside, beside_file, file_id, is_keyword_string, is_server,
    paused_file, place,
};
pub use ops::liveness::{lapsed as seat_lapsed, live_runs, seat};
pub use pg::without_password_values;
pub use refused::{RefusedGroup, RefusedKey, RefusedKeys, Why, missing_group};
pub use sqlite::SCHEMA_VERSION;
pub use sqlite::SqliteStore;

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// The one store type callers use, on the backend its location names.
/// (A few stores per process: the size of a variant does not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Store {
    Sqlite(SqliteStore),
    Pg(PgStore),
}

impl Store {
    /// Opens an existing store: the SQLite file at `db`, or the PostgreSQL
    /// database `db` names as a URL. A missing store, one that is not a
    /// nightshift store, or one written by a newer version is refused and
    /// left untouched.
    pub fn open(db: &Path, access: Access) -> Result<Store> {
        match location::url(db) {
            Some(url) => PgStore::open(url, access).map(Store::Pg),
            None => SqliteStore::open(db, access).map(Store::Sqlite),
        }
    }

    /// Creates the store (the file; the schema in an existing PostgreSQL
    /// database), or opens the one there. True if it was created.
    pub fn create(db: &Path) -> Result<(Store, bool)> {
        match location::url(db) {
            Some(url) => PgStore::create(url).map(|(s, new)| (Store::Pg(s), new)),
            None => SqliteStore::create(db).map(|(s, new)| (Store::Sqlite(s), new)),
        }
    }

    /// Runs `f`, whose reads of this store make one consistent snapshot: on
    /// a read-only SQLite store, one connection and one read transaction for
    /// all of them, instead of a fresh connection per read (see
    /// `SqliteStore::snapshot`); elsewhere `f` just runs. `f` may run
    /// twice, so it only reads and computes (print after).
    pub fn snapshot<T>(&self, f: impl Fn(&Store) -> T) -> Result<T> {
        match self {
            Store::Sqlite(s) => s.snapshot(|| f(self)),
            Store::Pg(_) => Ok(f(self)),
        }
    }

    /// Group commit: every write `f` makes shares one transaction (see
    /// [`SqliteStore::group`]). A group inside a group joins it.
    pub fn group<T>(&mut self, f: impl FnOnce(&mut Store) -> T) -> Result<T> {
        match self {
            Store::Sqlite(_) => SqliteStore::group_in(
                self,
                |s| match s {
                    Store::Sqlite(s) => s,
                    Store::Pg(_) => unreachable!("a store keeps its backend"),
                },
                f,
            ),
            Store::Pg(_) => PgStore::group_in(
                self,
                |s| match s {
                    Store::Pg(s) => s,
                    Store::Sqlite(_) => unreachable!("a store keeps its backend"),
                },
                f,
            ),
        }
    }

    /// Group commit of writes that are kept whole or not at all: an error
    /// from `f` rolls back every write it made (where `group` keeps those
    /// before the error), so the caller may run it again.
    /// Inside a group already, it joins that one, as `group` does, and an
    /// error leaves the outer group to its owner.
    pub fn group_whole<T>(&mut self, f: impl FnOnce(&mut Store) -> Result<T>) -> Result<T> {
        let nested = match self {
            Store::Sqlite(s) => s.in_group(),
            Store::Pg(s) => s.in_group(),
        };
        if nested {
            return f(self);
        }
        let mut failed = None;
        let out = self.group(|s| match f(s) {
            Ok(v) => Some(v),
            Err(e) => {
                match s {
                    Store::Sqlite(s) => s.roll_back_group(),
                    Store::Pg(s) => s.roll_back_group(),
                }
                failed = Some(e);
                None
            }
        });
        match (failed, out) {
            (Some(e), _) => Err(e),
            (None, out) => out.map(|v| v.expect("kept when nothing failed")),
        }
    }

    /// Makes every later group of this session lock the seat of `run` first,
    /// exclusively (PostgreSQL, whose runner writes on more sessions: see
    /// the lock order in `pg::locks`); nothing on SQLite, one writer at a
    /// time.
    pub fn seat_first_in_groups(&mut self, batch: &str, run: i64) -> Result<()> {
        match self {
            Store::Sqlite(_) => Ok(()),
            Store::Pg(s) => s.seat_first_in_groups(batch, run),
        }
    }

    /// Whether groups lock a seat first (`seat_first_in_groups`): then a
    /// lone write goes in a group too.
    pub fn orders_by_seat(&self) -> bool {
        match self {
            Store::Sqlite(_) => false,
            Store::Pg(s) => s.orders_by_seat(),
        }
    }

    /// Another session on the same store, for a second writer: on
    /// PostgreSQL, whose sessions write side by side; `None` on SQLite,
    /// which takes one writer at a time.
    pub fn another_session(&self) -> Option<Result<Store>> {
        match self {
            Store::Sqlite(_) => None,
            Store::Pg(s) => Some(s.another_session().map(Store::Pg)),
        }
    }

    /// What messages call this store: its path, or its URL without the
    /// password.
    pub fn place(&self) -> String {
        self.path().display().to_string()
    }

    /// Whether this user may write the store (the dashboard opens
    /// read-only by itself when not): write permission on the file, or,
    /// on PostgreSQL, the privilege to update items on a primary server.
    pub fn writable(&self) -> bool {
        match self {
            Store::Sqlite(s) => s.writable(),
            Store::Pg(s) => s.writable(),
        }
    }

    /// Which store this is, so that a long-lived user (a run) notices its
    /// location naming another store, or none, later: see
    /// [`StoreIdentity::check`](StoreIdentity::check).
    pub fn identity(&self) -> Option<StoreIdentity> {
        match self {
            Store::Sqlite(s) => s.identity(),
            Store::Pg(s) => s.identity(),
        }
    }

    /// A store deleted or replaced under its user: see
    /// `SqliteStore::settle_after_loss`. A PostgreSQL session leaves
    /// nothing behind.
    pub fn settle_after_loss(&mut self) {
        if let Store::Sqlite(s) = self {
            s.settle_after_loss();
        }
    }
}

/// Reads an optional JSON text column.
pub(crate) fn json_col(text: Option<String>) -> Option<serde_json::Value> {
    text.map(|t| serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)))
}
