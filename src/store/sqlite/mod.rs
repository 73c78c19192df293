//! The SQLite dialect: the store as one file (`SqliteStore`), its schema,
//! and the statements of each area.

mod attempts;
mod batches;
pub(crate) mod beside;
mod budgets;
mod bulk;
mod counted;
mod daemons;
mod events;
pub(crate) mod file;
mod hot;
mod items;
mod key_table;
mod locks;
mod pools;
mod prune;
mod readonly;
mod runs;
mod schema;
mod sql;
mod tombstones;
mod trace;
mod views;
mod workers;

use crate::store::Fault;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};

pub use schema::SCHEMA_VERSION;

use crate::store::identity::StoreIdentity;
use crate::store::{Access, Result, StoreError, upgrade};
use crate::util::time::now_ms;
/// One SQLite transaction, as the statements of `dialect` see it.
pub(crate) struct SqliteTx<'c> {
    conn: &'c Connection,
    /// The store's dashboard search, continued from poll to poll (read
    /// snapshots only).
    search: Option<&'c std::sync::Mutex<views::SearchScan>>,
}

impl<'c> SqliteTx<'c> {
    pub(crate) fn new(conn: &'c Connection) -> SqliteTx<'c> {
        SqliteTx { conn, search: None }
    }

    /// A read snapshot of `store`, which may go on with its search.
    pub(crate) fn reading(conn: &'c Connection, store: &'c SqliteStore) -> SqliteTx<'c> {
        SqliteTx {
            conn,
            search: Some(&store.search),
        }
    }
}

/// The SQLite store (one file); callers use it through [`Store`](crate::store::Store).
pub struct SqliteStore {
    /// As given: what messages name.
    path: PathBuf,
    /// The file itself (`path`, or what it links to).
    file: PathBuf,
    /// The file's (device, inode) when opened.
    id: Option<(u64, u64)>,
    access: Access,
    /// The writer connection; `None` for a read-only store, which opens a
    /// fresh read-only connection per read (see `readonly`).
    conn: Option<Connection>,
    /// A read-only store's one connection while in `snapshot`, inside its
    /// read transaction: every read goes through it.
    pinned: std::cell::RefCell<Option<Connection>>,
    /// Inside `group`: writes become savepoints of one transaction.
    in_group: bool,
    /// A write without a savepoint (`write_whole`) failed in the group:
    /// its partial changes cannot be undone alone, so the group is not
    /// committed.
    doomed: bool,
    /// The dashboard's search, continued from poll to poll.
    search: std::sync::Mutex<views::SearchScan>,
    /// Bulk writes stop between chunks once this is set (`set_stop`).
    stop: crate::util::signals::Stop,
    /// During a bulk write: the thread that checkpoints beside it.
    beside: Option<beside::Beside>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("access", &self.access)
            .finish()
    }
}

impl SqliteStore {
    /// Opens an existing store. A missing or empty file, anything but a
    /// regular file, a file that is not a nightshift store, or one written
    /// by a newer version is refused and left untouched.
    pub fn open(path: &Path, access: Access) -> Result<SqliteStore> {
        let found = file::inspect(path)?;
        match found.found {
            file::Found::Missing => return Err(StoreError::NotFound(path.to_path_buf())),
            file::Found::Empty => return Err(StoreError::Empty(path.to_path_buf())),
            file::Found::File => {}
        }
        // SQLite would only say "unable to open database file". access(2),
        // not an open: closing any descriptor of the file would drop the
        // POSIX locks this process's connections hold on it.
        #[cfg(unix)]
        if nix::unistd::access(path, nix::unistd::AccessFlags::R_OK)
            == Err(nix::errno::Errno::EACCES)
        {
            return Err(StoreError::CannotOpen(
                path.to_path_buf(),
                "permission denied (a store is readable by its owner only unless shared, \
                 e.g. with a group: see \"Who can read it\" in the README)"
                    .into(),
            ));
        }
        Self::open_found(path, found.real, access, false)
    }

