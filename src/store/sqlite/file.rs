//! The SQLite store's file: what is at its path before SQLite is let near
//! it, and creating it whole.
//!
//! SQLite opens whatever the path names: a FIFO blocks the open forever, a
//! directory gives "disk I/O error". So the path (followed, if it is a
//! symbolic link) and its `-wal` and `-shm` are judged first, and anything
//! but a regular file is refused, naming what it is.
//!
//! A new store is made under a temporary name beside it and given its name
//! only once migrated and on disk, without replacing anything there
//! ([`util::files::publish_new`](crate::util::files::publish_new)): a
//! killed `init` leaves no store or the whole store, never an empty file
//! that every command refuses. An empty file found there anyway (`touch`,
//! or an older version killed mid-way) holds nothing to lose, and `init`
//! makes it a store.

use std::fs::{FileType, Metadata};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::store::{Result, StoreError};
use crate::util::files;

/// What is at a store's path.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    Missing,
    /// A regular file of 0 bytes with no write-ahead log: no store yet.
    Empty,
    /// A regular file with something in it (SQLite says what).
    File,
}

/// Where a store's file was found, and what it is (see [`Found`]).
pub(super) struct Inspected {
    pub(super) found: Found,
    /// The file itself, the link resolved if `path` is a symbolic link:
    /// SQLite keeps the `-wal` and `-shm` beside it, not beside the link.
    pub(super) real: PathBuf,
}

/// The `-wal` or `-shm` beside a store file.
pub(super) fn side(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

/// Judges what is at `path` without opening it.
pub(super) fn inspect(path: &Path) -> Result<Inspected> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        // Nothing there; or a file where a directory should be, which
        // `init` then names when it cannot create the store.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            if let Ok(target) = std::fs::read_link(path) {
                return Err(StoreError::NotAFile {
                    path: path.to_path_buf(),
                    what: format!(
                        "a symbolic link to {}, which does not exist",
                        target.display()
                    ),
                    hint: String::new(),
                });
            }
            return Ok(Inspected {
                found: Found::Missing,
                real: path.to_path_buf(),
            });
        }
        Err(e) => return Err(StoreError::Io(path.to_path_buf(), e)),
    };
    refuse_unless_file(path, &meta)?;
    let linked = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    let real = match linked {
        true => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        false => path.to_path_buf(),
    };
    let mut wal_len = 0;
    for suffix in ["-wal", "-shm"] {
        let p = side(&real, suffix);
        // Not followed: SQLite makes these files itself, never links.
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(StoreError::NotAFile {
                    path: p,
                    what: "a symbolic link".into(),
                    hint: ", which SQLite never makes: remove it".into(),
                });
            }
            Ok(m) => {
                refuse_unless_file(&p, &m)?;
                if suffix == "-wal" {
                    wal_len = m.len();
                }
            }
            Err(_) => {}
        }
    }
    let found = if meta.len() == 0 && wal_len == 0 {
        Found::Empty
    } else {
        Found::File
    };
    Ok(Inspected { found, real })
}

fn refuse_unless_file(path: &Path, meta: &Metadata) -> Result<()> {
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let hint = if kind.is_dir() {
        format!(
            "; did you mean {}?",
            path.join(crate::config::DEFAULT_DB_FILE).display()
        )
    } else {
        String::new()
    };
    Err(StoreError::NotAFile {
        path: path.to_path_buf(),
        what: format!("{}, not a store file", kind_name(kind)),
        hint,
    })
}

fn kind_name(kind: FileType) -> &'static str {
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Whether this user may write the store file `file` and its directory
/// (where SQLite creates and removes the `-wal` and `-shm`).
pub(super) fn writable(file: &Path) -> bool {
    use nix::unistd::{AccessFlags, access};
    access(file, AccessFlags::W_OK).is_ok()
        && access(dir_of(file), AccessFlags::W_OK | AccessFlags::X_OK).is_ok()
}

