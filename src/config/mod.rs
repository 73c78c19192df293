//! `nightshift.toml` → typed [`Config`].
//!
//! The file is read into toml's spanned tree ([`DeTable`]) and walked by hand
//! rather than through serde derive: that way every error can name the file,
//! the line and the dotted field (`batch.articles.item_timeout`), type errors
//! included, and unknown keys can list what is allowed. When a file has
//! several problems the one nearest the top is reported.
//!
//! - [`fields`]: every setting, one row each (key, description, default,
//!   how it is read and written); the allowed keys come from the rows.
//! - `walk.rs`: the tree to a [`Config`] by the rows, and the checks that
//!   involve two settings; `convert.rs`: a TOML value to a setting's type
//!   (and back); `suggest.rs`: the nearest allowed word to a typo.
//! - [`example`]: the example config `nightshift init` writes, from the rows.
//! - [`ConfigError`] (`error.rs`); [`Overlap`], [`WorkerMode`], [`RateLimit`]
//!   (`values.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono_tz::Tz;
use toml::de::DeTable;

pub mod budget;
mod convert;
mod error;
pub mod example;
pub mod fields;
pub mod limits;
pub mod stamp;
mod suggest;
#[cfg(test)]
mod tests;
mod values;
mod walk;

pub use error::ConfigError;
pub use fields::{BATCH_FIELDS, TOP_LEVEL_FIELDS};
pub use values::{Overlap, RateLimit, RateLimitError, WorkerMode};
use walk::Walker;

/// Kept here too: the schedule is part of a batch's config.
pub use crate::cron::{Schedule, ScheduleError};

/// Upper bound for `concurrency`: far above what one host can use well, low
/// enough that a typo (`40000`) is caught instead of forking a storm.
pub const MAX_CONCURRENCY: usize = 1024;

/// Upper bound for `runners` sharing one batch.
pub const MAX_RUNNERS: i64 = 256;

/// Attempts an item gets before it is quarantined, unless a batch says.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;

/// Upper bound for immediate `retries`; more belongs in `max_attempts`.
pub const MAX_RETRIES: u32 = 100;

/// Default database file name, beside the config file or in the current directory.
pub const DEFAULT_DB_FILE: &str = "nightshift.db";

/// Config file name looked for beside the database.
pub const CONFIG_FILE: &str = "nightshift.toml";

/// The whole config file.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where it was read from; `None` for [`Config::empty`].
    pub file: Option<PathBuf>,
    /// `db`, resolved against the config file's directory.
    pub db: Option<PathBuf>,
    /// `log_dir`, resolved against the config file's directory.
    pub log_dir: Option<PathBuf>,
    pub batches: BTreeMap<String, BatchConfig>,
    /// The `[limit.NAME]` pools.
    pub limits: BTreeMap<String, limits::LimitPool>,
}

