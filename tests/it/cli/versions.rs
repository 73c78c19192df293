//! Versioned done (`version` in a batch's config): each done item remembers
//! the version it was done under; `status` counts the stale ones, `items
//! --stale` lists them and `requeue --stale` sends back exactly those, on
//! both backends, with the real binary and a real worker.

use crate::support as common;

use common::Env;

/// A worker that appends its key to `ran.log` (what ran, and how often).
fn logging_worker(env: &Env) -> String {
    let log = env.path("ran.log");
    let w = env.script(
        "log-worker.sh",
        &format!(
            "cat >/dev/null\necho \"$NIGHTSHIFT_KEY\" >> {}\necho '\"ok\"'",
            log.display()
        ),
    );
    w.display().to_string()
}

fn config(env: &Env, worker: &str, version: Option<&str>) {
    let version = version.map_or(String::new(), |v| format!("version = \"{v}\"\n"));
    env.config(&format!("[batch.b]\nworker = [\"{worker}\"]\n{version}"));
}

fn add(env: &Env, keys: &[&str]) {
    let lines: String = keys
        .iter()
        .map(|k| format!("{{\"key\":\"{k}\"}}\n"))
        .collect();
    env.write("more.jsonl", &lines);
    env.run(&["add", "b", "more.jsonl"]).code(0);
}

fn keys(items: &[serde_json::Value]) -> Vec<String> {
    let mut keys: Vec<String> = items
        .iter()
        .map(|i| i["key"].as_str().unwrap().to_string())
        .collect();
    keys.sort();
    keys
}

fn stale_listed(env: &Env) -> Vec<String> {
    keys(
        &env.run(&["items", "b", "--stale", "--json"])
            .code(0)
            .json_lines(),
    )
}

both_backends! {
    /// Items done before the batch had a version are stale once it has one;
    /// items done under v1 are stale under v2; a skipped item never ran and
    /// is never stale. `requeue --stale --dry-run` names them and changes
    /// nothing; `requeue --stale` moves exactly them, and the next run pays
    /// for exactly them.
    fn a_stale_version_is_listed_and_requeued_exactly(env) {
        let worker = logging_worker(&env);
        config(&env, &worker, None);
        add(&env, &["k1", "k2"]);
        env.run(&["run", "b"]).code(0);
        assert_eq!(env.batch_status("b")["stale"], serde_json::Value::Null, "no version, nothing is stale");

        config(&env, &worker, Some("v1"));
        add(&env, &["k3", "k4", "k5"]);
        env.run(&["skip", "b", "k5", "--reason", "by hand"]).code(0);
        env.run(&["run", "b"]).code(0);
        let b = env.batch_status("b");
        assert_eq!((b["version"].as_str(), b["stale"].as_i64()), (Some("v1"), Some(2)));
        assert_eq!(stale_listed(&env), ["k1", "k2"]);
        let k3 = env.run(&["show", "b", "k3", "--json"]).code(0).json();
        assert_eq!(k3["item"]["done_version"], "v1");

        config(&env, &worker, Some("v2"));
        assert_eq!(stale_listed(&env), ["k1", "k2", "k3", "k4"]);
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("4 done under an older version: `nightshift requeue b --stale` runs them again"), "{text}");
        let table = env.run(&["items", "b", "--stale"]).code(0).stdout.clone();
        assert!(table.lines().next().unwrap().contains("DONE UNDER"), "{table}");
        assert!(table.lines().any(|l| l.starts_with("k1 ") && l.contains("(no version)")), "{table}");
        assert!(table.lines().any(|l| l.starts_with("k3 ") && l.ends_with("v1")), "{table}");

        let before = env.snapshot();
        let dry = env.run(&["requeue", "b", "--stale", "--dry-run", "--json"]).code(0).json();
        assert_eq!(keys(dry["items"].as_array().unwrap()), ["k1", "k2", "k3", "k4"]);
        assert_eq!(env.snapshot(), before, "a dry run changes nothing");

        let moved = env.run(&["requeue", "b", "--stale", "--json"]).code(0).json();
        assert_eq!(moved["count"], 4);
        assert_eq!(env.item("k5").0, "done", "the skipped item stays done");
        std::fs::remove_file(env.path("ran.log")).unwrap();
        env.run(&["run", "b"]).code(0);
        let mut ran = common::lines(&env.path("ran.log"));
        ran.sort();
        assert_eq!(ran, ["k1", "k2", "k3", "k4"], "exactly the stale items ran again, once each");
        assert_eq!(env.batch_status("b")["stale"], 0);
        assert!(stale_listed(&env).is_empty());
        env.assert_counts_consistent();
    }

    /// `--stale` without a version in the config is an error naming what to
    /// set, and `--stale` beside another selection is refused; neither
    /// changes anything.
    fn stale_without_a_version_is_refused(env) {
        let worker = logging_worker(&env);
        config(&env, &worker, None);
        add(&env, &["k1"]);
        env.run(&["run", "b"]).code(0);
        let before = env.snapshot();
        let no_version = env.run(&["requeue", "b", "--stale"]);
        no_version.code(2);
        assert_eq!(
            no_version.error_line(),
            "nightshift: error: --stale: batch b sets no `version` in the config, so no item is \
             stale; set `version = \"...\"` under [batch.b] first"
        );
        env.run(&["items", "b", "--stale"]).code(2);
        // A name TOML must quote is quoted in the table to set it under.
        env.config("[batch.\"記事\"]\nworker = [\"cat\"]\n");
        let quoted = env.run(&["items", "記事", "--stale"]);
        assert!(quoted.error_line().ends_with("under [batch.\"記事\"] first"), "{quoted:?}");
        config(&env, &worker, Some("v1"));
        env.run(&["requeue", "b", "--stale", "k1"]).code(2);
        env.run(&["requeue", "b", "--stale", "--outcome", "done"]).code(2);
        assert_eq!(env.snapshot(), before);
    }

    /// A persistent worker's successes, recorded in batches
    /// (`complete_all`), remember the version too.
    fn persistent_mode_records_the_version(env) {
        env.write("worker.py", "import json, sys\nfor line in sys.stdin:\n    req = json.loads(line)\n    print(json.dumps({\"key\": req[\"key\"], \"result\": 1}), flush=True)\n");
        env.config("[batch.b]\nworker = [\"python3\", \"worker.py\"]\nmode = \"persistent\"\nversion = \"model-2026\"\n");
        env.add_items("b", 50);
        env.run(&["run", "b"]).code(0);
        assert_eq!(env.int("SELECT count(*) FROM items WHERE done_version = 'model-2026'"), 50);
        assert_eq!(env.batch_status("b")["stale"], 0);
        env.config("[batch.b]\nworker = [\"python3\", \"worker.py\"]\nmode = \"persistent\"\nversion = \"model-2027\"\n");
        assert_eq!(env.batch_status("b")["stale"], 50);
    }
}
