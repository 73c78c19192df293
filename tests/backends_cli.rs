//! The real binary against both backends: the same commands, run once on a
//! SQLite file and once on a PostgreSQL database given as a `postgresql://`
//! URL in `NIGHTSHIFT_DB` (a fresh database of a private server, see
//! `common/pg.rs`), must do the same. Then what is particular to a URL:
//! config discovery, `init`, passwords kept out of output, a read-only role.

#[macro_use]
mod common;

use common::{Backend, Env};

/// A persistent worker (one JSON answer line per request): keys ending in
/// 7 fail permanently, the rest succeed at a cost.
const PERSISTENT: &str = r#"import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["key"].endswith("7"):
        print(json.dumps({"error": {"error_class": "Seven", "transient": False, "message": "no"}}), flush=True)
    else:
        print(json.dumps({"result": {"n": req["payload"]["n"]}, "cost": 0.5}), flush=True)
"#;

fn batch<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    status["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no batch {name} in {status}"))
}

both_backends! {
    /// add, run (failures of each kind), status, dlq, items, show, requeue,
    /// and a second run: the same outcome on both backends.
    fn a_batch_runs_fails_and_is_requeued(env) {
        let worker = env.failing_batch("b");
        let s = env.status();
        let b = batch(&s, "b");
        assert_eq!((b["done"].as_i64(), b["retry"].as_i64(), b["manual"].as_i64()), (Some(4), Some(1), Some(3)));
        assert_eq!(b["last_run"]["state"], "failed");
        let dlq = env.run(&["dlq", "b"]).code(0).stdout.clone();
        assert!(dlq.contains("BadInput") && dlq.contains("Exit1"), "{dlq}");
        let failed = env.run(&["items", "b", "--status", "failed"]).code(0).stdout.clone();
        assert_eq!(failed.lines().skip(1).count(), 4, "{failed}");
        let shown = env.run(&["show", "b", "k5"]).code(0).stdout.clone();
        assert!(shown.contains("op-555"), "{shown}");
        let again = env.run(&["add", "b", "b-items.jsonl"]);
        assert!(again.code(0).stdout.contains("added 0, already present 8"), "{}", again.stdout);

        env.run(&["requeue", "b", "--class", "BadInput"]).code(0);
        assert_eq!(env.item("k1").0, "pending");
        let out = env.cmd().args(["run", "b", "--"]).arg(&worker).output().unwrap();
        common::ran(out).code(1);
        assert_eq!(env.item("k3").0, "failed", "k3 fails again (exit 75)");
        let kinds = env.event_kinds();
        assert!(kinds.iter().any(|k| k == "requeued"), "{kinds:?}");
        assert_eq!(env.run_states(), ["failed", "failed"]);
        env.assert_counts_consistent();
    }

    /// A persistent worker's successes are recorded in batches (the store's
    /// `complete_all`): every item done or dead-lettered, the run's counts
    /// and cost exact.
    fn persistent_mode_records_every_answer(env) {
        env.write("worker.py", PERSISTENT);
        env.config("[batch.p]\nworker = [\"python3\", \"worker.py\"]\nmode = \"persistent\"\nconcurrency = 2\nretries = 0\n");
        env.add_items("p", 300);
        env.run(&["run", "p"]).code(1);
        let s = env.status();
        let p = batch(&s, "p");
        assert_eq!((p["done"].as_i64(), p["manual"].as_i64(), p["pending"].as_i64()), (Some(270), Some(30), Some(0)));
        assert_eq!(p["last_run"]["counts"]["done"], 270);
        assert_eq!(p["last_run"]["counts"]["cost"], 135.0);
        assert_eq!(env.int("SELECT count(*) FROM events WHERE kind = 'done'"), 270);
        env.assert_counts_consistent();
    }

    /// An item is found by its label when no key matches and exactly one
    /// item has that label; several are listed, none says how to search
    /// (both exit 2, printing nothing on stdout). The run log and the
    /// dead-letter export name items by label beside the key.
    fn items_are_found_and_named_by_label(env) {
        env.write(
            "items.jsonl",
            "{\"key\":\"a1\",\"label\":\"夏休みの記事\",\"n\":1}\n\
             {\"key\":\"a2\",\"label\":\"夏休みの記事\",\"n\":2}\n\
             {\"key\":\"b1\",\"label\":\"ブログ:技術記事:記事01\",\"n\":3}\n\
             {\"key\":\"c1\",\"label\":\"b1\",\"n\":4}\n",
        );
        env.run(&["add", "b", "items.jsonl"]).code(0);
        let by_label = env.run(&["show", "b", "ブログ:技術記事:記事01", "--json"]).code(0).json();
        assert_eq!(by_label["item"]["key"], "b1");
        let text = env.run(&["show", "b", "ブログ:技術記事:記事01"]).code(0).stdout.clone();
        assert!(text.starts_with("key:       b1\nlabel:     ブログ:技術記事:記事01\n"), "{text}");
        // A key wins over a label that reads the same.
        assert_eq!(env.run(&["show", "b", "b1", "--json"]).code(0).json()["item"]["key"], "b1");

        let several = env.run(&["show", "b", "夏休みの記事"]);
        several.code(2);
        assert!(several.stdout.is_empty(), "{several:?}");
        assert!(several.stderr.contains("2 items in batch \"b\" have the label \"夏休みの記事\""), "{several:?}");
        for key in ["a1", "a2"] {
            assert!(several.stderr.contains(&format!("nightshift show b {key}   (pending)")), "{several:?}");
        }
        let none = env.run(&["show", "b", "夏休み 2026"]);
        none.code(2);
        assert!(none.stdout.is_empty(), "{none:?}");
        assert_eq!(
            none.error_line(),
            "nightshift: error: no item \"夏休み 2026\" in batch \"b\" (neither a key nor a label); \
             to search keys and labels: nightshift items b --search '夏休み 2026'"
        );
        assert_eq!(
            env.run(&["items", "b", "--search", "夏休み", "--json"]).code(0).json_lines().len(),
            2,
            "the search the message suggests finds them"
        );

        env.run(&["skip", "b", "b1", "--reason", "done by hand"]).code(0);
        let log = env.run(&["log", "b", "--kind", "skipped"]).code(0).stdout.clone();
        assert!(log.contains(" skipped      b1 (ブログ:技術記事:記事01) "), "{log}");
        let events = env.run(&["log", "b", "--kind", "skipped", "--json"]).code(0).json_lines();
        assert_eq!(events[0]["label"], "ブログ:技術記事:記事01");
    }

    /// Pause stops runs, unpause lets them go on; the log records both.
    fn pause_and_unpause(env) {
        env.config("[batch.b]\nworker = [\"sh\", \"-c\", \"cat >/dev/null; echo '{}'\"]\n");
        env.add_items("b", 3);
        env.run(&["pause", "b", "--reason", "maintenance"]).code(0);
        env.run(&["run", "b"]).code(0);
        assert_eq!(batch(&env.status(), "b")["pending"], 3);
        env.run(&["unpause", "b"]).code(0);
        env.run(&["run", "b"]).code(0);
        assert_eq!(batch(&env.status(), "b")["done"], 3);
        assert_eq!(env.run_states(), ["paused", "ok"]);
        let log = env.run(&["log", "b"]).code(0).stdout.clone();
        assert!(log.contains("maintenance"), "{log}");
    }
}

