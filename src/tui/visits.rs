//! The user's last visit to a store, for "since you last looked". Kept in
//! the user's own state directory (`$XDG_STATE_HOME/nightshift/` or
//! `~/.local/state/nightshift/`), keyed by the store's canonical path, never
//! in the database: it works read-only and per user.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::model::Millis;
use crate::util::files;

/// `$XDG_STATE_HOME/nightshift` (if absolute), else `~/.local/state/nightshift`.
pub fn state_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let base = xdg.or_else(|| {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".local").join("state"))
    })?;
    Some(base.join("nightshift"))
}

pub struct Visits {
    file: Option<PathBuf>,
    store: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Record {
    store: String,
    last_visit: Millis,
}

impl Visits {
    pub fn new(state_dir: Option<&Path>, store: &Path) -> Visits {
        let canonical = std::fs::canonicalize(store).unwrap_or_else(|_| store.to_path_buf());
        let store = crate::store::place(&canonical);
        let hash: String = Sha256::digest(canonical.as_os_str().as_encoded_bytes())
            .iter()
            .take(12)
            .map(|b| format!("{b:02x}"))
            .collect();
        Visits {
            file: state_dir.map(|d| d.join("visits").join(format!("{hash}.json"))),
            store,
        }
    }

    /// When this user last had this store open, if known (and kept where
    /// nobody else could have written it).
    pub fn last(&self) -> Option<Millis> {
        let file = self.file.as_ref()?;
        files::check_dir(file.parent()?).ok()?;
        let text = std::fs::read_to_string(file).ok()?;
        let record: Record = serde_json::from_str(&text).ok()?;
        (record.store == self.store).then_some(record.last_visit)
    }

    /// Records a visit (write to a new temporary file, then rename: a
    /// crash never leaves half a record). The state directory holds who
    /// looked when: this user's only (see `util::files`).
    pub fn record(&self, at: Millis) -> std::io::Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let Some(file) = &self.file else {
            return Ok(());
        };
        if let Some(dir) = file.parent() {
            files::private_dir(dir)?;
        }
        for stale in files::stale_temporaries(file) {
            let _ = std::fs::remove_file(stale);
        }
        let tmp = files::temporary_beside(file);
        let record = Record {
            store: self.store.clone(),
            last_visit: at,
        };
        // A new file (never through a link planted under its name).
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?
            .write_all(&serde_json::to_vec(&record).unwrap_or_default())?;
        std::fs::rename(&tmp, file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_per_store() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.db");
        let b = dir.path().join("b.db");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        let state = dir.path().join("state");
        let va = Visits::new(Some(&state), &a);
        assert_eq!(va.last(), None);
        va.record(42).unwrap();
        assert_eq!(Visits::new(Some(&state), &a).last(), Some(42));
        assert_eq!(Visits::new(Some(&state), &b).last(), None);
        assert_eq!(Visits::new(None, &a).last(), None);
    }

    /// A state directory another user may write: no visit is read from it
    /// or written to it (they could plant a link under the record's name).
    #[test]
    fn nothing_kept_where_another_user_could_write() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.db");
        std::fs::write(&a, "").unwrap();
        let state = dir.path().join("state");
        Visits::new(Some(&state), &a).record(42).unwrap();
        let shared = std::fs::Permissions::from_mode(0o777);
        std::fs::set_permissions(&state, shared.clone()).unwrap();
        let v = Visits::new(Some(&state), &a);
        assert_eq!(v.last(), None);
        let e = v.record(43).unwrap_err().to_string();
        assert!(e.contains("is writable by other users"), "{e}");

        let fresh = dir.path().join("fresh");
        std::fs::create_dir(&fresh).unwrap();
        std::fs::set_permissions(&fresh, shared).unwrap();
        assert!(Visits::new(Some(&fresh.join("ns")), &a).record(1).is_err());
        assert_eq!(
            std::fs::read_dir(&fresh).unwrap().count(),
            0,
            "made a directory there"
        );
    }
}
