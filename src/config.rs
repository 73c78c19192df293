//! `nightshift.toml` → typed [`Config`].
//!
//! The file is read into toml's spanned tree ([`DeTable`]) and walked by hand
//! rather than through serde derive: that way every error can name the file,
//! the line and the dotted field (`batch.articles.item_timeout`), type errors
//! included, and unknown keys can list what is allowed. When a file has
//! several problems the one nearest the top is reported.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use chrono_tz::Tz;
use thiserror::Error;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

use crate::batch_name;
use crate::duration::{format_duration, parse_duration};

mod example;
pub use example::{EXAMPLE, commented_key};

/// Kept here too: the schedule is part of a batch's config.
pub use crate::schedule::{Schedule, ScheduleError};

/// Keys allowed at the top of the file.
pub const TOP_LEVEL_FIELDS: &[&str] = &["db", "log_dir", "batch"];

/// Keys allowed in a `[batch.NAME]` table, in the order the docs list them.
pub const BATCH_FIELDS: &[&str] = &[
    "worker",
    "source",
    "key_fields",
    "concurrency",
    "item_timeout",
    "max_duration",
    "retries",
    "backoff",
    "backoff_max",
    "max_attempts",
    "transient_exit_codes",
    "transient_error_classes",
    "rate_limit",
    "max_hold",
    "max_cost",
    "schedule",
    "timezone",
    "catch_up",
    "overlap",
    "grace",
    "lock_ttl",
    "runners",
    "mode",
    "alert",
];

/// Upper bound for `concurrency`: far above what one host can use well, low
/// enough that a typo (`40000`) is caught instead of forking a storm.
pub const MAX_CONCURRENCY: usize = 1024;

/// Upper bound for `runners` sharing one batch.
pub const MAX_RUNNERS: i64 = 256;

/// Upper bound for immediate `retries`; more belongs in `max_attempts`.
pub const MAX_RETRIES: u32 = 100;

/// Default database file name, beside the config file or in the current directory.
pub const DEFAULT_DB_FILE: &str = "nightshift.db";

/// Config file name looked for beside the database.
pub const CONFIG_FILE: &str = "nightshift.toml";

/// A bad or unreadable config. Every variant but [`ConfigError::Read`] names
/// the file and line; field errors name the dotted field too.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("cannot read config {}: {reason}", path.display())]
    Read {
        path: PathBuf,
        kind: std::io::ErrorKind,
        reason: String,
    },
    /// The text is not valid TOML.
    #[error("{}:{line}: invalid TOML: {message}", file.display())]
    Syntax {
        file: PathBuf,
        line: usize,
        message: String,
    },
    /// A known field has a value of the wrong type or out of range.
    #[error("{}:{line}: {field}: {message}", file.display())]
    Invalid {
        file: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    /// A key that nightshift does not know (usually a typo).
    #[error(
        "{}:{line}: unknown field {key:?} in {}{} (expected one of: {})",
        file.display(),
        table_label(field, key),
        suggestion.map(|s| format!(", did you mean {s:?}?")).unwrap_or_default(),
        expected.join(", ")
    )]
    UnknownField {
        file: PathBuf,
        line: usize,
        /// Dotted path of the key, e.g. `batch.articles.concurency`.
        field: String,
        key: String,
        /// The allowed key nearest to `key`, when it looks like a typo of it.
        suggestion: Option<&'static str>,
        expected: &'static [&'static str],
    },
}

/// `[batch.articles]` for a key inside that table, or `the top level`.
fn table_label(field: &str, key: &str) -> String {
    match field.strip_suffix(key).and_then(|t| t.strip_suffix('.')) {
        Some(table) if !table.is_empty() => format!("[{table}]"),
        _ => "the top level".to_string(),
    }
}

impl ConfigError {
    /// The 1-based line the error points at, when there is one.
    #[must_use]
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { line, .. }
            | ConfigError::Invalid { line, .. }
            | ConfigError::UnknownField { line, .. } => Some(*line),
        }
    }

    /// The dotted field the error is about (`batch.articles.timezone`).
    #[must_use]
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } | ConfigError::UnknownField { field, .. } => {
                Some(field)
            }
            ConfigError::Read { .. } | ConfigError::Syntax { .. } => None,
        }
    }
}

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
    /// Longest hold a `retry_after_s` answer can put on the batch; a longer
    /// one is clamped to it.
    pub max_hold: Duration,
    pub max_cost: Option<f64>,
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
}

impl BatchConfig {
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
            max_duration: None,
            retries: 2,
            backoff: Duration::from_secs(1),
            backoff_max: Duration::from_mins(1),
            max_attempts: 5,
            transient_exit_codes: vec![75],
            transient_error_classes: Vec::new(),
            rate_limit: None,
            max_hold: Duration::from_hours(1),
            max_cost: None,
            schedule: None,
            timezone: Tz::UTC,
            catch_up: None,
            overlap: Overlap::Skip,
            grace: Duration::from_secs(30),
            lock_ttl: Duration::from_mins(1),
            runners: 1,
            mode: WorkerMode::Process,
            alert: None,
        }
    }
}

/// What the daemon does when a fire time comes while the batch still runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Overlap {
    /// Drop this fire; the running cycle will pick up the work anyway.
    #[default]
    Skip,
    /// Run one more cycle right after the current one ends.
    Queue,
}

impl Overlap {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How worker processes are run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WorkerMode {
    /// One process per item.
    #[default]
    Process,
    /// One long-lived process per slot, JSON lines in and out.
    Persistent,
}

impl WorkerMode {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerMode::Process => "process",
            WorkerMode::Persistent => "persistent",
        }
    }
}

impl fmt::Display for WorkerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `count` calls per `per`, e.g. `60/min`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub count: u32,
    pub per: Duration,
}

