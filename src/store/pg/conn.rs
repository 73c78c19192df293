//! One PostgreSQL session: connecting, the clock offset, a statement cache,
//! and error classification.

use crate::store::Fault;
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row, Statement};

use crate::store::api::Access;
use crate::store::{Result, StoreError};
use crate::util::time;

/// Statement parameters, as the `postgres` crate takes them.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// Prepared statements kept per session (dynamic filters add a few each).
const CACHE: usize = 256;

pub(crate) struct Conn {
    /// Always set; taken only when the session is dropped (see `Drop`).
    client: Option<Client>,
    /// How to connect again after the server dropped the session.
    url: String,
    access: Access,
    skew_ms: i64,
    cache: HashMap<String, Statement>,
    /// Batch ids by name: batches are never deleted, so an id once read
    /// stays right. Cleared on every rollback (it may hold an id whose
    /// insert was rolled back).
    pub(crate) batch_ids: HashMap<String, i64>,
    /// Database clock minus the caller's clock ([`Offset::ms`]).
    off: Offset,
    /// The store this session must be on: a session opened again after
    /// the server dropped it is checked against it (see `reconnect`).
    pub(crate) expect: Option<super::schema::DbId>,
    /// Reopened onto another store: every statement is refused.
    replaced: bool,
}

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> StoreError {
        // A session the server closed, or whose socket failed, has no
        // SQLSTATE: it is `connection_failure` here, for `is_session_lost`.
        let broken = e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>());
        let code = match e.code() {
            Some(c) => c.code().to_string(),
            None if broken => "08006".to_string(),
            None => String::new(),
        };
        let message = match e.as_db_error() {
            Some(db) => {
                let mut m = db.message().to_string();
                if let Some(d) = db.detail() {
                    m.push_str(&format!(" ({d})"));
                }
                m
            }
            None => {
                let mut m = e.to_string();
                if let Some(src) = std::error::Error::source(&e) {
                    m.push_str(&format!(": {src}"));
                }
                m
            }
        };
        StoreError::Postgres {
            target: None,
            code,
            message,
        }
    }
}

impl StoreError {
    /// Names the store a PostgreSQL error happened on (once).
    pub(crate) fn at(self, target: &Path) -> StoreError {
        match self {
            StoreError::Postgres {
                target: None,
                code,
                message,
            } => {
                // Waiting too long for a row lock: another writer held it.
                if code == "55P03" {
                    return StoreError::Busy(target.to_path_buf());
                }
                if code == "53100" {
                    return StoreError::DiskFull(target.to_path_buf());
                }
                // A read-only transaction (a read-only role or a standby),
                // or a role without the privilege.
                if code == "25006" || code == "42501" {
                    return StoreError::ReadOnlyDatabase(target.to_path_buf(), message);
                }
                StoreError::Postgres {
                    target: Some(target.to_path_buf()),
                    code,
                    message,
                }
            }
            other => other,
        }
    }

    /// A serialisation failure or deadlock: the transaction can be retried.
    pub(crate) fn is_retryable_pg(&self) -> bool {
        matches!(self, StoreError::Postgres { code, .. } if code == "40001" || code == "40P01")
    }

    /// The session is gone, and nothing written in it since its last
    /// commit was kept: the connection failed or could not be made again
    /// (class 08), or the server ended it (an admin shutdown, a crash, a
    /// server starting up: 57P01–57P03). A later session may succeed.
    pub fn is_session_lost(&self) -> bool {
        matches!(self, StoreError::Postgres { code, .. }
            if code.starts_with("08") || matches!(code.as_str(), "57P01" | "57P02" | "57P03"))
    }

    /// A key already taken (`unique_violation`).
    pub(crate) fn is_unique_violation_pg(&self) -> bool {
        matches!(self, StoreError::Postgres { code, .. } if code == "23505")
    }
}

/// A session to `url`, given the password libpq would find when the URL
/// has none (`passfile`): every session the store opens starts here.
pub(super) fn open_client(url: &str) -> std::result::Result<Client, postgres::Error> {
    let mut config: postgres::Config = url.parse()?;
    super::passfile::supply_password(&mut config);
    config.connect(NoTls)
}