/// `init` on a database URL creates the schema, and writes the example
/// config without the URL (which may hold a password) in the working
/// directory; the store's own location decides, not a file beside it.
#[test]
fn init_on_a_url_creates_the_schema_and_a_config_without_it() {
    let Some(env) = Env::bare_for(Backend::Pg) else {
        return;
    };
    let out = env.run(&["init"]);
    assert!(
        out.code(0).stdout.contains("created store postgres"),
        "{}",
        out.stdout
    );
    let config = std::fs::read_to_string(env.path("nightshift.toml")).unwrap();
    assert!(
        !config.contains(env.db.to_str().unwrap()) && !config.contains("host="),
        "{config}"
    );
    assert!(config.contains("\n# db = \"nightshift.db\"\n"), "{config}");
    assert!(env.run(&["init"]).code(0).stdout.contains("already exists"));
    // No file store appeared, and a PAUSED file in the working directory
    // is not an emergency stop of a database server.
    assert!(!env.path("nightshift.db").exists());
    env.write("PAUSED", "");
    let s = env.status();
    assert_eq!(s["emergency_stop"], serde_json::Value::Null);
    assert_eq!(env.int("SELECT count(*) FROM batches"), 0);
}

/// A config naming the database by URL is used as it is (not taken for a
/// path relative to the config file).
#[test]
fn a_config_can_name_the_database_by_url() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    env.add_items("b", 2);
    let config = env.write(
        "elsewhere.toml",
        &format!("db = \"{}\"\n", env.db.display()),
    );
    let out = env
        .cmd()
        .env_remove("NIGHTSHIFT_DB")
        .arg("--config")
        .arg(&config)
        .args(["status", "--short"])
        .output()
        .unwrap();
    let out = common::ran(out);
    assert_eq!(out.code(0).stdout.trim(), "b 0✓ 2…", "{}", out.stderr);
}

