//! [`ConfigError`]: what is wrong with a config, and where.

use std::path::PathBuf;

use thiserror::Error;

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