/// Policy of one batch: what to run and how hard to try.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchConfig {
    pub name: String,
    /// Worker argv, run once per item (no shell).
    pub worker: Option<Vec<String>>,
    /// Argv printing JSON lines of items to add at the start of each cycle.
    pub source: Option<Vec<String>>,
    /// Natural-key fields hashed into the idempotency key.
    pub key_fields: Option<Vec<String>>,
    pub concurrency: usize,
    pub item_timeout: Duration,
    /// Persistent mode: the extra time the first item sent to a fresh
    /// worker has, for the worker's start-up.
    pub start_timeout: Option<Duration>,
    pub max_duration: Option<Duration>,
    /// Immediate retries of a transient failure within one attempt.
    pub retries: u32,
    /// Base of the exponential backoff between immediate retries.
    pub backoff: Duration,
    pub backoff_max: Duration,
    /// Attempts after which an item goes to the `manual` tier.
    pub max_attempts: u32,
    pub transient_exit_codes: Vec<i32>,
    pub transient_error_classes: Vec<String>,
    pub rate_limit: Option<RateLimit>,
    /// The `[limit.NAME]` pool the batch draws from: `limit` names it,
    /// `pool` is its table (filled in once the whole file is read).
    pub limit: Option<String>,
    pub pool: Option<limits::LimitPool>,
    /// Tokens reserved per call before it starts (the fallback when
    /// `estimate_field` is missing from a payload).
    pub token_estimate: Option<u64>,
    /// A payload field holding the call's token estimate (`max_tokens`).
    pub estimate_field: Option<String>,
    /// The item field holding each item's claim priority.
    pub priority_field: Option<String>,
    /// Longest hold a `retry_after_s` answer can put on the batch; a longer
    /// one is clamped to it.
    pub max_hold: Duration,
    pub max_cost: Option<f64>,
    /// Spend per UTC-aligned window; at it the runner starts no call until
    /// the window ends (`runner::budget`).
    pub budget: Option<budget::Budget>,
    /// The prompt or model version items are done under (`version`); items
    /// done under another one, or before it was set, are stale.
    pub version: Option<String>,
    pub schedule: Option<Schedule>,
    pub timezone: Tz,
    /// Window within which a missed fire time is caught up on daemon start.
    pub catch_up: Option<Duration>,
    pub overlap: Overlap,
    /// How long in-flight items may finish after a stop.
    pub grace: Duration,
    pub lock_ttl: Duration,
    /// Runners (on any hosts sharing the store) that may run the batch at
    /// once, each holding a seat of its lock. 1: never two at once.
    pub runners: u32,
    pub mode: WorkerMode,
    /// Argv run after a cycle in which anything failed.
    pub alert: Option<Vec<String>>,
    /// The circuit breaker: when the run's recent answers trip it, the
    /// run stops claiming and the batch is paused with the reason.
    pub halt: Option<crate::runner::halt::HaltRule>,
    /// Where the file set each of these settings.
    pub lines: Lines,
}

