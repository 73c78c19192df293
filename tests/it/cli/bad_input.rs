//! Bad input: every case gets a clear error naming what and where, the
//! documented exit code (2 bad input, 3 store), and changes nothing.

use crate::support as common;

use common::{Env, Ran, fingerprint};

/// Runs `args`, asserting the exit code, that stderr names every one of
/// `names`, and that the store is byte-identical afterwards. Returns the
/// run for further checks.
#[track_caller]
fn refused(env: &Env, args: &[&str], code: i32, names: &[&str]) -> Ran {
    let before = fingerprint(&env.db);
    let ran = env.run(args);
    ran.code(code);
    assert!(
        ran.stderr.starts_with("nightshift: error: ") || ran.stderr.starts_with("error: "),
        "{ran:?}"
    );
    assert!(!ran.stderr.contains("panicked"), "{ran:?}");
    for name in names {
        assert!(ran.stderr.contains(name), "{name:?} not named: {ran:?}");
    }
    if args.iter().any(|a| *a == "--json" || *a == "--jsonl") {
        // Asked for JSON, it answers with the error in JSON.
        assert_eq!(ran.json()["error"]["exit"], code, "{ran:?}");
    } else {
        assert_eq!(ran.stdout, "", "{args:?} printed a result");
    }
    assert_eq!(fingerprint(&env.db), before, "{args:?} changed the store");
    ran
}

/// A store with batch `b` (k1..k8, some failed) and a file of good lines.
fn store() -> Env {
    let env = Env::new();
    env.failing_batch("b");
    env
}

#[test]
fn malformed_json_names_the_line() {
    let env = store();
    let file = env.write("in.jsonl", "{\"key\":\"x1\"}\n{\"key\": \"x2\"\n");
    let ran = refused(
        &env,
        &["add", "b", "in.jsonl"],
        2,
        &["in.jsonl", "rejected, nothing imported"],
    );
    assert!(
        ran.stderr
            .contains("line 2: malformed JSON: EOF while parsing an object at column 12"),
        "{ran:?}"
    );
    drop(file);
    // The column counts characters: 壊れた is three, not nine bytes.
    env.write("ja.jsonl", "{\"key\":\"x2\",\"title\":\"壊れた\n");
    let ran = refused(&env, &["add", "b", "ja.jsonl"], 2, &["ja.jsonl"]);
    assert!(
        ran.stderr
            .contains("line 1: malformed JSON: EOF while parsing a string at column 24"),
        "{ran:?}"
    );
}

#[test]
fn a_line_that_is_not_an_object_is_refused() {
    let env = store();
    env.write("in.jsonl", "[1,2]\n\"text\"\n");
    let ran = refused(
        &env,
        &["add", "b", "in.jsonl"],
        2,
        &["line 1: not a JSON object", "line 2: not a JSON object"],
    );
    assert!(ran.stderr.contains("2 bad lines"), "{ran:?}");
}

#[test]
fn invalid_utf8_names_the_line() {
    let env = store();
    std::fs::write(
        env.path("in.jsonl"),
        b"{\"key\":\"x1\"}\n{\"key\":\"\xff\xfe\"}\n",
    )
    .unwrap();
    refused(
        &env,
        &["add", "b", "in.jsonl"],
        2,
        &["in.jsonl", "line 2: not valid UTF-8"],
    );
    // Saved as Shift_JIS (Excel's CSV, Notepad's "ANSI" on a Japanese
    // Windows): where each line stops being UTF-8, and how to mend it.
    let mut sjis = b"{\"key\":\"".to_vec();
    sjis.extend_from_slice(&[0x8b, 0x4c, 0x8e, 0x96]); // 記事
    sjis.extend_from_slice(b"1\"}\n");
    std::fs::write(env.path("sjis.jsonl"), &sjis).unwrap();
    refused(
        &env,
        &["add", "b", "sjis.jsonl"],
        2,
        &[
            "sjis.jsonl",
            "line 1: not valid UTF-8 (the byte 0x8B at column 9): JSON lines are UTF-8; \
             save it as UTF-8 (from Shift_JIS: iconv -f SHIFT_JIS -t UTF-8)",
        ],
    );
}

/// Only the first line may carry a byte-order mark (it is skipped there);
/// one further down (files joined with `cat`) is named, not "malformed".
#[test]
fn a_byte_order_mark_on_a_later_line_is_named() {
    let env = store();
    env.write(
        "joined.jsonl",
        "\u{feff}{\"key\":\"x1\"}\n\u{feff}{\"key\":\"x2\"}\n",
    );
    let ran = refused(
        &env,
        &["add", "b", "joined.jsonl"],
        2,
        &[
            "1 bad line",
            "line 2: starts with a byte-order mark (U+FEFF): only the first line",
        ],
    );
    assert!(!ran.stderr.contains("malformed"), "{ran:?}");
}

