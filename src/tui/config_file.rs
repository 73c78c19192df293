//! The dashboard's config file, looked at on the poller's cadence: a
//! dashboard left open (a tmux pane overnight) follows a budget, a pool or
//! a batch added to `nightshift.toml` after it opened, as a command run
//! now would. A look is one `stat`: the file is read only when its size,
//! its modification time or its identity (an editor's save by rename)
//! changed, so an unchanged file costs no read and sends nothing.

use std::path::{Path, PathBuf};

use crate::config::stamp::Looked;
use crate::config::{Config, ConfigError};

/// The file, and how it was at the last look.
#[derive(Debug)]
pub struct ConfigFile {
    file: Looked,
    /// The `db` the config named when the dashboard opened.
    db_then: Option<PathBuf>,
    /// The store shown: absolute, or a URL.
    store: PathBuf,
}

impl ConfigFile {
    /// The file at `path` as it is now, `config` as the dashboard read it
    /// (empty when there was no file: one written later is taken too), on
    /// the store shown at `store`.
    pub fn new(path: PathBuf, config: &Config, store: &Path) -> ConfigFile {
        ConfigFile {
            file: Looked::new(path),
            db_then: config.db.clone(),
            store: store.to_path_buf(),
        }
    }

    /// The config as it reads now, when the file changed since the last
    /// look; or, in words for the footer, why it is refused (the dashboard
    /// keeps the one it has). A refused file is not read again until it
    /// changes again, so the footer says it once.
    pub fn look(&mut self) -> Option<Result<Box<Config>, String>> {
        self.file.changed().then(|| self.read())
    }

    fn read(&self) -> Result<Box<Config>, String> {
        let config = Config::load(self.file.path()).map_err(|e| refusal(self.file.path(), &e))?;
        if self.other_store(&config) {
            return Err(format!(
                "{} now names another store: showing the config as it was (open the dashboard again for that store)",
                name(self.file.path())
            ));
        }
        Ok(Box::new(config))
    }

    /// The daemon's rule on a reload (the config's `db` changed), but a
    /// `db` that is the store shown is no other (a config written since
    /// the dashboard opened, as `nightshift init` writes it, names it).
    fn other_store(&self, config: &Config) -> bool {
        config.db != self.db_then
            && config.db.as_deref().map(crate::store::absolute).as_ref() != Some(&self.store)
    }
}

fn name(path: &Path) -> String {
    path.file_name()
        .unwrap_or(path.as_os_str())
        .to_string_lossy()
        .into_owned()
}

/// What the footer says of a config that does not load.
fn refusal(path: &Path, e: &ConfigError) -> String {
    let name = name(path);
    let what = match (e, e.line()) {
        (ConfigError::Read { reason, .. }, _) => format!("{name} cannot be read ({reason})"),
        (_, Some(line)) => {
            // The message without the path and line it starts with.
            let text = e.to_string();
            let at = format!("{}:{line}: ", path.display());
            let detail = text.strip_prefix(&at).unwrap_or(&text);
            format!("{name} has an error (line {line}: {detail})")
        }
        (_, None) => format!("{name} has an error ({e})"),
    };
    format!("{what}: showing the config as it was")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watching(dir: &Path, text: Option<&str>) -> ConfigFile {
        let path = dir.join("nightshift.toml");
        if let Some(text) = text {
            std::fs::write(&path, text).unwrap();
        }
        let config = match text {
            Some(_) => Config::load(&path).unwrap(),
            None => Config::empty(),
        };
        ConfigFile::new(path, &config, &dir.join("nightshift.db"))
    }

    #[test]
    fn an_unchanged_file_is_not_read_and_a_changed_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = watching(dir.path(), Some("[batch.a]\n"));
        assert!(file.look().is_none());
        std::fs::write(file.file.path(), "[batch.a]\nbudget = \"0.5/day\"\n").unwrap();
        let config = file.look().unwrap().unwrap();
        assert!(config.batch("a").unwrap().budget.is_some());
        assert!(file.look().is_none(), "read once per change");
    }

    #[test]
    fn a_bad_edit_is_refused_once_by_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = watching(dir.path(), Some("[batch.a]\n"));
        std::fs::write(file.file.path(), "[batch.a]\nconcurrency = \"many\"\n").unwrap();
        let said = file.look().unwrap().unwrap_err();
        assert!(
            said.starts_with("nightshift.toml has an error (line 2: batch.a.concurrency: "),
            "{said}"
        );
        assert!(said.ends_with("): showing the config as it was"), "{said}");
        assert!(file.look().is_none(), "said once");
    }

    #[test]
    fn a_config_written_later_is_taken_unless_it_names_another_store() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = watching(dir.path(), None);
        assert!(file.look().is_none());
        std::fs::write(file.file.path(), "db = \"nightshift.db\"\n[batch.a]\n").unwrap();
        assert!(file.look().unwrap().is_ok(), "the store shown");
        std::fs::write(file.file.path(), "db = \"other.db\"\n[batch.a]\n").unwrap();
        let said = file.look().unwrap().unwrap_err();
        assert!(said.starts_with("nightshift.toml now names another store"));
        std::fs::remove_file(file.file.path()).unwrap();
        let said = file.look().unwrap().unwrap_err();
        assert!(
            said.starts_with("nightshift.toml cannot be read ("),
            "{said}"
        );
    }
}
