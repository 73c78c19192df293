//! The PostgreSQL store: the same methods, types and semantics as the
//! SQLite [`Store`](super::Store), for runners on several hosts sharing one
//! queue. Selected by a `postgres://` database URL.
//!
//! - Transactions: writes are `READ COMMITTED` transactions whose row locks
//!   give the same serialisation the SQLite store gets from `BEGIN
//!   IMMEDIATE`, but per row: claims take pending rows `FOR UPDATE SKIP
//!   LOCKED`, so runners never wait for each other's items. Reads are
//!   `REPEATABLE READ READ ONLY` (one snapshot, like a SQLite read).
//!   Serialisation failures and deadlocks are retried.
//! - Clock: every time the caller passes in is moved onto the database's
//!   clock by the offset measured when connecting (and every time read is
//!   moved back), so lock and lease expiries written by one host and judged
//!   by another are compared on one clock, whatever the hosts' skew.
//! - Counts: per-batch counters kept by statement-level triggers, in
//!   sharded rows (one shard per connection, a runner's sessions each
//!   given their own; summed on read), so runners on
//!   different connections do not queue on one hot counter row.
//! - Read-only: the session sets `default_transaction_read_only`, every
//!   read is a `READ ONLY` transaction, and writes are refused before they
//!   reach the server. A read-only role is documented in the README.
//!
//! All tables live in the `nightshift` schema of the database named by the
//! URL, so the database can be shared with other programs.

mod add;
mod attempts;
mod batches;
mod budgets;
mod bulk;
mod conn;
mod copy;
mod daemons;
mod events;
mod hot;
mod items;
mod locks;
mod passfile;
mod pools;
mod prune;
mod runs;
mod schema;
mod sql;
mod tombstones;
mod views;
mod workers;

use crate::store::Fault;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::{Result, StoreError};
use crate::store::api::Access;
use conn::Conn;

/// One PostgreSQL transaction, as the statements of `dialect` see it.
pub(crate) struct PgTx<'c> {
    c: &'c mut Conn,
}

impl<'c> PgTx<'c> {
    pub(crate) fn new(c: &'c mut Conn) -> PgTx<'c> {
        PgTx { c }
    }
}
pub(crate) use schema::DbId;
pub use schema::PG_SCHEMA_VERSION;

/// Does this `--db` value name a PostgreSQL database?
pub fn is_url(db: &str) -> bool {
    db.starts_with("postgres://") || db.starts_with("postgresql://")
}

pub struct PgStore {
    /// The URL without its password: what messages name.
    target: PathBuf,
    access: Access,
    conn: Mutex<Conn>,
    /// Inside `group`: writes become savepoints of one transaction.
    in_group: bool,
    /// Bulk writes stop between chunks once this is set (`set_stop`).
    stop: crate::util::signals::Stop,
    /// The seat (batch id, run) each group locks first, exclusively (see
    /// `seat_first_in_groups` and the lock order in `locks`).
    seat_first: Option<(i64, i64)>,
    /// Sessions opened beside this one (`another_session`), each given the
    /// counters' shard that many after this session's.
    beside: std::sync::atomic::AtomicI32,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("target", &self.target)
            .field("access", &self.access)
            .finish()
    }
}

impl PgStore {
    /// Opens an existing store. A database without the nightshift schema,
    /// or with a newer one, is refused and left untouched.
    pub fn open(url: &str, access: Access) -> Result<PgStore> {
        Self::open_with_skew(url, access, 0)
    }

    /// As [`PgStore::open`], for a host whose clock reads `skew_ms` ahead of
    /// this one's (tests of clock skew between hosts).
    #[doc(hidden)]
    pub fn open_with_skew(url: &str, access: Access, skew_ms: i64) -> Result<PgStore> {
        let target = redact(url);
        let mut conn = Conn::connect(url, &target, access, skew_ms)?;
        schema::check_identity(&mut conn, &target, access)?;
        if access == Access::ReadWrite {
            schema::migrate(&mut conn, &target).map_err(|e| e.at(&target))?;
        }
        conn.expect = schema::db_id(&mut conn).map_err(|e| e.at(&target))?;
        Ok(PgStore {
            target,
            access,
            conn: Mutex::new(conn),
            in_group: false,
            seat_first: None,
            stop: Default::default(),
            beside: Default::default(),
        })
    }