/// A batch name starting with '-' would be read as an option (and the
/// dashboard runs `nightshift run NAME`): refused by every command that
/// takes a batch, however it is passed, changing nothing.
#[test]
fn a_batch_name_like_an_option_is_refused_everywhere() {
    let env = store();
    env.write("in.jsonl", "{\"key\":\"x1\"}\n");
    let reason = "a batch name must not start with '-' (it would be read as an option)";
    for name in ["-x", "--config=FILE"] {
        for args in [
            vec!["add", "--", name, "in.jsonl"],
            vec!["status", "--", name],
            vec!["items", "--", name],
            vec!["show", "--", name, "k1"],
            vec!["requeue", "--all-failed", "--", name],
            vec!["skip", "--reason", "r", "--", name, "k1"],
            vec!["pause", "--", name],
            vec!["unpause", "--", name],
            vec!["dlq", "--", name],
            vec!["log", "--", name],
            vec!["schedule", "--", name],
        ] {
            let ran = refused(&env, &args, 2, &[reason]);
            assert!(
                ran.stderr.contains(&format!("'{name}'")),
                "{args:?}: {ran:?}"
            );
        }
        let flag = format!("--batch={name}");
        for args in [vec!["daemon", flag.as_str()], vec!["watch", flag.as_str()]] {
            refused(&env, &args, 2, &[reason]);
        }
    }
    // Without `--` clap reads it as an option: refused too, naming it.
    refused(&env, &["run", "-x"], 2, &["'-x'"]);
    // The other parts of the rule, in the same words as the config's.
    refused(
        &env,
        &["status", "--", " b"],
        2,
        &["must not start or end with a space"],
    );
    refused(
        &env,
        &["status", "--", "b\u{1b}[2J"],
        2,
        &["control or bidi characters: \"b\\x1b[2J\""],
    );
}

#[test]
fn a_missing_file_is_named() {
    let env = store();
    let ran = refused(
        &env,
        &["add", "b", "nope.jsonl"],
        2,
        &["cannot read nope.jsonl"],
    );
    ran.error_line();
}

#[test]
fn a_missing_key_field_names_line_and_field() {
    let env = store();
    env.write(
        "in.jsonl",
        "{\"site\":\"a\",\"slug\":\"x\"}\n{\"site\":\"a\"}\n{\"slug\":\"y\",\"site\":null}\n\
         {\"site\":\"\",\"slug\":\"\"}\n{\"site\":\" \",\"slug\":\"　\"}\n{\"site\":\"\",\"slug\":\"z\"}\n",
    );
    // Every key field empty: every such item would share one key, the
    // second "already present" and never run.
    let ran = refused(
        &env,
        &["add", "n", "in.jsonl", "--key-fields", "site,slug"],
        2,
        &[
            "line 2: missing key field \"slug\"",
            "line 3: key field \"site\" must be",
            "line 4: every key field is empty or blank (site, slug)",
            "line 5: every key field is empty or blank (site, slug)",
        ],
    );
    assert!(ran.stderr.contains("4 bad lines"), "{ran:?}");
    assert!(
        !ran.stderr.contains("line 6"),
        "one field given is a key: {ran:?}"
    );
    env.write("nokey.jsonl", "{\"id\":1}\n");
    refused(
        &env,
        &["add", "n", "nokey.jsonl"],
        2,
        &["line 1: no \"key\" field"],
    );
}

#[test]
fn a_duplicate_key_in_one_file_names_both_lines() {
    let env = store();
    env.write(
        "in.jsonl",
        "{\"key\":\"x1\"}\n{\"key\":\"x2\"}\n{\"key\":\"x1\",\"again\":true}\n",
    );
    refused(
        &env,
        &["add", "b", "in.jsonl"],
        2,
        &[
            "line 3: duplicate key \"x1\" (first on line 1)",
            "nothing imported",
        ],
    );
}