/// A `rate_limit` that is not `N/sec`, `N/min` or `N/hour`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "invalid rate limit {0:?}: expected COUNT/UNIT with a positive count, e.g. 10/sec, 60/min, 1000/hour"
)]
pub struct RateLimitError(pub String);

impl FromStr for RateLimit {
    type Err = RateLimitError;

    fn from_str(s: &str) -> Result<RateLimit, RateLimitError> {
        let err = || RateLimitError(s.to_string());
        let (count, unit) = s.split_once('/').ok_or_else(err)?;
        let count = count.trim();
        // `u32::from_str` takes a leading `+`; a rate is plain digits.
        if !count.bytes().all(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let count: u32 = count.parse().map_err(|_| err())?;
        let per = match unit.trim() {
            "sec" | "s" => Duration::from_secs(1),
            "min" | "m" => Duration::from_mins(1),
            "hour" | "h" => Duration::from_hours(1),
            _ => return Err(err()),
        };
        if count == 0 {
            return Err(err());
        }
        Ok(RateLimit { count, per })
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.per.as_secs() {
            1 => "sec".to_string(),
            60 => "min".to_string(),
            3600 => "hour".to_string(),
            _ => format_duration(self.per),
        };
        write!(f, "{}/{unit}", self.count)
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
        }
    }