/// Runs `f`, which may block on the `postgres` client. That client drives
/// a tokio runtime of its own, which panics when entered (or dropped) on a
/// thread already running one: the runner's and the daemon's async code
/// call the store directly. There, `f` runs on a short-lived thread. The
/// store thread of the runner and the dashboard's poller run none.
pub(super) fn off_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| s.spawn(f).join()).unwrap_or_else(|p| std::panic::resume_unwind(p))
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(client) = self.client.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let _ = std::thread::spawn(move || drop(client)).join();
        }
    }
}

impl Conn {
    pub(crate) fn connect(url: &str, target: &Path, access: Access, skew_ms: i64) -> Result<Conn> {
        off_runtime(|| Self::connect_here(url, target, access, skew_ms))
    }

    fn connect_here(url: &str, target: &Path, access: Access, skew_ms: i64) -> Result<Conn> {
        let mut client = open_client(url).map_err(|e| {
            let hint = match e.code().map(|c| c.code()) {
                Some("3D000") => ": create the database first (createdb), then `nightshift init`",
                _ => "",
            };
            let detail = StoreError::from(e).to_string();
            let detail = detail.trim_start_matches("PostgreSQL error: ");
            StoreError::CannotOpen(target.to_path_buf(), format!("{detail}{hint}"))
        })?;
        let readonly = if access == Access::ReadOnly {
            "SET default_transaction_read_only = on;"
        } else {
            ""
        };
        client
            .batch_execute(&format!(
                "SET search_path = nightshift, pg_catalog;
                 SET application_name = 'nightshift';
                 SET TIME ZONE 'UTC';
                 SET lock_timeout = '60s';
                 {readonly}"
            ))
            .map_err(|e| StoreError::from(e).at(target))?;
        let off = measure_offset(&mut client, skew_ms).map_err(|e| e.at(target))?;
        let mut conn = Conn {
            client: Some(client),
            url: url.to_string(),
            access,
            skew_ms,
            cache: HashMap::new(),
            batch_ids: HashMap::new(),
            off,
            expect: None,
            replaced: false,
        };
        // Each session of its own: temporary views end with the session.
        if access == Access::ReadOnly {
            super::schema::shim_reader(&mut conn, target)?;
        }
        Ok(conn)
    }

