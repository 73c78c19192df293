//! What tells a changed config file from the same one without reading it
//! (its size, modification time and identity: an editor's save by
//! rename): the dashboard and a live run look at their file each second
//! and read it only when its stamp changed.

use std::path::Path;
use std::time::SystemTime;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    /// Device and inode.
    id: Option<(u64, u64)>,
}

impl Stamp {
    /// The file's stamp now; `None` when there is no file.
    #[must_use]
    pub fn of(path: &Path) -> Option<Stamp> {
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
