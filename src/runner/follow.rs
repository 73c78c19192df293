//! A run follows its config file while it lives: a pool's limits or a
//! budget raised (or lowered) in the file apply to the live run within
//! about a second, as every view reads them from the file at once; a run
//! that kept what it started with waited for a reset the file no longer
//! asked for, or spent past a budget every view said was reached. The
//! heartbeat looks at the file each tick (a `stat`: read only when it
//! changed); a file that no longer loads keeps what is known.

use std::path::Path;
use std::sync::Mutex;

use super::cycle::Cycle;
use crate::config::Config;
use crate::config::stamp::Looked;

/// The run's config file, and how it was at the last look.
pub struct ConfigFile(Mutex<Looked>);

impl ConfigFile {
    pub fn new(path: &Path) -> ConfigFile {
        ConfigFile(Mutex::new(Looked::new(path.to_path_buf())))
    }

    /// The file's path.
    pub fn path(&self) -> std::path::PathBuf {
        let file = self.0.lock().unwrap_or_else(|p| p.into_inner());
        file.path().to_path_buf()
    }

    /// The config as the file says it now, when it changed since the last
    /// look and loads.
    fn changed(&self) -> Option<Config> {
        let mut file = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !file.changed() {
            return None;
        }
        Config::load(file.path()).ok()
    }
}

impl Cycle {
    /// Takes in what the config file says now of the batch's pool and
    /// budgets, when it changed (see the module's doc).
    pub(super) async fn follow_config(&self) {
        let Some(config) = self.config_file.as_ref().and_then(ConfigFile::changed) else {
            return;
        };
        if let Some(fresh) = self.pool.as_ref().and_then(|p| p.follow(&config)) {
            tracing::info!(
                "pool {}: limits read again from the config file",
                fresh.name
            );
        }
        if let (Some(budgets), Some(cfg)) = (&self.budgets, config.batch(&self.batch)) {
            budgets.follow(cfg);
            self.budget_check().await;
        }
    }
}