    fn client(&mut self) -> Result<&mut Client> {
        if self.replaced {
            return Err(StoreError::Replaced(super::redact(&self.url)));
        }
        Ok(self
            .client
            .as_mut()
            .expect("the session is open until dropped"))
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The simulated clock skew this session was opened with.
    pub(crate) fn skew_ms(&self) -> i64 {
        self.skew_ms
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.client.as_ref().is_none_or(Client::is_closed)
    }

    /// Replaces a session the server dropped. The URL may name another
    /// store by now (the database dropped and made anew, restored, or
    /// initialised again): then nothing more is sent to it.
    fn reconnect(&mut self, target: &Path) -> Result<()> {
        let fresh = Conn::connect(&self.url, target, self.access, self.skew_ms).map_err(|e| {
            match e {
                // Still down: a session lost, not a store that cannot be
                // opened (it was open).
                StoreError::CannotOpen(_, why) => StoreError::Postgres {
                    target: None,
                    code: "08001".into(),
                    message: format!("connecting again: {why}"),
                },
                other => other,
            }
        })?;
        let expect = self.expect.take();
        *self = fresh;
        self.expect = expect;
        if let Some(want) = self.expect.clone()
            && super::schema::db_id(self).map_err(|e| e.at(target))? != Some(want)
        {
            self.replaced = true;
            return Err(StoreError::Replaced(target.to_path_buf()));
        }
        Ok(())
    }

    /// Begins a transaction; a session the server dropped meanwhile (a
    /// restart, an idle timeout, a terminated backend) is replaced first.
    /// Nothing was sent in it yet, so nothing can have been half done.
    pub(crate) fn begin(&mut self, sql: &str, target: &Path) -> Result<()> {
        match self.simple(sql) {
            Err(StoreError::Postgres { .. }) if self.is_closed() => {
                self.reconnect(target)?;
                self.simple(sql)
            }
            other => other,
        }
    }

    /// Runs statements without parameters (transaction control, DDL).
    pub(crate) fn simple(&mut self, sql: &str) -> Result<()> {
        if sql.starts_with("ROLLBACK") {
            self.batch_ids.clear();
        }
        let client = self.client()?;
        Ok(off_runtime(|| client.batch_execute(sql))?)
    }

    /// Replaces a session the server dropped (see [`Conn::begin`]).
    pub(crate) fn ensure_open(&mut self, target: &Path) -> Result<()> {
        if self.is_closed() {
            self.reconnect(target)?;
        }
        Ok(())
    }

    /// A single statement in its own implicit transaction.
    pub(crate) fn q_alone(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let out = self.q(sql, params);
        if out.is_err() {
            self.batch_ids.clear();
        }
        out
    }

    fn prepared(&mut self, sql: &str) -> Result<Statement> {
        self.prepared_as(sql, false)
    }

    /// The statement of `sql`, prepared once per session (while cached);
    /// a `neutral` one (`dialect::sql`: `?N` placeholders) is rewritten to
    /// `$N` only then, and cached under its own text.
    fn prepared_as(&mut self, sql: &str, neutral: bool) -> Result<Statement> {
        if let Some(st) = self.cache.get(sql) {
            return Ok(st.clone());
        }
        let client = self.client()?;
        let text = if neutral {
            Cow::Owned(crate::store::dialect::sql::dollar_placeholders(sql))
        } else {
            Cow::Borrowed(sql)
        };
        let st = off_runtime(|| client.prepare(&text))?;
        if self.cache.len() >= CACHE {
            self.cache.clear();
        }
        self.cache.insert(sql.to_string(), st.clone());
        Ok(st)
    }

    pub(crate) fn q(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let st = self.prepared(sql)?;
        let client = self.client()?;
        Ok(off_runtime(|| client.query(&st, params))?)
    }

    /// `q` of a dialect-neutral statement (`?N` placeholders).
    pub(crate) fn q_neutral(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let st = self.prepared_as(sql, true)?;
        let client = self.client()?;
        Ok(off_runtime(|| client.query(&st, params))?)
    }

    /// `x` of a dialect-neutral statement (`?N` placeholders).
    pub(crate) fn x_neutral(&mut self, sql: &str, params: Params<'_>) -> Result<u64> {
        let st = self.prepared_as(sql, true)?;
        let client = self.client()?;
        Ok(off_runtime(|| client.execute(&st, params))?)
    }

    pub(crate) fn x(&mut self, sql: &str, params: Params<'_>) -> Result<u64> {
        let st = self.prepared(sql)?;
        let client = self.client()?;
        Ok(off_runtime(|| client.execute(&st, params))?)
    }

    /// `COPY ... FROM STDIN` of `data`, whole and in the copy's format:
    /// the rows it wrote. One round trip with the statement prepared.
    pub(crate) fn copy_in(&mut self, sql: &str, data: &[u8]) -> Result<u64> {
        let st = self.prepared(sql)?;
        let client = self.client()?;
        off_runtime(|| {
            let mut w = client.copy_in(&st)?;
            // An empty writer buffers any slice whole; `finish` sends it.
            w.write_all(data).map_err(copy_failed)?;
            Ok(w.finish()?)
        })
    }

    pub(crate) fn opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        let st = self.prepared(sql)?;
        let client = self.client()?;
        Ok(off_runtime(|| client.query_opt(&st, params))?)
    }

    pub(crate) fn one(&mut self, sql: &str, params: Params<'_>) -> Result<Row> {
        let st = self.prepared(sql)?;
        let client = self.client()?;
        Ok(off_runtime(|| client.query_one(&st, params))?)
    }

    pub(crate) fn query_one_text(&mut self, sql: &str) -> Result<String> {
        let client = self.client()?;
        let row = off_runtime(|| client.query_one(sql, &[]))?;
        Ok(row.get(0))
    }