/// What [`writable`] found missing, for a message.
pub(super) fn why_not_writable(file: &Path) -> String {
    use nix::unistd::{AccessFlags, access};
    if crate::store::error::read_only_fs(file) {
        return "read-only file system".into();
    }
    if access(file, AccessFlags::W_OK).is_err() {
        return "this user may not write the file".into();
    }
    format!(
        "this user may not write its directory {}, where SQLite makes the -wal and -shm files",
        dir_of(file).display()
    )
}

fn dir_of(file: &Path) -> &Path {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The identity (device, inode) of the file `path` names now.
pub(crate) fn id_of(path: &Path) -> std::io::Result<(u64, u64)> {
    let m = std::fs::metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// Makes the store at `path`, which does not exist: `make` migrates a new,
/// empty file at the temporary path it is given, which then takes `path`
/// as its name. False if another process created `path` meanwhile (ours
/// is discarded).
pub(super) fn create_whole(path: &Path, make: impl FnOnce(&Path) -> Result<()>) -> Result<bool> {
    // What killed creations left behind: never a store, only its draft.
    for stale in files::stale_temporaries(path) {
        let _ = std::fs::remove_file(stale);
    }
    let tmp = files::temporary_beside(path);
    let cannot = |e: std::io::Error| StoreError::CannotCreate(path.to_path_buf(), e.to_string());
    create_private(&tmp).map_err(cannot)?;
    let made = make(&tmp).and_then(|()| {
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(cannot)
    });
    if let Err(e) = made {
        for suffix in ["", "-journal", "-wal", "-shm"] {
            let _ = std::fs::remove_file(side(&tmp, suffix));
        }
        return Err(match e {
            // Named for the store, not its draft: "the disk holding ... is full".
            StoreError::Sqlite(e) => StoreError::from_sqlite(e, path),
            other => other,
        });
    }
    files::publish_new(&tmp, path).map_err(cannot)
}

/// A new file readable by its owner only: payloads may hold private data.
/// SQLite gives the `-wal` and `-shm` files the same mode.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anything_but_a_regular_file_is_named_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        assert_eq!(inspect(&at("none.db")).unwrap().found, Found::Missing);
        std::fs::write(at("empty.db"), "").unwrap();
        assert_eq!(inspect(&at("empty.db")).unwrap().found, Found::Empty);
        std::fs::write(at("x.db"), "SQLite format 3\0").unwrap();
        assert_eq!(inspect(&at("x.db")).unwrap().found, Found::File);
        std::os::unix::fs::symlink(at("x.db"), at("link.db")).unwrap();
        let linked = inspect(&at("link.db")).unwrap();
        assert_eq!(linked.real, std::fs::canonicalize(at("x.db")).unwrap());

        let refused = |name: &str| inspect(&at(name)).err().unwrap().to_string();
        std::fs::create_dir(at("d")).unwrap();
        assert_eq!(
            refused("d"),
            format!(
                "{} is a directory, not a store file; did you mean {}?",
                at("d").display(),
                at("d/nightshift.db").display()
            )
        );
        nix::unistd::mkfifo(&at("f.db"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(refused("f.db").contains("is a FIFO (named pipe)"));
        // A FIFO named like the write-ahead log would hang SQLite as well.
        nix::unistd::mkfifo(&at("x.db-wal"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(refused("x.db").contains("x.db-wal is a FIFO"));
        std::fs::remove_file(at("x.db-wal")).unwrap();
        std::os::unix::fs::symlink(at("elsewhere"), at("x.db-shm")).unwrap();
        assert!(
            refused("x.db")
                .ends_with("x.db-shm is a symbolic link, which SQLite never makes: remove it")
        );
        std::os::unix::fs::symlink(at("gone.db"), at("dangling.db")).unwrap();
        assert!(refused("dangling.db").contains("which does not exist"));
    }
}