/// A name twice in one object (`{"key":"a","key":"b"}`) gave the item
/// the last one's key, silently, where a person reads the first; a key
/// field or a payload field twice likewise. Refused at any depth, naming
/// the file, line and name; the escaped spelling of a name is that name.
#[test]
fn a_name_twice_in_one_object_names_the_line_and_the_name() {
    let env = store();
    env.write(
        "twice.jsonl",
        "{\"key\":\"x1\"}\n\
         {\"key\":\"a\",\"key\":\"b\"}\n\
         {\"k\\u0065y\":\"c\",\"key\":\"d\"}\n\
         {\"key\":\"x2\",\"記事\":{\"題\":1,\"題\":2}}\n",
    );
    let ran = refused(
        &env,
        &["add", "b", "twice.jsonl"],
        2,
        &[
            "twice.jsonl: rejected, nothing imported: 3 bad lines",
            "line 2: the name \"key\" is given twice in one object",
            "line 3: the name \"key\" is given twice",
            "line 4: the name \"題\" is given twice in one object at column 27",
            "so give each name once",
        ],
    );
    assert!(!ran.stderr.contains("line 1"), "{ran:?}");
    env.write(
        "fields.jsonl",
        "{\"site\":\"x\",\"slug\":\"a\",\"slug\":\"b\"}\n",
    );
    refused(
        &env,
        // A batch of its own: "b" holds items keyed by their "key" field,
        // and other key fields would be refused before the input is read.
        &["add", "c", "fields.jsonl", "--key-fields", "site,slug"],
        2,
        &["fields.jsonl", "line 1: the name \"slug\" is given twice"],
    );
}

/// A file whose lines end in a bare CR (old Mac) is one line to a reader
/// of newlines: it said "trailing characters at column 15". CRLF is read.
#[test]
fn lines_ending_in_cr_only_are_named_as_such() {
    let env = store();
    env.write("mac.jsonl", "{\"key\":\"x1\"}\r{\"key\":\"x2\"}\r");
    let ran = refused(
        &env,
        &["add", "b", "mac.jsonl"],
        2,
        &[
            "mac.jsonl",
            "line 1: lines end in CR only (\\r)",
            "tr '\\r' '\\n'",
        ],
    );
    assert!(!ran.stderr.contains("trailing characters"), "{ran:?}");
    env.write("dos.jsonl", "{\"key\":\"x1\"}\r\n{\"key\":\"x2\"}\r\n");
    let ran = env.run(&["add", "b", "dos.jsonl"]);
    assert_eq!(
        ran.code(0).stdout.trim(),
        "b: added 2, already present 0",
        "{ran:?}"
    );
}

/// As the config refuses them: an empty name, or a name twice (`a,a`
/// keyed `1:1`, and the same fields set in the config later, where they
/// are refused, would have keyed every item anew).
#[test]
fn key_fields_with_an_empty_name_or_one_twice_are_refused() {
    let env = store();
    env.write("in.jsonl", "{\"a\":1,\"b\":2}\n");
    let ran = refused(
        &env,
        &["add", "b", "in.jsonl", "--key-fields", "a,,b"],
        2,
        &["--key-fields", "must not be empty"],
    );
    ran.error_line();
    let ran = refused(
        &env,
        &["add", "b", "in.jsonl", "--key-fields", "a,b,a"],
        2,
        &["--key-fields: field \"a\" is listed twice"],
    );
    ran.error_line();
}

/// `--key-fields` other than the config's `key_fields` for the batch keyed
/// every item anew: the items already added (and done) were "added" again
/// and would run, and be paid for, twice. The same list is harmless.
#[test]
fn key_fields_other_than_the_config_s_are_refused_naming_its_line() {
    let env = Env::new();
    env.config("[batch.\"記事\"]\nkey_fields = [\"site\", \"slug\"]\n");
    env.write(
        "in.jsonl",
        "{\"site\":\"ブログ\",\"slug\":\"こんにちは\",\"title\":\"挨拶\"}\n",
    );
    env.run(&["add", "記事", "in.jsonl"]).code(0);
    for other in ["slug,site", "site", "site,slug,title"] {
        let ran = refused(
            &env,
            &["add", "記事", "in.jsonl", "--key-fields", other],
            2,
            &[
                &format!("--key-fields {other}"),
                "nightshift.toml:2: batch.\"記事\".key_fields",
                "[\"site\", \"slug\"]",
                "nothing was added",
            ],
        );
        ran.error_line();
    }
    let ran = env.run(&["add", "記事", "in.jsonl", "--key-fields", "site,slug"]);
    ran.code(0);
    assert_eq!(
        ran.stdout.trim(),
        "記事: added 0, already present 1",
        "{ran:?}"
    );
}

#[test]
fn an_unknown_batch_is_named_with_the_known_ones() {
    let env = store();
    for args in [
        vec!["status", "nob"],
        vec!["items", "nob"],
        vec!["show", "nob", "k1"],
        vec!["requeue", "nob", "--all-failed"],
        vec!["requeue", "nob", "k1", "--dry-run"],
        vec!["dlq", "nob"],
        vec!["dlq", "nob", "--jsonl"],
        vec!["log", "nob"],
        vec!["skip", "nob", "k1", "--reason", "r"],
        vec!["pause", "nob"],
        vec!["unpause", "nob"],
        vec!["run", "nob", "--", "/bin/true"],
    ] {
        let ran = refused(&env, &args, 2, &["unknown batch \"nob\"", "(known: b)"]);
        ran.error_line();
    }
}