    /// Opens the regular file `real` (what `path` names); `adopt`: an
    /// empty file, made a store by migrating it.
    fn open_found(path: &Path, real: PathBuf, access: Access, adopt: bool) -> Result<SqliteStore> {
        let id = file::id_of(&real).ok();
        let mut store = SqliteStore {
            path: path.to_path_buf(),
            file: real,
            id,
            access,
            conn: None,
            pinned: Default::default(),
            in_group: false,
            doomed: false,
            search: Default::default(),
            stop: Default::default(),
            beside: None,
        };
        if access == Access::ReadOnly {
            store.read(|conn| {
                let version = check_identity(conn, path)?;
                check_current(version, path)
            })?;
            return Ok(store);
        }
        // SQLite would open it read-only without a word, and fail at the
        // first write; or fail to make the `-wal` in the directory.
        if !file::writable(&store.file) {
            return Err(StoreError::ReadOnlyFile(
                path.to_path_buf(),
                file::why_not_writable(&store.file),
            ));
        }
        let mut conn = Connection::open_with_flags(
            &store.file,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| StoreError::from_sqlite(e, path))?;
        // Check before any pragma: a refused file must not change.
        if !adopt {
            check_identity(&conn, path)?;
        }
        schema::configure_writer(&mut conn).map_err(|e| StoreError::from_sqlite(e, path))?;
        let now = now_ms();
        let refused = schema::migrate_unless(&mut conn, |tx, found| {
            let seats = schema::seats(tx)?;
            Ok(upgrade::refusal(
                path,
                found,
                schema::SCHEMA_VERSION,
                seats,
                now,
            ))
        })
        .map_err(|e| StoreError::from_sqlite(e, path))?;
        if let Some(refused) = refused {
            return Err(refused);
        }
        store.conn = Some(conn);
        Ok(store)
    }

