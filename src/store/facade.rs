//! [`Store`]: the one store type callers use, forwarding every operation to
//! the backend its location names: a SQLite file ([`SqliteStore`]) or a
//! PostgreSQL database ([`PgStore`], for a `postgres://` URL). Both have
//! the same methods with the same semantics (`tests/it/store/contract/`).

use std::path::Path;

use super::pg::PgStore;
use super::{Access, Completion, EventFilter, FollowCursor, Result, SqliteStore, location};
use crate::model::{AddReport, Claim, Event, Millis, NewEvent, NewItem};

/// (A few stores per process: the size of a variant does not matter.)
#[derive(Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Store {
    Sqlite(SqliteStore),
    Pg(PgStore),
}

/// Forwards each method, written as its signature, to the backend.
macro_rules! forward {
    ($(fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {$(
        pub fn $name(&self $(, $arg: $ty)*) -> $ret {
            match self {
                Store::Sqlite(s) => s.$name($($arg),*),
                Store::Pg(s) => s.$name($($arg),*),
            }
        }
    )*};
    ($(fn $name:ident(&mut self $(, $arg:ident: $ty:ty)*) -> $ret:ty;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        pub fn $name(&mut self $(, $arg: $ty)*) -> $ret {
            match self {
                Store::Sqlite(s) => s.$name($($arg),*),
                Store::Pg(s) => s.$name($($arg),*),
            }
        }
    )*};
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
    /// [`StoreIdentity::check`](super::StoreIdentity::check).
    pub fn identity(&self) -> Option<super::StoreIdentity> {
        match self {
            Store::Sqlite(s) => s.identity(),
            Store::Pg(s) => s.identity(),
        }
    }

    /// A store deleted or replaced under its user: see
    /// [`SqliteStore::settle_after_loss`]. A PostgreSQL session leaves
    /// nothing behind.
    pub fn settle_after_loss(&mut self) {
        if let Store::Sqlite(s) = self {
            s.settle_after_loss();
        }
    }

    forward! {
        fn path(&self) -> &Path;
        fn access(&self) -> Access;
        fn integrity_check(&self) -> Result<String>;
        fn change_marker(&self) -> Vec<u8>;
        fn follow_start(&self) -> Result<FollowCursor>;
        fn follow_next(&self, filter: &EventFilter, cursor: &mut FollowCursor) -> Result<Vec<Event>>;
    }

    forward! {
        fn set_stop(&mut self, stop: crate::util::signals::Stop) -> ();
        fn checkpoint(&mut self) -> Result<()>;
        fn add_items(&mut self, batch: &str, items: &[NewItem], now: Millis, progress: impl FnMut(usize)) -> Result<AddReport>;
        fn claim(&mut self, batch: &str, run_id: i64, n: usize, lease_until: Millis, now: Millis) -> Result<Option<Vec<Claim>>>;
        fn complete(&mut self, c: &Completion<'_>, event: &NewEvent) -> Result<bool>;
        fn complete_all(&mut self, done: &[(Completion<'_>, &NewEvent)]) -> Result<Vec<bool>>;
    }
}
