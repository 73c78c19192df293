//! Where a store lives: a SQLite file (a path), or a PostgreSQL database
//! (a `postgres://` or `postgresql://` URL given where the path would be:
//! `--db`, `NIGHTSHIFT_DB`, the config's `db`). What callers derive from
//! the location (files beside it, how to show it) is decided here, so no
//! code outside the store needs to know which backend it is.

use std::path::{Path, PathBuf};

/// The URL, when `db` names a database server rather than a file.
pub(crate) fn url(db: &Path) -> Option<&str> {
    db.to_str().filter(|s| super::pg::is_url(s))
}

/// Does `db` name a database server (PostgreSQL) rather than a file?
pub fn is_server(db: &Path) -> bool {
    url(db).is_some()
}

/// Is `db` a libpq keyword string (`host=h user=u dbname=d`), given
/// where a URL belongs? It is no file anyone meant.
pub fn is_keyword_string(db: &Path) -> bool {
    let text = db.to_string_lossy();
    text.contains(' ')
        && ["host=", "dbname=", "user="]
            .iter()
            .any(|k| text.starts_with(k) || text.contains(&format!(" {k}")))
}

/// What to say of a keyword string given as the store.
pub const KEYWORDS_HINT: &str = "a PostgreSQL store is given as a URL (postgres://USER:PASSWORD@HOST/DATABASE), not as keywords";

/// What messages call the store at `db`: the path, or the URL without its
/// password.
pub fn place(db: &Path) -> String {
    match url(db) {
        Some(url) => super::pg::redact(url).display().to_string(),
        // A libpq keyword string given as a path still hides its password.
        None => super::pg::without_password_values(&db.display().to_string()),
    }
}

/// `name` beside the store: in the directory of its file, or in the
/// current directory for a database server (the config is found there).
pub fn beside(db: &Path, name: &str) -> PathBuf {
    if is_server(db) {
        return PathBuf::from(name);
    }
    db.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from(name), |dir| dir.join(name))
}

/// `name` in the directory of the store's file; `None` for a database
/// server, which has no directory (its URL is no path to build on).
pub fn beside_file(db: &Path, name: &str) -> Option<PathBuf> {
    (!is_server(db)).then(|| beside(db, name))
}

/// `db` made absolute (a file), or as it is (a URL).
pub fn absolute(db: &Path) -> PathBuf {
    if is_server(db) {
        return db.to_path_buf();
    }
    std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf())
}

/// The emergency-stop file beside the store, if present. A database
/// server has none: hosts share no directory, and `nightshift pause`
/// reaches every host.
pub fn paused_file(db: &Path) -> Option<PathBuf> {
    if is_server(db) {
        return None;
    }
    let file = db.parent().unwrap_or(Path::new(".")).join("PAUSED");
    file.exists().then_some(file)
}

/// The identity (device, inode) of the store's file, so a poller notices
/// the file being replaced; `None` where there is no file to replace.
pub fn file_id(db: &Path) -> std::io::Result<Option<(u64, u64)>> {
    if is_server(db) {
        return Ok(None);
    }
    super::sqlite::file::id_of(db).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_no_file() {
        let url = Path::new("postgres://ns:s3cret@db.example/queue");
        assert!(is_server(url));
        assert_eq!(place(url), "postgres://ns:***@db.example/queue");
        assert_eq!(beside(url, "nightshift.toml"), Path::new("nightshift.toml"));
        assert_eq!(absolute(url), url);
        assert_eq!(beside_file(url, "logs"), None);
        assert_eq!(paused_file(url), None);
        assert_eq!(file_id(url).unwrap(), None);

        let file = Path::new("/srv/ns/nightshift.db");
        assert!(!is_server(file));
        assert_eq!(place(file), "/srv/ns/nightshift.db");
        assert_eq!(
            beside(file, "nightshift.toml"),
            Path::new("/srv/ns/nightshift.toml")
        );
        assert_eq!(beside(Path::new("n.db"), "x"), Path::new("x"));
        assert_eq!(
            beside_file(file, "logs").unwrap(),
            Path::new("/srv/ns/logs")
        );
    }
}