/// The 1-based line where the file set each of a batch's settings, so
/// that a problem found after the file was read (a `worker` that is not
/// there) names its place as any config error does. Not part of the
/// policy: configs that differ only in where they say it are equal.
#[derive(Debug, Clone, Default)]
pub struct Lines(BTreeMap<&'static str, usize>);

impl PartialEq for Lines {
    fn eq(&self, _: &Lines) -> bool {
        true
    }
}

impl Lines {
    /// The line of `key`, if the file set it.
    #[must_use]
    pub fn of(&self, key: &str) -> Option<usize> {
        self.0.get(key).copied()
    }
}

impl BatchConfig {
    /// Where its keys come from in `file`, for a message that refuses
    /// them: `nightshift.toml:5: batch."記事".key_fields`, or
    /// `nightshift.toml: batch."記事" (no key_fields)`.
    #[must_use]
    pub fn key_fields_at(&self, file: &Path) -> String {
        let field = format!("batch.{}", crate::batch_name::toml_key(&self.name));
        match self.lines.of("key_fields") {
            Some(line) => format!("{}:{line}: {field}.key_fields", file.display()),
            None => format!("{}: {field} (no key_fields)", file.display()),
        }
    }

    /// The policy of a batch that the config file does not mention.
    #[must_use]
    pub fn defaults(name: &str) -> BatchConfig {
        BatchConfig {
            name: name.to_string(),
            worker: None,
            source: None,
            key_fields: None,
            concurrency: 4,
            item_timeout: Duration::from_mins(10),
            start_timeout: None,
            max_duration: None,
            retries: 2,
            backoff: Duration::from_secs(1),
            backoff_max: Duration::from_mins(1),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            transient_exit_codes: vec![75],
            transient_error_classes: Vec::new(),
            rate_limit: None,
            limit: None,
            pool: None,
            token_estimate: None,
            estimate_field: None,
            priority_field: None,
            max_hold: Duration::from_hours(1),
            max_cost: None,
            budget: None,
            version: None,
            schedule: None,
            timezone: Tz::UTC,
            catch_up: None,
            overlap: Overlap::Skip,
            grace: Duration::from_secs(30),
            lock_ttl: Duration::from_mins(1),
            runners: 1,
            mode: WorkerMode::Process,
            alert: None,
            halt: None,
            lines: Lines::default(),
        }
    }

    /// The setting `key` as the config writes it (`["site", "slug"]`);
    /// `None` while it is off, or for a key no batch has.
    #[must_use]
    pub fn shown(&self, key: &str) -> Option<String> {
        fields::BATCH
            .iter()
            .find(|f| f.key == key)
            .and_then(|f| (f.show)(self))
    }
}

impl Config {
    /// No file: every batch uses [`BatchConfig::defaults`].
    #[must_use]
    pub fn empty() -> Config {
        Config {
            file: None,
            db: None,
            log_dir: None,
            batches: BTreeMap::new(),
            limits: BTreeMap::new(),
        }
    }

    /// The configured batch of this name, if the file has one.
    #[must_use]
    pub fn batch(&self, name: &str) -> Option<&BatchConfig> {
        self.batches.get(name)
    }

    /// `problem` with the setting `key` of `batch` as the file set it, as
    /// any config error names it (file, line, field); `None` when the file
    /// did not set it.
    #[must_use]
    pub fn invalid(&self, batch: &str, key: &str, problem: String) -> Option<ConfigError> {
        let line = self.batch(batch)?.lines.of(key)?;
        Some(ConfigError::Invalid {
            file: self.file.clone()?,
            line,
            field: format!("batch.{}.{key}", crate::batch_name::toml_key(batch)),
            message: problem,
        })
    }

    /// Where the batch's keys come from in the file, for a message that
    /// refuses them (see [`BatchConfig::key_fields_at`]); `None` without a
    /// file.
    #[must_use]
    pub fn key_fields_at(&self, batch: &str) -> Option<String> {
        let file = self.file.as_deref()?;
        Some(self.batch_or_defaults(batch).key_fields_at(file))
    }

    /// The batch's `max_attempts` (the default for a batch the file omits),
    /// without copying its config.
    #[must_use]
    pub fn max_attempts_of(&self, name: &str) -> u32 {
        self.batch(name)
            .map_or(DEFAULT_MAX_ATTEMPTS, |b| b.max_attempts)
    }

    /// The configured batch, or the defaults for a batch the file omits.
    #[must_use]
    pub fn batch_or_defaults(&self, name: &str) -> BatchConfig {
        self.batch(name)
            .cloned()
            .unwrap_or_else(|| BatchConfig::defaults(name))
    }

    /// Reads and parses a config file.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Read`] if the file cannot be read, else as [`Config::parse`].
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        // Reading a FIFO (or a device) would block, or never end.
        if let Ok(meta) = std::fs::metadata(path)
            && !meta.is_file()
        {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                kind: std::io::ErrorKind::InvalidInput,
                reason: "not a regular file".into(),
            });
        }
        let bytes = std::fs::read(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            kind: e.kind(),
            reason: io_reason(&e),
        })?;
        let text = String::from_utf8(bytes).map_err(|e| not_utf8(path, e.as_bytes(), &e))?;
        Config::parse(&text, path)
    }

    /// Parses config text; `file` is used in messages and to resolve
    /// relative `db` and `log_dir` paths.
    ///
    /// # Errors
    ///
    /// The first (topmost) problem in the text, with its line and field.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let root = DeTable::parse(text).map_err(|e| {
            let line = line_of(text, e.span().map_or(0, |s| s.start));
            let mut message = e.message().to_string();
            // The parser says "duplicate key" without naming it.
            if message == "duplicate key"
                && let Some(key) = e
                    .span()
                    .and_then(|s| text.get(s))
                    .filter(|k| !k.contains('\n'))
            {
                let here = text.lines().nth(line - 1).unwrap_or("").trim();
                message = if here.starts_with('[') {
                    format!("the table {here} is written twice: write its keys under one header")
                } else {
                    format!("duplicate key {}: a table sets each key once", key.trim())
                };
            }
            if let Some(quoted) = text.lines().nth(line - 1).and_then(quoted_header) {
                message.push_str(&format!(
                    " (a name other than letters, digits, `_` and `-` is quoted: {quoted})"
                ));
            }
            ConfigError::Syntax {
                file: file.to_path_buf(),
                line,
                message,
            }
        })?;
        let mut walker = Walker {
            file,
            text,
            problems: Vec::new(),
            limit_refs: Vec::new(),
        };
        let config = walker.config(root.get_ref());
        match walker
            .problems
            .into_iter()
            .min_by_key(|(offset, _)| *offset)
        {
            Some((_, err)) => Err(err),
            None => Ok(config),
        }
    }
}

/// An io error's message without the ` (os error N)` suffix.
fn io_reason(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text,
    }
}