    /// Creates a new store (or opens the existing one); true if it made one.
    /// The store appears whole or not at all (see `file`); an empty file
    /// at `path` has nothing to lose and is made the store.
    pub fn create(path: &Path) -> Result<(SqliteStore, bool)> {
        let found = file::inspect(path)?;
        match found.found {
            file::Found::File => Ok((SqliteStore::open(path, Access::ReadWrite)?, false)),
            file::Found::Empty => Ok((
                Self::open_found(path, found.real, Access::ReadWrite, true)?,
                true,
            )),
            file::Found::Missing => {
                let made = file::create_whole(path, |draft| {
                    let mut conn = Connection::open_with_flags(
                        draft,
                        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                    )?;
                    schema::migrate(&mut conn)?;
                    conn.close().map_err(|(_, e)| StoreError::from(e))
                })?;
                Ok((SqliteStore::open(path, Access::ReadWrite)?, made))
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes bulk writes (`add_items`, `requeue`) stop at the next chunk
    /// boundary once `stop` is set, saying how far they got.
    pub fn set_stop(&mut self, stop: crate::util::signals::Stop) {
        self.stop = stop;
    }

    /// What bulk writes check between chunks (`set_stop`).
    pub(crate) fn stop(&self) -> &crate::util::signals::Stop {
        &self.stop
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// The file this store opened (see [`Store::identity`](crate::store::Store::identity)).
    pub(crate) fn identity(&self) -> Option<StoreIdentity> {
        Some(StoreIdentity::file(self.path.clone(), self.id?))
    }

    /// Whether this user may write the store (see [`Store::writable`](crate::store::Store::writable)):
    /// the file, and its directory, where SQLite creates the `-wal` and
    /// `-shm` when a writer opens it and removes them when the last one
    /// closes.
    pub fn writable(&self) -> bool {
        file::writable(&self.file)
    }

    /// Runs `f` in one short read transaction (one consistent snapshot).
    pub(crate) fn read<T>(&self, f: impl Fn(&Connection) -> Result<T>) -> Result<T> {
        match &self.conn {
            // Inside a group's transaction: read what it has written so far.
            Some(conn) if !conn.is_autocommit() => f(conn).map_err(|e| e.with_path(&self.path)),
            Some(conn) => {
                let tx = conn
                    .unchecked_transaction()
                    .map_err(|e| self.sqlite_err(e))?;
                let out = f(&tx).map_err(|e| e.with_path(&self.path))?;
                tx.finish().map_err(|e| self.sqlite_err(e))?;
                Ok(out)
            }
            None => match self.pinned.borrow().as_ref() {
                Some(conn) => f(conn).map_err(|e| e.with_path(&self.path)),
                None => readonly::read(&self.file, f),
            },
        }
    }

    /// Runs `f` with every read of a read-only store on one connection, in
    /// one read transaction: one consistent snapshot, and one open instead
    /// of one per read (each open parses the whole schema). A writer's reads
    /// share its connection already: there `f` just runs. `f` runs again
    /// when the read turns out torn (see `readonly`), so it only computes.
    pub(crate) fn snapshot<T>(&self, f: impl Fn() -> T) -> Result<T> {
        if self.conn.is_some() || self.pinned.borrow().is_some() {
            return Ok(f());
        }
        readonly::session(&self.file, |conn| {
            // A first read starts the transaction: that is where SQLite
            // opens `-wal` and `-shm`, which a writer's close can remove in
            // between, so its error must reach `session` to be retried,
            // not `f`'s first read.
            conn.execute_batch("BEGIN")
                .and_then(|()| conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(())))
                .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
            self.pinned.replace(Some(conn));
            let out = f();
            if let Some(conn) = self.pinned.take() {
                // Only reads ran: ending the transaction cannot lose anything.
                let _ = conn.execute_batch("COMMIT");
            }
            Ok(out)
        })
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction: all or nothing.
    /// Inside [`SqliteStore::group`], `f` runs in a savepoint of the group's
    /// transaction instead: still all or nothing, durable at the group's
    /// commit.
    pub(crate) fn write<T>(&mut self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let path = self.path.clone();
        let (in_group, doomed) = (self.in_group, self.doomed);
        let Some(conn) = self.conn.as_mut() else {
            return Err(StoreError::ReadOnlyStore(path));
        };
        if in_group {
            // SQLite rolls the whole transaction back on some errors (disk
            // full, I/O): never let later writes run in autocommit instead.
            if doomed || conn.is_autocommit() {
                return Err(StoreError::Fault(Fault::GroupRolledBack(format!(
                    "the group transaction on {} was rolled back by an earlier error",
                    path.display()
                ))));
            }
            exec_cached(conn, "SAVEPOINT write").map_err(|e| StoreError::from_sqlite(e, &path))?;
            return match f(conn) {
                Ok(out) => {
                    exec_cached(conn, "RELEASE write")
                        .map_err(|e| StoreError::from_sqlite(e, &path))?;
                    Ok(out)
                }
                Err(e) => {
                    let _ = exec_cached(conn, "ROLLBACK TO write");
                    let _ = exec_cached(conn, "RELEASE write");
                    Err(e.with_path(&path))
                }
            };
        }
        exec_cached(conn, "BEGIN IMMEDIATE").map_err(|e| StoreError::from_sqlite(e, &path))?;
        let timer = trace::TxTimer::start();
        let mut tx = Open { conn, done: false };
        let out = f(tx.conn).map_err(|e| e.with_path(&path))?;
        exec_cached(tx.conn, "COMMIT").map_err(|e| StoreError::from_sqlite(e, &path))?;
        tx.done = true;
        if let Some(timer) = timer {
            timer.finish();
        }
        Ok(out)
    }

    /// [`SqliteStore::write`] that, in a group, opens no savepoint of its
    /// own: a savepoint copies every page its writes touch first (to the
    /// sub-journal), most of a claim's or a done mark's cost. Should `f`
    /// fail after writing, what it wrote cannot be undone alone, so the
    /// whole group rolls back and every write in it is refused
    /// (`GroupRolledBack`). A refusal before its first change (an unknown
    /// batch) leaves the group as it was, as a savepoint would: for writes
    /// whose only failures once writing are the store's own (I/O, disk full).
    pub(crate) fn write_whole<T>(&mut self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        if !self.in_group {
            return self.write(f);
        }
        let path = self.path.clone();
        let Some(conn) = self.conn.as_ref() else {
            return Err(StoreError::ReadOnlyStore(path));
        };
        if self.doomed || conn.is_autocommit() {
            return Err(StoreError::Fault(Fault::GroupRolledBack(format!(
                "the group transaction on {} was rolled back by an earlier error",
                path.display()
            ))));
        }
        // Counts every row changed, by triggers too: unchanged (and still in
        // the transaction) means `f` wrote nothing before it failed.
        let before = conn.total_changes();
        let out = f(conn);
        if out.is_err() && (conn.is_autocommit() || conn.total_changes() != before) {
            self.doomed = true;
        }
        out.map_err(|e| e.with_path(&path))
    }

    /// Group commit: every write `f` makes shares one transaction, so many
    /// small transitions cost one commit. Each write stays atomic on its
    /// own (a savepoint); none is durable, and none may be acknowledged to
    /// anyone, before this returns `Ok`. A group inside a group joins it.
    pub fn group<T>(&mut self, f: impl FnOnce(&mut SqliteStore) -> T) -> Result<T> {
        Self::group_in(self, |s| s, f)
    }

    /// Ends the group under way, keeping none of it (see
    /// [`super::Store::group_whole`]).
    pub(crate) fn roll_back_group(&mut self) {
        if let (true, Some(conn)) = (self.in_group, self.conn.as_ref()) {
            let _ = exec_cached(conn, "ROLLBACK");
        }
    }

    pub(crate) fn in_group(&self) -> bool {
        self.in_group
    }

    /// [`SqliteStore::group`] of the store `inner` reaches from `outer`
    /// (the [`Store`](crate::store::Store) holding it), so that `f` gets `outer`.
    pub(crate) fn group_in<S, T>(
        outer: &mut S,
        inner: impl Fn(&mut S) -> &mut SqliteStore,
        f: impl FnOnce(&mut S) -> T,
    ) -> Result<T> {
        if inner(outer).in_group {
            return Ok(f(outer));
        }
        let this = inner(outer);
        let path = this.path.clone();
        let Some(conn) = this.conn.as_ref() else {
            return Err(StoreError::ReadOnlyStore(path));
        };
        exec_cached(conn, "BEGIN IMMEDIATE").map_err(|e| StoreError::from_sqlite(e, &path))?;
        let timer = trace::TxTimer::start();
        this.in_group = true;
        let out = f(outer);
        let this = inner(outer);
        this.in_group = false;
        let doomed = std::mem::take(&mut this.doomed);
        let Some(conn) = this.conn.as_ref() else {
            return Err(StoreError::ReadOnlyStore(path));
        };
        if doomed && !conn.is_autocommit() {
            let _ = exec_cached(conn, "ROLLBACK");
        }
        if doomed || conn.is_autocommit() {
            return Err(StoreError::Fault(Fault::GroupRolledBack(format!(
                "the group transaction on {} was rolled back by an error; nothing in it was kept",
                path.display()
            ))));
        }
        if let Err(e) = exec_cached(conn, "COMMIT") {
            let _ = exec_cached(conn, "ROLLBACK");
            return Err(StoreError::from_sqlite(e, &path));
        }
        if let Some(timer) = timer {
            timer.finish();
        }
        Ok(out)
    }

    /// Raises the writer's page cache to at least `kib` for a bulk write;
    /// returns the setting to give back to [`SqliteStore::restore_cache`].
    pub(crate) fn grow_cache(&self, kib: i64) -> Option<i64> {
        let conn = self.conn.as_ref()?;
        let old: i64 = conn.query_row("PRAGMA cache_size", [], |r| r.get(0)).ok()?;
        // Negative values are KiB, positive ones pages (of 4 KiB).
        let old_kib = if old < 0 { -old } else { old * 4 };
        if kib <= old_kib {
            return None;
        }
        conn.execute_batch(&format!("PRAGMA cache_size = -{kib}"))
            .ok()?;
        Some(old)
    }

    /// Shrinks the page cache to `schema::RUNNER_CACHE_KIB` for a run's
    /// hot path, which reads and writes near the ends of its tables and
    /// indexes (claims in queue order, events appended): a few pages,
    /// whatever the store's size. The writer's 16 MiB, kept for the bulk
    /// writes' scattered pages, filled once the file outgrew it, and the
    /// runner's memory grew with the store up to 100,000 items (issue 19:
    /// "runner RSS flat"). SQLite frees the pages above the new size.
    pub fn use_runner_cache(&self) {
        if let Some(conn) = &self.conn {
            // A cache that cannot shrink costs memory, not correctness.
            let _ = conn.execute_batch(&format!(
                "PRAGMA cache_size = -{}",
                schema::RUNNER_CACHE_KIB
            ));
        }
    }

    /// Gives back the page cache taken by [`SqliteStore::grow_cache`]; SQLite frees
    /// the pages above the old size.
    pub(crate) fn restore_cache(&self, old: Option<i64>) {
        if let (Some(conn), Some(old)) = (&self.conn, old) {
            let _ = conn.execute_batch(&format!("PRAGMA cache_size = {old}"));
        }
    }

    fn sqlite_err(&self, e: rusqlite::Error) -> StoreError {
        StoreError::from_sqlite(e, &self.path)
    }

    /// For a writer of many commits: the WAL checkpointed beside it by a
    /// thread of its own rather than inside its commits (see `beside`),
    /// until [`SqliteStore::end_checkpoints_beside`].
    pub(crate) fn begin_checkpoints_beside(&mut self, span: beside::Span) {
        if self.beside.is_none()
            && let Some(conn) = self.conn.as_mut()
        {
            self.beside = beside::Beside::start(conn, &self.file, span);
        }
    }

    /// The connection checkpoints inside its commits again.
    pub(crate) fn end_checkpoints_beside(&mut self) {
        if let (Some(b), Some(conn)) = (self.beside.take(), self.conn.as_mut()) {
            b.finish(conn);
        }
    }

    /// Runs a passive WAL checkpoint; keeps the WAL short between runs.
    /// Inside a transaction (a group commit) SQLite cannot checkpoint and
    /// says SQLITE_LOCKED; it is skipped there: the WAL is checkpointed
    /// automatically and when the last connection closes anyway.
    pub fn checkpoint(&mut self) -> Result<()> {
        if let Some(conn) = &self.conn {
            if !conn.is_autocommit() {
                return Ok(());
            }
            conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE);")
                .map_err(|e| StoreError::from_sqlite(e, &self.path))?;
        }
        Ok(())
    }

    /// After the store's path came to name another file (or none): moves
    /// what the write-ahead log holds into the file still open, and empties
    /// the log. SQLite leaves a moved file's log in place when it closes,
    /// and that log, still named beside whatever is at the path now, would
    /// be read as part of it. Nothing new is written: only commits already
    /// made, into their own file.
    pub(crate) fn settle_after_loss(&mut self) {
        if let Some(conn) = &self.conn {
            let _ = conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);");
        }
    }

    /// `PRAGMA integrity_check`: "ok" or the problems found.
    pub fn integrity_check(&self) -> Result<String> {
        self.read(|conn| {
            let rows: Vec<String> = conn
                .prepare("PRAGMA integrity_check")
                .and_then(|mut st| st.query_map([], |r| r.get(0))?.collect())?;
            Ok(rows.join("; "))
        })
    }
}

/// Runs a transaction-control statement (BEGIN, COMMIT, SAVEPOINT...) from
/// the statement cache: parsing them anew for every transition was about 8%
/// of the runner's instructions.
fn exec_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([])?;
    Ok(())
}

/// A write transaction begun by `Store::write`: rolled back unless it
/// committed (an error, or a panic, on the way).
struct Open<'c> {
    conn: &'c Connection,
    done: bool,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.done && !self.conn.is_autocommit() {
            let _ = exec_cached(self.conn, "ROLLBACK");
        }
    }
}