    /// The configured batch of this name, if the file has one.
    #[must_use]
    pub fn batch(&self, name: &str) -> Option<&BatchConfig> {
        self.batches.get(name)
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
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            kind: e.kind(),
            reason: io_reason(&e),
        })?;
        Config::parse(&text, path)
    }

    /// Parses config text; `file` is used in messages and to resolve
    /// relative `db` and `log_dir` paths.
    ///
    /// # Errors
    ///
    /// The first (topmost) problem in the text, with its line and field.
    pub fn parse(text: &str, file: &Path) -> Result<Config, ConfigError> {
        let root = DeTable::parse(text).map_err(|e| ConfigError::Syntax {
            file: file.to_path_buf(),
            line: line_of(text, e.span().map_or(0, |s| s.start)),
            message: e.message().to_string(),
        })?;
        let mut walker = Walker {
            file,
            text,
            problems: Vec::new(),
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
    let config_path = crate::store::beside(&db, CONFIG_FILE);
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

/// 1-based line of a byte offset.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A value that failed a conversion: where, and why. `index` is set for an
/// array element, so the field reads `worker[1]`.
struct Bad {
    span: Range<usize>,
    index: Option<usize>,
    message: String,
}

type Conv<T> = Result<T, Bad>;

fn bad(value: &Spanned<DeValue<'_>>, message: impl Into<String>) -> Bad {
    Bad {
        span: value.span(),
        index: None,
        message: message.into(),
    }
}

/// Collects problems while walking the tree, so the topmost can be reported.
struct Walker<'a> {
    file: &'a Path,
    text: &'a str,
    problems: Vec<(usize, ConfigError)>,
}

impl Walker<'_> {
    fn invalid(&mut self, span: Range<usize>, field: &str, message: impl Into<String>) {
        let error = ConfigError::Invalid {
            file: self.file.to_path_buf(),
            line: line_of(self.text, span.start),
            field: field.to_string(),
            message: message.into(),
        };
        self.problems.push((span.start, error));
    }

    /// Runs a conversion, recording its failure against `field`.
    fn take<T>(
        &mut self,
        value: &Spanned<DeValue<'_>>,
        field: &str,
        convert: impl FnOnce(&Spanned<DeValue<'_>>) -> Conv<T>,
    ) -> Option<T> {
        match convert(value) {
            Ok(v) => Some(v),
            Err(b) => {
                let field = match b.index {
                    Some(i) => format!("{field}[{i}]"),
                    None => field.to_string(),
                };
                self.invalid(b.span, &field, b.message);
                None
            }
        }
    }

    fn unknown(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        table: &str,
        allowed: &'static [&'static str],
    ) {
        let name = key.get_ref().as_ref();
        let field = if table.is_empty() {
            name.to_string()
        } else {
            format!("{table}.{name}")
        };
        let error = ConfigError::UnknownField {
            file: self.file.to_path_buf(),
            line: line_of(self.text, key.span().start),
            field,
            key: name.to_string(),
            suggestion: closest(name, allowed.iter().copied()),
            expected: allowed,
        };
        self.problems.push((key.span().start, error));
    }

    fn config(&mut self, root: &DeTable<'_>) -> Config {
        let mut config = Config::empty();
        config.file = Some(self.file.to_path_buf());
        for (key, value) in root {
            let name = key.get_ref().as_ref();
            match name {
                "db" => {
                    config.db = self
                        .take(value, name, path_value)
                        .map(|p| resolve(self.file, &p));
                }
                "log_dir" => {
                    config.log_dir = self
                        .take(value, name, path_value)
                        .map(|p| resolve(self.file, &p));
                }
                "batch" => match value.get_ref() {
                    DeValue::Table(batches) => {
                        for (batch_key, batch_value) in batches {
                            if let Some(batch) = self.batch(batch_key, batch_value) {
                                config.batches.insert(batch.name.clone(), batch);
                            }
                        }
                    }
                    other => self.invalid(
                        value.span(),
                        "batch",
                        format!(
                            "expected tables like [batch.NAME], found {}",
                            describe(other)
                        ),
                    ),
                },
                _ => self.unknown(key, "", TOP_LEVEL_FIELDS),
            }
        }
        config
    }

    fn batch(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        value: &Spanned<DeValue<'_>>,
    ) -> Option<BatchConfig> {
        let name = key.get_ref().as_ref();
        // The field path as TOML would write it: `batch."記事".worker`.
        let table_name = format!("batch.{}", batch_name::toml_key(name));
        if let Err(e) = batch_name::check(name) {
            self.invalid(key.span(), &table_name, e.to_string());
            return None;
        }
        let DeValue::Table(table) = value.get_ref() else {
            self.invalid(
                value.span(),
                &table_name,
                format!(
                    "expected a table [{table_name}], found {}",
                    describe(value.get_ref())
                ),
            );
            return None;
        };

        let mut b = BatchConfig::defaults(name);
        let mut spans: BTreeMap<&str, Range<usize>> = BTreeMap::new();
        for (key, value) in table {
            let key_name = key.get_ref().as_ref();
            let field = format!("{table_name}.{key_name}");
            let f = field.as_str();
            match key_name {
                "worker" => b.worker = self.take(value, f, argv),
                "source" => b.source = self.take(value, f, argv),
                "alert" => b.alert = self.take(value, f, argv),
                "key_fields" => b.key_fields = self.take(value, f, key_fields),
                "concurrency" => {
                    b.concurrency = self
                        .take(value, f, |v| {
                            int_in(v, 1, i64::try_from(MAX_CONCURRENCY).unwrap_or(i64::MAX))
                        })
                        .and_then(|n| usize::try_from(n).ok())
                        .unwrap_or(b.concurrency);
                }
                "item_timeout" => {
                    b.item_timeout = self
                        .take(value, f, positive_duration)
                        .unwrap_or(b.item_timeout);
                }
                "max_duration" => b.max_duration = self.take(value, f, positive_duration),
                "retries" => {
                    b.retries = self
                        .take(value, f, |v| int_in(v, 0, i64::from(MAX_RETRIES)))
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(b.retries);
                }
                "backoff" => b.backoff = self.take(value, f, duration).unwrap_or(b.backoff),
                "backoff_max" => {
                    b.backoff_max = self.take(value, f, duration).unwrap_or(b.backoff_max);
                }
                "max_attempts" => {
                    b.max_attempts = self
                        .take(value, f, |v| int_in(v, 1, i64::from(u32::MAX)))
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(b.max_attempts);
                }
                "transient_exit_codes" => {
                    b.transient_exit_codes = self
                        .take(value, f, exit_codes)
                        .unwrap_or_else(|| b.transient_exit_codes.clone());
                }
                "transient_error_classes" => {
                    b.transient_error_classes = self
                        .take(value, f, |v| string_list(v, false))
                        .unwrap_or_default();
                }
                "rate_limit" => {
                    b.rate_limit = self.take(value, f, |v| {
                        string(v)?
                            .parse::<RateLimit>()
                            .map_err(|e| bad(v, e.to_string()))
                    });
                }
                "max_hold" => {
                    b.max_hold = self.take(value, f, positive_duration).unwrap_or(b.max_hold);
                }
                "max_cost" => b.max_cost = self.take(value, f, max_cost),
                "schedule" => {
                    b.schedule = self.take(value, f, |v| {
                        Schedule::parse(string(v)?).map_err(|e| bad(v, e.to_string()))
                    });
                }
                "timezone" => b.timezone = self.take(value, f, timezone).unwrap_or(b.timezone),
                "catch_up" => b.catch_up = self.take(value, f, positive_duration),
                "overlap" => {
                    b.overlap = self
                        .take(value, f, |v| match string(v)? {
                            "skip" => Ok(Overlap::Skip),
                            "queue" => Ok(Overlap::Queue),
                            other => Err(bad(
                                v,
                                format!("expected \"skip\" or \"queue\", found {other:?}"),
                            )),
                        })
                        .unwrap_or(b.overlap);
                }
                "grace" => b.grace = self.take(value, f, duration).unwrap_or(b.grace),
                "lock_ttl" => {
                    b.lock_ttl = self.take(value, f, positive_duration).unwrap_or(b.lock_ttl);
                }
                "runners" => {
                    b.runners = self
                        .take(value, f, |v| int_in(v, 1, MAX_RUNNERS))
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(b.runners);
                }
                "mode" => {
                    b.mode = self
                        .take(value, f, |v| match string(v)? {
                            "process" => Ok(WorkerMode::Process),
                            "persistent" => Ok(WorkerMode::Persistent),
                            other => Err(bad(
                                v,
                                format!("expected \"process\" or \"persistent\", found {other:?}"),
                            )),
                        })
                        .unwrap_or(b.mode);
                }
                _ => {
                    self.unknown(key, &table_name, BATCH_FIELDS);
                    continue;
                }
            }
            if let Some(known) = BATCH_FIELDS.iter().find(|k| **k == key_name) {
                spans.insert(*known, value.span());
            }
        }

        // Checks that involve two fields, pointed at the one to change.
        if let Some(span) = spans.get("catch_up")
            && b.schedule.is_none()
            && !spans.contains_key("schedule")
        {
            self.invalid(
                span.clone(),
                &format!("{table_name}.catch_up"),
                "catch_up needs a schedule (it is the window for catching up a missed fire time)",
            );
        }
        if b.backoff_max < b.backoff {
            let (span, field, message) = match (spans.get("backoff_max"), spans.get("backoff")) {
                (Some(span), _) => (
                    span,
                    "backoff_max",
                    format!(
                        "backoff_max ({}) is shorter than backoff ({})",
                        format_duration(b.backoff_max),
                        format_duration(b.backoff)
                    ),
                ),
                (None, Some(span)) => (
                    span,
                    "backoff",
                    format!(
                        "backoff ({}) is longer than the default backoff_max ({}); set backoff_max too",
                        format_duration(b.backoff),
                        format_duration(b.backoff_max)
                    ),
                ),
                // Both defaults: cannot happen, and nothing to point at.
                (None, None) => return Some(b),
            };
            self.invalid(span.clone(), &format!("{table_name}.{field}"), message);
        }
        Some(b)
    }
}