    /// Database clock minus the caller's clock now, in ms (whole seconds).
    pub(crate) fn off(&self) -> i64 {
        self.off.ms()
    }

    /// A time from the caller's clock onto the database's.
    pub(crate) fn tin(&self, t: i64) -> i64 {
        t.saturating_add(self.off())
    }

    /// A stored time back onto the caller's clock.
    pub(crate) fn tout(&self, t: i64) -> i64 {
        t.saturating_sub(self.off())
    }

    pub(crate) fn tout_opt(&self, t: Option<i64>) -> Option<i64> {
        t.map(|t| self.tout(t))
    }

    pub(crate) fn tin_opt(&self, t: Option<i64>) -> Option<i64> {
        t.map(|t| self.tin(t))
    }
}

/// A failed write of a copy: the server's error inside it, or its text.
fn copy_failed(e: std::io::Error) -> StoreError {
    match e
        .into_inner()
        .map(|inner| inner.downcast::<postgres::Error>())
    {
        Some(Ok(pg)) => StoreError::from(*pg),
        Some(Err(other)) => StoreError::Fault(Fault::Database(other.to_string())),
        None => StoreError::Fault(Fault::Database("a COPY's data could not be sent".into())),
    }
}

/// The database clock minus the caller's, measured once on connecting and
/// kept right for as long as the session lives: a step of this host's
/// clock afterwards (NTP correcting it, a VM resumed, `date -s`) would
/// otherwise move every time it writes by the step (a live runner renewing
/// its seat minutes in the past, taken over by another host). Steps are
/// told from time passing by the steady clock ([`time::steady_ms`]).
#[derive(Debug, Clone, Copy)]
struct Offset {
    /// As measured, in ms (not rounded).
    measured: i64,
    /// The caller's clock, and the steady clock, when it was measured.
    wall: i64,
    steady: i64,
}

impl Offset {
    /// Now, in whole seconds: hosts within half a second of the database
    /// store exactly the times they pass, and a step under a second (the
    /// two clocks read a moment apart) moves nothing.
    fn ms(&self) -> i64 {
        let stepped = (time::now_ms() - self.wall) - (time::steady_ms() - self.steady);
        let stepped = if stepped.abs() < 1000 { 0 } else { stepped };
        whole_seconds(self.measured - stepped)
    }
}

fn whole_seconds(ms: i64) -> i64 {
    (ms as f64 / 1000.0).round() as i64 * 1000
}

/// The database clock minus ours (plus `skew_ms`, a simulated skew), from
/// the fastest of three round trips.
fn measure_offset(client: &mut Client, skew_ms: i64) -> Result<Offset> {
    let st = client.prepare("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::int8")?;
    let mut best: Option<(u128, Offset)> = None;
    for _ in 0..3 {
        let before = std::time::Instant::now();
        let (wall0, steady0) = (time::now_ms(), time::steady_ms());
        let db: i64 = client.query_one(&st, &[])?.get(0);
        let rtt = before.elapsed().as_micros();
        let half = (rtt / 2000) as i64;
        let local = wall0 + half + skew_ms;
        if best.is_none_or(|(r, _)| rtt < r) {
            let off = Offset {
                measured: db - local,
                wall: wall0 + half,
                steady: steady0 + half,
            };
            best = Some((rtt, off));
        }
    }
    Ok(best.map_or(
        Offset {
            measured: 0,
            wall: time::now_ms(),
            steady: time::steady_ms(),
        },
        |(_, off)| off,
    ))
}

/// Text as the store keeps it (`dialect::sql::kept`).
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    crate::store::dialect::sql::kept(s)
}

pub(crate) fn text_opt(s: Option<&str>) -> Option<Cow<'_, str>> {
    s.map(text)
}

/// Parses a stored enum column; the schema's CHECKs keep these valid.
pub(crate) fn parse_col_text<T: std::str::FromStr<Err = String>>(text: &str) -> Result<T> {
    text.parse().map_err(|e: String| {
        StoreError::Fault(Fault::Unreadable(format!("unreadable stored value: {e}")))
    })
}