/// Refuses files that are not nightshift stores or are from a newer version,
/// reading only the header fields.
fn check_identity(conn: &Connection, path: &Path) -> Result<i32> {
    let header = conn.query_row(
        "SELECT (SELECT application_id FROM pragma_application_id),
                (SELECT user_version FROM pragma_user_version)",
        [],
        |r| Ok((r.get::<_, i32>(0)?, r.get::<_, i32>(1)?)),
    );
    let (app_id, version) = header.map_err(|e| StoreError::from_sqlite(e, path))?;
    if app_id != schema::APPLICATION_ID || version < 1 {
        return Err(StoreError::Foreign(path.to_path_buf()));
    }
    if version > SCHEMA_VERSION {
        return Err(StoreError::NewerSchema {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(version)
}

/// A read-only open reads the current layout, and older ones that only
/// lack columns (see `store::older`); an older one it refuses (see
/// [`StoreError::OlderSchema`]).
fn check_current(version: i32, path: &Path) -> Result<()> {
    if version < schema::readable_from() {
        return Err(StoreError::OlderSchema {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(())
}

/// Parses a stored enum column; the schema's CHECKs keep these valid.
pub(crate) fn parse_col<T: std::str::FromStr<Err = String>>(
    idx: usize,
    text: &str,
) -> rusqlite::Result<T> {
    text.parse().map_err(|e: String| {
        rusqlite::Error::FromSqlConversionFailure(idx, rusqlite::types::Type::Text, e.into())
    })
}

/// For the tests of checkpoints (here and the runner's writer's).
#[cfg(test)]
impl SqliteStore {
    /// The writer connection's `wal_autocheckpoint`: 0 while its commits
    /// leave the checkpoints to the thread beside them.
    pub(crate) fn autocheckpoint_pages(&self) -> i64 {
        let conn = self.conn.as_ref().expect("a writable store");
        conn.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .expect("reading wal_autocheckpoint")
    }

    /// Commits `rows` rows of 3,000 random bytes (about a page each) into
    /// a table `t` of its own, made by the first call (`rows` may be 0).
    pub(crate) fn write_blob_rows(&mut self, rows: u32) -> Result<()> {
        self.write(|tx| {
            Ok(tx.execute_batch(&format!(
                "CREATE TABLE IF NOT EXISTS t (x BLOB);
                 WITH RECURSIVE n(i) AS (SELECT 1 WHERE {rows} > 0 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
                 INSERT INTO t SELECT randomblob(3000) FROM n"
            ))?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite rolls a whole transaction back on some errors (disk full,
    /// I/O); a group whose transaction was lost is a fault of the store,
    /// never the user's (exit 3, not 2), for its later writes and at its end.
    #[test]
    fn a_group_rolled_back_under_it_is_a_store_fault() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = SqliteStore::create(&dir.path().join("s.db")).unwrap();
        let mut later = None;
        let end = s
            .group(|s| {
                s.write(|tx| Ok(tx.execute_batch("CREATE TABLE t (x); INSERT INTO t VALUES (1)")?))
                    .unwrap();
                // What SQLite does by itself on such an error.
                s.conn.as_ref().unwrap().execute_batch("ROLLBACK").unwrap();
                later = Some(s.write(|tx| Ok(tx.execute_batch("INSERT INTO t VALUES (2)")?)));
            })
            .unwrap_err();
        let later = later.unwrap().unwrap_err();
        for e in [later, end] {
            assert!(!e.is_user_error(), "{e}");
            let exit = crate::commands::exit_for(&anyhow::Error::from(e));
            assert_eq!(exit, crate::commands::Exit::Store);
        }
    }

    /// A bulk write's commits leave their checkpoints to the thread beside
    /// them: the file takes the pages while the writer's own automatic
    /// checkpoint is off, and gets it back afterwards.
    #[test]
    fn a_bulk_writes_checkpoints_run_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let (mut s, _) = SqliteStore::create(&path).unwrap();
        assert_eq!(s.autocheckpoint_pages(), 1000);
        s.write_blob_rows(0).unwrap();
        s.checkpoint().unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        s.begin_checkpoints_beside(beside::Span::Bulk);
        assert_eq!(
            s.autocheckpoint_pages(),
            0,
            "the writer's commits do not checkpoint"
        );
        // Three commits of ~1,200 pages each: each fills the WAL past the
        // threshold.
        for _ in 0..3 {
            s.write_blob_rows(1200).unwrap();
        }
        // Waits for the thread's last checkpoint.
        s.end_checkpoints_beside();
        assert_eq!(
            s.autocheckpoint_pages(),
            1000,
            "the writer checkpoints again"
        );
        let after = std::fs::metadata(&path).unwrap().len();
        assert!(
            after > before + 3 * 1000 * 3000,
            "the file took the pages: {before} -> {after} bytes"
        );
    }

    /// A lasting writer that never pauses still has its log start over
    /// while its checkpoints run beside it (a runner's log grew without
    /// end). Told by the log's header, whose checkpoint sequence number
    /// counts its starts over: not by the file's length, which a
    /// checkpointing thread kept from the CPU by a loaded machine lets
    /// grow past `RESTART_PAGES` a while (the writer's own checkpoint is
    /// busy meanwhile), so a bound on it raced the scheduler.
    #[test]
    fn a_busy_writers_log_starts_over_while_checkpointed_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let (mut s, _) = SqliteStore::create(&path).unwrap();
        s.write_blob_rows(0).unwrap();
        s.begin_checkpoints_beside(beside::Span::Lasting);
        let wal = dir.path().join("s.db-wal");
        let starts = || {
            let header = std::fs::read(&wal).unwrap();
            u32::from_be_bytes(header[12..16].try_into().unwrap())
        };
        let first = starts();
        // Commits of ~40 pages: the log is made to start over at every
        // 4,000 pages or so, 100 commits; never, it grew without end.
        let mut commits = 0;
        while starts() < first + 2 && commits < 1_000 {
            s.write_blob_rows(40).unwrap();
            commits += 1;
        }
        let restarted = starts() - first;
        s.end_checkpoints_beside();
        assert!(
            restarted >= 2,
            "the log kept growing: started over {restarted} times in {commits} commits"
        );
    }

    fn rows(s: &SqliteStore) -> Vec<i64> {
        let conn = s.conn.as_ref().unwrap();
        let mut st = conn.prepare("SELECT x FROM t ORDER BY x").unwrap();
        st.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    /// A hot write (no savepoint of its own) that fails half done in a
    /// group keeps nothing: not its half, not what the group wrote before
    /// it, and nothing after it; the group is refused as a store fault.
    #[test]
    fn a_hot_write_failing_half_done_rolls_its_whole_group_back() {
        let dir = tempfile::tempdir().unwrap();
        let (mut s, _) = SqliteStore::create(&dir.path().join("s.db")).unwrap();
        s.write(|tx| Ok(tx.execute_batch("CREATE TABLE t (x)")?))
            .unwrap();
        let mut later = None;
        let end = s
            .group(|s| {
                s.write(|tx| Ok(tx.execute_batch("INSERT INTO t VALUES (1)")?))
                    .unwrap();
                let half = s.write_whole(|tx| {
                    tx.execute_batch("INSERT INTO t VALUES (2)")?;
                    Err::<(), _>(StoreError::Fault(Fault::WriterStopped))
                });
                assert!(half.is_err());
                later = Some(s.write(|tx| Ok(tx.execute_batch("INSERT INTO t VALUES (3)")?)));
            })
            .unwrap_err();
        assert!(later.unwrap().is_err(), "a write after it is refused");
        assert!(!end.is_user_error(), "{end}");
        assert_eq!(rows(&s), Vec::<i64>::new(), "nothing of the group kept");
        // The store goes on: the next group commits.
        s.group(|s| s.write_whole(|tx| Ok(tx.execute_batch("INSERT INTO t VALUES (4)")?)))
            .unwrap()
            .unwrap();
        assert_eq!(rows(&s), vec![4]);
        // A refusal before its first change keeps the group.
        s.group(|s| {
            s.write(|tx| Ok(tx.execute_batch("INSERT INTO t VALUES (5)")?))
                .unwrap();
            let refused = s.write_whole(|_| Err::<(), _>(StoreError::Fault(Fault::WriterStopped)));
            assert!(refused.is_err());
            s.write_whole(|tx| Ok(tx.execute_batch("INSERT INTO t VALUES (6)")?))
                .unwrap();
        })
        .unwrap();
        assert_eq!(rows(&s), vec![4, 5, 6]);
    }

    fn cache_size(s: &SqliteStore) -> i64 {
        let conn = s.conn.as_ref().unwrap();
        conn.query_row("PRAGMA cache_size", [], |r| r.get(0))
            .unwrap()
    }

    /// A run's connection keeps a small page cache (its memory flat
    /// whatever the store's size), from which an add on it still grows
    /// its own and gives it back.
    #[test]
    fn a_run_keeps_a_small_page_cache_and_an_add_still_grows_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let (s, _) = SqliteStore::create(&dir.path().join("s.db")).unwrap();
        assert_eq!(cache_size(&s), -schema::WRITER_CACHE_KIB);
        s.use_runner_cache();
        assert_eq!(cache_size(&s), -schema::RUNNER_CACHE_KIB);
        let restore = s.grow_cache(64 * 1024);
        assert_eq!(cache_size(&s), -64 * 1024);
        s.restore_cache(restore);
        assert_eq!(cache_size(&s), -schema::RUNNER_CACHE_KIB);
    }
}