    /// Another session on this store, as this one was opened: a runner's
    /// second writer (see `runner::writer`'s lanes). Refused when the URL
    /// names another store by now.
    pub fn another_session(&self) -> Result<PgStore> {
        let (url, skew, expect) = {
            let c = self.conn();
            (c.url().to_string(), c.skew_ms(), c.expect.clone())
        };
        let other = PgStore::open_with_skew(&url, self.access, skew)?;
        if other.conn().expect != expect {
            return Err(StoreError::Replaced(self.target.clone()));
        }
        // A shard of counters of its own: the sessions of one runner commit
        // side by side and would queue on a shared counter row.
        let own: i32 = self
            .conn()
            .one("SELECT nightshift.shard()", &[])
            .map_err(|e| e.at(&self.target))?
            .get(0);
        let k = 1 + self
            .beside
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        other
            .conn()
            .one("SELECT nightshift.shard_beside($1, $2)", &[&own, &k])
            .map_err(|e| e.at(&self.target))?;
        Ok(other)
    }

    /// Ends the group under way, keeping none of it (see
    /// [`super::Store::group_whole`]); its `COMMIT` then finds no
    /// transaction and commits nothing.
    pub(crate) fn roll_back_group(&mut self) {
        if self.in_group {
            let _ = self.conn().simple("ROLLBACK");
        }
    }

    /// From now on every group of this session locks the seat of `run`
    /// first, exclusively: the runner's own session while its slots write
    /// on sessions of their own (see the lock order in `locks`).
    pub fn seat_first_in_groups(&mut self, batch: &str, run: i64) -> Result<()> {
        let b = self.read(|c| batches::batch_id(c, batch))?;
        self.seat_first = Some((b, run));
        Ok(())
    }

    /// Whether groups lock a seat first (`seat_first_in_groups`).
    pub(crate) fn orders_by_seat(&self) -> bool {
        self.seat_first.is_some()
    }

    pub(crate) fn in_group(&self) -> bool {
        self.in_group
    }

    /// Creates the schema in an existing database (or opens the store that
    /// is there). True if it was created.
    pub fn create(url: &str) -> Result<(PgStore, bool)> {
        let target = redact(url);
        let mut conn = Conn::connect(url, &target, Access::ReadWrite, 0)?;
        let created = schema::migrate(&mut conn, &target).map_err(|e| e.at(&target))?;
        conn.expect = schema::db_id(&mut conn).map_err(|e| e.at(&target))?;
        Ok((
            PgStore {
                target,
                access: Access::ReadWrite,
                conn: Mutex::new(conn),
                in_group: false,
                seat_first: None,
                stop: Default::default(),
                beside: Default::default(),
            },
            created,
        ))
    }

