//! Which store a long-lived process opened, so that it notices its
//! location naming another store, or none: `rm nightshift.db*` or `mv
//! backup.db nightshift.db` under a run, which would otherwise go on writing
//! the file it has open (and report success), or a PostgreSQL database
//! dropped, or made anew under its name.
//!
//! A file is known by its (device, inode); a database by its oid and the
//! store id its schema was made with.

use std::path::PathBuf;

use super::pg;
use super::sqlite::file;

pub struct StoreIdentity(Kind);

enum Kind {
    File { path: PathBuf, id: (u64, u64) },
    Database { url: String, id: pg::DbId },
}

impl std::fmt::Debug for StoreIdentity {
    /// Never the URL: it may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Kind::File { path, id } => write!(f, "StoreIdentity({}, {id:?})", path.display()),
            Kind::Database { url, id } => {
                write!(f, "StoreIdentity({}, {id:?})", pg::redact(url).display())
            }
        }
    }
}

/// What the location names now, compared with what was opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Same,
    /// Another store, or none.
    Changed,
    /// Could not tell (the server unreachable...): ask again later.
    Unknown(String),
}

impl StoreIdentity {
    pub(super) fn file(path: PathBuf, id: (u64, u64)) -> StoreIdentity {
        StoreIdentity(Kind::File { path, id })
    }

    pub(super) fn database(url: String, id: pg::DbId) -> StoreIdentity {
        StoreIdentity(Kind::Database { url, id })
    }

    /// Blocks: a `stat`, or on PostgreSQL a session of its own.
    pub fn check(&self) -> Verdict {
        match &self.0 {
            Kind::File { path, id } => match file::id_of(path) {
                Ok(now) if now == *id => Verdict::Same,
                Ok(_) => Verdict::Changed,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Verdict::Changed,
                Err(e) => Verdict::Unknown(e.to_string()),
            },
            Kind::Database { url, id } => match pg::db_id_at(url) {
                Ok(Some(now)) if now == *id => Verdict::Same,
                Ok(_) => Verdict::Changed,
                Err(e) => Verdict::Unknown(e.to_string()),
            },
        }
    }
}