/// Finds the config and the database path.
///
/// - With `config_flag`: that file is loaded (a missing file is an error); the
///   database is `db_flag`, else the config's `db`, else `nightshift.db`
///   beside the config file.
/// - Without it: the database is `db_flag`, else `./nightshift.db`; the config
///   is `nightshift.toml` in the database's directory if that file exists,
///   else [`Config::empty`]. When neither flag is given and `./nightshift.toml`
///   sets `db`, that path is used, so the file's own `db` is never ignored.
///
/// # Errors
///
/// A config that cannot be read or parsed.
pub fn discover(
    db_flag: Option<&Path>,
    config_flag: Option<&Path>,
) -> Result<(Config, PathBuf), ConfigError> {
    if let Some(config_path) = config_flag {
        let config = Config::load(config_path)?;
        let db = db_flag
            .map(Path::to_path_buf)
            .or_else(|| config.db.clone())
            .unwrap_or_else(|| sibling(config_path, DEFAULT_DB_FILE));
        return Ok((config, db));
    }
    let db = db_flag.map_or_else(|| PathBuf::from(DEFAULT_DB_FILE), Path::to_path_buf);
    let config_path = beside_store(&db);
    if !config_path.is_file() {
        return Ok((Config::empty(), db));
    }
    let config = Config::load(&config_path)?;
    let db = match (db_flag, &config.db) {
        (None, Some(configured)) => configured.clone(),
        _ => db,
    };
    Ok((config, db))
}

/// The config file of the store at `db` when no `--config` is given:
/// `nightshift.toml` beside it (see [`discover`]).
#[must_use]
pub fn beside_store(db: &Path) -> PathBuf {
    crate::store::beside(db, CONFIG_FILE)
}

/// `name` in the same directory as `path`.
fn sibling(path: &Path, name: &str) -> PathBuf {
    path.parent()
        .map_or_else(|| PathBuf::from(name), |dir| dir.join(name))
}

/// `path` as written in `file`, made relative to the file's directory (a
/// database URL stays as it is).
fn resolve(file: &Path, path: &str) -> PathBuf {
    let path = PathBuf::from(path);
    if path.is_absolute() || crate::store::is_server(&path) {
        return path;
    }
    file.parent().map_or(path.clone(), |dir| dir.join(&path))
}

/// A config that is not UTF-8 (saved as Shift_JIS, Notepad's "ANSI" on
/// a Japanese Windows): the line, column and byte where it stops being
/// UTF-8, and how to mend it.
fn not_utf8(file: &Path, bytes: &[u8], e: &std::string::FromUtf8Error) -> ConfigError {
    let good = &bytes[..e.utf8_error().valid_up_to()];
    let line_start = good
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |at| at + 1);
    // Up to the bad byte all is UTF-8: its column counts characters.
    let column = String::from_utf8_lossy(&good[line_start..]).chars().count() + 1;
    ConfigError::Syntax {
        file: file.to_path_buf(),
        line: good.iter().filter(|b| **b == b'\n').count() + 1,
        message: format!(
            "not UTF-8 (the byte 0x{:02X} at column {column}): a config is UTF-8; save it as \
             UTF-8 (from Shift_JIS: iconv -f SHIFT_JIS -t UTF-8)",
            bytes[good.len()]
        ),
    }
}

/// 1-based line of a byte offset.
/// A table header line with a part TOML does not take bare (`[batch.記事]`,
/// the usual first try of a Japanese batch name), as it would be written:
/// `[batch."記事"]`.
fn quoted_header(line: &str) -> Option<String> {
    let inner = line.trim().strip_prefix('[')?.strip_suffix(']')?;
    let (open, inner, close) = match inner.strip_prefix('[').and_then(|i| i.strip_suffix(']')) {
        Some(inner) => ("[[", inner, "]]"),
        None => ("[", inner, "]"),
    };
    let bare = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    let parts: Vec<&str> = inner.split('.').map(str::trim).collect();
    // Parts already quoted (or holding quotes) are left to TOML's message.
    if parts
        .iter()
        .any(|p| p.is_empty() || p.contains(['"', '\'', '[']))
        || parts.iter().all(|p| bare(p))
    {
        return None;
    }
    let parts: Vec<String> = parts
        .iter()
        .map(|p| {
            if bare(p) {
                p.to_string()
            } else {
                format!("{p:?}")
            }
        })
        .collect();
    Some(format!("{open}{}{close}", parts.join(".")))
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}
