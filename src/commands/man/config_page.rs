//! nightshift.toml(5), read off the example config that `nightshift init`
//! writes ([`EXAMPLE`]): each key's comment there is its description, its
//! value there (set or commented out) the example, and the default is the
//! comment's `Default:` line, or else comes from [`BatchConfig::defaults`].
//! One text for the file and the page.

use clap_mangen::roff::{Roff, bold, italic, roman};

use crate::config::{BatchConfig, DEFAULT_DB_FILE, EXAMPLE, commented_key};
use crate::duration::format_duration;

/// Keys documented together (one comment over consecutive lines).
#[derive(Debug, Default)]
struct Entry {
    /// Each key with its example value.
    keys: Vec<(String, String)>,
    doc: Vec<String>,
    /// The comment's `Default: ...` line, for a key without a value default.
    default: Option<String>,
}

impl Entry {
    /// `key`'s default, as the page writes it.
    fn default_of(&self, key: &str) -> Option<String> {
        self.default.clone().or_else(|| default_of(key))
    }
}

/// The keys of one table (the top level, or `[batch.NAME]`).
#[derive(Debug, Default)]
struct Table {
    /// `batch` for `[batch.articles]`; empty at the top level.
    name: String,
    intro: Vec<String>,
    entries: Vec<Entry>,
}

/// The example, parsed: its opening comment and its tables.
#[derive(Debug, Default)]
struct Reference {
    preamble: Vec<String>,
    tables: Vec<Table>,
}

/// Reads [`EXAMPLE`]'s shape: comments, then a key (set or commented out;
/// or keys on the following lines) or a table header they describe. A
/// comment followed by a blank line belongs to the file as a whole.
fn parse(example: &str) -> Reference {
    let mut r = Reference {
        tables: vec![Table::default()],
        ..Reference::default()
    };
    let mut comment: Vec<String> = Vec::new();
    let mut last_was_key = false;
    for line in example.lines() {
        let line = line.trim();
        let table = r.tables.last_mut().expect("one table at least");
        let key = commented_key(line).or_else(|| {
            line.split_once('=')
                .filter(|_| !line.starts_with(['#', '[']))
                .map(|(k, v)| (k.trim(), v.trim()))
        });
        if let Some((key, value)) = key {
            let key = (key.to_string(), value.to_string());
            match table.entries.last_mut() {
                Some(entry) if last_was_key && comment.is_empty() => entry.keys.push(key),
                _ => {
                    let default = comment
                        .iter()
                        .position(|l| l.starts_with("Default: "))
                        .map(|i| comment.remove(i)["Default: ".len()..].to_string());
                    let default = default.map(|d| d.trim_end_matches('.').to_string());
                    table.entries.push(Entry {
                        keys: vec![key],
                        doc: std::mem::take(&mut comment),
                        default,
                    });
                }
            }
            last_was_key = true;
        } else if let Some(text) = line.strip_prefix('#') {
            comment.push(text.trim().to_string());
            last_was_key = false;
        } else if line.is_empty() {
            if !comment.is_empty() {
                if !r.preamble.is_empty() {
                    r.preamble.push(String::new());
                }
                r.preamble.append(&mut comment);
            }
            last_was_key = false;
        } else if let Some(header) = line.strip_prefix('[') {
            let name = header.split(['.', ']']).next().unwrap_or_default();
            r.tables.push(Table {
                name: name.to_string(),
                intro: std::mem::take(&mut comment),
                entries: Vec::new(),
            });
            last_was_key = false;
        }
    }
    r
}

