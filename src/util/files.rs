//! Files that are the operator's alone: where nightshift writes besides the
//! store (event logs, the dashboard's state), and new files published whole.
//!
//! The rule for a directory nightshift writes into is OpenSSH's for
//! `~/.ssh`: it and every directory above it belong to this user or root,
//! and none is writable by group or others (above it, a sticky directory
//! such as `/tmp` is fine: nobody can rename what is ours in it). Another
//! user who could write there could plant a symbolic link named like our
//! next log file and have us append to any file we may write (`~/.bashrc`).
//! Files are opened without following a symbolic link, as a second line.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;

/// Creates `dir` (and what is missing above it) private to this user
/// (`0700`, whatever the umask), and checks that it and every directory
/// above it are safe to write into (see the module doc).
pub fn private_dir(dir: &Path) -> io::Result<()> {
    if !dir.is_dir() {
        // Nothing is made under a directory that is not safe either.
        let abs = std::path::absolute(dir)?;
        if let Some(existing) = abs.ancestors().skip(1).find(|p| p.is_dir()) {
            let uid = nix::unistd::geteuid().as_raw();
            for p in std::fs::canonicalize(existing)?.ancestors() {
                judge(p, &std::fs::metadata(p)?, uid, true)?;
            }
        }
        std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
            .create(dir)?;
    }
    check_dir(dir)
}

/// Whether only this user (or root) can change what `dir` holds: the error
/// names the directory at fault and why.
pub fn check_dir(dir: &Path) -> io::Result<()> {
    let uid = nix::unistd::geteuid().as_raw();
    let real = std::fs::canonicalize(dir)?;
    let meta = std::fs::metadata(&real)?;
    if !meta.is_dir() {
        return Err(unsafe_dir(format!("{} is not a directory", dir.display())));
    }
    judge(&real, &meta, uid, false)?;
    // Above it, and above the link if `dir` is a symbolic link: whoever may
    // write one of those may swap what `dir` names.
    let mut above: Vec<PathBuf> = real.ancestors().skip(1).map(Path::to_path_buf).collect();
    if let Some(parent) = std::path::absolute(dir)?.parent()
        && let Ok(parent) = std::fs::canonicalize(parent)
    {
        above.extend(parent.ancestors().map(Path::to_path_buf));
    }
    above.sort();
    above.dedup();
    for p in above.iter().filter(|p| **p != real) {
        judge(p, &std::fs::metadata(p)?, uid, true)?;
    }
    Ok(())
}

fn judge(path: &Path, meta: &Metadata, uid: u32, above: bool) -> io::Result<()> {
    if meta.uid() != 0 && meta.uid() != uid {
        return Err(unsafe_dir(format!(
            "{} belongs to another user (uid {})",
            path.display(),
            meta.uid()
        )));
    }
    let mode = meta.mode();
    let sticky = mode & 0o1000 != 0;
    let by = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (_, true) => "other users",
        (true, false) => "its group",
        (false, false) => return Ok(()),
    };
    if above && sticky {
        return Ok(());
    }
    Err(unsafe_dir(format!(
        "{} is writable by {by} (mode {:04o}): anyone who can write there could plant a link \
         and make nightshift write to another file; chmod go-w it",
        path.display(),
        mode & 0o7777
    )))
}

fn unsafe_dir(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

/// Opens `path` to append, creating it `0600`, never through a symbolic
/// link (the open fails instead), and only if it is a regular file.
pub fn open_append_private(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == nix::errno::Errno::ELOOP as i32 => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is a symbolic link: not followed", path.display()),
            ),
            _ => e,
        })?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a regular file", path.display()),
        ));
    }
    Ok(file)
}