#[test]
fn an_unknown_key_is_named_with_its_batch() {
    let env = store();
    for args in [vec!["show", "b", "k99"], vec!["show", "b", "k99", "--json"]] {
        let ran = refused(&env, &args, 2, &["no item \"k99\" in batch \"b\""]);
        ran.error_line();
    }
}

#[test]
fn a_bad_duration_names_the_value_and_the_flag() {
    let env = store();
    for args in [
        vec!["dlq", "b", "--since", "10x"],
        vec!["dlq", "b", "--since", "0s"],
        vec!["prune", "--older-than", "soon"],
        // One rule for every duration flag: none is refused (it pruned
        // every done item, failed ones too with --include-failed).
        vec!["prune", "--include-failed", "--older-than", "0s"],
        vec!["prune", "--older-than", "0d"],
        vec!["watch", "--interval", "0s"],
        vec!["run", "b", "--max-duration=5 minutes", "--", "/bin/true"],
        vec!["run", "b", "--max-duration=0s", "--", "/bin/true"],
    ] {
        let ran = refused(&env, &args, 2, &["invalid"]);
        let first = ran.stderr.lines().next().unwrap();
        let value = args
            .iter()
            .find_map(|a| a.split_once("=").map(|(_, v)| v))
            .unwrap_or(args[args.len() - 1]);
        assert!(first.contains(value), "names the value: {ran:?}");
        assert!(first.contains("--"), "names the flag: {first}");
    }
}

/// A negative number or duration given to a flag is its bad value, named
/// with the flag: it was taken for an unknown flag ("unexpected argument
/// '-1' found; tip: use -- -1"), which names neither.
#[test]
fn a_negative_value_is_named_with_its_flag() {
    let env = store();
    for (args, flag) in [
        (vec!["items", "b", "--limit", "-1"], "--limit"),
        (vec!["log", "-n", "-1"], "--limit"),
        (vec!["dlq", "b", "--since", "-1h"], "--since"),
        (vec!["prune", "--older-than", "-5m"], "--older-than"),
        (
            vec!["run", "b", "-j", "-2", "--", "/bin/true"],
            "--concurrency",
        ),
        (
            vec!["run", "b", "--max-duration", "-1m", "--", "/bin/true"],
            "--max-duration",
        ),
    ] {
        let value = args
            .iter()
            .find(|a| a.starts_with('-') && a[1..].starts_with(|c: char| c.is_ascii_digit()))
            .unwrap();
        let ran = refused(&env, &args, 2, &["invalid value", flag]);
        let first = ran.stderr.lines().next().unwrap();
        assert!(
            first.contains(&format!("'{value}'")),
            "names the value: {first}"
        );
        assert!(!ran.stderr.contains("unexpected argument"), "{ran:?}");
    }
}

/// Every numeric flag says, in its own words, what it takes: `-j -2` and
/// `log -n -1` said Rust's "invalid digit found in string", a priority
/// past an i32 "number too large to fit in target type".
#[test]
fn a_number_out_of_range_names_the_flag_and_the_range() {
    let env = store();
    for (args, flag, range) in [
        (
            vec!["run", "b", "-j", "-2", "--", "/bin/true"],
            "--concurrency",
            "a whole number from 1 to 1024",
        ),
        (
            vec!["run", "b", "-j", "0", "--", "/bin/true"],
            "--concurrency",
            "a whole number from 1 to 1024",
        ),
        (
            vec!["run", "b", "-j", "5000", "--", "/bin/true"],
            "--concurrency",
            "a whole number from 1 to 1024",
        ),
        (
            vec!["run", "b", "-j", "two", "--", "/bin/true"],
            "--concurrency",
            "\"two\" is not a whole number",
        ),
        (
            vec!["log", "-n", "-1"],
            "--limit",
            "a whole number of at least 0 (0: every event)",
        ),
        (
            vec!["items", "b", "--limit", "-1"],
            "--limit",
            "a whole number of at least 1",
        ),
        (
            vec!["run", "b", "--limit", "1.5", "--", "/bin/true"],
            "--limit",
            "a whole number of at least 1",
        ),
        (
            vec!["add", "b", "-", "--priority", "3000000000"],
            "--priority",
            "a whole number from -2147483648 to 2147483647",
        ),
        (
            vec!["schedule", "b", "-n", "-1"],
            "--next",
            "a whole number from 1 to 1000",
        ),
        (
            vec!["schedule", "b", "-n", "1001"],
            "--next",
            "a whole number from 1 to 1000",
        ),
    ] {
        let ran = refused(&env, &args, 2, &[flag, range]);
        assert!(!ran.stderr.contains("invalid digit"), "{ran:?}");
        assert!(!ran.stderr.contains("target type"), "{ran:?}");
    }
}