/// The default of a key that has a value by default, as it would be written
/// in the file. A key without one says so in its comment (`Default: none`).
fn default_of(key: &str) -> Option<String> {
    let d = BatchConfig::defaults("");
    let quoted = |s: String| format!("{s:?}");
    Some(match key {
        "db" => format!("\"{DEFAULT_DB_FILE}\" (beside this file)"),
        "log_dir" => "\"logs\" (beside the store)".to_string(),
        "concurrency" => d.concurrency.to_string(),
        "item_timeout" => quoted(format_duration(d.item_timeout)),
        "retries" => d.retries.to_string(),
        "backoff" => quoted(format_duration(d.backoff)),
        "backoff_max" => quoted(format_duration(d.backoff_max)),
        "max_attempts" => d.max_attempts.to_string(),
        "transient_exit_codes" => format!(
            "[{}]",
            d.transient_exit_codes
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "max_hold" => quoted(format_duration(d.max_hold)),
        "timezone" => quoted(d.timezone.name().to_string()),
        "overlap" => quoted(d.overlap.to_string()),
        "grace" => quoted(format_duration(d.grace)),
        "lock_ttl" => quoted(format_duration(d.lock_ttl)),
        "runners" => d.runners.to_string(),
        "mode" => quoted(d.mode.to_string()),
        _ => return None,
    })
}

fn paragraphs(roff: &mut Roff, lines: &[String]) {
    for para in lines.split(String::is_empty) {
        if !para.is_empty() {
            roff.control("PP", []);
            roff.text([roman(para.join(" "))]);
        }
    }
}

fn entries(roff: &mut Roff, table: &Table) {
    for entry in &table.entries {
        roff.control("TP", []);
        let mut head = Vec::new();
        for (i, (key, _)) in entry.keys.iter().enumerate() {
            if i > 0 {
                head.push(roman(", "));
            }
            head.push(bold(key.clone()));
        }
        roff.text(head);
        roff.text([roman(entry.doc.join(" "))]);
        for (key, example) in &entry.keys {
            roff.control("br", []);
            let default = entry.default_of(key).unwrap_or_else(|| "none".into());
            // A key commented out at its default needs no separate example.
            let mut line = Vec::new();
            if *example != default {
                line.push(italic("Example:"));
                line.push(roman(format!(" {key} = {example}   ")));
            }
            line.push(italic("Default:"));
            // Keys documented together say whose default it is.
            line.push(roman(if entry.keys.len() > 1 {
                format!(" {key} = {default}")
            } else {
                format!(" {default}")
            }));
            roff.text(line);
        }
    }
}

/// The page, after its `.TH` header.
pub(super) fn render(mut roff: Roff) -> Roff {
    let r = parse(EXAMPLE);
    roff.control("SH", ["NAME"]);
    roff.text([roman("nightshift.toml - the configuration of nightshift")]);
    roff.control("SH", ["DESCRIPTION"]);
    roff.text([roman(
        "nightshift reads nightshift.toml beside the store, or the file given with --config \
         or NIGHTSHIFT_CONFIG. Without one, every batch has the defaults below. \
         nightshift init writes the example at the end of this page. A misspelt key, a value \
         of the wrong type or out of range is an error naming the file, the line and the field, \
         and nothing runs.",
    )]);
    // The example's first line is its title; the rest says how values are written.
    paragraphs(&mut roff, r.preamble.get(1..).unwrap_or_default());
    for table in &r.tables {
        let title = if table.name.is_empty() {
            "TOP-LEVEL KEYS".to_string()
        } else {
            format!("{} KEYS", table.name.to_uppercase())
        };
        roff.control("SH", [title.as_str()]);
        paragraphs(&mut roff, &table.intro);
        entries(&mut roff, table);
    }
    roff.control("SH", ["EXAMPLE"]);
    roff.text([roman("What nightshift init writes:")]);
    roff.control("PP", []);
    roff.control("nf", []);
    roff.control("RS", ["4"]);
    for line in EXAMPLE.lines() {
        roff.text([roman(line)]);
    }
    roff.control("RE", []);
    roff.control("fi", []);
    roff
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{BATCH_FIELDS, Config, TOP_LEVEL_FIELDS};

    #[test]
    fn every_key_is_documented_once_with_its_default() {
        let r = parse(EXAMPLE);
        let keys = |name: &str| -> Vec<String> {
            r.tables
                .iter()
                .filter(|t| t.name == name)
                .flat_map(|t| &t.entries)
                .flat_map(|e| e.keys.iter().map(|(k, _)| k.clone()))
                .collect()
        };
        let top: Vec<&str> = TOP_LEVEL_FIELDS
            .iter()
            .copied()
            .filter(|k| *k != "batch")
            .collect();
        assert_eq!(keys(""), top);
        assert_eq!(keys("batch"), BATCH_FIELDS);
        for table in &r.tables {
            for entry in &table.entries {
                assert!(!entry.doc.is_empty(), "{:?} has no description", entry.keys);
                for (key, _) in &entry.keys {
                    // One source for each default: the value, or the comment.
                    assert!(
                        default_of(key).is_some() != entry.default.is_some(),
                        "{key}: default {:?}, comment says {:?}",
                        default_of(key),
                        entry.default
                    );
                }
            }
        }
        assert!(
            r.preamble[0].starts_with("nightshift.toml"),
            "{:?}",
            r.preamble
        );
        // A `Default:` comment is one sentence on one line.
        for line in EXAMPLE
            .lines()
            .filter(|l| l.trim_start_matches("# ").starts_with("Default"))
        {
            assert!(
                line.starts_with("# Default: none (") && line.ends_with(")."),
                "{line}"
            );
        }
    }

    /// The example with every commented-out key set, but `except`.
    fn uncommented(except: Option<&str>) -> Config {
        let text: Vec<&str> = EXAMPLE
            .lines()
            .filter_map(|l| match commented_key(l) {
                Some((key, _)) if Some(key) == except => None,
                Some(_) => Some(l.trim_start_matches("# ")),
                None => Some(l),
            })
            .collect();
        Config::parse(&text.join("\n"), Path::new("nightshift.toml"))
            .unwrap_or_else(|_| Config::empty())
    }

    #[test]
    fn a_commented_out_key_shows_its_default_or_says_it_has_none() {
        let all = uncommented(None);
        assert_ne!(all, Config::empty(), "the example, uncommented, parses");
        let r = parse(EXAMPLE);
        let mut commented = 0;
        for entry in r.tables.iter().flat_map(|t| &t.entries) {
            for (key, value) in &entry.keys {
                if !EXAMPLE
                    .lines()
                    .any(|l| commented_key(l).is_some_and(|(k, _)| k == key))
                {
                    continue;
                }
                commented += 1;
                let effect = uncommented(Some(key)) != all;
                match (default_of(key), &entry.default) {
                    (Some(default), _) => {
                        assert_eq!(
                            *value, default,
                            "{key} shows another value than its default"
                        );
                        assert!(!effect, "setting {key} to {value} changes the config");
                    }
                    (None, Some(said)) => {
                        assert!(said.starts_with("none ("), "{key}: {said}");
                        assert!(effect, "{key} = {value} is no example: it changes nothing");
                    }
                    (None, None) => panic!("{key} has no default"),
                }
            }
        }
        assert_eq!(commented, BATCH_FIELDS.len() - 1, "all but the worker");
    }

    #[test]
    fn defaults_are_the_config_defaults() {
        assert_eq!(default_of("concurrency").unwrap(), "4");
        assert_eq!(default_of("item_timeout").unwrap(), "\"10m\"");
        assert_eq!(default_of("transient_exit_codes").unwrap(), "[75]");
        assert_eq!(default_of("timezone").unwrap(), "\"UTC\"");
        assert_eq!(default_of("bogus"), None);
    }
}
