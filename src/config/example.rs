//! The example config `nightshift init` writes, and how its commented-out
//! keys read. The text is `assets/examples/init.toml`, which the README
//! includes and nightshift.toml(5) is read off.

use super::{BATCH_FIELDS, TOP_LEVEL_FIELDS};

/// The file `nightshift init` writes: every key explained; only `db`,
/// `log_dir` and one batch's `worker` set, every other key commented out.
pub const EXAMPLE: &str = include_str!("../../assets/examples/init.toml");

/// A key the example shows commented out (`# concurrency = 4`): its name and
/// value. Prose is not a key: the name must be a config key and the rest a
/// TOML value.
pub fn commented_key(line: &str) -> Option<(&str, &str)> {
    let text = line.trim().strip_prefix("# ")?;
    let (key, value) = text.split_once(" = ")?;
    let known = TOP_LEVEL_FIELDS
        .iter()
        .chain(BATCH_FIELDS)
        .any(|k| *k == key);
    (known && toml::from_str::<toml::Table>(text).is_ok()).then_some((key, value))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{BatchConfig, Config};

    /// The example with every commented-out key set.
    fn uncommented() -> String {
        EXAMPLE
            .lines()
            .map(|l| match commented_key(l) {
                Some(_) => l.trim_start_matches("# "),
                None => l,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn only_db_log_dir_and_the_worker_are_set() {
        let table: toml::Table = toml::from_str(EXAMPLE).unwrap();
        let keys = |t: &toml::Table| t.keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&table), ["batch", "db", "log_dir"]);
        let batches = table["batch"].as_table().unwrap();
        assert_eq!(keys(batches), ["example"]);
        let example = batches["example"].as_table().unwrap();
        assert_eq!(keys(example), ["worker"], "{example:?}");

        let config = Config::parse(EXAMPLE, Path::new("nightshift.toml")).unwrap();
        let expected = BatchConfig {
            worker: Some(vec!["cat".to_string()]),
            ..BatchConfig::defaults("example")
        };
        assert_eq!(config.batch("example"), Some(&expected));
    }

    #[test]
    fn every_key_is_there_once_set_or_commented_out() {
        for key in TOP_LEVEL_FIELDS.iter().chain(BATCH_FIELDS) {
            if *key == "batch" {
                continue;
            }
            let set = EXAMPLE
                .lines()
                .filter(|l| l.starts_with(&format!("{key} = ")))
                .count();
            let commented = EXAMPLE
                .lines()
                .filter(|l| commented_key(l).is_some_and(|(k, _)| k == *key))
                .count();
            assert_eq!(
                set + commented,
                1,
                "{key}: set {set}, commented {commented}"
            );
        }
    }

    #[test]
    fn every_commented_out_key_can_be_set_as_written() {
        let text = uncommented();
        assert_ne!(text, EXAMPLE.trim_end());
        let config = Config::parse(&text, Path::new("nightshift.toml"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let b = config.batch("example").unwrap();
        assert!(b.source.is_some() && b.schedule.is_some() && b.alert.is_some());
    }

    #[test]
    fn prose_is_not_a_key() {
        assert_eq!(
            commented_key("# concurrency = 4"),
            Some(("concurrency", "4"))
        );
        assert_eq!(
            commented_key("# rate_limit = \"60/min\""),
            Some(("rate_limit", "\"60/min\""))
        );
        assert_eq!(commented_key("# exit 0 = done"), None);
        assert_eq!(commented_key("# colour = \"red\""), None);
        assert_eq!(commented_key("# concurrency = four"), None);
        assert_eq!(commented_key("concurrency = 4"), None);
    }
}