/// A limit of none would do nothing and say so as if nothing were there
/// ("no items match", "would run 0 items"): it is refused instead.
#[test]
fn a_limit_of_none_is_refused_not_obeyed() {
    let env = store();
    for args in [
        vec!["items", "b", "--limit", "0"],
        vec!["run", "b", "--limit", "0", "--", "/bin/true"],
        vec!["run", "b", "--limit=0", "--dry-run", "--", "/bin/true"],
        vec!["items", "b", "--limit", "many"],
    ] {
        let ran = refused(&env, &args, 2, &["--limit"]);
        let first = ran.stderr.lines().next().unwrap();
        assert!(
            first.contains("leave --limit out") || first.contains("\"many\" is not a whole number"),
            "{ran:?}"
        );
    }
    env.run(&["items", "b", "--limit", "1"]).code(0);
}

#[test]
fn a_bad_config_names_file_line_and_field() {
    let env = store();
    let config = env.path("nightshift.toml");
    let file = config.to_str().unwrap();

    env.config("[batch.b]\nretries = 0\nfrobnicate = 3\n");
    let ran = refused(
        &env,
        &["status"],
        2,
        &[
            &format!("{file}:3:"),
            "unknown field \"frobnicate\"",
            "[batch.b]",
        ],
    );
    ran.error_line();

    env.config("[batch.b]\nretries = 0\n\nconcurrency = \"lots\"\n");
    let ran = refused(
        &env,
        &["status"],
        2,
        &[&format!("{file}:4:"), "batch.b.concurrency"],
    );
    ran.error_line();

    env.config("[batch.b]\nitem_timeout = \"10x\"\n");
    let ran = refused(
        &env,
        &["add", "b", "-"],
        2,
        &[&format!("{file}:2:"), "batch.b.item_timeout", "10x"],
    );
    ran.error_line();

    // A budget: per batch and per pool, the key, the line and the value named.
    env.config("[batch.b]\nretries = 0\nbudget = \"20/week\"\n");
    let ran = refused(
        &env,
        &["run", "b", "--dry-run"],
        2,
        &[
            &format!("{file}:3:"),
            "batch.b.budget",
            "\"20/week\"",
            "AMOUNT/PERIOD",
        ],
    );
    ran.error_line();
    env.config("[limit.openai]\nrequests = \"10/s\"\nbudget = \"-5/day\"\n");
    let ran = refused(
        &env,
        &["status"],
        2,
        &[&format!("{file}:3:"), "limit.openai.budget", "\"-5/day\""],
    );
    ran.error_line();
}

#[cfg(unix)]
#[test]
fn init_in_a_directory_it_cannot_write() {
    use std::os::unix::fs::PermissionsExt;
    // Where the parent is a file, nobody can create the store (not even root).
    let env = Env::bare();
    env.write("file", "");
    let db = env.path("file").join("nightshift.db");
    let ran = common::ran(
        env.cmd()
            .env("NIGHTSHIFT_DB", &db)
            .arg("init")
            .output()
            .unwrap(),
    );
    ran.code(3);
    let line = ran.error_line();
    assert!(
        line.contains(&format!("cannot create the store {}", db.display())),
        "{line}"
    );

    // A read-only directory stops anyone but root.
    if !nix::unistd::geteuid().is_root() {
        let env = Env::bare();
        std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
        let ran = env.run(&["init"]);
        std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        ran.code(3);
        let line = ran.error_line();
        let expected = format!("cannot create the store {}", env.db.display());
        assert!(line.contains(&expected), "{line}");
        assert!(!env.db.exists());
        assert!(!env.path("nightshift.toml").exists());
    }
}

#[test]
fn a_corrupt_database_file_is_refused_untouched() {
    let env = Env::bare();
    let bytes: Vec<u8> = (0..16_384u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&env.db, &bytes).unwrap();
    env.write("in.jsonl", "{\"key\":\"x\"}\n");
    for args in [
        vec!["status"],
        vec!["add", "b", "in.jsonl"],
        vec!["pause", "b"],
        vec!["init"],
    ] {
        let ran = refused(
            &env,
            &args,
            3,
            &[env.db.to_str().unwrap(), "not a valid SQLite database"],
        );
        ran.error_line();
    }
    assert_eq!(std::fs::read(&env.db).unwrap(), bytes);
}

