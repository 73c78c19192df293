//! What tells a changed config file from the same one without reading it
//! (its size, modification time and identity: an editor's save by
//! rename): the dashboard and a live run look at their file each second
//! and read it only when its stamp changed.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A file looked at now and then: a look is one `stat`, and says whether
/// the file changed (went, or came back) since the last one.
#[derive(Debug)]
pub struct Looked {
    path: PathBuf,
    /// `None`: there was no file.
    seen: Option<Stamp>,
}

impl Looked {
    /// The file at `path` as it is now.
    #[must_use]
    pub fn new(path: PathBuf) -> Looked {
        Looked {
            seen: Stamp::of(&path),
            path,
        }
    }

    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file changed since the last look (this one).
    pub fn changed(&mut self) -> bool {
        let now = Stamp::of(&self.path);
        if now == self.seen {
            return false;
        }
        self.seen = now;
        true
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    /// Device and inode.
    id: Option<(u64, u64)>,
}

impl Stamp {
    /// The file's stamp now; `None` when there is no file.
    fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Stamp {
            len: meta.len(),
            modified: meta.modified().ok(),
            id: identity(&meta),
        })
    }
}

#[cfg(unix)]
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn identity(_: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}