    /// What messages call this store (the URL without a password).
    pub fn path(&self) -> &Path {
        &self.target
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// Makes bulk writes (`add_items`, `requeue`) stop at the next chunk
    /// boundary once `stop` is set (see `SqliteStore::set_stop`).
    pub fn set_stop(&mut self, stop: crate::util::signals::Stop) {
        self.stop = stop;
    }

    /// What bulk writes check between chunks (`set_stop`).
    pub(crate) fn stop(&self) -> &crate::util::signals::Stop {
        &self.stop
    }

    /// Whether this role may change items, on a server that accepts
    /// writes (a standby does not).
    pub fn writable(&self) -> bool {
        self.read(|c| {
            Ok(c.one(
                "SELECT has_table_privilege('nightshift.items', 'UPDATE')
                        AND NOT pg_is_in_recovery()",
                &[],
            )?
            .get::<_, bool>(0))
        })
        .unwrap_or(false)
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Conn> {
        // A panic while holding the lock leaves no transaction open that
        // matters: the next BEGIN fails loudly if one were.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` in one read-only snapshot (inside a group: in the group's
    /// transaction, seeing its writes).
    pub(crate) fn read<T>(&self, f: impl Fn(&mut Conn) -> Result<T>) -> Result<T> {
        let mut conn = self.conn();
        if self.in_group {
            // In a savepoint: a failed statement would otherwise abort the
            // whole group's transaction.
            conn.simple("SAVEPOINT r").map_err(|e| e.at(&self.target))?;
            let out = f(&mut conn);
            let end = if out.is_ok() {
                "RELEASE r"
            } else {
                "ROLLBACK TO r; RELEASE r"
            };
            conn.simple(end).map_err(|e| e.at(&self.target))?;
            return out.map_err(|e| e.at(&self.target));
        }
        conn.begin(
            "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",
            &self.target,
        )
        .map_err(|e| e.at(&self.target))?;
        match f(&mut conn) {
            Ok(out) => {
                conn.simple("COMMIT").map_err(|e| e.at(&self.target))?;
                Ok(out)
            }
            Err(e) => {
                let _ = conn.simple("ROLLBACK");
                Err(e.at(&self.target))
            }
        }
    }

    /// Runs `f` in one transaction, retried on a serialisation failure or
    /// deadlock (which roll back everything `f` did). Inside
    /// [`PgStore::group`], a savepoint of the group's transaction instead.
    pub(crate) fn write<T>(&mut self, mut f: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        if self.access == Access::ReadOnly {
            return Err(StoreError::ReadOnlyStore(self.target.clone()));
        }
        let target = self.target.clone();
        let in_group = self.in_group;
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        if in_group {
            conn.simple("SAVEPOINT w").map_err(|e| e.at(&target))?;
            return match f(conn) {
                Ok(out) => {
                    conn.simple("RELEASE w").map_err(|e| e.at(&target))?;
                    Ok(out)
                }
                Err(e) => {
                    let _ = conn.simple("ROLLBACK TO w");
                    let _ = conn.simple("RELEASE w");
                    Err(e.at(&target))
                }
            };
        }
        let mut tries = 0;
        loop {
            tries += 1;
            conn.begin("BEGIN", &target).map_err(|e| e.at(&target))?;
            let out = f(conn).and_then(|out| conn.simple("COMMIT").map(|()| out));
            match out {
                Ok(out) => return Ok(out),
                Err(e) => {
                    let _ = conn.simple("ROLLBACK");
                    if tries < 10 && e.is_retryable_pg() {
                        std::thread::sleep(std::time::Duration::from_millis(fastrand::u64(
                            1..=5 * tries,
                        )));
                        continue;
                    }
                    return Err(e.at(&target));
                }
            }
        }
    }

    /// A write of one statement, built by `f` (which may read, e.g. a batch
    /// id, but must write only in the statement it returns the rows of):
    /// outside a group it runs in its own implicit transaction, saving the
    /// BEGIN and COMMIT round trips of [`PgStore::write`] on the runner's
    /// hot path; inside a group, as any write. Retried as `write` is.
    pub(crate) fn write_one<T>(&mut self, mut f: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        if self.in_group || self.access == Access::ReadOnly {
            return self.write(f);
        }
        let target = self.target.clone();
        let conn = self.conn.get_mut().unwrap_or_else(|p| p.into_inner());
        let mut tries = 0;
        loop {
            tries += 1;
            conn.ensure_open(&target).map_err(|e| e.at(&target))?;
            match f(conn) {
                Ok(out) => return Ok(out),
                Err(e) if tries < 10 && e.is_retryable_pg() => {
                    std::thread::sleep(std::time::Duration::from_millis(fastrand::u64(
                        1..=5 * tries,
                    )));
                }
                Err(e) => return Err(e.at(&target)),
            }
        }
    }

    /// Group commit: every write `f` makes shares one transaction (see
    /// [`super::Store::group`]). A group inside a group joins it.
    pub fn group<T>(&mut self, f: impl FnOnce(&mut PgStore) -> T) -> Result<T> {
        Self::group_in(self, |s| s, f)
    }

    /// [`PgStore::group`] of the store `inner` reaches from `outer` (the
    /// [`Store`](crate::store::Store) holding it), so that `f` gets `outer`.
    pub(crate) fn group_in<S, T>(
        outer: &mut S,
        inner: impl Fn(&mut S) -> &mut PgStore,
        f: impl FnOnce(&mut S) -> T,
    ) -> Result<T> {
        if inner(outer).in_group {
            return Ok(f(outer));
        }
        let this = inner(outer);
        if this.access == Access::ReadOnly {
            return Err(StoreError::ReadOnlyStore(this.target.clone()));
        }
        let target = this.target.clone();
        this.conn()
            .begin("BEGIN", &target)
            .map_err(|e| e.at(&target))?;
        if let Some(seat) = this.seat_first {
            let mut conn = this.conn();
            if let Err(e) = locks::seat_first(&mut conn, seat) {
                let _ = conn.simple("ROLLBACK");
                return Err(e.at(&target));
            }
        }
        this.in_group = true;
        let out = f(outer);
        let this = inner(outer);
        this.in_group = false;
        let mut conn = this.conn();
        // COMMIT of a transaction that an error aborted "succeeds" as a
        // rollback: ask first, so a lost group is never reported as kept.
        if let Err(e) = conn.simple("SELECT 1") {
            let _ = conn.simple("ROLLBACK");
            // The session went with it: said so, for the callers to wait
            // for the server and write again.
            if conn.is_closed() {
                return Err(e.at(&target));
            }
            return Err(StoreError::Fault(Fault::GroupRolledBack(format!(
                "the group transaction on {} was rolled back by an error; nothing in it was kept ({})",
                target.display(),
                e.at(&target)
            ))));
        }
        if let Err(e) = conn.simple("COMMIT") {
            let _ = conn.simple("ROLLBACK");
            return Err(e.at(&target));
        }
        Ok(out)
    }

    /// PostgreSQL checkpoints on its own: nothing to do.
    pub fn checkpoint(&mut self) -> Result<()> {
        Ok(())
    }

    /// Nothing to shrink: the server keeps the pages.
    pub fn use_runner_cache(&self) {}

    /// A value that differs after any commit: the server's WAL position.
    /// The dashboard polls it (one round trip) and reads only when it moved;
    /// see the README for why this polls rather than LISTENs.
    pub fn change_marker(&self) -> Vec<u8> {
        let mut conn = self.conn();
        match conn.query_one_text("SELECT pg_current_wal_insert_lsn()::text") {
            Ok(lsn) => lsn.into_bytes(),
            // Unreadable: a fresh value each time, so the poller reads
            // (and reports the error) rather than showing stale numbers.
            Err(_) => fastrand::u64(..).to_le_bytes().to_vec(),
        }
    }

    /// The counters checked against the items they count: "ok" or the
    /// differences found (what `PRAGMA integrity_check` is to SQLite).
    pub fn integrity_check(&self) -> Result<String> {
        self.read(schema::check_counts)
    }

    /// The database clock minus this host's now (measured on connecting,
    /// kept right through steps of this host's clock).
    pub fn clock_offset(&self) -> i64 {
        self.conn().off()
    }

    /// Which store this is, for [`super::identity`]: its URL and the id
    /// read when it was opened.
    pub(crate) fn identity(&self) -> Option<super::StoreIdentity> {
        let conn = self.conn();
        let id = conn.expect.clone()?;
        Some(super::StoreIdentity::database(conn.url().to_string(), id))
    }
}

/// The store `url` names now, from a session of its own (closed at once);
/// `None` when it names none: the database or its nightshift schema is
/// gone.
pub(crate) fn db_id_at(url: &str) -> Result<Option<schema::DbId>> {
    let target = redact(url);
    conn::off_runtime(|| {
        let mut client = match conn::open_client(url) {
            Ok(c) => c,
            Err(e) if e.code() == Some(&postgres::error::SqlState::INVALID_CATALOG_NAME) => {
                return Ok(None);
            }
            Err(e) => return Err(StoreError::from(e).at(&target)),
        };
        schema::db_id_of(&mut client).map_err(|e| e.at(&target))
    })
}

/// The URL with any password replaced, for messages and `path()`.
pub(crate) fn redact(url: &str) -> PathBuf {
    // scheme://user:password@host/...
    let Some((scheme, rest)) = url.split_once("://") else {
        return PathBuf::from(url);
    };
    // The driver takes everything before the first `@` as the user and
    // password, a `/` in them included (a generated password often has
    // one): so is it hidden here.
    let (auth, tail) = match rest.split_once('@') {
        Some((auth, tail)) => (Some(auth), tail),
        None => (None, rest),
    };
    let shown = match auth {
        Some(auth) => match auth.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{tail}"),
            None => format!("{scheme}://{auth}@{tail}"),
        },
        None => format!("{scheme}://{rest}"),
    };
    PathBuf::from(without_password_values(&shown))
}

/// `text` with the value of every `password=` hidden: a URL's query
/// parameter, or a libpq keyword string given where a URL belongs.
pub fn without_password_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("password=") {
        let (head, tail) = rest.split_at(at + "password=".len());
        out.push_str(head);
        out.push_str("***");
        let end = tail.find(['&', ' ']).unwrap_or(tail.len());
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://ns:s3cret@db.example/queue"),
            PathBuf::from("postgres://ns:***@db.example/queue")
        );
        assert_eq!(
            redact("postgres:///q?host=/tmp/x&password=s3cret&user=u"),
            PathBuf::from("postgres:///q?host=/tmp/x&password=***&user=u")
        );
        // The driver reads a `/` in a password as part of it.
        assert_eq!(
            redact("postgres://app:Xk9/aB+c=@localhost:5432/queue"),
            PathBuf::from("postgres://app:***@localhost:5432/queue")
        );
        assert_eq!(
            redact("postgres://app:a/b@/queue?host=/tmp/s&password=x&password=y"),
            PathBuf::from("postgres://app:***@/queue?host=/tmp/s&password=***&password=***")
        );
        assert_eq!(
            without_password_values("host=h user=app password=hunter2 dbname=q"),
            "host=h user=app password=*** dbname=q"
        );
        assert_eq!(
            redact("postgresql://u@h/q"),
            PathBuf::from("postgresql://u@h/q")
        );
        assert!(is_url("postgresql://h/q") && !is_url("nightshift.db"));
    }

    /// The runner moves its store into a writer thread; the dashboard's
    /// poller shares one.
    #[test]
    fn the_store_can_move_between_threads() {
        fn send_and_sync<T: Send + Sync>() {}
        send_and_sync::<PgStore>();
    }
}