#[test]
fn another_programs_sqlite_file_is_refused_untouched() {
    let env = Env::bare();
    {
        let conn = rusqlite::Connection::open(&env.db).unwrap();
        conn.execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
            .unwrap();
    }
    env.write("in.jsonl", "{\"key\":\"x\"}\n");
    for args in [
        vec!["status"],
        vec!["add", "b", "in.jsonl"],
        vec!["log"],
        vec!["init"],
    ] {
        let ran = refused(
            &env,
            &args,
            3,
            &[
                env.db.to_str().unwrap(),
                "not a nightshift store",
                "left untouched",
            ],
        );
        ran.error_line();
        // `init` refuses it too: the words do not send the user there.
        assert!(
            !ran.stderr.contains("run `nightshift init`"),
            "{args:?}: {}",
            ran.stderr
        );
    }
}

#[test]
fn a_missing_store_says_to_init_and_creates_nothing() {
    let env = Env::bare();
    env.write("in.jsonl", "{\"key\":\"x\"}\n");
    for args in [
        vec!["status"],
        vec!["add", "b", "in.jsonl"],
        vec!["requeue", "b", "--all-failed"],
    ] {
        let ran = refused(
            &env,
            &args,
            3,
            &[env.db.to_str().unwrap(), "nightshift init"],
        );
        ran.error_line();
        assert!(!env.db.exists(), "{args:?} created the store");
    }
}

/// A blank pause reason is refused, as skip's is, and nothing is paused:
/// it paused the batch with the reason "", shown as "paused ()" by pause
/// and as an empty reason by status and the dashboard.
#[test]
fn pause_with_a_blank_reason_is_refused() {
    let env = store();
    for blank in ["", "  "] {
        refused(&env, &["pause", "b", "--reason", blank], 2, &["--reason"]).error_line();
    }
    assert_eq!(env.status()["batches"][0]["paused"], false);
}

/// A blank cancel reason is refused, as pause's and skip's are, and
/// nothing is cancelled: it cancelled the item with the reason "", shown
/// as "cancelled by root@vm: " by show and the log.
#[test]
fn cancel_with_a_blank_reason_is_refused() {
    let env = Env::new();
    env.add_items("b", 1);
    for blank in ["", "   "] {
        refused(
            &env,
            &["cancel", "b", "k1", "--reason", blank],
            2,
            &["--reason"],
        )
        .error_line();
    }
}

/// A blank error class is refused, naming `--class`: no item has one (a
/// worker's blank class takes the default), so requeue said "requeued 0
/// items", items "No items match" and dlq "no dead letters of class ",
/// each with exit 0.
#[test]
fn a_blank_error_class_is_refused() {
    let env = store();
    for blank in ["", " "] {
        for args in [
            vec!["requeue", "b", "--class", blank],
            vec!["requeue", "b", "k1", "--class", blank, "--dry-run"],
            vec!["items", "b", "--class", blank],
            vec!["dlq", "b", "--class", blank],
            vec!["dlq", "b", "--jsonl", "--class", blank],
        ] {
            refused(&env, &args, 2, &["--class"]).error_line();
        }
    }
}

#[test]
fn requeue_without_a_selector_says_how_to_choose() {
    let env = store();
    let ran = refused(
        &env,
        &["requeue", "b"],
        2,
        // Each way its own item of the list (the comma before --outcome
        // was missing: "--tier retry|manual --outcome ...", read as one).
        &[
            "KEY...",
            "--all-failed",
            "--class ERROR_CLASS",
            "--tier retry|manual, --outcome",
        ],
    );
    ran.error_line();
}

#[test]
fn requeue_of_a_key_that_is_not_failed_moves_nothing() {
    let env = store();
    // k1 is failed, k5 is done: all or nothing.
    let ran = refused(
        &env,
        &["requeue", "b", "k1", "k5"],
        2,
        &["k5 (done)", "batch \"b\""],
    );
    ran.error_line();
    let ran = refused(
        &env,
        &["requeue", "b", "k1", "k99"],
        2,
        &["no item \"k99\" in batch \"b\""],
    );
    ran.error_line();
    assert_eq!(env.status()["batches"][0]["failed"], 4);
}

#[test]
fn skip_of_an_unknown_key_skips_nothing() {
    let env = store();
    let ran = refused(
        &env,
        &["skip", "b", "k1", "k99", "--reason", "done by hand"],
        2,
        &["no item \"k99\" in batch \"b\""],
    );
    ran.error_line();
    assert_eq!(env.status()["batches"][0]["skipped"], 0);
}

#[test]
fn skip_needs_a_reason() {
    let env = store();
    refused(&env, &["skip", "b", "k1"], 2, &["--reason"]);
    let ran = refused(
        &env,
        &["skip", "b", "k1", "--reason", "  "],
        2,
        &["--reason"],
    );
    ran.error_line();
}

