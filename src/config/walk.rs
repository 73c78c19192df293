//! [`Walker`]: the TOML tree to a [`Config`], every problem recorded with
//! its place.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::convert::*;
use super::suggest::closest;
use super::*;
use crate::batch_name;
use crate::duration::format_duration;

/// Collects problems while walking the tree, so the topmost can be reported.
pub(super) struct Walker<'a> {
    pub(super) file: &'a Path,
    pub(super) text: &'a str,
    pub(super) problems: Vec<(usize, ConfigError)>,
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

    pub(super) fn config(&mut self, root: &DeTable<'_>) -> Config {
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