/// Gives the finished file `tmp` the name `dest`, atomically, unless
/// `dest` exists (then `tmp` is removed and `Ok(false)` returned): a
/// reader sees no file or the whole file, never a part. `tmp` must be in
/// `dest`'s directory and flushed to disk. A rename that never replaces a
/// file (`RENAME_NOREPLACE`), so that a process killed at any moment
/// leaves the draft or the file, never both (a killed `init` that left
/// both left a draft nothing removes, `dest` being there); where the file
/// system has no such rename, a hard link, then the draft removed.
pub fn publish_new(tmp: &Path, dest: &Path) -> io::Result<bool> {
    let linked = match rename_noreplace(tmp, dest) {
        Some(moved) => moved,
        None => std::fs::hard_link(tmp, dest),
    };
    let _ = std::fs::remove_file(tmp);
    match linked {
        Ok(()) => {
            // The new name survives a power loss once the directory is synced.
            let dir = match dest.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            File::open(dir)?.sync_all()?;
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// `rename(tmp, dest)` unless `dest` exists (`AlreadyExists`); `None`
/// where the system or the file system cannot do that in one step.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn rename_noreplace(tmp: &Path, dest: &Path) -> Option<io::Result<()>> {
    use nix::errno::Errno;
    use nix::fcntl::{AT_FDCWD, RenameFlags, renameat2};
    match renameat2(AT_FDCWD, tmp, AT_FDCWD, dest, RenameFlags::RENAME_NOREPLACE) {
        Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => None,
        done => Some(done.map_err(io::Error::from)),
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn rename_noreplace(_tmp: &Path, _dest: &Path) -> Option<io::Result<()>> {
    None
}

/// A name for a temporary file beside `dest`, unique to this process:
/// `.NAME.PID-START-RANDOM.tmp` (START: the process's start time, so that
/// a pid handed to another process does not keep the draft alive), hidden,
/// and recognisable by [`stale_temporaries`].
pub fn temporary_beside(dest: &Path) -> PathBuf {
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    let me = std::process::id();
    let start = super::identity::pid_start(me).unwrap_or(0);
    let tmp = format!(".{name}.{me}-{start}-{:08x}.tmp", fastrand::u32(..));
    match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.join(tmp),
        _ => PathBuf::from(tmp),
    }
}

/// Temporaries of [`temporary_beside`] for `dest` (and files SQLite made
/// beside them) left by a process that is gone (killed mid-way).
pub fn stale_temporaries(dest: &Path) -> Vec<PathBuf> {
    let name = dest.file_name().unwrap_or_default().to_string_lossy();
    let prefix = format!(".{name}.");
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file = e.file_name().to_string_lossy().into_owned();
            let rest = file.strip_prefix(&prefix)?;
            let (pid, tail) = rest.split_once('-')?;
            let pid: u32 = pid.parse().ok()?;
            let (unique, suffix) = tail.split_once(".tmp")?;
            // No start time in drafts of older versions (`PID-RANDOM`).
            let start = match unique.split_once('-') {
                Some((start, _)) => Some(start.parse::<u64>().ok()?).filter(|s| *s > 0),
                None => None,
            };
            let ours = ["", "-journal", "-wal", "-shm"].contains(&suffix);
            (ours && !super::identity::process_alive(pid, start)).then(|| e.path())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_private_dir_is_made_0700_and_a_shared_one_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);

        chmod(&dir, 0o770);
        let e = check_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("writable by its group (mode 0770)"), "{e}");
        chmod(&dir, 0o1777);
        let e = check_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("writable by other users"), "{e}");
        // Writable above it: the whole chain counts, sticky or not.
        chmod(&dir, 0o700);
        chmod(&tmp.path().join("a"), 0o777);
        let e = check_dir(&dir).unwrap_err().to_string();
        assert!(e.contains("/a is writable by other users"), "{e}");
        chmod(&tmp.path().join("a"), 0o1777);
        check_dir(&dir).unwrap();
    }

    #[test]
    fn a_link_is_never_followed_and_a_name_never_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("bashrc");
        std::fs::write(&target, "safe\n").unwrap();
        let link = tmp.path().join("log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_append_private(&link).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "safe\n");

        let dest = tmp.path().join("n.db");
        let t = temporary_beside(&dest);
        std::fs::write(&t, "one").unwrap();
        assert!(publish_new(&t, &dest).unwrap());
        let t = temporary_beside(&dest);
        std::fs::write(&t, "two").unwrap();
        assert!(!publish_new(&t, &dest).unwrap());
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "one");
        assert!(!t.exists());
    }

    /// Pids come back soon (32,768 of them in many containers): a draft
    /// whose pid now names another process is stale all the same, while a
    /// live creator's own draft is kept.
    #[test]
    fn a_draft_of_a_reused_pid_is_stale_and_a_live_ones_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("n.db");
        let mine = temporary_beside(&dest);
        std::fs::write(&mine, "").unwrap();
        // Made by a process with this pid that started at another time.
        let me = std::process::id();
        let start = super::super::identity::pid_start(me).unwrap();
        let reused = tmp
            .path()
            .join(format!(".n.db.{me}-{}-0badcafe.tmp", start + 1));
        std::fs::write(&reused, "").unwrap();
        assert_eq!(stale_temporaries(&dest), vec![reused]);
    }
}
