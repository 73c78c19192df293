//! `init` and `add`: idempotent adds, whole-file rejection, keys from
//! natural-key fields, refusal of a newer schema.

use crate::common::Env;

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
    let ran = super::common::ran(
        env.cmd()
            .args(["add", "b", "-"])
            .write_stdin(lines(1..=3))
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 3, already present 0");
    let ran = super::common::ran(
        env.cmd()
            .args(["add", "b"])
            .write_stdin(lines(3..=4))
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 1, already present 1");
    // Blank lines and CRLF line ends are fine.
    let ran = super::common::ran(
        env.cmd()
            .args(["add", "b", "-"])
            .write_stdin("\r\n{\"key\":\"k9\"}\r\n\n")
            .output()
            .unwrap(),
    );
    ran.code(0);
    assert_eq!(ran.stdout.trim(), "b: added 1, already present 0");
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
