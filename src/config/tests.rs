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
        error("[batch.a]\nlock_ttl = true").contains(":2: batch.a.lock_ttl: expected a duration")
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
    // A city alone names its zone; an abbreviation is said to be one
    // (JST is a letter from EST, which is a zone).
    assert!(
        error("[batch.a]\ntimezone = \"Tokyo\"")
            .ends_with(r#"unknown time zone "Tokyo" (did you mean "Asia/Tokyo"?)"#)
    );
    assert!(
        error("[batch.a]\ntimezone = \"JST\"").ends_with(
            r#"unknown time zone "JST" (JST is an abbreviation, not a zone: did you mean "Asia/Tokyo"?)"#
        )
    );
}

#[test]
fn unknown_fields_are_refused_with_the_allowed_list() {
    let err = error("[batch.articles]\nworker = [\"w\"]\nconcurency = 4\n");
    assert!(
        err.starts_with(r#"nightshift.toml:3: unknown field "concurency" in [batch.articles], did you mean "concurrency"? (expected one of: worker, source, key_fields, concurrency,"#),
        "{err}"
    );
    assert!(err.ends_with("mode, start_timeout, alert, halt)"), "{err}");
    assert_eq!(
        error("db = \"x.db\"\nlogdir = \"logs\""),
        r#"nightshift.toml:2: unknown field "logdir" in the top level, did you mean "log_dir"? (expected one of: db, log_dir, batch, limit)"#
    );
    assert_eq!(parse("[batches.a]").unwrap_err().field(), Some("batches"));
}

#[test]
fn toml_syntax_errors_carry_the_line() {
    assert_eq!(
        error("[batch.a]\nconcurrency = \n"),
        "nightshift.toml:2: invalid TOML: string values must be quoted, expected literal string"
    );
    // The key is named (the parser's message is "duplicate key" alone).
    assert_eq!(
        error("db = \"a\"\ndb = \"b\""),
        "nightshift.toml:2: invalid TOML: duplicate key db: a table sets each key once"
    );
    assert_eq!(
        error("[batch.\"日報\"]\ntimezone = \"UTC\"\n\"timezone\" = \"Asia/Tokyo\"\n"),
        "nightshift.toml:3: invalid TOML: duplicate key \"timezone\": a table sets each key once"
    );
    assert_eq!(
        error("[batch.\"日報\"]\nworker = [\"x\"]\n[batch.\"日報\"]\nconcurrency = 2\n"),
        "nightshift.toml:3: invalid TOML: the table [batch.\"日報\"] is written twice: \
         write its keys under one header"
    );
    assert!(error("[batch.a]\nworker = [\"x\",\n").starts_with("nightshift.toml:2: invalid TOML:"));
}

#[test]
fn a_bare_table_name_toml_refuses_is_shown_quoted() {
    let err = error("db = \"x.db\"\n[batch.記事]\nworker = [\"x\"]\n");
    assert!(
        err.starts_with("nightshift.toml:2: invalid TOML: "),
        "{err}"
    );
    assert!(
        err.ends_with(
            r#"(a name other than letters, digits, `_` and `-` is quoted: [batch."記事"])"#
        ),
        "{err}"
    );
    let err = error("[limit.my pool]\nrequests_per_minute = 60\n");
    assert!(err.ends_with(r#"quoted: [limit."my pool"])"#), "{err}");
    // A header TOML takes, or one already quoted, gets no hint.
    let err = error("[batch.\"記事]\n");
    assert!(!err.contains("is quoted:"), "{err}");
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
        error("[batch.a]\nretries = -1").contains(":2: batch.a.retries: must be between 0 and 100")
    );
    assert!(
        error("db = 5").starts_with("nightshift.toml:1: db: expected a string, found integer 5")
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
        error("[batch.a]\nworker = []")
            .ends_with("batch.a.worker: must name a program, e.g. [\"python3\", \"worker.py\"]")
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
fn nul_bytes_and_empty_strings_are_refused_where_they_stand() {
    for (text, message) in [
        (
            "[batch.a]\nworker = [\"w\", \"a\\u0000b\"]",
            "batch.a.worker[1]: must not contain a NUL byte",
        ),
        (
            "[batch.a]\nalert = [\" \", \"x\"]",
            "batch.a.alert[0]: the program name must not be empty",
        ),
        (
            "[batch.a]\ntransient_error_classes = [\"\\u0000\"]",
            "batch.a.transient_error_classes[0]: must not contain a NUL byte",
        ),
        (
            "[batch.a]\ntransient_error_classes = [\"E\", \"\"]",
            "batch.a.transient_error_classes[1]: must not be an empty string",
        ),
        ("db = \"a\\u0000b\"", "db: must not contain a NUL byte"),
        ("log_dir = \"\"", "log_dir: must not be empty"),
    ] {
        let err = error(text);
        assert!(err.ends_with(message), "{text}: {err}");
    }
    // An empty argument after the program is an argument.
    let config = parse("[batch.a]\nsource = [\"s\", \"\"]").unwrap();
    assert_eq!(
        config.batch("a").unwrap().source,
        Some(vec!["s".into(), String::new()])
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
fn a_version_is_any_printable_text() {
    assert_eq!(
        parse("[batch.a]\nversion = \"プロンプト v3\"")
            .unwrap()
            .batch("a")
            .and_then(|b| b.version.clone()),
        Some("プロンプト v3".to_string())
    );
    for (bad, why) in [
        ("\"\"", "must not be empty"),
        ("\"  \"", "must not be empty"),
        ("\"v\\u001b[31m\"", "control characters"),
        ("\"v\\u0000\"", "control characters"),
        ("3", "expected a string"),
    ] {
        let err = parse(&format!("[batch.a]\nversion = {bad}")).unwrap_err();
        assert_eq!(
            (err.line(), err.field()),
            (Some(2), Some("batch.a.version")),
            "{bad}"
        );
        assert!(err.to_string().contains(why), "{bad}: {err}");
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
    // croner's own message names no field: the one refused is named.
    assert_eq!(
        Schedule::parse("0 2 * * 8").unwrap_err().reason,
        r#"the day-of-week field "8" (takes 0-7 or SUN-SAT): number out of bounds"#
    );
    assert!(
        Schedule::parse("0 61 2 * * *")
            .unwrap_err()
            .reason
            .starts_with(r#"the minute field "61" (takes 0-59)"#)
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
    // Every key that acts only beside another is refused without it, as
    // catch_up is (they were kept, doing nothing).
    assert_eq!(
        error("[batch.a]\nworker = [\"w\"]\noverlap = \"queue\""),
        "nightshift.toml:3: batch.a.overlap: overlap needs a schedule (it says what a fire time does while the batch still runs)"
    );
    assert_eq!(
        error("[batch.a]\ntimezone = \"Asia/Tokyo\"\nworker = [\"w\"]"),
        "nightshift.toml:2: batch.a.timezone: timezone needs a schedule (it is the zone the schedule is read in)"
    );
    for mode in ["", "mode = \"process\"\n"] {
        assert_eq!(
            error(&format!("[batch.a]\n{mode}start_timeout = \"2m\"")),
            format!(
                "nightshift.toml:{}: batch.a.start_timeout: start_timeout needs mode = \"persistent\" \
                 (in process mode each item's worker starts with it, within item_timeout)",
                2 + usize::from(!mode.is_empty())
            )
        );
    }
    // Beside what they need, or a refused value of it, they are not.
    let scheduled = "schedule = \"0 2 * * *\"\ntimezone = \"Asia/Tokyo\"\noverlap = \"queue\"\n";
    parse(&format!("[batch.a]\n{scheduled}")).unwrap();
    parse("[batch.a]\nmode = \"persistent\"\nstart_timeout = \"2m\"").unwrap();
    assert!(
        error("[batch.a]\nschedule = \"61 2 * * *\"\ntimezone = \"UTC\"")
            .contains("batch.a.schedule: invalid cron expression")
    );
    assert!(
        error("[batch.a]\nmode = \"thread\"\nstart_timeout = \"2m\"")
            .contains("batch.a.mode: expected")
    );
    assert!(
        error("[batch.a]\nbackoff = \"10s\"\nbackoff_max = \"5s\"").starts_with(
            "nightshift.toml:3: batch.a.backoff_max: backoff_max (5s) is shorter than backoff (10s)"
        )
    );
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

/// A config saved as Shift_JIS (Notepad's "ANSI" on a Japanese Windows)
/// said only "stream did not contain valid UTF-8": no line, and nothing of
/// what to do. Now the line, the column and the byte, and how to mend it.
#[test]
fn a_config_not_in_utf8_names_its_line_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nightshift.toml");
    // `# 日本語` in Shift_JIS on line 3.
    let mut text = b"[batch.a]\nworker = [\"cat\"]\n# ".to_vec();
    text.extend_from_slice(&[0x93, 0xfa, 0x96, 0x7b, 0x8c, 0xea, b'\n']);
    std::fs::write(&path, &text).unwrap();
    let err = Config::load(&path).unwrap_err();
    assert_eq!(err.line(), Some(3), "{err}");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3: invalid TOML: not UTF-8 (the byte 0x93 at column 3): a config is UTF-8; \
             save it as UTF-8 (from Shift_JIS: iconv -f SHIFT_JIS -t UTF-8)",
            path.display()
        )
    );
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

#[test]
fn halt_takes_either_form_and_refuses_others_naming_the_key() {
    use crate::runner::halt::HaltRule;
    let halt = |text: &str| parse(text).unwrap().batch("a").and_then(|b| b.halt);
    assert_eq!(
        halt("[batch.a]\nhalt = \"5 in a row\""),
        Some(HaltRule::InARow(5))
    );
    assert_eq!(
        halt("[batch.a]\nhalt = \"30% of the last 50\""),
        Some(HaltRule::Share {
            percent: 30,
            of: 50
        })
    );
    assert_eq!(halt("[batch.a]\n"), None);
    for bad in ["\"5 in a line\"", "5", "\"130% of the last 50\""] {
        let e = error(&format!("[batch.a]\nhalt = {bad}"));
        assert!(e.contains("batch.a.halt"), "{e}");
        assert!(
            e.contains("\"N in a row\"") || e.contains("expected a string"),
            "{e}"
        );
    }
}

#[test]
fn limit_pools_parse_and_batches_get_theirs() {
    use crate::config::limits::{Measure, PoolLimit, PoolRate};
    use std::time::Duration;
    let text = "[limit.openai]\nrequests = [\"3000/min\", \"10000/day\"]\ntokens = \"250000/min\"\n\
                input_tokens = \"5000/s\"\noutput_tokens = \"7000/h\"\nconcurrency = 16\n\n\
                [batch.a]\nworker = [\"w\"]\nlimit = \"openai\"\ntoken_estimate = 1200\nestimate_field = \"max_tokens\"\n";
    let config = parse(text).unwrap();
    let pool = config.limits.get("openai").unwrap();
    let rate = |count, secs| PoolRate {
        count,
        per: Duration::from_secs(secs),
    };
    assert_eq!(
        pool.limits,
        [
            PoolLimit {
                measure: Measure::Requests,
                rate: rate(3000, 60)
            },
            PoolLimit {
                measure: Measure::Requests,
                rate: rate(10000, 86_400)
            },
            PoolLimit {
                measure: Measure::Tokens,
                rate: rate(250_000, 60)
            },
            PoolLimit {
                measure: Measure::InputTokens,
                rate: rate(5000, 1)
            },
            PoolLimit {
                measure: Measure::OutputTokens,
                rate: rate(7000, 3600)
            },
        ]
    );
    assert_eq!(pool.limits[1].dimension(), "requests/day");
    assert_eq!(pool.concurrency, Some(16));
    let b = config.batch("a").unwrap();
    assert_eq!(b.pool.as_ref(), Some(pool));
    assert_eq!(
        (b.token_estimate, b.estimate_field.as_deref()),
        (Some(1200), Some("max_tokens"))
    );
}

#[test]
fn bad_limit_pools_are_refused_naming_the_field() {
    for (text, wanted) in [
        (
            "[limit.p]\nrequests = \"10/week\"",
            "nightshift.toml:2: limit.p.requests: invalid rate \"10/week\"",
        ),
        (
            "[limit.p]\nrequests = \"0/min\"",
            "limit.p.requests: invalid rate \"0/min\"",
        ),
        (
            "[limit.p]\nrequests = [\"1/min\", \"2/min\"]",
            "limit.p.requests[1]: two rates of the same unit",
        ),
        (
            "[limit.p]\nrequests = []",
            "limit.p.requests: must list at least one rate",
        ),
        (
            "[limit.p]\ntokens = 5",
            "limit.p.tokens: expected a rate like \"3000/min\" or an array of them, found integer 5",
        ),
        (
            "[limit.p]\nconcurrency = 0",
            "limit.p.concurrency: must be between 1 and 100000, found 0",
        ),
        (
            "[limit.p]\ntokes = \"1/s\"",
            "unknown field \"tokes\" in [limit.p], did you mean \"tokens\"?",
        ),
        (
            "[limit.p]\n",
            "limit.p: a pool needs at least one of requests",
        ),
        (
            "limit = 3",
            "limit: expected tables like [limit.NAME], found integer 3",
        ),
        (
            "[batch.a]\nestimate_field = \"n\"",
            "batch.a.estimate_field: estimate_field needs a limit",
        ),
        (
            "[batch.a]\nlimit = \"p\"",
            "batch.a.limit: no [limit.p] table for \"p\": the file defines none",
        ),
        (
            "[limit.p]\nrequests = \"1/s\"\n[batch.a]\nlimit = \"p\"\ntoken_estimate = -1",
            "batch.a.token_estimate: must be between 0 and 100000000, found -1",
        ),
        // A call reserving more than a token rate's whole window: it
        // waited for an empty bucket each time, in silence, and a provider
        // refuses such a call. Named at its own line.
        (
            "[limit.p]\ntokens = \"1000/min\"\n[batch.\"記事\"]\nlimit = \"p\"\ntoken_estimate = 5000",
            "nightshift.toml:5: batch.\"記事\".token_estimate: 5000 tokens a call is more than \
             pool \"p\" allows in a whole window (1000 tokens/min): no call could ever fit",
        ),
        (
            "[limit.p]\ninput_tokens = \"100/h\"\n[batch.a]\ntoken_estimate = 101\nlimit = \"p\"",
            "nightshift.toml:4: batch.a.token_estimate: 101 tokens a call is more than pool \"p\" \
             allows in a whole window (100 input_tokens/h)",
        ),
    ] {
        let err = error(text);
        assert!(err.contains(wanted), "{text}: {err}");
    }
}

#[test]
fn budgets_are_read_per_batch_and_per_pool_and_bad_ones_name_key_and_line() {
    let config = parse(
        "[limit.openai]\nbudget = \"50/day\"\n\n[batch.a]\nlimit = \"openai\"\nbudget = \"0.30/3s\"\n",
    )
    .unwrap();
    let a = config.batch("a").unwrap();
    let budget = a.budget.unwrap();
    assert_eq!((budget.amount, budget.period.as_secs()), (0.3, 3));
    let pool = a.pool.as_ref().and_then(|p| p.budget).unwrap();
    assert_eq!((pool.amount, pool.period.as_secs()), (50.0, 86_400));
    assert_eq!(
        error("[batch.a]\n\nbudget = \"20/week\""),
        r#"nightshift.toml:3: batch.a.budget: invalid budget "20/week": expected AMOUNT/PERIOD with a positive amount and a period of s, min, h or day (optionally a whole number of them), e.g. 20.0/day, 5/h, 0.30/3s"#
    );
    for bad in ["\"-1/day\"", "\"0/day\"", "\"20\"", "20.0", "[\"1/day\"]"] {
        let err = parse(&format!("[limit.p]\nrequests = \"1/s\"\nbudget = {bad}")).unwrap_err();
        assert_eq!(
            (err.line(), err.field()),
            (Some(3), Some("limit.p.budget")),
            "{bad}"
        );
    }
    // A pool may have a budget and nothing else.
    assert!(parse("[limit.p]\nbudget = \"1/h\"\n").is_ok());
}