/// A short description of a value for "expected X, found Y" messages.
fn describe(value: &DeValue<'_>) -> String {
    match value {
        DeValue::String(s) => {
            let shown: String = s.chars().take(40).collect();
            if shown.len() < s.len() {
                format!("string {shown:?}…")
            } else {
                format!("string {shown:?}")
            }
        }
        DeValue::Integer(i) => format!("integer {i}"),
        DeValue::Float(x) => format!("float {x}"),
        DeValue::Boolean(b) => format!("boolean {b}"),
        DeValue::Datetime(d) => format!("datetime {d}"),
        DeValue::Array(_) => "an array".to_string(),
        DeValue::Table(_) => "a table".to_string(),
    }
}

fn string<'v>(value: &'v Spanned<DeValue<'_>>) -> Conv<&'v str> {
    match value.get_ref() {
        DeValue::String(s) => Ok(s.as_ref()),
        other => Err(bad(
            value,
            format!("expected a string, found {}", describe(other)),
        )),
    }
}

fn integer(value: &Spanned<DeValue<'_>>) -> Conv<i64> {
    match value.get_ref() {
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .map_err(|_| bad(value, format!("integer {i} is out of range"))),
        other => Err(bad(
            value,
            format!("expected an integer, found {}", describe(other)),
        )),
    }
}

fn int_in(value: &Spanned<DeValue<'_>>, min: i64, max: i64) -> Conv<i64> {
    let n = integer(value)?;
    if (min..=max).contains(&n) {
        Ok(n)
    } else {
        Err(bad(
            value,
            format!("must be between {min} and {max}, found {n}"),
        ))
    }
}

fn path_value(value: &Spanned<DeValue<'_>>) -> Conv<String> {
    let s = string(value)?;
    if s.is_empty() {
        return Err(bad(value, "must not be empty"));
    }
    if s.contains('\0') {
        return Err(bad(value, "must not contain a NUL byte"));
    }
    Ok(s.to_string())
}

/// A duration string (`"10m"`), or an integer number of seconds.
fn duration(value: &Spanned<DeValue<'_>>) -> Conv<Duration> {
    match value.get_ref() {
        DeValue::String(s) => parse_duration(s).map_err(|e| bad(value, e.to_string())),
        DeValue::Integer(_) => {
            let secs = integer(value)?;
            u64::try_from(secs)
                .map(Duration::from_secs)
                .map_err(|_| bad(value, format!("must not be negative, found {secs}")))
        }
        other => Err(bad(
            value,
            format!(
                "expected a duration such as \"30s\" or \"10m\", found {}",
                describe(other)
            ),
        )),
    }
}

fn positive_duration(value: &Spanned<DeValue<'_>>) -> Conv<Duration> {
    let d = duration(value)?;
    if d.is_zero() {
        return Err(bad(value, "must be longer than zero"));
    }
    Ok(d)
}

/// The array elements, or an error naming what was found instead.
fn array<'v, 'i>(
    value: &'v Spanned<DeValue<'i>>,
    expected: &str,
) -> Conv<&'v [Spanned<DeValue<'i>>]> {
    match value.get_ref() {
        DeValue::Array(items) => Ok(items),
        other => Err(bad(
            value,
            format!("expected {expected}, found {}", describe(other)),
        )),
    }
}

/// An element's failure, with its index for the field name.
fn at(index: usize, mut b: Bad) -> Bad {
    b.index = Some(index);
    b
}

/// Strings, each non-empty; `require_some` refuses `[]`.
fn string_list(value: &Spanned<DeValue<'_>>, require_some: bool) -> Conv<Vec<String>> {
    let items = array(value, "an array of strings")?;
    if require_some && items.is_empty() {
        return Err(bad(value, "must list at least one entry"));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let s = string(item).map_err(|b| at(i, b))?;
        if s.is_empty() {
            return Err(at(i, bad(item, "must not be an empty string")));
        }
        if s.contains('\0') {
            return Err(at(i, bad(item, "must not contain a NUL byte")));
        }
        out.push(s.to_string());
    }
    Ok(out)
}

/// A program and its arguments, run without a shell.
fn argv(value: &Spanned<DeValue<'_>>) -> Conv<Vec<String>> {
    if let DeValue::String(s) = value.get_ref() {
        return Err(bad(
            value,
            format!(
                "expected an argv array such as [\"python3\", \"worker.py\"] (no shell), found string {s:?}"
            ),
        ));
    }
    let items = array(value, "an argv array such as [\"python3\", \"worker.py\"]")?;
    if items.is_empty() {
        return Err(bad(
            value,
            "must name a program, e.g. [\"python3\", \"worker.py\"]",
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let s = string(item).map_err(|b| at(i, b))?;
        if i == 0 && s.trim().is_empty() {
            return Err(at(i, bad(item, "the program name must not be empty")));
        }
        if s.contains('\0') {
            return Err(at(i, bad(item, "must not contain a NUL byte")));
        }
        out.push(s.to_string());
    }
    Ok(out)
}

fn key_fields(value: &Spanned<DeValue<'_>>) -> Conv<Vec<String>> {
    let fields = string_list(value, true)?;
    for (i, name) in fields.iter().enumerate() {
        if fields[..i].contains(name) {
            return Err(bad(value, format!("field {name:?} is listed twice")));
        }
    }
    Ok(fields)
}

fn exit_codes(value: &Spanned<DeValue<'_>>) -> Conv<Vec<i32>> {
    let items = array(value, "an array of exit codes such as [75]")?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        // 0 is success, and a process cannot exit with more than 255.
        let code = int_in(item, 1, 255).map_err(|b| at(i, b))?;
        out.push(i32::try_from(code).map_err(|_| at(i, bad(item, "out of range")))?);
    }
    Ok(out)
}

fn max_cost(value: &Spanned<DeValue<'_>>) -> Conv<f64> {
    let cost = match value.get_ref() {
        // Integers are exact below 2^53, far beyond any real budget.
        DeValue::Integer(_) => integer(value)? as f64,
        DeValue::Float(x) => x
            .as_str()
            .parse::<f64>()
            .map_err(|_| bad(value, format!("not a number: {x}")))?,
        other => {
            return Err(bad(
                value,
                format!("expected a number, found {}", describe(other)),
            ));
        }
    };
    if !cost.is_finite() || cost < 0.0 {
        return Err(bad(
            value,
            format!("must be a finite number >= 0, found {cost}"),
        ));
    }
    Ok(cost)
}

fn timezone(value: &Spanned<DeValue<'_>>) -> Conv<Tz> {
    let name = string(value)?;
    name.parse::<Tz>().map_err(|_| {
        let hint = closest(name, chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name()))
            .map(|c| format!(" (did you mean {c:?}?)"))
            .unwrap_or_default();
        bad(value, format!("unknown time zone {name:?}{hint}"))
    })
}

