//! nightshift.toml(5), read off the example config that `nightshift init`
//! writes ([`EXAMPLE`]): each key's comment there is its description, its
//! value there the example, and the default comes from
//! [`BatchConfig::defaults`]. One text for the file and the page.

use clap_mangen::roff::{Roff, bold, italic, roman};

use crate::config::{BatchConfig, DEFAULT_DB_FILE, EXAMPLE};
use crate::duration::format_duration;

/// Keys documented together (one comment over consecutive lines).
#[derive(Debug, Default)]
struct Entry {
    /// Each key with its example value.
    keys: Vec<(String, String)>,
    doc: Vec<String>,
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

/// Reads [`EXAMPLE`]'s shape: comments, then a key (or keys on the
/// following lines) or a table header they describe. A comment followed by
/// a blank line belongs to the file as a whole.
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
        if let Some(text) = line.strip_prefix('#') {
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
        } else if let Some((key, value)) = line.split_once('=') {
            let key = (key.trim().to_string(), value.trim().to_string());
            match table.entries.last_mut() {
                Some(entry) if last_was_key && comment.is_empty() => entry.keys.push(key),
                _ => table.entries.push(Entry {
                    keys: vec![key],
                    doc: std::mem::take(&mut comment),
                }),
            }
            last_was_key = true;
        }
    }
    r
}

/// A key's default, as it would be written in the file.
fn default_of(key: &str) -> Option<String> {
    let d = BatchConfig::defaults("");
    let none = || "none".to_string();
    let quoted = |s: String| format!("{s:?}");
    let list = |v: Vec<String>| format!("[{}]", v.join(", "));
    Some(match key {
        "db" => format!("\"{DEFAULT_DB_FILE}\" (beside this file)"),
        "log_dir" => "\"logs\" (beside the store)".to_string(),
        "worker" => "none: give one here or after -- on the command line".to_string(),
        "source" => none(),
        "key_fields" => "none: each item's own \"key\" field is its key".to_string(),
        "concurrency" => d.concurrency.to_string(),
        "item_timeout" => quoted(format_duration(d.item_timeout)),
        "max_duration" => d
            .max_duration
            .map_or_else(none, |v| quoted(format_duration(v))),
        "retries" => d.retries.to_string(),
        "backoff" => quoted(format_duration(d.backoff)),
        "backoff_max" => quoted(format_duration(d.backoff_max)),
        "max_attempts" => d.max_attempts.to_string(),
        "transient_exit_codes" => list(
            d.transient_exit_codes
                .iter()
                .map(ToString::to_string)
                .collect(),
        ),
        "transient_error_classes" => list(
            d.transient_error_classes
                .iter()
                .map(|c| quoted(c.clone()))
                .collect(),
        ),
        "rate_limit" => d.rate_limit.map_or_else(none, |r| quoted(r.to_string())),
        "max_hold" => quoted(format_duration(d.max_hold)),
        "max_cost" => d.max_cost.map_or_else(none, |c| c.to_string()),
        "schedule" => "none: the daemon does not run the batch".to_string(),
        "timezone" => quoted(d.timezone.name().to_string()),
        "catch_up" => "none: a missed fire is not run".to_string(),
        "overlap" => quoted(d.overlap.to_string()),
        "grace" => quoted(format_duration(d.grace)),
        "lock_ttl" => quoted(format_duration(d.lock_ttl)),
        "runners" => d.runners.to_string(),
        "mode" => quoted(d.mode.to_string()),
        "alert" => none(),
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
            let default = default_of(key).unwrap_or_else(|| "none".into());
            roff.text([
                italic("Example:"),
                roman(format!(" {key} = {example}   ")),
                italic("Default:"),
                roman(format!(" {default}")),
            ]);
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
    use super::*;
    use crate::config::{BATCH_FIELDS, TOP_LEVEL_FIELDS};

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
                    assert!(default_of(key).is_some(), "{key} has no default");
                }
            }
        }
        assert!(
            r.preamble[0].starts_with("nightshift.toml"),
            "{:?}",
            r.preamble
        );
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