#[test]
fn a_worker_that_does_not_exist_is_named_before_anything_runs() {
    let env = store();
    env.add_items("b", 9);
    let ran = refused(
        &env,
        &["run", "b", "--", "./no-such-worker.sh"],
        2,
        &["\"./no-such-worker.sh\" not found"],
    );
    ran.error_line();
    let ran = refused(
        &env,
        &["run", "b", "--", "no-such-program-on-path"],
        2,
        &["\"no-such-program-on-path\" not found"],
    );
    ran.error_line();
    assert_eq!(env.status()["batches"][0]["pending"], 1);
}

/// A libpq keyword string given where a URL belongs: no file of that name
/// is created, the error says to give a URL, and its password is hidden.
#[test]
fn a_keyword_string_for_the_store_is_refused_with_its_password_hidden() {
    let env = Env::new();
    let db = "host=localhost user=app password=hunter2 dbname=queue";
    for (args, code) in [(&["init"][..], 2), (&["status"][..], 3)] {
        let ran = common::ran(
            env.cmd()
                .env("NIGHTSHIFT_DB", db)
                .args(args)
                .output()
                .unwrap(),
        );
        assert_eq!(ran.code, code, "{args:?}: {ran:?}");
        assert!(
            ran.stderr.contains("given as a URL (postgres://")
                && ran.stderr.contains("password=***"),
            "{args:?}: {}",
            ran.stderr
        );
        assert!(!ran.stderr.contains("hunter2"), "{}", ran.stderr);
    }
    assert!(
        !env.dir.path().join(db).exists(),
        "init created a file named like the keywords"
    );
}

/// A worker that no spawn can start (not executable, a script with no
/// `#!` line) is refused before anything is claimed, by the run and by its
/// dry run, naming the file and the fix: each item would otherwise fail,
/// using an attempt each.
#[test]
fn a_worker_that_cannot_start_is_refused_before_any_item_is_claimed() {
    let env = store();
    let not_executable = env.write("plain.sh", "#!/bin/sh\ncat\n");
    let no_interpreter = env.script("noline.sh", "");
    std::fs::write(&no_interpreter, "cat >/dev/null\necho ok\n").unwrap();
    let cases = [
        (not_executable.display().to_string(), "is not executable"),
        (no_interpreter.display().to_string(), "no `#!` line"),
    ];
    for (worker, why) in cases {
        for dry in [false, true] {
            let mut args = vec!["run", "b"];
            if dry {
                args.push("--dry-run");
            }
            args.extend(["--", worker.as_str()]);
            let ran = refused(&env, &args, 2, &[why, &worker, "worker = [\"sh\""]);
            assert!(!ran.stderr.contains("panicked"), "{ran:?}");
        }
    }
}

/// A script whose `#!` line the kernel cannot follow is refused before
/// anything is claimed, naming the file and what is wrong with the line: a
/// Windows line end (the kernel looks for "/bin/sh\r"), an interpreter
/// that is not there, `env` naming a program not in `PATH`, or `env` given
/// a program and its arguments without `-S` (Linux passes them as one
/// word). Each was spawned: the first two stopped the run saying "No such
/// file or directory" of a file that is there, and the `env` ones failed
/// every item with exit 127, quarantining the whole batch, an attempt
/// each. A line the kernel follows (`env -S sh -e`) is not refused.
#[test]
fn a_worker_whose_interpreter_cannot_start_is_refused_before_any_item_is_claimed() {
    let env = store();
    let script = |name: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = env.write(name, text);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    };
    let cases = [
        (
            script("crlf.sh", "#!/bin/sh\r\ncat >/dev/null\r\necho ok\r\n"),
            vec![
                "`#!` line ends in a carriage return",
                "/bin/sh\\r",
                "sed -i",
            ],
        ),
        (
            script("gone.py", "#!/usr/bin/nightshift-no-python4\nprint(1)\n"),
            vec!["/usr/bin/nightshift-no-python4", "`#!` line", "not found"],
        ),
        (
            script("env.py", "#!/usr/bin/env nightshift-no-python4\nprint(1)\n"),
            vec!["nightshift-no-python4", "not found in PATH"],
        ),
        (
            script("envargs.sh", "#!/usr/bin/env sh -e\necho ok\n"),
            vec!["\"sh -e\"", "env -S"],
        ),
    ];
    for (worker, names) in &cases {
        for dry in [false, true] {
            let mut args = vec!["run", "b"];
            if dry {
                args.push("--dry-run");
            }
            args.extend(["--", worker.as_str()]);
            let mut want = names.clone();
            want.push(worker.as_str());
            refused(&env, &args, 2, &want);
        }
    }
    // A line the kernel follows is not refused.
    let fine = script(
        "fine.sh",
        "#!/usr/bin/env -S sh -e\ncat >/dev/null\necho ok\n",
    );
    let ran = env.run(&["run", "b", "--dry-run", "--", &fine]);
    ran.code(0);
}