/// The candidate nearest to `word` when it is close enough to be a typo.
fn closest<'c>(word: &str, candidates: impl Iterator<Item = &'c str>) -> Option<&'c str> {
    let limit = (word.chars().count() / 3).clamp(1, 3);
    candidates
        .map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut row = Vec::with_capacity(b.len() + 1);
        row.push(i + 1);
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            row.push(substitute.min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("nightshift.toml"))
    }

    /// The error for `text`, as displayed.
    fn error(text: &str) -> String {
        match parse(text) {
            Ok(config) => panic!("expected an error, parsed {config:?}"),
            Err(e) => e.to_string(),
        }
    }

    const SPEC_SHAPE: &str = r#"
db = "state/nightshift.db"
log_dir = "logs"

[batch.articles]
worker = ["python3", "post_article.py"]
source = ["python3", "list_articles.py"]
key_fields = ["site", "category", "slug"]
concurrency = 8
item_timeout = "10m"
max_duration = "1h"
retries = 3
max_attempts = 5
transient_exit_codes = [75, 111]
transient_error_classes = ["TimeoutError", "ConnectionError", "RateLimitError"]
rate_limit = "60/min"
max_cost = 5.0
schedule = "0 2 * * *"
timezone = "Asia/Tokyo"
catch_up = "6h"
overlap = "queue"
mode = "persistent"
alert = ["sh", "-c", "mail -s nightshift me@example.com"]

