//! [`Walker`]: the TOML tree to a [`Config`] by the rows of [`super::fields`],
//! every problem recorded with its place; and the checks that involve two
//! settings.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::convert::{Conv, describe, parsed};
use super::fields::{BATCH, BATCH_FIELDS, REQUIRES, TOP, TOP_LEVEL_FIELDS};
use super::limits::{self, LIMIT_FIELDS, LimitPool, PoolLimit};
use super::suggest::closest;
use super::{BatchConfig, Config, ConfigError, line_of};
use crate::batch_name;
use crate::duration::format_duration;

/// Collects problems while walking the tree, so the topmost can be reported.
pub(super) struct Walker<'a> {
    pub(super) file: &'a Path,
    pub(super) text: &'a str,
    pub(super) problems: Vec<(usize, ConfigError)>,
    /// Each batch's `limit`, checked against the pools once all are read.
    pub(super) limit_refs: Vec<LimitRef>,
}

/// A batch's `limit`: the batch, its table's name, the value's place, and
/// its `token_estimate`'s (checked against the pool's token rates).
pub(super) struct LimitRef {
    batch: String,
    table_name: String,
    span: Range<usize>,
    estimate: Option<Range<usize>>,
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
                "limit" => match value.get_ref() {
                    DeValue::Table(pools) => {
                        for (pool_key, pool_value) in pools {
                            if let Some(pool) = self.pool(pool_key, pool_value) {
                                config.limits.insert(pool.name.clone(), pool);
                            }
                        }
                    }
                    other => self.invalid(
                        value.span(),
                        "limit",
                        format!(
                            "expected tables like [limit.NAME], found {}",
                            describe(other)
                        ),
                    ),
                },
                _ => match TOP.iter().find(|f| f.key == name) {
                    Some(row) => {
                        self.take(value, name, |v| (row.set)(v, &mut config));
                    }
                    None => self.unknown(key, "", TOP_LEVEL_FIELDS),
                },
            }
        }
        self.resolve_limits(&mut config);
        config
    }

    /// Gives each batch the pool its `limit` names.
    fn resolve_limits(&mut self, config: &mut Config) {
        for LimitRef {
            batch,
            table_name,
            span,
            estimate,
        } in std::mem::take(&mut self.limit_refs)
        {
            let Some(b) = config.batches.get_mut(&batch) else {
                continue;
            };
            let name = b.limit.clone().unwrap_or_default();
            match config.limits.get(&name) {
                Some(pool) => {
                    b.pool = Some(pool.clone());
                    // A call reserving more than a token rate's whole
                    // window fits only in an empty bucket, and a provider
                    // refuses it: said here, not found out overnight.
                    if let (Some(tokens), Some(span)) = (b.token_estimate, estimate)
                        && let Some(l) = pool.limits.iter().find(|l| {
                            l.measure != super::limits::Measure::Requests && tokens > l.rate.count
                        })
                    {
                        self.invalid(
                            span,
                            &format!("{table_name}.token_estimate"),
                            format!(
                                "{tokens} tokens a call is more than pool {name:?} allows in a whole \
                                 window ({} {}): no call could ever fit; lower token_estimate or \
                                 raise the pool's limit",
                                l.rate.count,
                                l.dimension()
                            ),
                        );
                    }
                }
                None => {
                    let known: Vec<String> =
                        config.limits.keys().map(|k| format!("{k:?}")).collect();
                    let known = if known.is_empty() {
                        "the file defines none".to_string()
                    } else {
                        format!("the file defines {}", known.join(", "))
                    };
                    self.invalid(
                        span,
                        &format!("{table_name}.limit"),
                        format!(
                            "no [limit.{}] table for {name:?}: {known}",
                            batch_name::toml_key(&name)
                        ),
                    );
                }
            }
        }
    }

    /// A `[KIND.NAME]` table's field path as TOML would write it
    /// (`batch."記事"`) and its table, or `None` (the error recorded) when
    /// the name is not a valid batch or pool name or the value no table.
    fn named_table<'v, 'de>(
        &mut self,
        kind: &str,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        value: &'v Spanned<DeValue<'de>>,
    ) -> Option<(String, &'v DeTable<'de>)> {
        let name = key.get_ref().as_ref();
        let table_name = format!("{kind}.{}", batch_name::toml_key(name));
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
        Some((table_name, table))
    }

    fn pool(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        value: &Spanned<DeValue<'_>>,
    ) -> Option<LimitPool> {
        let name = key.get_ref().as_ref();
        let (table_name, table) = self.named_table("limit", key, value)?;
        let mut pool = LimitPool {
            name: name.to_string(),
            limits: Vec::new(),
            concurrency: None,
            budget: None,
        };
        for (key, value) in table {
            let key_name = key.get_ref().as_ref();
            let field = format!("{table_name}.{key_name}");
            if key_name == "concurrency" {
                pool.concurrency = self.take(value, &field, limits::concurrency);
            } else if key_name == "budget" {
                pool.budget = self.take(value, &field, parsed);
            } else if let Some(measure) = limits::measure_of(key_name) {
                for rate in self.take(value, &field, limits::rates).unwrap_or_default() {
                    pool.limits.push(PoolLimit { measure, rate });
                }
            } else {
                self.unknown(key, &table_name, LIMIT_FIELDS);
            }
        }
        // In one order whatever the file's: the store's rows and the views.
        pool.limits.sort_by_key(|l| (l.measure, l.rate.per));
        if table.is_empty() {
            self.invalid(
                value.span(),
                &table_name,
                "a pool needs at least one of requests, tokens, input_tokens, output_tokens, concurrency, budget",
            );
        }
        Some(pool)
    }

    fn batch(
        &mut self,
        key: &Spanned<std::borrow::Cow<'_, str>>,
        value: &Spanned<DeValue<'_>>,
    ) -> Option<BatchConfig> {
        let name = key.get_ref().as_ref();
        let (table_name, table) = self.named_table("batch", key, value)?;

        let mut b = BatchConfig::defaults(name);
        let mut spans: BTreeMap<&'static str, Range<usize>> = BTreeMap::new();
        // Keys whose value was refused.
        let mut refused: BTreeSet<&str> = BTreeSet::new();
        for (key, value) in table {
            let key_name = key.get_ref().as_ref();
            let Some(row) = BATCH.iter().find(|f| f.key == key_name) else {
                self.unknown(key, &table_name, BATCH_FIELDS);
                continue;
            };
            let taken = self.take(value, &format!("{table_name}.{key_name}"), |v| {
                (row.set)(v, &mut b)
            });
            if taken.is_none() {
                refused.insert(row.key);
            }
            spans.insert(row.key, value.span());
        }

        b.lines = super::Lines(
            spans
                .iter()
                .map(|(key, span)| (*key, line_of(self.text, span.start)))
                .collect(),
        );
        if let Some(span) = spans.get("limit") {
            self.limit_refs.push(LimitRef {
                batch: name.to_string(),
                table_name: table_name.clone(),
                span: span.clone(),
                estimate: spans.get("token_estimate").cloned(),
            });
        }
        // Checks that involve two fields, pointed at the one to change: a
        // key set where it does nothing (a refused value, its own or the
        // key's it needs, is reported alone).
        for rule in REQUIRES {
            if let Some(span) = spans.get(rule.key)
                && !(rule.met)(&b)
                && !refused.contains(rule.key)
                && !refused.contains(rule.needs)
            {
                self.invalid(
                    span.clone(),
                    &format!("{table_name}.{}", rule.key),
                    rule.why,
                );
            }
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
