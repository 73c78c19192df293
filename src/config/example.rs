//! The example config `nightshift init` writes, written from the rows of
//! [`super::fields`] and [`super::limits`]: every key explained, with its
//! default (or, for a key that is off until set, an example). Only `db`,
//! `log_dir` and the example batch's `worker` are set, so a fresh `init`
//! runs as it is; every other key is commented out, a `[limit.NAME]` pool's
//! with its table. `assets/examples/init.toml` is the checked-in copy
//! (the README includes it; a test keeps the two equal).

use super::fields::{BATCH, TOP, Unset};
use super::limits::LIMIT;

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

/// What a `[limit.NAME]` table is: above the example pool's, and in
/// nightshift.toml(5).
pub const LIMIT_INTRO: &[&str] = &[
    "One [limit.NAME] table per limit pool: the provider's limits of one account,",
    "shared by every batch that names it with `limit = \"NAME\"` and by every runner",
    "on every host sharing the store (the pool's state is in the store). A call",
    "starts only when every limit of its pool has room; a retry-after answer",
    "(`retry_after_s`, or `reset_at` as RFC 3339 or epoch seconds) from any batch",
    "of the pool holds every batch of it until then. `status`, `status --json` and",
    "the dashboard's Pools pane (key 6) show each limit's use.",
    "",
    "Every key of a pool is optional (one left out is no limit of its kind), and a",
    "pool sets at least one.",
];

/// Above the example pool's table (the file's own: the man page lists the
/// keys apart).
const POOL_EXAMPLE: &[&str] = &[
    "The example pool is commented out as a whole: to use it, uncomment its table",
    "and the keys it needs, and the batch's `limit`.",
];

/// The example pool's name: the one the example batch's `limit` names.
pub const POOL_NAME: &str = "openai";

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
    out.push('\n');
    comment(&mut out, LIMIT_INTRO);
    comment(&mut out, &[""]);
    comment(&mut out, POOL_EXAMPLE);
    out.push_str(&format!("# [limit.{POOL_NAME}]\n"));
    for row in LIMIT {
        out.push('\n');
        comment(&mut out, row.doc);
        out.push_str(&format!("# {} = {}\n", row.key, row.example));
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
    use crate::config::limits::{LIMIT_FIELDS, Measure};
    use crate::config::{BATCH_FIELDS, BatchConfig, Config};

    /// The file up to the example pool, and the pool's part.
    fn parts(text: &str) -> (&str, &str) {
        let at = text
            .find(&format!("# [limit.{POOL_NAME}]\n"))
            .expect("the example pool");
        text.split_at(at)
    }

    /// A key of `fields` the example shows commented out (`# concurrency = 4`).
    fn commented_key<'a>(line: &'a str, fields: &[&str]) -> Option<&'a str> {
        let (key, _) = line.strip_prefix("# ")?.split_once(" = ")?;
        fields.contains(&key).then_some(key)
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

    /// Every key of the file, of a batch and of a limit pool, is there
    /// once (the README says so of the file `init` writes).
    #[test]
    fn every_key_is_there_once_set_or_commented_out() {
        let text = text();
        let (file, pool) = parts(&text);
        let top_and_batch: Vec<&str> = TOP_LEVEL_FIELDS
            .iter()
            .chain(BATCH_FIELDS)
            .copied()
            .collect();
        for key in &top_and_batch {
            let set = file.lines().filter(|l| l.starts_with(&format!("{key} = ")));
            let commented = file
                .lines()
                .filter(|l| commented_key(l, &top_and_batch) == Some(key));
            let found = set.count() + commented.count();
            assert_eq!(found, usize::from(*key != "batch"), "{key}");
        }
        for key in LIMIT_FIELDS {
            let commented = pool
                .lines()
                .filter(|l| commented_key(l, LIMIT_FIELDS) == Some(key));
            assert_eq!(commented.count(), 1, "[limit.{POOL_NAME}] {key}");
        }
    }

    /// `line` with the `# ` taken off when it is a key of `fields`.
    fn uncommented<'a>(line: &'a str, fields: &[&str]) -> &'a str {
        match commented_key(line, fields) {
            Some(_) => &line["# ".len()..],
            None => line,
        }
    }

    #[test]
    fn every_key_set_as_the_example_shows_it_reads_back_as_written() {
        let text = text();
        let (file, pool) = parts(&text);
        let top_and_batch: Vec<&str> = TOP_LEVEL_FIELDS
            .iter()
            .chain(BATCH_FIELDS)
            .copied()
            .collect();
        let mut all: Vec<&str> = file
            .lines()
            .map(|l| uncommented(l, &top_and_batch))
            .collect();
        // The pool the batch's `limit` names, as its table shows it.
        all.extend(pool.lines().map(|l| match l.strip_prefix("# [limit.") {
            Some(_) => &l["# ".len()..],
            None => uncommented(l, LIMIT_FIELDS),
        }));
        // `start_timeout` acts in persistent mode only (and is refused in
        // the default process mode): read as a persistent batch's.
        let persistent = "mode = \"persistent\"";
        let mode = BATCH.iter().find(|r| r.key == "mode").unwrap();
        let shown_mode = format!("mode = {}", mode.example_value());
        let all: Vec<&str> = all
            .into_iter()
            .map(|l| if l == shown_mode { persistent } else { l })
            .collect();
        let config = parse(&all.join("\n"));
        let b = config.batch(BATCH_NAME).unwrap();
        for row in BATCH.iter().filter(|r| r.key != "mode") {
            assert_eq!((row.show)(b), Some(row.example_value()), "{}", row.key);
        }
        // A key that is off shows a value that turns it on.
        assert!(b.source.is_some() && b.schedule.is_some() && b.alert.is_some());
        assert_eq!(b.limit.as_deref(), Some(POOL_NAME));
        let p = &config.limits[POOL_NAME];
        for m in Measure::ALL {
            assert!(p.limits.iter().any(|l| l.measure == m), "{}", m.key());
        }
        assert!(p.concurrency.is_some() && p.budget.is_some(), "{p:?}");
    }
}
