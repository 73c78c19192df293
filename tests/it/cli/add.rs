//! `init` and `add`: idempotent adds, whole-file rejection, keys from
//! natural-key fields, refusal of a newer schema.

use crate::support::Env;

fn lines(n: std::ops::RangeInclusive<usize>) -> String {
    n.map(|i| format!("{{\"key\":\"k{i}\",\"n\":{i}}}\n"))
        .collect()
}

#[test]
fn init_creates_store_and_config_and_never_overwrites() {
    let env = Env::bare();
    let ran = env.run(&["init"]);
    ran.code(0);
    assert!(ran.stdout.contains("created store"), "{ran:?}");
    assert!(env.db.is_file());
    let config = std::fs::read_to_string(env.path("nightshift.toml")).unwrap();
    assert!(config.contains("[batch."), "an example batch: {config}");

    env.config("# mine\n");
    let before = env.fingerprint();
    let ran = env.run(&["init"]);
    ran.code(0);
    assert!(ran.stdout.contains("already exists"), "{ran:?}");
    assert_eq!(env.fingerprint(), before, "the store is left as it is");
    assert_eq!(
        std::fs::read_to_string(env.path("nightshift.toml")).unwrap(),
        "# mine\n"
    );
}

#[cfg(unix)]
#[test]
fn store_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let mode = std::fs::metadata(&env.db).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn adding_the_same_file_twice_changes_nothing_the_second_time() {
    let env = Env::new();
    let file = env.write("items.jsonl", &lines(1..=5));
    let ran = env.run(&["add", "b", file.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 5, already present 0");

    let before = env.fingerprint();
    let ran = env.run(&["add", "b", file.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 0, already present 5");
    assert_eq!(env.fingerprint(), before, "not a byte changed");

    // A file with old and new items adds only the new ones.
    let more = env.write("more.jsonl", &lines(4..=7));
    let ran = env.run(&["add", "b", more.to_str().unwrap(), "--json"]);
    ran.code(0);
    let report = ran.json();
    assert_eq!(report["added"], 2);
    assert_eq!(report["present"], 2);
    assert_eq!(report["new_batch"], false);
    assert_eq!(env.status()["batches"][0]["pending"], 7);
    env.assert_counts_consistent();
}

#[test]
fn an_existing_item_is_left_exactly_as_it_is() {
    let env = Env::new();
    env.failing_batch("b");
    let before = env.run(&["show", "b", "k1", "--json"]).json()["item"].clone();
    // Same key, different payload: still "already present", nothing changes.
    let file = env.write("again.jsonl", "{\"key\":\"k1\",\"n\":999}\n");
    let ran = env.run(&["add", "b", file.to_str().unwrap()]);
    ran.code(0);
    assert!(ran.stdout.contains("added 0, already present 1"), "{ran:?}");
    let after = env.run(&["show", "b", "k1", "--json"]).json()["item"].clone();
    assert_eq!(after, before);
    assert_eq!(after["status"], "failed");
}

#[test]
fn a_file_with_bad_lines_3_and_7_is_rejected_naming_both() {
    let env = Env::new();
    env.add_items("other", 2);
    let mut text = lines(1..=8);
    let mut rows: Vec<String> = text.lines().map(String::from).collect();
    rows[2] = "{\"key\":\"k3\",".into();
    rows[6] = "not json at all".into();
    text = rows.join("\n") + "\n";
    let file = env.write("bad.jsonl", &text);
    let before = env.fingerprint();

    let ran = env.run(&["add", "b", file.to_str().unwrap()]);
    ran.code(2);
    let head = format!(
        "nightshift: error: {}: rejected, nothing imported: 2 bad lines\n",
        file.display()
    );
    assert!(ran.stderr.starts_with(&head), "{ran:?}");
    assert!(ran.stderr.contains("\n  line 3: malformed JSON"), "{ran:?}");
    assert!(ran.stderr.contains("\n  line 7: malformed JSON"), "{ran:?}");
    assert!(
        !ran.stderr.contains("line 1 column"),
        "one line number per problem: {ran:?}"
    );
    assert_eq!(ran.stdout, "");
    assert_eq!(env.fingerprint(), before, "nothing imported");
    let ran = env.run(&["status", "b"]);
    ran.code(2);
}

both_backends! {
    /// A file large enough to be written while it is parsed (on SQLite and
    /// PostgreSQL alike: its first parts are in the store before its last
    /// line is read) is still rejected whole by a bad line or a key given
    /// twice near its end: nothing imported, no batch made, and a batch that
    /// held items keeps exactly those.
    fn a_large_file_with_problems_near_its_end_is_rejected_whole(env) {
        env.add_items("other", 2);
        let mut rows: Vec<String> = lines(1..=60_000).lines().map(String::from).collect();
        rows[39_999] = "{\"key\":\"k7\",\"n\":0}".into();
        rows[59_998] = "not json at all".into();
        let text = rows.join("\n") + "\n";
        assert!(text.len() > 1024 * 1024, "large enough to be fed");
        let file = env.write("big.jsonl", &text);
        let before = unchanged(&env);

        for batch in ["b", "other"] {
            let ran = env.run(&["add", batch, file.to_str().unwrap()]);
            ran.code(2);
            assert!(ran.stderr.contains("rejected, nothing imported: 2 bad lines"), "{ran:?}");
            assert!(
                ran.stderr.contains("\n  line 40000: duplicate key \"k7\" (first on line 7)"),
                "{ran:?}"
            );
            assert!(ran.stderr.contains("\n  line 59999: malformed JSON"), "{ran:?}");
            assert_eq!(unchanged(&env), before, "{batch}: nothing imported");
        }
        env.run(&["status", "b"]).code(2);

        // The same file without them: every item, in input order.
        rows[39_999] = "{\"key\":\"k40000\",\"n\":40000}".into();
        rows[59_998] = "{\"key\":\"k59999\",\"n\":59999}".into();
        let file = env.write("good.jsonl", &(rows.join("\n") + "\n"));
        let ran = env.run(&["add", "b", file.to_str().unwrap()]);
        ran.code(0);
        assert_eq!(ran.stdout, "b: added 60000, already present 0\n");
        let keys = env.strings(
            "SELECT i.key FROM items i JOIN batches b ON b.id = i.batch_id
              WHERE b.name = 'b' ORDER BY i.id",
        );
        assert_eq!(keys.len(), 60_000);
        let in_order = keys.iter().enumerate().all(|(i, k)| *k == format!("k{}", i + 1));
        assert!(in_order, "ids in input order");
        // Into the batch that held two of them: the rest, once.
        let ran = env.run(&["add", "other", file.to_str().unwrap()]);
        assert_eq!(ran.code(0).stdout, "other: added 59998, already present 2\n");
        env.assert_counts_consistent();
    }

    /// The same for an input of a few thousand lines, fed in blocks of
    /// its own size class: rejected whole, then added in input order.
    fn a_mid_sized_file_with_a_key_given_twice_near_its_end_is_rejected_whole(env) {
        let mut rows: Vec<String> = lines(1..=5_000).lines().map(String::from).collect();
        rows[4_990] = "{\"key\":\"k3\",\"n\":0}".into();
        let text = rows.join("\n") + "\n";
        assert!((64 * 1024..1024 * 1024).contains(&text.len()), "{}", text.len());
        let file = env.write("mid.jsonl", &text);
        env.run(&["init"]).code(0);
        let before = unchanged(&env);
        let ran = env.run(&["add", "b", file.to_str().unwrap()]);
        ran.code(2);
        assert!(ran.stderr.contains("rejected, nothing imported: 1 bad line\n  line 4991: duplicate key \"k3\" (first on line 3)"), "{ran:?}");
        assert_eq!(unchanged(&env), before, "nothing imported");

        rows[4_990] = "{\"key\":\"k4991\",\"n\":4991}".into();
        let file = env.write("mid.jsonl", &(rows.join("\n") + "\n"));
        assert_eq!(env.run(&["add", "b", file.to_str().unwrap()]).code(0).stdout, "b: added 5000, already present 0\n");
        let keys = env.strings("SELECT key FROM items ORDER BY id");
        assert!(keys.iter().enumerate().all(|(i, k)| *k == format!("k{}", i + 1)), "ids in input order");
        env.assert_counts_consistent();
    }

    /// `add --json` refused says so on stdout as one JSON object (as `skip`
    /// and `requeue` say their refused keys), where it printed nothing: each
    /// bad line with its number and reason, for a small input and for one
    /// fed to the store while it is parsed; or the one reason the whole
    /// input was refused. Exit 2, the error on stderr, nothing added.
    fn add_json_says_what_it_refused(env) {
        let mid: Vec<String> = lines(1..=5_000).lines().map(String::from).collect();
        let mut bad_mid = mid.clone();
        bad_mid[4_990] = "{\"key\":\"k3\",\"n\":0}".into();
        let small = env.write("small.jsonl", "{\"key\":\"a\"}\nnot json\n{\"key\":\"a\"}\n");
        let mid = env.write("mid.jsonl", &(bad_mid.join("\n") + "\n"));
        let before = unchanged(&env);
        for (file, dry_run, want) in [
            (&small, false, vec![(2, "malformed JSON"), (3, "duplicate key \"a\" (first on line 1)")]),
            (&small, true, vec![(2, "malformed JSON"), (3, "duplicate key")]),
            (&mid, false, vec![(4_991, "duplicate key \"k3\" (first on line 3)")]),
        ] {
            let file = file.to_str().unwrap();
            let mut args = vec!["add", "b", file, "--json"];
            if dry_run {
                args.push("--dry-run");
            }
            let ran = env.run(&args);
            ran.code(2);
            assert!(ran.stderr.contains("rejected, nothing imported"), "{ran:?}");
            let json = ran.json();
            assert_eq!(json["batch"], "b", "{ran:?}");
            assert_eq!(json["dry_run"], dry_run, "{ran:?}");
            assert_eq!(json["source"], file, "{ran:?}");
            assert_eq!(json["added"], 0, "{ran:?}");
            let refused = json["refused"].as_array().unwrap();
            assert_eq!(refused.len(), want.len(), "{ran:?}");
            for (got, (line, says)) in refused.iter().zip(&want) {
                assert_eq!(got["line"], *line, "{ran:?}");
                assert!(got["says"].as_str().unwrap().starts_with(says), "{ran:?}");
            }
        }
        let dir = env.dir.path().to_str().unwrap();
        let ran = env.run(&["add", "b", dir, "--json"]);
        ran.code(2);
        let refused = &ran.json()["refused"];
        assert_eq!(refused[0]["line"], serde_json::Value::Null, "{ran:?}");
        assert!(refused[0]["says"].as_str().unwrap().contains("is a directory"), "{ran:?}");
        assert_eq!(unchanged(&env), before, "nothing added");
    }
}

/// What an add that writes nothing leaves as it was: the store
/// (`Env::snapshot`), but for PostgreSQL's id sequences, which a
/// rolled-back insert still advances (a gap in the ids, as a key found
/// present leaves one).
fn unchanged(env: &Env) -> Vec<(String, Option<String>)> {
    let mut all = env.snapshot();
    all.retain(|(name, _)| !name.ends_with("_id_seq"));
    all
}

#[test]
fn every_bad_line_is_listed_up_to_twenty_then_counted() {
    let env = Env::new();
    let text: String = (1..=30).map(|i| format!("bad {i}\n")).collect();
    let file = env.write("bad.jsonl", &text);
    let ran = env.run(&["add", "b", file.to_str().unwrap()]);
    ran.code(2);
    assert!(ran.stderr.contains("30 bad lines"), "{ran:?}");
    assert!(ran.stderr.contains("line 20:"), "{ran:?}");
    assert!(!ran.stderr.contains("line 21:"), "{ran:?}");
    assert!(ran.stderr.contains("… and 10 more"), "{ran:?}");
}

#[test]
fn natural_key_fields_make_stable_keys_with_readable_labels() {
    let env = Env::new();
    let file = env.write(
        "articles.jsonl",
        "{\"site\":\"blog\",\"category\":\"rust\",\"slug\":\"hello\",\"n\":1}\n\
         {\"site\":\"blog\",\"category\":\"rust\",\"slug\":\"world\",\"n\":2}\n",
    );
    let f = file.to_str().unwrap();
    env.run(&["add", "a", f, "--key-fields", "site,category,slug"])
        .code(0);
    let items = env.run(&["items", "a", "--json"]).json_lines();
    let labels: Vec<&str> = items.iter().map(|i| i["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["blog:rust:hello", "blog:rust:world"]);
    let key = items[0]["key"].as_str().unwrap().to_string();
    assert_eq!(key.len(), 32);
    assert!(key.bytes().all(|b| b.is_ascii_hexdigit()));

    // The same item with its fields in another order and another payload
    // field is the same item; the config's key_fields work like the flag.
    env.config("[batch.a]\nkey_fields = [\"site\", \"category\", \"slug\"]\n");
    let again = env.write(
        "again.jsonl",
        "{\"slug\":\"hello\",\"n\":3,\"category\":\"rust\",\"site\":\"blog\"}\n",
    );
    let ran = env.run(&["add", "a", again.to_str().unwrap()]);
    ran.code(0);
    assert!(ran.stdout.contains("added 0, already present 1"), "{ran:?}");
    env.run(&["show", "a", &key]).code(0);
}

#[test]
fn add_reads_stdin_with_dash_or_no_file() {
    let env = Env::new();
    let ran = crate::support::ran(
        env.cmd()
            .args(["add", "b", "-"])
            .write_stdin(lines(1..=3))
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 3, already present 0");
    let ran = crate::support::ran(
        env.cmd()
            .args(["add", "b"])
            .write_stdin(lines(3..=4))
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 1, already present 1");
    // Blank lines and CRLF line ends are fine.
    let ran = crate::support::ran(
        env.cmd()
            .args(["add", "b", "-"])
            .write_stdin("\r\n{\"key\":\"k9\"}\r\n\n")
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 1, already present 0");
}

/// A stream that is no JSON lines (`/dev/zero`, a binary piped in) is
/// refused once a line passes 64 MiB, naming it; it grew the add's memory
/// until the kernel killed it. Nothing is added.
#[test]
fn an_endless_line_is_refused_not_read_to_the_end_of_memory() {
    let env = Env::new();
    let ran = env.run(&["add", "b", "/dev/zero"]);
    assert!(
        ran.code(2)
            .stderr
            .contains("/dev/zero: line 1 is longer than 64 MiB"),
        "{}",
        ran.stderr
    );
    let mut two = lines(1..=1).into_bytes();
    two.extend(std::iter::repeat_n(b'x', (64 << 20) + 1));
    let ran = crate::support::ran(
        env.cmd()
            .args(["add", "b", "-"])
            .write_stdin(two)
            .output()
            .unwrap(),
    );
    assert!(
        ran.code(2)
            .stderr
            .contains("stdin: line 2 is longer than 64 MiB"),
        "{}",
        ran.stderr
    );
    assert_eq!(
        env.status()["batches"].as_array().map_or(0, Vec::len),
        0,
        "nothing added"
    );
}

#[test]
fn a_newer_schema_is_refused_and_its_bytes_are_unchanged() {
    let env = Env::new();
    env.add_items("b", 3);
    {
        let conn = env.sql();
        conn.execute_batch("PRAGMA user_version = 99").unwrap();
    }
    let before = env.fingerprint();
    let file = env.write("items.jsonl", &lines(10..=12));
    for args in [
        vec!["add", "b", file.to_str().unwrap()],
        vec!["status"],
        vec!["requeue", "b", "--all-failed"],
        vec!["pause", "b"],
        vec!["init"],
    ] {
        let ran = env.run(&args);
        ran.code(3);
        let line = ran.error_line();
        assert!(line.contains("newer nightshift"), "{args:?}: {line}");
        assert!(line.contains("schema v99"), "{args:?}: {line}");
        assert!(
            line.contains(env.db.to_str().unwrap()),
            "names the file: {line}"
        );
        assert_eq!(env.fingerprint(), before, "{args:?} changed the file");
    }
}

#[cfg(unix)]
#[test]
fn add_shows_progress_on_a_terminal_for_large_files_only() {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    use std::io::Read;

    let env = Env::new();
    let big = env.write("big.jsonl", &lines(1..=60_000));
    // Not a terminal: stderr stays quiet.
    let ran = env.run(&["add", "quiet", big.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.stderr, "");

    let pty = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols: 100,
            pixel_width: 0,
            pixel_height: 0,
        })
        .unwrap();
    let mut cmd = CommandBuilder::new(assert_cmd::cargo::cargo_bin("nightshift"));
    cmd.args(["add", "loud"]);
    cmd.arg(&big);
    cmd.cwd(env.dir.path());
    cmd.env("NIGHTSHIFT_DB", &env.db);
    cmd.env("NO_COLOR", "1");
    let mut child = pty.slave.spawn_command(cmd).unwrap();
    drop(pty.slave);
    let mut reader = pty.master.try_clone_reader().unwrap();
    let mut screen = Vec::new();
    // The pty reports EOF (or EIO) once the child has exited.
    let _ = reader.read_to_end(&mut screen);
    assert!(child.wait().unwrap().success());
    let screen = String::from_utf8_lossy(&screen);
    assert!(screen.contains("adding 50000/60000"), "{screen}");
    assert!(
        screen.contains("loud: added 60000, already present 0"),
        "{screen}"
    );
}

#[test]
fn init_says_what_it_created_as_json() {
    let env = Env::bare();
    let first = env.run(&["init", "--json"]).code(0).json();
    let db = env.db.display().to_string();
    let config = env.path("nightshift.toml").display().to_string();
    assert_eq!(
        first,
        serde_json::json!({
            "store": {"path": db, "created": true},
            "config": {"path": config, "created": true},
        })
    );
    let again = env.run(&["init", "--json"]).code(0).json();
    assert_eq!(again["store"]["created"], false);
    assert_eq!(again["config"]["created"], false);
    assert_eq!(again["config"]["path"], first["config"]["path"]);
}

/// A store whose directory does not exist yet (`--db data/日本/x.db` in a
/// fresh checkout) is created with it, and init says so; it refused with
/// "No such file or directory" while every other command said to run init.
#[test]
fn init_creates_the_stores_missing_directory() {
    let env = Env::bare();
    let db = env.path("data").join("日本").join("nightshift.db");
    let ran = crate::support::ran(
        env.cmd()
            .env("NIGHTSHIFT_DB", &db)
            .args(["init"])
            .output()
            .unwrap(),
    );
    let said = ran.code(0).stdout.clone();
    // The directory the store is in, with every one above it made: not
    // only the first of them.
    let data = env.path("data").join("日本").display().to_string();
    assert!(
        said.starts_with(&format!("created directory {data}\n")),
        "{said}"
    );
    assert!(
        said.contains(&format!("created store {}", db.display())),
        "{said}"
    );
    assert!(db.exists());
    let status = env
        .cmd()
        .env("NIGHTSHIFT_DB", &db)
        .args(["status"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    // Again: nothing to create, nothing said of it.
    let again = env
        .cmd()
        .env("NIGHTSHIFT_DB", &db)
        .args(["init", "--json"])
        .output()
        .unwrap();
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["store"]["created"], false);
    assert_eq!(again["store"].get("created_directory"), None);
    let other = env.path("more").join("x.db");
    let json = env
        .cmd()
        .env("NIGHTSHIFT_DB", &other)
        .args(["init", "--json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(
        json["store"]["created_directory"],
        env.path("more").display().to_string()
    );
    // One that cannot be made (under a file) is the store's fault, exit 3,
    // naming the store and why; not an internal error (exit 4).
    env.write("plain", "a file");
    let under = env.path("plain").join("sub").join("x.db");
    let ran = crate::support::ran(
        env.cmd()
            .env("NIGHTSHIFT_DB", &under)
            .args(["init"])
            .output()
            .unwrap(),
    );
    ran.code(3);
    assert!(
        ran.stderr
            .contains(&format!("cannot create the store {}", under.display()))
            && ran.stderr.contains("creating its directory"),
        "{}",
        ran.stderr
    );
}

fn keys_of(env: &Env, batch: &str) -> Vec<String> {
    let mut keys: Vec<String> = env
        .run(&["items", batch, "--json"])
        .json_lines()
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    keys
}

/// Numbers beyond a 64-bit float keep every digit. (They were rounded to
/// one key: in one file the second line was a "duplicate" of a key in
/// neither line, in two files the second item was "already present" and
/// never ran.)
#[test]
fn huge_numeric_keys_are_two_items_in_one_file_or_two() {
    let env = Env::new();
    let (a, b) = ("12345678901234567890123", "12345678901234567890124");
    let both = env.write("both.jsonl", &format!("{{\"key\":{a}}}\n{{\"key\":{b}}}\n"));
    let ran = env.run(&["add", "one", both.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "one: added 2, already present 0");
    assert_eq!(keys_of(&env, "one"), [a, b]);

    let first = env.write("a.jsonl", &format!("{{\"key\":{a}}}\n"));
    let second = env.write("b.jsonl", &format!("{{\"key\":{b}}}\n"));
    env.run(&["add", "two", first.to_str().unwrap()]).code(0);
    let ran = env.run(&["add", "two", second.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "two: added 1, already present 0");
    let ran = env.run(&["add", "two", second.to_str().unwrap()]);
    assert_eq!(ran.stdout.trim(), "two: added 0, already present 1");
    assert_eq!(keys_of(&env, "two"), [a, b]);
    let shown = env.run(&["show", "two", b, "--json"]).json();
    assert_eq!(shown["item"]["key"], b);

    // A real duplicate is still named by the key it has.
    let dup = env.write("dup.jsonl", &format!("{{\"key\":{a}}}\n{{\"key\":{a}}}\n"));
    let ran = env.run(&["add", "three", dup.to_str().unwrap()]);
    ran.code(2);
    assert!(
        ran.stderr
            .contains(&format!("line 2: duplicate key \"{a}\" (first on line 1)")),
        "{ran:?}"
    );
}

/// A 128-bit id as a natural-key field: the label has every digit and two
/// ids one apart are two items. Keys from numbers that were exact before
/// are the same as before (pinned: `printf blog:42 | sha256sum`).
#[test]
fn a_128_bit_id_in_key_fields_keeps_every_digit() {
    let env = Env::new();
    let max = "170141183460469231731687303715884105727";
    let below = "170141183460469231731687303715884105726";
    let file = env.write(
        "ids.jsonl",
        &format!(
            "{{\"site\":\"blog\",\"id\":{max}}}\n{{\"site\":\"blog\",\"id\":{below}}}\n\
             {{\"site\":\"blog\",\"id\":42}}\n{{\"site\":\"blog\",\"id\":1.5e3}}\n"
        ),
    );
    let ran = env.run(&[
        "add",
        "ids",
        file.to_str().unwrap(),
        "--key-fields",
        "site,id",
    ]);
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "ids: added 4, already present 0");
    let mut pairs: Vec<(String, String)> = env
        .run(&["items", "ids", "--json"])
        .json_lines()
        .iter()
        .map(|i| {
            let s = |f: &str| i[f].as_str().unwrap().to_string();
            (s("label"), s("key"))
        })
        .collect();
    pairs.sort();
    for (label, key) in &pairs {
        assert_eq!(key, &nightshift::key::hash_key(label), "{label}");
    }
    let labels: Vec<&str> = pairs.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        [
            "blog:1500.0".to_string(),
            format!("blog:{below}"),
            format!("blog:{max}"),
            "blog:42".to_string()
        ]
    );
    assert_eq!(pairs[3].1, "1a484691a5475b44c176e2c832ce5d57");
}

/// Excel and Windows editors start a file with a byte-order mark: it is
/// skipped, and is no part of the first item's payload.
#[test]
fn a_byte_order_mark_on_the_first_line_is_skipped() {
    let env = Env::new();
    let file = env.write(
        "excel.jsonl",
        "\u{feff}{\"key\":\"k1\"}\r\n{\"key\":\"k2\"}\r\n",
    );
    let ran = env.run(&["add", "b", file.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 2, already present 0");
    let item = env.run(&["show", "b", "k1", "--json"]).json()["item"].clone();
    assert_eq!(item["payload"], serde_json::json!({"key": "k1"}), "{item}");
    let ran = crate::support::ran(
        env.cmd()
            .args(["add", "b"])
            .write_stdin("\u{feff}{\"key\":\"k3\"}\n")
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 1, already present 0");
    assert_eq!(keys_of(&env, "b"), ["k1", "k2", "k3"]);
}

/// A source with nothing new is a normal night for cron: an empty file or
/// stdin adds 0 and exits 0, and writes nothing (no batch is made).
#[test]
fn an_empty_input_adds_nothing_and_succeeds() {
    let env = Env::new();
    env.add_items("b", 2);
    let before = env.fingerprint();
    env.write("empty.jsonl", "");
    env.write("blank.jsonl", "\n  \r\n\n");
    env.write("bom.jsonl", "\u{feff}");
    for file in ["empty.jsonl", "blank.jsonl", "bom.jsonl"] {
        let ran = env.run(&["add", "b", file]);
        ran.code(0);
        assert_eq!(ran.stdout, "b: added 0, already present 0\n", "{file}");
        assert_eq!(ran.stderr, "", "{file}");
    }
    let ran = crate::support::ran(
        env.cmd()
            .args(["add", "new", "--json"])
            .write_stdin("")
            .output()
            .unwrap(),
    );
    ran.code(0);
    let report = ran.json();
    assert_eq!(report["added"], 0);
    assert_eq!(report["present"], 0);
    assert_eq!(report["new_batch"], false, "nothing was made");
    assert_eq!(env.fingerprint(), before, "not a byte changed");
    let names: Vec<serde_json::Value> = env.status()["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].clone())
        .collect();
    assert_eq!(names, ["b"]);
}

/// A Japanese batch name works end to end: `[batch."記事"]` in the config,
/// `add` (no hint: the section exists), `run`, and every view.
#[test]
fn a_quoted_unicode_batch_in_the_config_works_end_to_end() {
    let env = Env::new();
    env.config("[batch.\"記事\"]\nworker = [\"cat\"]\n");
    let file = env.write("in.jsonl", &lines(1..=3));
    let ran = env.run(&["add", "記事", file.to_str().unwrap()]);
    ran.code(0);
    assert_eq!(ran.stdout, "記事: added 3, already present 0\n");
    assert_eq!(ran.stderr, "", "the batch has its section");
    let ran = env.run(&["run", "記事"]);
    ran.code(0);
    assert!(ran.stdout.starts_with("記事: 3 done"), "{ran:?}");
    let status = env.status();
    assert_eq!(status["batches"][0]["name"], "記事");
    assert_eq!(status["batches"][0]["done"], 3);
    let table = env.run(&["status"]);
    table.code(0);
    let row = table.stdout.lines().nth(1).unwrap();
    assert!(row.starts_with("記事 "), "{table:?}");
    assert!(row.contains(" 3 "), "{table:?}");
    let items = env.run(&["items", "記事", "--json"]).json_lines();
    assert!(items.iter().all(|i| i["status"] == "done"), "{items:?}");
    let ran = env.run(&["schedule", "記事"]);
    ran.code(2);
    assert!(
        ran.stderr.contains("in [batch.\"記事\"] of"),
        "the hint is TOML: {ran:?}"
    );
}

/// The hint for a batch with no section is a table header to paste as it
/// is: valid TOML naming that batch, which the config then accepts.
#[test]
fn the_new_batch_hint_is_toml_to_paste() {
    let env = Env::new();
    let config = "[batch.other]\nworker = [\"cat\"]\n";
    env.config(config);
    let file = env.write("in.jsonl", &lines(1..=2));
    for name in ["記事", "my batch", "v1.2", "say \"hi\""] {
        let ran = env.run(&["add", name, file.to_str().unwrap()]);
        ran.code(0);
        let header = ran
            .stderr
            .split(" has no ")
            .nth(1)
            .and_then(|rest| rest.strip_suffix(" section in the config\n"))
            .unwrap_or_else(|| panic!("{ran:?}"));
        let text = format!("{config}{header}\nworker = [\"cat\"]\n");
        let parsed: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(
            parsed["batch"].as_table().unwrap().contains_key(name),
            "{text}"
        );
        // Pasted, it is that batch's section: the run uses its worker.
        env.config(&text);
        env.run(&["run", name]).code(0);
        assert_eq!(
            env.run(&["add", name, file.to_str().unwrap()]).stderr,
            "",
            "{name}: no hint once the section exists"
        );
        env.config(config);
    }
}

/// The config `init` wrote, parsed as plain TOML (nothing of nightshift's
/// own reading in between).
fn written_config(env: &Env) -> toml::Table {
    toml::from_str(&std::fs::read_to_string(env.path("nightshift.toml")).unwrap()).unwrap()
}

const JAPANESE_ITEMS: &str = concat!(
    "{\"key\":\"記事01\",\"label\":\"ブログ:技術記事:記事01\",\"title\":\"はじめに\"}\n",
    "{\"key\":\"記事02\",\"label\":\"ブログ:技術記事:記事02\",\"title\":\"続き\"}\n",
);

/// `nightshift init && nightshift add example items.jsonl && nightshift run
/// example` works as written: the example batch's stand-in worker (`cat`)
/// answers each item, and nothing else in the file acts (no source, alert,
/// limit, budget or schedule). Before, the example's `source` failed every
/// run and its `alert` mailed me@example.com.
#[test]
fn the_example_config_runs_as_init_wrote_it() {
    let env = Env::bare();
    env.run(&["init"]).code(0);
    let config = written_config(&env);
    let keys = |t: &toml::Table| t.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&config), ["batch", "db", "log_dir"]);
    let batches = config["batch"].as_table().unwrap();
    assert_eq!(keys(batches), ["example"]);
    assert_eq!(
        batches["example"].as_table().unwrap(),
        &toml::toml! { worker = ["cat"] },
        "only the worker is set"
    );

    env.write("items.jsonl", JAPANESE_ITEMS);
    let added = env.run(&["add", "example", "items.jsonl"]);
    added.code(0);
    assert_eq!(added.stdout.trim(), "example: added 2, already present 0");
    let ran = env.run(&["run", "example"]);
    ran.code(0);
    assert_eq!(ran.stderr, "", "no hook said anything: {ran:?}");
    assert!(ran.stdout.contains("example: 2 done"), "{ran:?}");
    let shown = env
        .run(&["show", "example", "記事01", "--json"])
        .code(0)
        .json();
    assert_eq!(shown["item"]["result"]["title"], "はじめに", "{shown}");
    let kinds = env.event_kinds();
    for quiet in ["source", "source-failed", "alert", "hold"] {
        assert!(!kinds.iter().any(|k| k == quiet), "{quiet}: {kinds:?}");
    }
}

/// What `init` writes beside the store it made is the checked-in example
/// that the README shows, byte for byte.
#[test]
fn init_writes_the_checked_in_example() {
    let env = Env::bare();
    env.run(&["init"]).code(0);
    let asset = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/examples/init.toml");
    assert_eq!(
        std::fs::read_to_string(env.path("nightshift.toml")).unwrap(),
        std::fs::read_to_string(asset).unwrap()
    );
}

/// A newcomer who sets only `worker`, to a program of their own, gets a
/// run that succeeds (it was exit 1: the example's source and alert failed).
#[test]
fn a_newcomer_who_sets_only_the_worker_succeeds() {
    let env = Env::bare();
    env.run(&["init"]).code(0);
    env.script(
        "worker.sh",
        "cat >/dev/null\nprintf '{\"label\": \"%s\"}\\n' \"$NIGHTSHIFT_LABEL\"",
    );
    let path = env.path("nightshift.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let set_worker: Vec<&str> = text
        .lines()
        .map(|l| match l.starts_with("worker = ") {
            true => "worker = [\"./worker.sh\"]",
            false => l,
        })
        .collect();
    assert_ne!(
        set_worker.join("\n"),
        text.trim_end(),
        "a worker line: {text}"
    );
    std::fs::write(&path, set_worker.join("\n")).unwrap();

    env.write("items.jsonl", JAPANESE_ITEMS);
    env.run(&["add", "example", "items.jsonl"]).code(0);
    let ran = env.run(&["run", "example", "--json"]);
    ran.code(0);
    let summary = ran.json();
    assert_eq!(summary["counts"]["done"], 2, "{summary}");
    assert_eq!(summary["state"], "ok", "{summary}");
    assert_eq!(summary["hooks_failed"], serde_json::json!([]), "{summary}");
    let shown = env
        .run(&["show", "example", "記事02", "--json"])
        .code(0)
        .json();
    assert_eq!(
        shown["item"]["result"]["label"], "ブログ:技術記事:記事02",
        "{shown}"
    );
    assert_eq!(env.item("記事01").0, "done");
}

/// A batch's `estimate_field` holding no estimate (not a whole number,
/// negative, past the largest) rejects the file naming each line, as a bad
/// priority does: the runner ignored such a value unsaid at every call and
/// reserved `token_estimate` instead. A line without the field is fine.
#[test]
fn a_bad_estimate_field_rejects_the_file_naming_each_line() {
    let env = Env::new();
    env.config(
        "[limit.ai]\ntokens = \"1000/min\"\n\n[batch.b]\nlimit = \"ai\"\n\
         token_estimate = 10\nestimate_field = \"max_tokens\"\n",
    );
    let file = env.write(
        "in.jsonl",
        "{\"key\":\"a\",\"max_tokens\":100}\n{\"key\":\"b\",\"max_tokens\":\"lots\"}\n\
         {\"key\":\"c\",\"max_tokens\":-5}\n{\"key\":\"d\"}\n{\"key\":\"e\",\"max_tokens\":2.5}\n\
         {\"key\":\"f\",\"max_tokens\":100000001}\n{\"key\":\"g\",\"max_tokens\":null}\n",
    );
    let before = env.fingerprint();
    let ran = env.run(&["add", "b", file.to_str().unwrap()]);
    ran.code(2);
    let says = "estimate field \"max_tokens\" must be a whole number of tokens from 0 to 100000000";
    for (line, value) in [
        (2, "the string \"lots\""),
        (3, "-5"),
        (5, "2.5"),
        (6, "100000001"),
        (7, "null"),
    ] {
        let want = format!("\n  line {line}: {says}, not {value}");
        assert!(ran.stderr.contains(&want), "{want:?}: {ran:?}");
    }
    assert!(ran.stderr.contains("5 bad lines"), "{ran:?}");
    assert_eq!(env.fingerprint(), before, "nothing imported");

    let good = env.write(
        "good.jsonl",
        "{\"key\":\"a\",\"max_tokens\":100}\n{\"key\":\"d\"}\n",
    );
    env.run(&["add", "b", good.to_str().unwrap()]).code(0);
}
