//! The example config `nightshift init` writes, written from the rows of
//! [`super::fields`]: every key explained, with its default (or, for a key
//! that is off until set, an example). Only `db`, `log_dir` and the example
//! batch's `worker` are set, so a fresh `init` runs as it is; every other key
//! is commented out. `assets/examples/init.toml` is the checked-in copy
//! (the README includes it; a test keeps the two equal).

use super::fields::{BATCH, TOP, Unset};

/// The file's opening comment, a line each ("": a paragraph break).
pub const PREAMBLE: &[&str] = &[
    "nightshift.toml — configuration for nightshift.",
    "Durations are written like \"500ms\", \"30s\", \"10m\", \"2h\", \"7d\" or \"1h30m\".",
    "Relative paths are relative to this file.",
    "",
    "As `nightshift init` writes this file, only `db`, `log_dir` and the example",
    "batch's `worker` are set; every other key is commented out (delete its \"# \"",
    "to set it). A commented-out key shows its default; one marked",
    "\"Default: none\" is off until set, and shows an example.",
];

/// What a `[batch.NAME]` table is, above the example batch's.
pub const BATCH_INTRO: &[&str] = &[
    "One [batch.NAME] table per batch. A batch not listed here still works with",
    "the default for every key (but needs a worker to run). A name other than",
    "letters, digits, '_' and '-' is quoted: [batch.\"記事\"].",
    "",
    "The example batch runs as it is: `nightshift add example items.jsonl` adds",
    "JSON lines such as {\"key\": \"a1\", \"title\": \"Hello\"}, and `nightshift run",
    "example` hands each to its worker. For your batch, rename the table and set",
    "`worker`.",
];

/// The example batch's name.
pub const BATCH_NAME: &str = "example";

/// The example as checked in: `db` is `nightshift.db`, beside the file.
#[must_use]
pub fn text() -> String {
    write(None)
}

/// The example with `db_lines` in place of the line that sets `db` (`init`
/// names the store it made, or says why it does not).
#[must_use]
pub fn with_db(db_lines: &str) -> String {
    write(Some(db_lines))
}

fn write(db_lines: Option<&str>) -> String {
    let mut out = String::new();
    comment(&mut out, PREAMBLE);
    for row in TOP {
        out.push('\n');
        comment(&mut out, row.doc);
        match (row.key, db_lines) {
            ("db", Some(lines)) => out.push_str(lines),
            (key, _) => out.push_str(&format!("{key} = {}", row.example_value())),
        }
        out.push('\n');
    }
    out.push('\n');
    comment(&mut out, BATCH_INTRO);
    out.push_str(&format!("[batch.{BATCH_NAME}]\n"));
    for row in BATCH {
        if !row.doc.is_empty() {
            out.push('\n');
            comment(&mut out, row.doc);
        }
        if let Unset::Off { means, .. } | Unset::Needed { means, .. } = row.unset {
            out.push_str(&format!("# Default: none ({means}).\n"));
        }
        if !matches!(row.unset, Unset::Needed { .. }) {
            out.push_str("# ");
        }
        out.push_str(&format!("{} = {}\n", row.key, row.example_value()));
    }
    out
}

/// `lines` as a TOML comment.
fn comment(out: &mut String, lines: &[&str]) {
    for line in lines {
        out.push('#');
        if !line.is_empty() {
            out.push(' ');
            out.push_str(line);
        }
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::fields::TOP_LEVEL_FIELDS;
    use crate::config::{BATCH_FIELDS, BatchConfig, Config};

    /// A key the example shows commented out (`# concurrency = 4`).
    fn commented_key(line: &str) -> Option<&str> {
        let (key, _) = line.strip_prefix("# ")?.split_once(" = ")?;
        BATCH_FIELDS
            .iter()
            .chain(TOP_LEVEL_FIELDS)
            .any(|k| *k == key)
            .then_some(key)
    }

    fn parse(text: &str) -> Config {
        Config::parse(text, Path::new("nightshift.toml")).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn only_db_log_dir_and_the_worker_are_set() {
        let text = text();
        let table: toml::Table = toml::from_str(&text).unwrap();
        let keys = |t: &toml::Table| t.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&table), ["batch", "db", "log_dir"]);
        let batches = table["batch"].as_table().unwrap();
        assert_eq!(keys(batches), [BATCH_NAME]);
        let example = batches[BATCH_NAME].as_table().unwrap();
        assert_eq!(keys(example), ["worker"], "{example:?}");

        let expected = BatchConfig {
            worker: Some(vec!["cat".to_string()]),
            ..BatchConfig::defaults(BATCH_NAME)
        };
        assert_eq!(parse(&text).batch(BATCH_NAME), Some(&expected));
    }

    #[test]
    fn every_key_is_there_once_set_or_commented_out() {
        let text = text();
        for key in TOP_LEVEL_FIELDS.iter().chain(BATCH_FIELDS) {
            let set = text.lines().filter(|l| l.starts_with(&format!("{key} = ")));
            let commented = text.lines().filter(|l| commented_key(l) == Some(key));
            let found = set.count() + commented.count();
            assert_eq!(found, usize::from(*key != "batch"), "{key}");
        }
    }

    #[test]
    fn every_key_set_as_the_example_shows_it_reads_back_as_written() {
        let text = text();
        let all: Vec<&str> = text
            .lines()
            .map(|l| match commented_key(l) {
                Some(_) => &l["# ".len()..],
                None => l,
            })
            .collect();
        // `limit` names a pool the file must define.
        let pool = "\n[limit.openai]\nrequests = \"60/min\"\n";
        // `start_timeout` acts in persistent mode only (and is refused in
        // the default process mode): read as a persistent batch's.
        let persistent = "mode = \"persistent\"";
        let mode = BATCH.iter().find(|r| r.key == "mode").unwrap();
        let shown_mode = format!("mode = {}", mode.example_value());
        let all: Vec<&str> = all
            .into_iter()
            .map(|l| if l == shown_mode { persistent } else { l })
            .collect();
        let config = parse(&(all.join("\n") + pool));
        let b = config.batch(BATCH_NAME).unwrap();
        for row in BATCH.iter().filter(|r| r.key != "mode") {
            assert_eq!((row.show)(b), Some(row.example_value()), "{}", row.key);
        }
        // A key that is off shows a value that turns it on.
        assert!(b.source.is_some() && b.schedule.is_some() && b.alert.is_some());
    }
}