/// A directory given to `add` (as its file, or on stdin) is bad input,
/// exit 2 naming it, where it was an internal error (exit 4).
#[test]
fn add_of_a_directory_is_bad_input() {
    let env = store();
    let dir = env.dir.path().display().to_string();
    refused(&env, &["add", "b", &dir], 2, &["is a directory", &dir]);
    let before = fingerprint(&env.db);
    let ran = common::ran(
        env.std_cmd()
            .args(["add", "b", "-"])
            .stdin(std::fs::File::open(env.dir.path()).unwrap())
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 2, "{ran:?}");
    assert!(
        ran.stderr.contains("cannot read stdin") && ran.stderr.contains("nothing was added"),
        "{ran:?}"
    );
    assert_eq!(fingerprint(&env.db), before);
}

/// A duration past 100 years in the config is refused where it is
/// written (file, line, key), by every command: `lock_ttl` of one was
/// taken, and every run then failed with a database error (exit 3).
#[test]
fn a_duration_too_large_is_refused_in_the_config() {
    let env = store();
    for value in ["\"106751991167d\"", "99999999999"] {
        env.config(&format!("[batch.b]\nretries = 0\nlock_ttl = {value}\n"));
        for args in [&["status"][..], &["run", "b", "--", "cat"][..]] {
            refused(
                &env,
                args,
                2,
                &["nightshift.toml:3", "batch.b.lock_ttl", "at most 100 years"],
            );
        }
    }
}

/// `run --key` of a batch the config names but that has no items yet says
/// the key is not in it, as it does for a batch with items, run and dry
/// run alike (the run said "unknown batch" and listed the batch as known).
#[test]
fn run_key_of_a_batch_with_no_items_names_the_key() {
    let env = Env::new();
    env.config("[batch.fresh]\nworker = [\"cat\"]\n");
    for args in [
        &["run", "fresh", "--key", "a1"][..],
        &["run", "fresh", "--key", "a1", "--dry-run"][..],
    ] {
        let ran = env.run(args);
        assert_eq!(ran.code, 2, "{args:?}: {ran:?}");
        assert!(
            ran.stderr.contains("no item \"a1\" in batch \"fresh\""),
            "{args:?}: {ran:?}"
        );
        assert_eq!(ran.stdout, "", "{args:?}");
    }
}

/// A UTF-16 file (Excel's "Unicode text") is named as such, where every
/// line was refused as "not valid UTF-8" with no word of why.
#[test]
fn a_utf16_input_is_named() {
    let env = store();
    let mut bytes = vec![0xFF, 0xFE];
    for unit in "{\"key\":\"k1\"}\n".encode_utf16() {
        bytes.extend_from_slice(&unit.to_le_bytes());
    }
    let file = env.dir.path().join("excel.txt");
    std::fs::write(&file, bytes).unwrap();
    let file = file.display().to_string();
    refused(
        &env,
        &["add", "b", &file],
        2,
        &[
            "UTF-16 (little-endian)",
            "save it as UTF-8",
            "nothing was added",
        ],
    );
}

/// `NIGHTSHIFT_DB` or `NIGHTSHIFT_CONFIG` set but empty is refused by its
/// own name (clap blamed `--db`, which nobody typed), not taken as unset
/// (which would open, or `init`, `./nightshift.db`); a flag given beside
/// it wins, and the commands that use no store never look.
#[test]
fn an_empty_environment_variable_is_named() {
    let env = store();
    let before = fingerprint(&env.db);
    for (var, long) in [("NIGHTSHIFT_DB", "--db"), ("NIGHTSHIFT_CONFIG", "--config")] {
        for args in [&["status"][..], &["init"], &["add", "b", "-"], &[]] {
            let ran = common::ran(env.cmd().env(var, "").args(args).output().unwrap());
            ran.code(2);
            let line = ran.error_line();
            assert!(
                line.starts_with("nightshift: error: ")
                    && line.contains(&format!("{var} is set but empty"))
                    && line.contains(long),
                "{var} {args:?}: {ran:?}"
            );
            assert_eq!(ran.stdout, "", "{var} {args:?}");
        }
    }
    assert_eq!(fingerprint(&env.db), before);
    let db = env.db.display().to_string();
    let ran = common::ran(
        env.cmd()
            .env("NIGHTSHIFT_DB", "")
            .args(["status", "--json", "--db", &db])
            .output()
            .unwrap(),
    );
    ran.code(0);
    for args in [&["man"][..], &["completions", "bash"]] {
        let ran = common::ran(
            env.cmd()
                .env("NIGHTSHIFT_DB", "")
                .args(args)
                .output()
                .unwrap(),
        );
        ran.code(0);
    }
}
