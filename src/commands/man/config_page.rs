//! nightshift.toml(5), written from the config's rows
//! ([`crate::config::fields`]): each key's description, example and default
//! are the ones shown by the example config `nightshift init` writes, which
//! closes the page. One source for the file and the page.

use clap_mangen::roff::{Roff, bold, italic, roman};

use crate::config::example::{self, BATCH_INTRO, LIMIT_INTRO, PREAMBLE};
use crate::config::fields::{BATCH, TOP};
use crate::config::limits::LIMIT;

/// One key as the page writes it: its name, example value and default.
struct Key {
    name: &'static str,
    example: String,
    default: String,
}

/// Keys documented together (one description over consecutive rows).
struct Entry {
    keys: Vec<Key>,
    doc: &'static [&'static str],
}

/// The top-level keys, one entry each.
fn top_entries() -> Vec<Entry> {
    TOP.iter()
        .map(|row| Entry {
            keys: vec![Key {
                name: row.key,
                example: row.example_value(),
                default: row.default_text(),
            }],
            doc: row.doc,
        })
        .collect()
}

/// The batch keys; a row without a description joins the entry before it.
fn batch_entries() -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for row in BATCH {
        let key = Key {
            name: row.key,
            example: row.example_value(),
            default: row.default_text(),
        };
        match out.last_mut() {
            Some(entry) if row.doc.is_empty() => entry.keys.push(key),
            _ => out.push(Entry {
                keys: vec![key],
                doc: row.doc,
            }),
        }
    }
    out
}

/// The `[limit.NAME]` keys, one entry each (none has a default: a key
/// left out is no limit of its kind).
fn limit_entries() -> Vec<Entry> {
    LIMIT
        .iter()
        .map(|row| Entry {
            keys: vec![Key {
                name: row.key,
                example: row.example.to_string(),
                default: "none (no limit of this kind)".to_string(),
            }],
            doc: row.doc,
        })
        .collect()
}

fn paragraphs(roff: &mut Roff, lines: &[&str]) {
    for para in lines.split(|l| l.is_empty()) {
        if !para.is_empty() {
            roff.control("PP", []);
            roff.text([roman(para.join(" "))]);
        }
    }
}

fn entries(roff: &mut Roff, entries: &[Entry]) {
    for entry in entries {
        roff.control("TP", []);
        let mut head = Vec::new();
        for (i, key) in entry.keys.iter().enumerate() {
            if i > 0 {
                head.push(roman(", "));
            }
            head.push(bold(key.name));
        }
        roff.text(head);
        roff.text([roman(entry.doc.join(" "))]);
        for key in &entry.keys {
            roff.control("br", []);
            // A key shown at its default needs no separate example.
            let mut line = Vec::new();
            if key.example != key.default {
                line.push(italic("Example:"));
                line.push(roman(format!(" {} = {}   ", key.name, key.example)));
            }
            line.push(italic("Default:"));
            // Keys documented together say whose default it is.
            line.push(roman(if entry.keys.len() > 1 {
                format!(" {} = {}", key.name, key.default)
            } else {
                format!(" {}", key.default)
            }));
            roff.text(line);
        }
    }
}

/// The page, after its `.TH` header.
pub(super) fn render(mut roff: Roff) -> Roff {
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
    paragraphs(&mut roff, PREAMBLE.get(1..).unwrap_or_default());
    roff.control("SH", ["TOP-LEVEL KEYS"]);
    entries(&mut roff, &top_entries());
    roff.control("SH", ["BATCH KEYS"]);
    paragraphs(&mut roff, BATCH_INTRO);
    entries(&mut roff, &batch_entries());
    roff.control("SH", ["LIMIT POOLS"]);
    paragraphs(&mut roff, LIMIT_INTRO);
    entries(&mut roff, &limit_entries());
    roff.control("SH", ["EXAMPLE"]);
    roff.text([roman("What nightshift init writes:")]);
    roff.control("PP", []);
    roff.control("nf", []);
    roff.control("RS", ["4"]);
    for line in example::text().lines() {
        roff.text([roman(line)]);
    }
    roff.control("RE", []);
    roff.control("fi", []);
    roff
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BATCH_FIELDS;

    #[test]
    fn every_limit_key_is_documented() {
        let keys: Vec<&str> = limit_entries()
            .iter()
            .flat_map(|e| e.keys.iter().map(|k| k.name))
            .collect();
        assert_eq!(keys, crate::config::limits::LIMIT_FIELDS);
        let page = render(Roff::new()).render();
        assert!(page.contains("LIMIT POOLS"), "{page}");
        for key in keys {
            assert!(
                page.contains(&format!("\\fB{key}\\fR")),
                "{key} not on the page"
            );
        }
    }

    #[test]
    fn every_batch_key_is_documented_once_and_described() {
        let entries = batch_entries();
        let keys: Vec<&str> = entries
            .iter()
            .flat_map(|e| e.keys.iter().map(|k| k.name))
            .collect();
        assert_eq!(keys, BATCH_FIELDS);
        for entry in &entries {
            assert!(
                !entry.doc.is_empty(),
                "{} has no description",
                entry.keys[0].name
            );
        }
        let shared = entries.iter().find(|e| e.keys.len() > 1).unwrap();
        let names: Vec<&str> = shared.keys.iter().map(|k| k.name).collect();
        assert_eq!(names, ["retries", "backoff", "backoff_max"]);
    }
}