/// A password in the URL is never printed: not in help, status, or errors.
#[test]
fn the_password_of_a_url_is_never_shown() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    // The test server trusts the socket: any password connects.
    let with_password =
        env.db
            .to_str()
            .unwrap()
            .replacen("postgres:///", "postgresql://postgres:s3cret@/", 1);
    let run = |args: &[&str], db: &str| {
        common::ran(
            env.cmd()
                .env("NIGHTSHIFT_DB", db)
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let help = run(&["status", "--help"], &with_password);
    assert!(!help.stdout.contains("s3cret"), "{}", help.stdout);
    let status = run(&["status", "--json"], &with_password);
    let store = status.code(0).json()["store"].as_str().unwrap().to_string();
    assert!(store.contains("postgres:***@"), "{store}");
    let missing = with_password.replacen("/t_", "/missing_", 1);
    let err = run(&["status"], &missing);
    assert_eq!(err.code, 3, "{}", err.stderr);
    assert!(
        err.stderr.contains("***") && !err.stderr.contains("s3cret"),
        "{}",
        err.stderr
    );
}

/// A role that may only read (the README's monitoring role): reads work,
/// every write fails with exit 3 naming the store, and the store says it is
/// not writable (so the dashboard opens read-only by itself).
#[test]
fn a_read_only_role_reads_and_cannot_write() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    env.add_items("b", 2);
    let url = env.db.to_str().unwrap().to_string();
    let database = url.split('/').nth(3).unwrap().split('?').next().unwrap();
    let role = format!("ro_{database}");
    env.pg_sql()
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN;
             GRANT CONNECT ON DATABASE {database} TO {role};
             GRANT USAGE ON SCHEMA nightshift TO {role};
             GRANT SELECT ON ALL TABLES IN SCHEMA nightshift TO {role};
             ALTER ROLE {role} SET default_transaction_read_only = on;"
        ))
        .unwrap();
    let ro_url = url.replace("user=postgres", &format!("user={role}"));
    let run = |args: &[&str]| {
        common::ran(
            env.cmd()
                .env("NIGHTSHIFT_DB", &ro_url)
                .args(args)
                .output()
                .unwrap(),
        )
    };
    assert_eq!(run(&["status", "--short"]).code(0).stdout.trim(), "b 0✓ 2…");
    run(&["log", "b"]).code(0);
    run(&["dlq", "b"]).code(0);
    for write in [
        &["pause", "b"][..],
        &["add", "b", "b-items.jsonl"],
        &["skip", "b", "k1", "--reason", "x"],
    ] {
        let out = run(write);
        assert_eq!(out.code, 3, "{write:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("only read"),
            "{write:?}: {}",
            out.stderr
        );
    }
    assert_eq!(env.item("k1").0, "pending");
    use nightshift::store::{Access, Store};
    let ro = Store::open(std::path::Path::new(&ro_url), Access::ReadOnly).unwrap();
    assert!(!ro.writable());
    let owner = Store::open(&env.db, Access::ReadOnly).unwrap();
    assert!(owner.writable());
}