[batch.other]
"#;

    #[test]
    fn parses_the_spec_shape() {
        let config = Config::parse(SPEC_SHAPE, Path::new("/etc/ns/nightshift.toml")).unwrap();
        assert_eq!(
            config.file.as_deref(),
            Some(Path::new("/etc/ns/nightshift.toml"))
        );
        assert_eq!(
            config.db.as_deref(),
            Some(Path::new("/etc/ns/state/nightshift.db"))
        );
        assert_eq!(config.log_dir.as_deref(), Some(Path::new("/etc/ns/logs")));
        let b = config.batch("articles").unwrap();
        assert_eq!(b.name, "articles");
        assert_eq!(
            b.worker.as_deref(),
            Some(&["python3".to_string(), "post_article.py".to_string()][..])
        );
        assert_eq!(b.source.as_ref().map(Vec::len), Some(2));
        assert_eq!(
            b.key_fields.as_ref().map(|k| k.join(":")),
            Some("site:category:slug".to_string())
        );
        assert_eq!(b.concurrency, 8);
        assert_eq!(b.item_timeout, Duration::from_secs(600));
        assert_eq!(b.max_duration, Some(Duration::from_secs(3600)));
        assert_eq!(b.retries, 3);
        assert_eq!(b.max_attempts, 5);
        assert_eq!(b.transient_exit_codes, vec![75, 111]);
        assert_eq!(b.transient_error_classes.len(), 3);
        assert_eq!(
            b.rate_limit,
            Some(RateLimit {
                count: 60,
                per: Duration::from_secs(60)
            })
        );
        assert_eq!(b.max_cost, Some(5.0));
        assert_eq!(
            b.schedule.as_ref().map(|s| s.expr.as_str()),
            Some("0 2 * * *")
        );
        assert_eq!(b.timezone, chrono_tz::Asia::Tokyo);
        assert_eq!(b.catch_up, Some(Duration::from_secs(6 * 3600)));
        assert_eq!(b.overlap, Overlap::Queue);
        assert_eq!(b.mode, WorkerMode::Persistent);
        assert_eq!(b.alert.as_ref().map(|a| a[0].as_str()), Some("sh"));
        // Keys the file leaves out keep their defaults.
        assert_eq!(b.backoff, Duration::from_secs(1));
        assert_eq!(b.grace, Duration::from_secs(30));
        // An empty table is a batch with every default.
        assert_eq!(config.batch("other"), Some(&BatchConfig::defaults("other")));
        assert_eq!(config.batch("nope"), None);
        assert_eq!(
            config.batch_or_defaults("nope"),
            BatchConfig::defaults("nope")
        );
    }

    #[test]
    fn defaults_match_the_documented_values() {
        let b = BatchConfig::defaults("x");
        assert_eq!(b.concurrency, 4);
        assert_eq!(b.item_timeout, Duration::from_secs(600));
        assert_eq!(b.max_duration, None);
        assert_eq!(b.retries, 2);
        assert_eq!(b.backoff, Duration::from_secs(1));
        assert_eq!(b.backoff_max, Duration::from_secs(60));
        assert_eq!(b.max_attempts, 5);
        assert_eq!(b.transient_exit_codes, vec![75]);
        assert!(b.transient_error_classes.is_empty());
        assert_eq!((b.rate_limit, b.max_cost, b.catch_up), (None, None, None));
        assert!(b.schedule.is_none() && b.worker.is_none() && b.alert.is_none());
        assert_eq!(b.timezone, Tz::UTC);
        assert_eq!(b.overlap, Overlap::Skip);
        assert_eq!(b.grace, Duration::from_secs(30));
        assert_eq!(b.lock_ttl, Duration::from_secs(60));
        assert_eq!(b.mode, WorkerMode::Process);
        assert_eq!(b.max_hold, Duration::from_secs(3600));
    }

    #[test]
    fn empty_text_is_an_empty_config_and_relative_paths_follow_the_file() {
        let config = parse("").unwrap();
        assert!(config.batches.is_empty() && config.db.is_none());
        let config = Config::parse(
            "db = \"a.db\"\nlog_dir = \"/var/log/ns\"",
            Path::new("conf/n.toml"),
        )
        .unwrap();
        assert_eq!(config.db.as_deref(), Some(Path::new("conf/a.db")));
        assert_eq!(config.log_dir.as_deref(), Some(Path::new("/var/log/ns")));
        // Durations may also be given as integer seconds.
        let config = parse("[batch.a]\ngrace = 0\nitem_timeout = 90").unwrap();
        assert_eq!(
            config.batch("a").map(|b| (b.grace, b.item_timeout)),
            Some((Duration::ZERO, Duration::from_secs(90)))
        );
    }

    #[test]
    fn bad_duration_names_file_line_and_field() {
        let text = "[batch.articles]\nworker = [\"w\"]\nitem_timeout = \"10x\"\n";
        assert_eq!(
            error(text),
            r#"nightshift.toml:3: batch.articles.item_timeout: invalid duration "10x": expected a number with a unit, e.g. 30s, 10m, 2h, 7d"#
        );
        let err = parse(text).unwrap_err();
        assert_eq!(err.line(), Some(3));
        assert_eq!(err.field(), Some("batch.articles.item_timeout"));
        assert!(
            error("[batch.a]\nitem_timeout = \"0s\"")
                .contains(":2: batch.a.item_timeout: must be longer than zero")
        );
        assert!(error("[batch.a]\ngrace = -1").contains(":2: batch.a.grace: must not be negative"));
        assert!(
            error("[batch.a]\nmax_hold = \"0s\"")
                .contains(":2: batch.a.max_hold: must be longer than zero")
        );
        let held = parse("[batch.a]\nmax_hold = \"10m\"").unwrap();
        assert_eq!(held.batch("a").unwrap().max_hold, Duration::from_secs(600));
        assert!(
            error("[batch.a]\nlock_ttl = true")
                .contains(":2: batch.a.lock_ttl: expected a duration")
        );
    }

    #[test]
    fn unknown_time_zone_suggests_the_nearest() {
        let text = "\n\n[batch.articles]\nschedule = \"0 2 * * *\"\ntimezone = \"Asia/Tokio\"\n";
        assert_eq!(
            error(text),
            r#"nightshift.toml:5: batch.articles.timezone: unknown time zone "Asia/Tokio" (did you mean "Asia/Tokyo"?)"#
        );
        assert!(
            error("[batch.a]\ntimezone = \"Nowhere/Atlantis\"")
                .ends_with(r#"unknown time zone "Nowhere/Atlantis""#)
        );
    }

    #[test]
    fn unknown_fields_are_refused_with_the_allowed_list() {
        let err = error("[batch.articles]\nworker = [\"w\"]\nconcurency = 4\n");
        assert!(
            err.starts_with(r#"nightshift.toml:3: unknown field "concurency" in [batch.articles], did you mean "concurrency"? (expected one of: worker, source, key_fields, concurrency,"#),
            "{err}"
        );
        assert!(err.ends_with("mode, alert)"), "{err}");
        assert_eq!(
            error("db = \"x.db\"\nlogdir = \"logs\""),
            r#"nightshift.toml:2: unknown field "logdir" in the top level, did you mean "log_dir"? (expected one of: db, log_dir, batch)"#
        );
        assert_eq!(parse("[batches.a]").unwrap_err().field(), Some("batches"));
    }

    #[test]
    fn toml_syntax_errors_carry_the_line() {
        assert_eq!(
            error("[batch.a]\nconcurrency = \n"),
            "nightshift.toml:2: invalid TOML: string values must be quoted, expected literal string"
        );
        assert!(
            error("db = \"a\"\ndb = \"b\"")
                .starts_with("nightshift.toml:2: invalid TOML: duplicate key")
        );
        assert!(
            error("[batch.a]\nworker = [\"x\",\n").starts_with("nightshift.toml:2: invalid TOML:")
        );
    }

    #[test]
    fn type_errors_name_line_and_field() {
        assert_eq!(
            error("[batch.articles]\nconcurrency = \"four\""),
            r#"nightshift.toml:2: batch.articles.concurrency: expected an integer, found string "four""#
        );
        assert!(
            error("[batch.a]\nconcurrency = 0")
                .ends_with("batch.a.concurrency: must be between 1 and 1024, found 0")
        );
        assert!(error("[batch.a]\nconcurrency = 5000").contains("must be between 1 and 1024"));
        assert!(
            error("[batch.a]\nconcurrency = 99999999999999999999").contains("batch.a.concurrency:")
        );
        assert!(
            error("[batch.a]\nmax_attempts = 0")
                .contains(":2: batch.a.max_attempts: must be between 1 and")
        );
        assert!(
            error("[batch.a]\nretries = -1")
                .contains(":2: batch.a.retries: must be between 0 and 100")
        );
        assert!(
            error("db = 5")
                .starts_with("nightshift.toml:1: db: expected a string, found integer 5")
        );
        assert!(
            error("batch = 5")
                .starts_with("nightshift.toml:1: batch: expected tables like [batch.NAME]")
        );
        assert!(
            error("[[batch.a]]\nworker = [\"w\"]")
                .contains("batch.a: expected a table [batch.a], found an array")
        );
        assert!(
            error("[batch.a]\noverlap = \"wait\"")
                .ends_with(r#"batch.a.overlap: expected "skip" or "queue", found "wait""#)
        );
        assert!(
            error("[batch.a]\nmode = \"thread\"")
                .ends_with(r#"batch.a.mode: expected "process" or "persistent", found "thread""#)
        );
    }

    #[test]
    fn argv_fields_must_name_a_program() {
        assert!(
            error("[batch.a]\nworker = []").ends_with(
                "batch.a.worker: must name a program, e.g. [\"python3\", \"worker.py\"]"
            )
        );
        assert!(
            error("[batch.a]\nworker = [\"\", \"x\"]")
                .ends_with("batch.a.worker[0]: the program name must not be empty")
        );
        assert!(
            error("[batch.a]\nsource = \"python3 list.py\"")
                .contains(":2: batch.a.source: expected an argv array")
        );
        assert!(
            error("[batch.a]\nalert = [\"sh\", 3]")
                .ends_with("batch.a.alert[1]: expected a string, found integer 3")
        );
        // An element error points at the element's own line.
        let err = parse("[batch.a]\nworker = [\n  \"python3\",\n  4,\n]").unwrap_err();
        assert_eq!(
            (err.line(), err.field()),
            (Some(4), Some("batch.a.worker[1]"))
        );
    }

    #[test]
    fn rate_limits_parse_display_and_refuse_garbage() {
        for (text, count, per) in [
            ("60/min", 60, 60),
            ("10/sec", 10, 1),
            ("5 / s", 5, 1),
            ("1000/hour", 1000, 3600),
            ("2/h", 2, 3600),
            ("3/m", 3, 60),
        ] {
            let rate: RateLimit = text.parse().unwrap();
            assert_eq!(
                rate,
                RateLimit {
                    count,
                    per: Duration::from_secs(per)
                },
                "{text}"
            );
        }
        assert_eq!("60/m".parse::<RateLimit>().unwrap().to_string(), "60/min");
        assert_eq!("10/s".parse::<RateLimit>().unwrap().to_string(), "10/sec");
        assert_eq!("7/h".parse::<RateLimit>().unwrap().to_string(), "7/hour");
        for bad in [
            "",
            "60",
            "60/day",
            "0/min",
            "-1/min",
            "+1/min",
            "x/min",
            "99999999999/s",
            "/min",
        ] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad:?}");
        }
        assert_eq!(
            error("[batch.a]\nrate_limit = \"60/day\""),
            r#"nightshift.toml:2: batch.a.rate_limit: invalid rate limit "60/day": expected COUNT/UNIT with a positive count, e.g. 10/sec, 60/min, 1000/hour"#
        );
    }

    #[test]
    fn max_cost_must_be_finite_and_not_negative() {
        assert_eq!(
            parse("[batch.a]\nmax_cost = 3")
                .unwrap()
                .batch("a")
                .and_then(|b| b.max_cost),
            Some(3.0)
        );
        assert_eq!(
            parse("[batch.a]\nmax_cost = 0.0")
                .unwrap()
                .batch("a")
                .and_then(|b| b.max_cost),
            Some(0.0)
        );
        for bad in ["-1.5", "inf", "nan", "-inf", "\"5\""] {
            let err = parse(&format!("[batch.a]\nmax_cost = {bad}")).unwrap_err();
            assert_eq!(
                (err.line(), err.field()),
                (Some(2), Some("batch.a.max_cost")),
                "{bad}"
            );
        }
    }

    #[test]
    fn cron_expressions_are_checked() {
        assert!(Schedule::parse("0 2 * * *").is_ok());
        assert!(Schedule::parse("30 0 2 * * *").is_ok());
        assert!(Schedule::parse("@daily").is_ok());
        assert!(
            Schedule::parse("@never")
                .unwrap_err()
                .reason
                .starts_with("unknown nickname")
        );
        assert!(Schedule::parse("0 2 * * MOX").is_err());
        assert_eq!(
            error("[batch.a]\nschedule = \"0 2 * *\""),
            r#"nightshift.toml:2: batch.a.schedule: invalid cron expression "0 2 * *": expected 5 fields (minute hour day-of-month month day-of-week) or 6 with leading seconds, found 4"#
        );
        assert!(
            Schedule::parse("0 0 2 * * * 2030")
                .unwrap_err()
                .reason
                .contains("found 7")
        );
        assert!(
            error("[batch.a]\nschedule = \"61 2 * * *\"")
                .contains(":2: batch.a.schedule: invalid cron expression \"61 2 * * *\"")
        );
        assert!(
            Schedule::parse("0 0 31 2 *")
                .unwrap_err()
                .reason
                .contains("never fires")
        );
        assert!(Schedule::parse("").is_err());
    }

    #[test]
    fn cross_field_and_name_rules() {
        assert_eq!(
            error("[batch.a]\nworker = [\"w\"]\ncatch_up = \"6h\""),
            "nightshift.toml:3: batch.a.catch_up: catch_up needs a schedule (it is the window for catching up a missed fire time)"
        );
        assert!(error("[batch.a]\nbackoff = \"10s\"\nbackoff_max = \"5s\"").starts_with("nightshift.toml:3: batch.a.backoff_max: backoff_max (5s) is shorter than backoff (10s)"));
        assert!(
            error("[batch.a]\nbackoff = \"2m\"")
                .starts_with("nightshift.toml:2: batch.a.backoff: backoff (2m) is longer than the default backoff_max (1m); set backoff_max too")
        );
        // One rule with the command line (`batch_name`): quoted Unicode
        // names are batches, a leading '-' is not.
        for ok in ["記事", "my batch", "v1.2_nightly-run"] {
            let text = format!("[batch.\"{ok}\"]\nworker = [\"w\"]\n");
            let config = parse(&text).unwrap();
            assert_eq!(config.batch(ok).map(|b| b.name.as_str()), Some(ok));
        }
        assert_eq!(
            error("[batch.-x]"),
            r#"nightshift.toml:1: batch.-x: a batch name must not start with '-' (it would be read as an option)"#
        );
        assert_eq!(
            error("[batch.\" 記事\"]"),
            r#"nightshift.toml:1: batch." 記事": a batch name must not start or end with a space"#
        );
        assert!(error("[batch.\"\"]").contains("a batch name must not be empty"));
        // A field of a quoted batch is named as TOML writes it.
        assert!(
            error("[batch.\"記事\"]\nconcurrency = 0")
                .starts_with(r#"nightshift.toml:2: batch."記事".concurrency: must be between"#)
        );
        assert!(
            error("[batch.a]\nkey_fields = []")
                .ends_with("batch.a.key_fields: must list at least one entry")
        );
        assert!(
            error("[batch.a]\nkey_fields = [\"site\", \"\"]")
                .ends_with("batch.a.key_fields[1]: must not be an empty string")
        );
        assert!(
            error("[batch.a]\nkey_fields = [\"site\", \"site\"]")
                .ends_with("field \"site\" is listed twice")
        );
        assert!(
            error("[batch.a]\ntransient_exit_codes = [75, 0]")
                .ends_with("batch.a.transient_exit_codes[1]: must be between 1 and 255, found 0")
        );
    }

    #[test]
    fn the_topmost_problem_is_reported() {
        // Keys are walked in sorted order; the report must still follow the file.
        let text = "[batch.zeta]\nworker = 1\n\n[batch.alpha]\nconcurrency = 0\n";
        assert_eq!(parse(text).unwrap_err().line(), Some(2));
        let text = "[batch.a]\nworker = 1\nalert = 2\n";
        assert_eq!(parse(text).unwrap_err().field(), Some("batch.a.worker"));
    }

    #[test]
    fn messages_neutralise_control_characters() {
        let err = error("[batch.a]\ntimezone = \"\\u001b[2J\"");
        assert!(!err.contains('\u{1b}'), "{err}");
        let err = error("[batch.a]\nitem_timeout = \"\\u001b]0;x\\u0007\"");
        assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err}");
    }

    #[test]
    fn missing_file_is_a_read_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nightshift.toml");
        let err = Config::load(&path).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "cannot read config {}: No such file or directory",
                path.display()
            )
        );
        assert!(matches!(
            err,
            ConfigError::Read {
                kind: std::io::ErrorKind::NotFound,
                ..
            }
        ));
        assert_eq!(err.line(), None);
    }

    #[test]
    fn load_reports_the_given_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ns.toml");
        std::fs::write(&path, "[batch.a]\nconcurrency = 0\n").unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}:2: batch.a.concurrency:", path.display())),
            "{err}"
        );
    }

    #[test]
    fn discover_follows_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("custom.toml");
        std::fs::write(&config_path, "[batch.a]\nworker = [\"w\"]\n").unwrap();

        // --config alone: nightshift.db beside it.
        let (config, db) = discover(None, Some(&config_path)).unwrap();
        assert_eq!(db, dir.path().join("nightshift.db"));
        assert!(config.batch("a").is_some());

        // --config and --db: the flag wins.
        let (_, db) = discover(Some(Path::new("/tmp/x.db")), Some(&config_path)).unwrap();
        assert_eq!(db, Path::new("/tmp/x.db"));

        // --config whose file sets db: resolved against the file.
        std::fs::write(&config_path, "db = \"data/q.db\"\n").unwrap();
        let (_, db) = discover(None, Some(&config_path)).unwrap();
        assert_eq!(db, dir.path().join("data/q.db"));

        // A missing --config is an error.
        let missing = dir.path().join("missing.toml");
        assert!(matches!(
            discover(None, Some(&missing)),
            Err(ConfigError::Read { .. })
        ));

        // --db alone: nightshift.toml beside the database, when present.
        let db_path = dir.path().join("store.db");
        let (config, db) = discover(Some(&db_path), None).unwrap();
        assert_eq!((config, &db), (Config::empty(), &db_path));
        std::fs::write(
            dir.path().join("nightshift.toml"),
            "db = \"elsewhere.db\"\n[batch.b]\n",
        )
        .unwrap();
        let (config, db) = discover(Some(&db_path), None).unwrap();
        assert!(config.batch("b").is_some());
        assert_eq!(db, db_path, "an explicit --db beats the file's db");

        // A bad config beside the database is reported, not ignored.
        std::fs::write(
            dir.path().join("nightshift.toml"),
            "[batch.b]\nconcurrency = 0\n",
        )
        .unwrap();
        assert!(discover(Some(&db_path), None).is_err());
    }

    #[test]
    fn discover_without_flags_uses_the_current_directory() {
        // The crate root (the test's working directory) has no nightshift.toml.
        let (config, db) = discover(None, None).unwrap();
        assert_eq!(db, Path::new("nightshift.db"));
        assert_eq!(config, Config::empty());
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn parse_never_panics_on_config_like_text(
            key in proptest::sample::select(BATCH_FIELDS.to_vec()),
            value in prop_oneof![
                "\"\\PC{0,12}\"",
                "-?[0-9]{1,22}",
                "-?[0-9]{1,5}\\.[0-9]{0,4}",
                "\\[(\"[a-z ]{0,5}\", ?){0,3}\\]",
                "\\[(-?[0-9]{1,12}, ?){0,3}\\]",
                "(true|false|inf|nan|1979-05-27|\\{\\})",
            ],
        ) {
            let _ = parse(&format!("[batch.a]\n{key} = {value}\n"));
        }
    }
}
