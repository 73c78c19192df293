//! The real binary against both backends: the same commands, run once on a
//! SQLite file and once on a PostgreSQL database given as a `postgresql://`
//! URL in `NIGHTSHIFT_DB` (a fresh database of a private server, see
//! `support/pg.rs`), must do the same. Then what is particular to a URL:
//! config discovery, `init`, passwords kept out of output, a read-only role.

use crate::support as common;
use crate::support::require::Tool;

use common::{Backend, Env};

/// A persistent worker (one JSON answer line per request): keys ending in
/// 7 fail permanently, the rest succeed at a cost.
const PERSISTENT: &str = r#"import json, sys
for line in sys.stdin:
    req = json.loads(line)
    if req["key"].endswith("7"):
        print(json.dumps({"key": req["key"], "error": {"error_class": "Seven", "transient": False, "message": "no"}}), flush=True)
    else:
        print(json.dumps({"key": req["key"], "result": {"n": req["payload"]["n"]}, "cost": 0.5}), flush=True)
"#;

fn batch<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    status["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap_or_else(|| panic!("no batch {name} in {status}"))
}

/// A worker that appends its key to `ran.log` (what ran, and how often).
/// The text with every "(12s ago)" cut to "(ago)": relative ages move
/// with the clock between two reads of the same data.
fn without_ages(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('(') {
        out.push_str(&rest[..at + 1]);
        rest = &rest[at + 1..];
        let inner = rest.find(')').map(|end| &rest[..end]);
        if let Some(inner) =
            inner.filter(|i| i.starts_with(|c: char| c.is_ascii_digit()) && i.ends_with(" ago"))
        {
            out.push_str("ago");
            rest = &rest[inner.len()..];
        }
    }
    out.push_str(rest);
    out
}

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

/// The keys the worker ran, sorted.
fn ran_keys(env: &Env) -> Vec<String> {
    let mut keys = common::lines(&env.path("ran.log"));
    keys.sort();
    keys
}

/// Every row of the store 40 days older, so `prune --older-than 30d` takes it.
fn age_40_days(env: &Env) {
    env.exec("UPDATE items SET created_at = created_at - 3456000000, updated_at = updated_at - 3456000000");
}

/// Waits for a background process to end; its exit code.
fn exit_code(child: &mut common::Background) -> Option<i32> {
    let mut code = None;
    common::wait_for("the process to exit", || match child.try_wait().unwrap() {
        Some(status) => {
            code = Some(status.code());
            true
        }
        None => false,
    });
    code.unwrap()
}

both_backends! {
    /// An item's cost is every attempt's: a failed attempt's cost stays
    /// when a later attempt is done (the done mark adds, as a failure does).
    fn an_items_cost_sums_its_failed_and_done_attempts(env) {
        env.config("[batch.b]\nretries = 0\n");
        env.add_items("b", 1);
        let worker = env.script(
            "costly.sh",
            "#!/bin/sh\nif [ \"$NIGHTSHIFT_ATTEMPT\" = 1 ]; then echo '@nightshift cost=0.25' >&2; exit 1; fi\necho '@nightshift cost=0.5' >&2\necho '{\"ok\":true}'\n",
        );
        env.run(&["run", "b", "--", worker.to_str().unwrap()]).code(1);
        env.run(&["requeue", "b", "k1"]).code(0);
        env.run(&["run", "b", "--", worker.to_str().unwrap()]).code(0);
        let shown = env.run(&["show", "b", "k1"]).code(0).stdout.clone();
        assert!(shown.contains("state:     done") && shown.contains("cost:      $0.75\n"), "{shown}");
    }

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
        require!(Tool::Python3);
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
        assert!(log.contains(" skipped          b1 (ブログ:技術記事:記事01) "), "{log}");
        let events = env.run(&["log", "b", "--kind", "skipped", "--json"]).code(0).json_lines();
        assert_eq!(events[0]["label"], "ブログ:技術記事:記事01");
    }

    /// A NUL in a label, given or joined from key fields, is added on both
    /// stores alike and shown as `\x00` (PostgreSQL refused the whole add,
    /// exit 3, and SQLite took it).
    fn a_nul_in_a_label_is_added_on_both_stores(env) {
        let file = env.write(
            "nul.jsonl",
            "{\"key\": \"k1\", \"label\": \"la\\u0000bel\"}\n{\"key\": \"k2\"}\n",
        );
        env.run(&["add", "b", file.to_str().unwrap()]).code(0);
        let listed = env.run(&["items", "b"]).code(0).stdout.clone();
        assert!(listed.contains("la\\x00bel"), "{listed}");
        let fields = env.write("fields.jsonl", "{\"site\": \"ブログ\", \"slug\": \"記事\\u0000一\"}\n");
        env.run(&["add", "c", fields.to_str().unwrap(), "--key-fields", "site,slug"]).code(0);
        let listed = env.run(&["items", "c"]).code(0).stdout.clone();
        assert!(listed.contains("ブログ:記事\\x00一"), "{listed}");
    }

    /// A key is text, not bytes: ガイド written decomposed (カ + ゛, as
    /// macOS writes file names) is the ガイド added composed, not a second
    /// item that runs (and posts) again beside it, listed as the same word
    /// twice. As a key field too; in one file, the second is a duplicate.
    /// Full-width letters stay keys of their own.
    fn a_key_in_another_unicode_form_is_the_same_item(env) {
        let worker = logging_worker(&env);
        env.config(&format!(
            "[batch.\"記事\"]\nworker = [\"{worker}\"]\n\n[batch.f]\nworker = [\"{worker}\"]\nkey_fields = [\"site\", \"slug\"]\n"
        ));
        let (nfc, nfd) = ("ガイド", "カ\u{3099}イト\u{3099}");
        env.write("nfc.jsonl", &format!("{{\"key\":\"{nfc}\"}}\n{{\"key\":\"ABC\"}}\n"));
        env.write("nfd.jsonl", &format!("{{\"key\":\"{nfd}\"}}\n{{\"key\":\"ＡＢＣ\"}}\n"));
        assert_eq!(env.run(&["add", "記事", "nfc.jsonl"]).code(0).stdout, "記事: added 2, already present 0\n");
        env.run(&["run", "記事"]).code(0);
        assert_eq!(env.run(&["add", "記事", "nfd.jsonl"]).code(0).stdout, "記事: added 1, already present 1\n");
        env.run(&["run", "記事"]).code(0);
        assert_eq!(ran_keys(&env), ["ABC", nfc, "ＡＢＣ"], "ガイド ran once, by its composed key");
        // The key pasted decomposed names the same item in every command
        // that takes one.
        assert!(env.run(&["show", "記事", nfd]).code(0).stdout.contains(nfc));
        assert!(env.run(&["log", "--key", nfd]).code(0).stdout.contains(nfc));
        assert!(env.run(&["log", "記事", "--key", nfd]).code(0).stdout.contains(nfc));
        let skip = env.run(&["skip", "記事", nfd, "--reason", "済み"]).code(0).stdout.clone();
        assert!(skip.contains("already done") || skip.contains("done already"), "{skip}");
        let run = env.run(&["run", "記事", "--key", nfd]);
        assert!(!run.stderr.contains("no item"), "{run:?}");
        let cancel = env.run(&["cancel", "記事", nfd]);
        assert!(!cancel.stderr.contains("no item"), "{cancel:?}");
        // A large input (one the store takes while it is parsed) alike.
        let mut big: String = (0..2000).map(|i| format!("{{\"key\":\"k{i}\",\"pad\":\"{:040}\"}}\n", 0)).collect();
        big.push_str(&format!("{{\"key\":\"{nfd}\"}}\n"));
        let big = env.write("big.jsonl", &big);
        assert_eq!(env.run(&["add", "記事", big.to_str().unwrap()]).code(0).stdout, "記事: added 2000, already present 1\n");
        let both = env.write("both.jsonl", &format!("{{\"key\":\"{nfc}\",\"n\":1}}\n{{\"key\":\"{nfd}\",\"n\":2}}\n"));
        let ran = env.run(&["add", "new", both.to_str().unwrap()]);
        assert!(ran.code(2).stderr.contains(&format!("line 2: duplicate key \"{nfc}\" (first on line 1)")), "{ran:?}");

        env.write("f1.jsonl", &format!("{{\"site\":\"ブログ\",\"slug\":\"{nfc}\"}}\n"));
        env.write("f2.jsonl", &format!("{{\"site\":\"フ\u{3099}ログ\",\"slug\":\"{nfd}\"}}\n"));
        env.run(&["add", "f", "f1.jsonl"]).code(0);
        assert_eq!(env.run(&["add", "f", "f2.jsonl"]).code(0).stdout, "f: added 0, already present 1\n");
        let items = env.run(&["items", "f", "--json"]).code(0).json_lines();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0]["label"], format!("ブログ:{nfc}"));

        // An item added decomposed before keys were composed keeps its key:
        // the same input again finds it, and adds nothing.
        env.write("old.jsonl", "{\"key\":\"ス\u{3099}ット\u{3099}\"}\n");
        env.run(&["add", "old", "old.jsonl"]).code(0);
        let composed = "ズッド";
        for table in ["items", "item_keys"] {
            env.exec(&format!("UPDATE {table} SET key = 'ス\u{3099}ット\u{3099}' WHERE key = '{composed}'"));
        }
        assert_eq!(env.run(&["add", "old", "old.jsonl"]).code(0).stdout, "old: added 0, already present 1\n");
        assert_eq!(env.run(&["add", "old", "old.jsonl", "--dry-run"]).code(0).stdout, "old: would add 0, already present 1\n");
    }

    /// An item an older version stored under a decomposed key (ズッド as
    /// ス + ゛...) could not be named by `run --key`, `requeue`, `skip` or
    /// `cancel`: they composed what was typed, and no item had the composed
    /// key. One rule now finds an item stored in either form by either
    /// form, in every command that names an item by KEY.
    fn an_item_stored_decomposed_is_named_by_either_form_in_every_command(env) {
        let worker = logging_worker(&env);
        env.config(&format!("[batch.old]\nworker = [\"{worker}\"]\n"));
        let (nfc, nfd) = ("ズッド", "ス\u{3099}ット\u{3099}");
        env.write("old.jsonl", &format!("{{\"key\":\"{nfc}\"}}\n"));
        env.run(&["add", "old", "old.jsonl"]).code(0);
        // As an older version stored it: key and label as written.
        env.exec(&format!("UPDATE items SET key = '{nfd}', label = '{nfd}' WHERE key = '{nfc}'"));
        env.exec(&format!("UPDATE item_keys SET key = '{nfd}' WHERE key = '{nfc}'"));
        for name in [nfc, nfd] {
            let said = |ran: &common::Ran| format!("{name:?}: {ran:?}");
            let ran = env.run(&["show", "old", name]);
            assert!(ran.code(0).stdout.contains(nfd), "{}", said(&ran));
            env.run(&["log", "--key", name]).code(0);
            env.run(&["log", "old", "--key", name]).code(0);
            let ran = env.run(&["cancel", "old", name, "--reason", "止める"]);
            assert!(ran.code(0).stdout.contains("cancelled"), "{}", said(&ran));
            let ran = env.run(&["requeue", "old", name]);
            assert_eq!(ran.code(0).stdout, "old: requeued 1 item\n", "{}", said(&ran));
            let ran = env.run(&["run", "old", "--key", name]);
            ran.code(0);
            let ran = env.run(&["skip", "old", name, "--reason", "済み"]);
            assert!(ran.code(0).stdout.contains("done already") || ran.stdout.contains("already done"), "{}", said(&ran));
            let ran = env.run(&["requeue", "old", name, "--outcome", "done"]);
            assert_eq!(ran.code(0).stdout, "old: requeued 1 item\n", "{}", said(&ran));
        }
        assert_eq!(ran_keys(&env), [nfd, nfd], "the one item ran once for each name, under its stored key");
        let items = env.run(&["items", "old", "--json"]).code(0).json_lines();
        assert_eq!(items.len(), 1, "{items:?}");
    }

    /// Editing `key_fields` after items exist re-keyed every item without
    /// a word: the next add (or `source`) added them all again, done ones
    /// too, to run (and be paid for) twice. The store records how a batch's
    /// items were keyed; an add keying them otherwise is refused before
    /// anything is written, naming the batch, both specs and the config's
    /// line. Order counts: `slug,site` joins, and keys, otherwise.
    fn key_fields_edited_after_items_exist_are_refused_naming_the_config_line(env) {
        let worker = logging_worker(&env);
        let conf = |keys: &str| {
            format!("[batch.\"記事\"]\nworker = [\"{worker}\"]\nsource = [\"cat\", \"in.jsonl\"]\n{keys}\n")
        };
        let first = "key_fields = [\"site\", \"category\", \"slug\"]";
        env.config(&conf(first));
        env.write(
            "in.jsonl",
            "{\"site\":\"ブログ\",\"category\":\"技術\",\"slug\":\"はじめに\"}\n\
             {\"site\":\"ブログ\",\"category\":\"日記\",\"slug\":\"二日目\"}\n",
        );
        assert_eq!(env.run(&["add", "記事", "in.jsonl"]).code(0).stdout, "記事: added 2, already present 0\n");
        env.run(&["run", "記事"]).code(0);
        assert_eq!(ran_keys(&env).len(), 2);
        assert_eq!(batch(&env.status(), "記事")["keyed_by"], serde_json::json!(["site", "category", "slug"]));
        let recorded = "key_fields [\"site\", \"category\", \"slug\"]";
        for (keys, asked, at) in [
            ("key_fields = [\"site\", \"slug\"]", "key_fields [\"site\", \"slug\"]", "nightshift.toml:4: batch.\"記事\".key_fields: "),
            ("key_fields = [\"slug\", \"site\", \"category\"]", "key_fields [\"slug\", \"site\", \"category\"]", "nightshift.toml:4: batch.\"記事\".key_fields: "),
            ("", "each item's \"key\" field", "nightshift.toml: batch.\"記事\" (no key_fields): "),
        ] {
            env.config(&conf(keys));
            let before = env.snapshot();
            for args in [&["add", "記事", "in.jsonl"][..], &["add", "記事", "in.jsonl", "--dry-run"]] {
                let ran = env.run(args);
                let line = ran.code(2).error_line();
                for said in [at, "batch \"記事\": its items were keyed by ", recorded, &format!("this add keys them by {asked}"),
                             "put key_fields back as it was", "or name a new batch", "nothing was added"] {
                    assert!(line.contains(said), "{args:?} {keys:?}: {said:?} in {line}");
                }
            }
            assert_eq!(env.snapshot(), before, "{keys:?}: nothing changed");
            // A run fed by the `source`: its items refused, the run fails
            // (exit 1), the items done stay done and nothing runs again.
            let ran = env.run(&["run", "記事"]);
            ran.code(1);
            let log = env.run(&["log", "記事", "--kind", "source-failed"]).code(0).stdout.clone();
            assert!(log.contains(at.trim_end_matches(": ")) && log.contains(recorded) && log.contains("nothing was added"), "{keys:?}: {log}");
            assert_eq!(ran_keys(&env).len(), 2, "{keys:?}: nothing ran again");
            let s = env.status();
            let b = batch(&s, "記事");
            assert_eq!((b["total"].as_i64(), b["done"].as_i64()), (Some(2), Some(2)), "{keys:?}: nothing added");
        }
        // Put back as it was: present, nothing new; the flag alike.
        env.config(&conf(first));
        assert_eq!(env.run(&["add", "記事", "in.jsonl"]).code(0).stdout, "記事: added 0, already present 2\n");
        env.run(&["run", "記事"]).code(0);
        assert_eq!(ran_keys(&env).len(), 2);

        // A batch keyed by each item's "key" (no key_fields), then given
        // key_fields by --key-fields: refused, naming the flag.
        env.write("keyed.jsonl", "{\"key\":\"鍵\",\"site\":\"s\",\"slug\":\"x\"}\n");
        env.run(&["add", "other", "keyed.jsonl"]).code(0);
        let before = env.snapshot();
        let ran = env.run(&["add", "other", "keyed.jsonl", "--key-fields", "site,slug"]);
        let line = ran.code(2).error_line();
        assert!(line.contains("error: --key-fields site,slug: batch \"other\": its items were keyed by each item's \"key\" field"), "{line}");
        assert_eq!(env.snapshot(), before, "nothing changed");

        // A batch of an older store (nothing recorded, items there): its
        // items tell how they were keyed. Keyed otherwise, refused (it
        // adopted any spec, and added every item again); keyed alike, it
        // adopts the spec and keeps it.
        env.exec("UPDATE batches SET key_spec = NULL");
        let before = env.snapshot();
        let ran = env.run(&["add", "other", "keyed.jsonl", "--key-fields", "site,slug"]);
        let line = ran.code(2).error_line();
        assert!(
            line.contains("batch \"other\": its items were keyed otherwise than by key_fields [\"site\", \"slug\"] (the item \"鍵\" would get another key; the nightshift that added them recorded no key spec)"),
            "{line}"
        );
        assert_eq!(env.snapshot(), before, "nothing changed");
        let ran = env.run(&["add", "other", "keyed.jsonl"]);
        assert_eq!(ran.code(0).stdout, "other: added 0, already present 1\n");
        assert_eq!(batch(&env.status(), "other")["keyed_by"], "key");
        env.run(&["add", "other", "keyed.jsonl", "--key-fields", "site,slug"]).code(2);
        // Key fields, the same way: the spec of the items is adopted.
        env.write("fields.jsonl", "{\"site\":\"ブログ\",\"slug\":\"記事\"}\n");
        env.run(&["add", "by_fields", "fields.jsonl", "--key-fields", "site,slug"]).code(0);
        env.exec("UPDATE batches SET key_spec = NULL");
        env.run(&["add", "by_fields", "fields.jsonl", "--key-fields", "slug,site"]).code(2);
        let ran = env.run(&["add", "by_fields", "fields.jsonl", "--key-fields", "site,slug"]);
        assert_eq!(ran.code(0).stdout, "by_fields: added 0, already present 1\n");
    }

    /// A store a newer nightshift wrote is refused by every command, `init`
    /// too, saying what to do and that it is left as it was: of a
    /// PostgreSQL database it said "the file was left untouched".
    fn a_store_of_a_newer_nightshift_is_refused_and_left_as_it_was(env) {
        env.add_items("b", 2);
        match env.backend {
            common::Backend::Sqlite => env.sql().execute_batch("PRAGMA user_version = 999").unwrap(),
            common::Backend::Pg => {
                env.exec("UPDATE nightshift_meta SET value = '999' WHERE key = 'schema_version'");
            }
        }
        let items = env.write("in.jsonl", "{\"key\":\"新しい\"}\n");
        let before = env.snapshot();
        for args in [&["status"][..], &["add", "b", items.to_str().unwrap()], &["init"]] {
            let ran = env.run(args);
            let line = ran.code(3).error_line();
            assert!(line.contains("was written by a newer nightshift (schema v999; this build knows up to v"), "{args:?}: {line}");
            assert!(line.ends_with("upgrade nightshift; it was left as it was"), "{args:?}: {line}");
        }
        assert_eq!(env.snapshot(), before, "nothing changed");
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

    /// README step 3: the same input gives the same key forever. Adding
    /// yesterday's list again after a prune must not run its done items
    /// again (a post published twice): they are present, and said to be
    /// pruned; `show` and `requeue` name them pruned; only `prune
    /// --forget-keys` (a dry run first) makes them new again.
    fn a_pruned_item_added_again_does_not_run_again(env) {
        let worker = logging_worker(&env);
        env.config(&format!("[batch.b]\nworker = [\"{worker}\"]\n"));
        env.write("items.jsonl", "{\"key\":\"k1\"}\n{\"key\":\"k2\"}\n{\"key\":\"k3\"}\n");
        env.run(&["add", "b", "items.jsonl"]).code(0);
        env.run(&["run", "b"]).code(0);
        assert_eq!(ran_keys(&env).len(), 3);
        age_40_days(&env);
        let pruned = env.run(&["prune", "--older-than", "30d"]);
        assert!(pruned.code(0).stdout.starts_with("removed: 3 done items,"), "{}", pruned.stdout);
        assert!(pruned.stdout.contains("kept the keys of the done items"), "{}", pruned.stdout);
        assert_eq!(batch(&env.status(), "b")["pruned_keys"], 3);
        let status = env.run(&["status"]);
        assert!(status.code(0).stdout.contains("pruned: the keys of 3 done items are kept"), "{}", status.stdout);

        let again = env.run(&["add", "b", "items.jsonl", "--json"]).code(0).json();
        assert_eq!((again["added"].as_i64(), again["present"].as_i64(), again["pruned"].as_i64()), (Some(0), Some(3), Some(3)));
        let when = again["pruned_between"][0].as_str().unwrap().to_string();
        let text = env.run(&["add", "b", "items.jsonl"]);
        assert_eq!(text.code(0).stdout, format!("b: added 0, already present 3 (3 of them done and pruned on {})\n", &when[..10]));
        env.run(&["run", "b"]).code(0);
        assert_eq!(ran_keys(&env).len(), 3, "nothing ran again");
        assert_eq!(batch(&env.status(), "b")["total"], 0);

        let shown = env.run(&["show", "b", "k2"]);
        assert!(shown.code(0).stdout.contains(&format!("state:     pruned on {when}")), "{}", shown.stdout);
        assert!(shown.stdout.contains("outcome done"), "{}", shown.stdout);
        assert_eq!(env.run(&["show", "b", "k2", "--json"]).code(0).json()["pruned"]["pruned_at"], when.as_str());
        let requeue = env.run(&["requeue", "b", "k2"]);
        assert!(requeue.code(2).stderr.contains(&format!("item \"k2\" of batch \"b\" was pruned on {when}")), "{}", requeue.stderr);
        env.run(&["show", "b", "nope"]).code(2);

        // Forgetting the keys: a dry run lists and changes nothing.
        let before = env.snapshot();
        let dry = env.run(&["prune", "--older-than", "30d", "--forget-keys", "--dry-run"]);
        assert!(dry.code(0).stdout.contains("would forget the keys of 3 items done before "), "{}", dry.stdout);
        assert!(dry.stdout.contains("\n  b: 3\n"), "{}", dry.stdout);
        assert_eq!(env.snapshot(), before, "a dry run changes nothing");
        let real = env.run(&["prune", "--older-than", "30d", "--forget-keys"]);
        assert!(real.code(0).stdout.contains("forgot the keys of 3 items done before "), "{}", real.stdout);
        let forgot = env.events("b", "keys-forgotten");
        assert_eq!((forgot.len(), forgot[0]["fields"]["keys"].as_i64()), (1, Some(3)));
        assert!(forgot[0]["actor"].as_str().unwrap().contains('@'), "{}", forgot[0]);
        assert_eq!(batch(&env.status(), "b")["pruned_keys"], 0);
        assert_eq!(env.run(&["add", "b", "items.jsonl"]).code(0).stdout, "b: added 3, already present 0\n");
        env.run(&["run", "b"]).code(0);
        assert_eq!(ran_keys(&env).len(), 6, "forgotten keys run again");
        env.assert_counts_consistent();
    }

    /// A prune that takes every run keeps the newest, so run numbers go on
    /// from it: they were given again from 1 (SQLite), and a kept dead
    /// letter's `run_id` then named a run of another batch.
    fn a_prune_never_lets_a_run_number_be_given_again(env) {
        env.config("[batch.b]\nworker = [\"sh\", \"-c\", \"cat >/dev/null; echo '{}'\"]\n");
        env.add_items("b", 1);
        env.run(&["run", "b"]).code(0);
        env.run(&["run", "b"]).code(0);
        env.exec("UPDATE runs SET started_at = started_at - 3456000000, ended_at = ended_at - 3456000000");
        let pruned = env.run(&["prune", "--older-than", "30d"]);
        assert!(pruned.code(0).stdout.contains(" 1 runs,"), "{}", pruned.stdout);
        let next = env.run(&["run", "b", "--json"]).code(0).json();
        assert_eq!(next["run_id"].as_i64(), Some(3), "{next}");
    }

    /// A store with an older layout (as the previous release left it: the
    /// newest migration undone): a read-only open cannot migrate it, so
    /// reads refuse it in one line and change nothing; a write (`init`)
    /// upgrades it, and reads work again.
    fn a_store_with_an_older_layout_is_refused_by_reads_and_upgraded_by_a_write(env) {
        env.add_items("b", 2);
        match env.backend {
            // SQLite's versions 18 and 19 replace three triggers: stand-ins here;
            // version 20's indexes and 21's key table go (the items table keeps its layout).
            Backend::Sqlite => env.sql().execute_batch(
                "DROP TRIGGER items_key_delete; DROP TABLE item_keys;
                 DROP INDEX items_claimed; DROP INDEX items_done;
                 DROP TRIGGER items_count_update; DROP TRIGGER items_minute_stats;
                 DROP TRIGGER items_failed_update;
                 CREATE TRIGGER items_failed_update AFTER UPDATE ON items BEGIN SELECT 1; END;
                 ALTER TABLE items DROP COLUMN self_counted;
                 CREATE TRIGGER items_count_update AFTER UPDATE ON items BEGIN SELECT 1; END;
                 CREATE TRIGGER items_minute_stats AFTER UPDATE ON items BEGIN SELECT 1; END;
                 DROP TABLE pool_places; DROP TABLE pool_usage; DROP TABLE run_usage; ALTER TABLE items DROP COLUMN usage;
                 DROP INDEX events_by_rare_kind; CREATE INDEX events_by_kind ON events (kind, id);
                 DROP INDEX items_queue; CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at);
                 DROP TABLE spend; ALTER TABLE runs DROP COLUMN cancelled; ALTER TABLE items DROP COLUMN priority;
                 DROP TABLE pool_dims; DROP TABLE pool_holds;
                 ALTER TABLE items DROP COLUMN done_version; DROP TABLE attempt_logs; ALTER TABLE items DROP COLUMN cancel_to;
                 ALTER TABLE items DROP COLUMN cancel_by; ALTER TABLE items DROP COLUMN cancel_reason;
                 ALTER TABLE locks DROP COLUMN stop; ALTER TABLE locks DROP COLUMN stop_by;
                 ALTER TABLE batches DROP COLUMN hold_key;
                 DROP TABLE daemons; ALTER TABLE locks DROP COLUMN ttl_ms;
                 DROP TABLE workers; ALTER TABLE items DROP COLUMN pool_wait_since; ALTER TABLE items DROP COLUMN retry_at;
                 ALTER TABLE batches DROP COLUMN cycle_fire_at; ALTER TABLE batches DROP COLUMN cycle_crashed;
                 ALTER TABLE batches DROP COLUMN queued_fire_at;
                 ALTER TABLE runs DROP COLUMN stopped;
                 ALTER TABLE batches DROP COLUMN fire_schedule; ALTER TABLE batches DROP COLUMN fire_timezone;
                 ALTER TABLE batches DROP COLUMN key_spec;
                 PRAGMA user_version = 4;").unwrap(),
            Backend::Pg => env.pg_sql().batch_execute(
                "DROP TRIGGER items_counted ON items;
                 CREATE TRIGGER items_counted AFTER UPDATE ON items
                     REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
                     FOR EACH STATEMENT EXECUTE FUNCTION items_counted();
                 DROP FUNCTION counts_itself(), counted_itself();
                 ALTER TABLE items ADD FOREIGN KEY (batch_id) REFERENCES batches (id);
                 DROP INDEX items_queue; CREATE INDEX items_queue ON items (batch_id, status, tier, next_attempt_at);
                 DROP TABLE pool_places, pool_usage, run_usage; ALTER TABLE items DROP COLUMN usage;
                 DROP INDEX events_by_rare_kind; CREATE INDEX events_by_kind ON events (kind, id);
                 DROP TABLE spend; ALTER TABLE runs DROP COLUMN cancelled; ALTER TABLE items DROP COLUMN priority;
                 CREATE INDEX items_claimable ON items (batch_id, id)
                     WHERE status = 'pending' AND tier IS NULL AND next_attempt_at IS NULL;
                 DROP TABLE pool_dims; DROP TABLE pool_holds;
                 ALTER TABLE items DROP COLUMN done_version; DROP TABLE attempt_logs; DROP INDEX items_cancels; ALTER TABLE items DROP COLUMN cancel_to;
                 ALTER TABLE items DROP COLUMN cancel_by; ALTER TABLE items DROP COLUMN cancel_reason;
                 ALTER TABLE locks DROP COLUMN stop; ALTER TABLE locks DROP COLUMN stop_by;
                 ALTER TABLE batches DROP COLUMN hold_key;
                 ALTER TABLE batches DROP COLUMN cycle_fire_at, DROP COLUMN cycle_crashed, DROP COLUMN queued_fire_at;
                 ALTER TABLE runs DROP COLUMN stopped;
                 ALTER TABLE batches DROP COLUMN fire_schedule, DROP COLUMN fire_timezone;
                 ALTER TABLE batches DROP COLUMN key_spec;
                 DROP TABLE daemons; ALTER TABLE locks DROP COLUMN ttl_ms;
                 CREATE FUNCTION items_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
                 BEGIN
                     INSERT INTO counts AS c (batch_id, bucket, shard, n)
                     SELECT batch_id, 'pending', shard(), count(*) FROM new_rows
                      GROUP BY batch_id ORDER BY batch_id
                     ON CONFLICT (batch_id, bucket, shard) DO UPDATE SET n = c.n + excluded.n;
                     RETURN NULL;
                 END $$;
                 CREATE TRIGGER items_inserted AFTER INSERT ON items
                     REFERENCING NEW TABLE AS new_rows
                     FOR EACH STATEMENT EXECUTE FUNCTION items_inserted();
                 DELETE FROM nightshift_meta WHERE key = 'store_id';
                 DROP TABLE item_keys; ALTER TABLE items ADD UNIQUE (batch_id, key);
                 UPDATE nightshift_meta SET value = '6' WHERE key = 'schema_version';").unwrap(),
        }
        let before = env.snapshot();
        for args in [&["status"][..], &["show", "b", "k1"], &["prune", "--older-than", "1s", "--dry-run"]] {
            let ran = env.run(args);
            assert!(ran.code(3).stderr.contains("has an older layout"), "{args:?}: {}", ran.stderr);
            assert!(ran.stderr.contains("nightshift init"), "{}", ran.stderr);
        }
        assert_eq!(env.snapshot(), before, "reads change nothing, and do not migrate");
        env.run(&["init"]).code(0);
        assert_eq!(batch(&env.status(), "b")["pending"], 2);
        env.run(&["add", "b", "b-items.jsonl"]).code(0);
        // Counted once (PostgreSQL's version 26 dropped the trigger that
        // counted the add's rows, which now count themselves).
        env.add_items("b", 5);
        assert_eq!(batch(&env.status(), "b")["pending"], 5);
    }

    /// A store the previous release left, whose newer layouts only add
    /// columns (the last three migrations undone here): reads take it as
    /// it is, say what they say after the upgrade, and write nothing. They
    /// refused it ("has an older layout"), so the first `status` after an
    /// upgrade failed until a write upgraded the store.
    fn a_store_whose_newer_layouts_only_add_columns_is_read_as_it_is(env) {
        env.config("[batch.b]\nworker = [\"sh\", \"-c\", \"cat >/dev/null; echo '{}'\"]\n");
        env.add_items("b", 3);
        env.run(&["run", "b", "--limit", "1"]).code(0);
        let reads: [&[&str]; 4] = [
            &["items", "b", "--json"],
            &["show", "b", "k2", "--json"],
            &["show", "b", "k1"],
            &["log", "b", "--json"],
        ];
        // The human `show` says how long ago the item changed; a second may
        // pass between the two reads.
        let said: Vec<String> = reads.iter().map(|a| without_ages(&env.run(a).code(0).stdout)).collect();
        let mut counts = batch(&env.status(), "b").clone();
        // The key spec was in a column the undone migration added.
        counts["keyed_by"] = serde_json::Value::Null;
        undo_column_migrations(&env);
        let before = env.snapshot();
        for (args, said) in reads.iter().zip(&said) {
            let ran = env.run(args);
            assert_eq!(&without_ages(&ran.code(0).stdout), said, "{args:?}: {}", ran.stderr);
        }
        assert_eq!(batch(&env.status(), "b"), &counts);
        assert!(env.run(&["status"]).code(0).stdout.contains("2 wait for a run"), "{}", env.run(&["status"]).stdout);
        assert_eq!(env.snapshot(), before, "reads change nothing, and do not migrate");
        // A write upgrades it, as before.
        env.run(&["init"]).code(0);
        assert_ne!(env.snapshot(), before);
        env.run(&["run", "b"]).code(0);
        assert_eq!(batch(&env.status(), "b")["done"], 3);
    }

    /// A writable command does not upgrade an older layout while a runner
    /// of the build that wrote it holds a seat: that runner's statements
    /// would go on writing under the new layout (a counter that moved from
    /// a trigger to the statements, and its counts would drift). It is
    /// refused, names who holds the store, and changes nothing; reads go
    /// on. A holder here counts while its process lives, one elsewhere
    /// until its seat expires; then the same command upgrades the store.
    fn an_older_layout_is_not_upgraded_under_a_live_runner(env) {
        env.config("[batch.b]\nworker = [\"sh\", \"-c\", \"cat >/dev/null; echo '{}'\"]\n");
        env.add_items("b", 3);
        env.run(&["run", "b", "--limit", "1"]).code(0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let hour = 3_600_000;
        // An older runner on this host (a process that lives while we look),
        // and one on another host whose seat has an hour to run.
        let mut here = common::Background(std::process::Command::new("sleep").arg("600").spawn().unwrap());
        let host = nightshift::util::identity::host();
        env.exec(&format!(
            "INSERT INTO locks (batch_id, token, host, pid, run_id, acquired_at, expires_at)
             SELECT id, 'here', '{host}', {}, 1, {now}, {} FROM batches WHERE name = 'b'",
            here.id(),
            now + hour
        ));
        env.exec(&format!(
            "INSERT INTO locks (batch_id, token, host, pid, run_id, acquired_at, expires_at)
             SELECT id, 'there', 'host-x', 77, NULL, {now}, {} FROM batches WHERE name = 'b'",
            now + hour
        ));
        undo_column_migrations(&env);
        let before = env.snapshot();
        let file = env.write("more.jsonl", "{\"key\":\"n1\"}\n");
        let refused = env.run(&["add", "b", file.to_str().unwrap()]);
        let said = &refused.code(3).stderr;
        assert!(said.contains("has an older layout") && said.contains("a runner is using it"), "{said}");
        assert!(said.contains(&format!("run 1 of batch b, pid {} on {host}", here.id())), "{said}");
        assert!(said.contains("batch b, pid 77 on host-x"), "{said}");
        assert!(said.contains("nothing was changed"), "{said}");
        assert_eq!(env.snapshot(), before, "refused whole");
        env.run(&["status"]).code(0);
        // The holder here is gone: only the one elsewhere holds it back.
        here.kill().unwrap();
        here.wait().unwrap();
        let refused = env.run(&["add", "b", file.to_str().unwrap()]);
        let said = &refused.code(3).stderr;
        assert!(said.contains("host-x") && !said.contains(&host), "{said}");
        assert_eq!(env.snapshot(), before, "refused whole");
        // Its seat expired: the store is upgraded and the item added.
        env.exec(&format!("UPDATE locks SET expires_at = {}", now - hour));
        env.run(&["add", "b", file.to_str().unwrap()]).code(0);
        assert_eq!(batch(&env.status(), "b")["pending"], 3);
        env.assert_counts_consistent();
    }

    /// The same through a batch's `source`: yesterday's list again, after a
    /// prune, runs nothing.
    fn a_source_listing_pruned_items_again_runs_nothing(env) {
        let worker = logging_worker(&env);
        env.write("list.jsonl", "{\"key\":\"s1\"}\n{\"key\":\"s2\"}\n");
        env.config(&format!("[batch.s]\nworker = [\"{worker}\"]\nsource = [\"cat\", \"list.jsonl\"]\n"));
        env.run(&["run", "s"]).code(0);
        assert_eq!(ran_keys(&env), ["s1", "s2"]);
        age_40_days(&env);
        env.run(&["prune", "--older-than", "30d"]).code(0);
        env.run(&["run", "s"]).code(0);
        assert_eq!(ran_keys(&env), ["s1", "s2"], "nothing ran again");
        let source = env.events("s", "source");
        let last = source.last().unwrap()["message"].as_str().unwrap().to_string();
        assert!(last.starts_with("source added 0, already present 2 (2 of them done and pruned on "), "{last}");
    }

    /// A key named twice is one item: the requeue moves it once and says
    /// so, as its dry run did; it failed (exit 3, "a requeue chunk moved 1
    /// items of the 2 it counted") while the dry run listed it twice.
    fn a_key_named_twice_is_requeued_once(env) {
        env.failing_batch("b");
        let dry = env.run(&["requeue", "b", "k1", "k1", "k2", "--dry-run", "--json"]).code(0).json();
        assert_eq!(dry["count"], 2, "{dry}");
        let ran = env.run(&["requeue", "b", "k1", "k2", "k1"]);
        assert_eq!(ran.code(0).stdout, "b: requeued 2 items\n", "{}", ran.stderr);
        assert_eq!(env.item("k1").0, "pending");
        assert_eq!(env.int("SELECT count(*) FROM events WHERE kind = 'requeued'"), 2);
        env.assert_counts_consistent();
    }

    /// A key named beside `--tier` or `--class` that leaves it out is
    /// refused, named with its tier or class, and nothing moves, in the dry
    /// run too: `requeue b k1 k3 --tier retry` read "requeued 1 item" and
    /// left k1 (manual) failed without a word (with k1 alone, "requeued 0
    /// items", exit 0). Keys that match move as before.
    fn a_key_the_filters_leave_out_refuses_the_requeue(env) {
        env.failing_batch("b");
        let refused = |args: &[&str], groups: &str| {
            for dry in [false, true] {
                let mut all = vec!["requeue", "b"];
                all.extend_from_slice(args);
                if dry {
                    all.push("--dry-run");
                }
                let ran = env.run(&all);
                assert_eq!(ran.code(2).stdout, "", "{all:?}");
                assert_eq!(ran.stderr, format!("nightshift: error: nothing was requeued in batch \"b\": {groups}\n"), "{all:?}");
            }
        };
        refused(&["k1", "--tier", "retry"], "left out by --tier retry: k1 (manual tier) (each key named must match --tier retry too)");
        refused(&["k3", "k1", "--tier", "retry"], "left out by --tier retry: k1 (manual tier) (each key named must match --tier retry too)");
        refused(&["k1", "k4", "--class", "BadInput"], "left out by --class BadInput: k4 (class Exit1) (each key named must match --class BadInput too)");
        refused(
            &["k1", "k3", "k4", "--class", "BadInput", "--tier", "manual"],
            "left out by --class BadInput --tier manual: k3 (retry tier, class TempFail), k4 (class Exit1) \
             (each key named must match --class BadInput --tier manual too)",
        );
        assert_eq!(env.int("SELECT count(*) FROM events WHERE kind = 'requeued'"), 0);
        assert_eq!(env.item("k1"), ("failed".into(), Some("manual".into()), 1));

        let ran = env.run(&["requeue", "b", "k1", "k2", "--class", "BadInput", "--tier", "manual", "--dry-run"]);
        assert!(ran.code(0).stdout.starts_with("b: would requeue 2 items\n"), "{ran:?}");
        let ran = env.run(&["requeue", "b", "k1", "k2", "--class", "BadInput", "--tier", "manual"]);
        assert_eq!(ran.code(0).stdout, "b: requeued 2 items\n", "{ran:?}");
        assert_eq!(env.item("k1").0, "pending");
        env.assert_counts_consistent();
    }

    /// Every key a requeue refuses is named in one refusal, grouped by why,
    /// in the dry run too and with `--json` (the groups on stdout as JSON),
    /// exit 2, nothing moved: a key not failed beside one `--tier` leaves
    /// out reported only the first ("not failed in batch \"b\": k5
    /// (done)"), and the fixed command met the second on the next try.
    fn every_key_a_requeue_refuses_is_named_at_once(env) {
        env.failing_batch("b");
        env.add_items("b", 9);
        let before = env.snapshot();
        let groups = "not failed: k5 (done), k9 (pending); left out by --tier manual: k3 (retry tier) \
                      (only failed items are requeued; done ones run again with --outcome done|empty|skipped; \
                      each key named must match --tier manual too)";
        for dry in [false, true] {
            let mut args = vec!["requeue", "b", "k5", "k1", "k3", "k9", "--tier", "manual"];
            if dry {
                args.push("--dry-run");
            }
            let ran = env.run(&args);
            assert_eq!(ran.code(2).stdout, "", "{args:?}");
            assert_eq!(ran.stderr, format!("nightshift: error: nothing was requeued in batch \"b\": {groups}\n"), "{args:?}");
            args.push("--json");
            let ran = env.run(&args);
            assert_eq!(ran.code(2).stderr, format!("nightshift: error: nothing was requeued in batch \"b\": {groups}\n"), "{args:?}");
            assert_eq!(ran.json(), serde_json::json!({
                "batch": "b",
                "dry_run": dry,
                "refused": [
                    {"why": "not_failed", "says": "not failed", "keys": [{"key": "k5", "state": "done"}, {"key": "k9", "state": "pending"}]},
                    {"why": "left_out", "says": "left out by --tier manual", "keys": [{"key": "k3", "state": "retry tier"}]},
                ],
                "error": {
                    "command": "requeue",
                    "says": format!("nothing was requeued in batch \"b\": {groups}"),
                    "exit": 2,
                },
            }), "{args:?}");
        }
        // A key no item has joins them; alone, it is said as ever.
        let ran = env.run(&["requeue", "b", "k99", "k5", "k1"]);
        assert_eq!(
            ran.code(2).error_line(),
            "nightshift: error: nothing was requeued in batch \"b\": no such item: k99; not failed: k5 (done) \
             (only failed items are requeued; done ones run again with --outcome done|empty|skipped)"
        );
        assert_eq!(env.run(&["requeue", "b", "k99", "k1"]).code(2).error_line(), "nightshift: error: no item \"k99\" in batch \"b\"");
        let ran = env.run(&["requeue", "b", "k1", "k5", "--outcome", "empty"]);
        assert_eq!(
            ran.code(2).error_line(),
            "nightshift: error: nothing was requeued in batch \"b\": not done/empty: k1 (failed), k5 (done) \
             (--outcome empty requeues done items with that outcome)"
        );
        assert_eq!(env.snapshot(), before, "nothing changed");
        assert_eq!(env.run(&["requeue", "b", "k1", "k2", "--tier", "manual"]).code(0).stdout, "b: requeued 2 items\n");
    }

    /// An unknown batch's error names the config's batches beside the
    /// store's, in one sorted list, each once: it named only the store's
    /// ("(known: b)", or "the store has no batches yet"), though the
    /// commands take a batch the config names before it has any items.
    fn an_unknown_batch_is_named_with_the_configs_batches_too(env) {
        env.config("[batch.c]\nworker = [\"true\"]\n\n[batch.b]\nworker = [\"true\"]\n\n[batch.a]\nworker = [\"true\"]\n");
        let ran = env.run(&["status", "zz"]);
        assert_eq!(ran.code(2).stderr, "nightshift: error: unknown batch \"zz\" (known: a, b, c)\n");
        env.add_items("b", 1);
        env.add_items("x", 1);
        for args in [
            vec!["status", "zz"],
            vec!["items", "zz"],
            vec!["show", "zz", "k1"],
            vec!["requeue", "zz", "--all-failed"],
            vec!["requeue", "zz", "k1", "--dry-run"],
            vec!["dlq", "zz"],
            vec!["log", "zz", "--key", "k1"],
            vec!["skip", "zz", "k1", "--reason", "r"],
            vec!["pause", "zz"],
            vec!["run", "zz", "--", "/bin/true"],
        ] {
            let ran = env.run(&args);
            assert_eq!(ran.code(2).stderr, "nightshift: error: unknown batch \"zz\" (known: a, b, c, x)\n", "{args:?}");
        }
    }

    /// A batch the config names that has not run yet (nothing added) reads
    /// as empty: no dead letters, no events, no items, nothing to requeue,
    /// and a key named in it is not there; `log --follow` waits for its
    /// first event. Each said "unknown batch \"記事\" (known: ...)", exit 2,
    /// of a batch the config names (and `log -f` could not be opened before
    /// the night's first run).
    fn a_configured_batch_that_has_not_run_yet_reads_as_empty(env) {
        env.config("[batch.\"記事\"]\nworker = [\"true\"]\n\n[batch.other]\nworker = [\"true\"]\n");
        env.add_items("other", 1);
        let mut follow = env.spawn("follow", &["log", "記事", "--follow"]);
        assert_eq!(env.run(&["dlq", "記事"]).code(0).stdout, "記事: no dead letters\n");
        let json = env.run(&["dlq", "記事", "--json", "--since", "1h"]).code(0).json();
        assert_eq!(json["classes"], serde_json::json!([]), "{json}");
        assert_eq!(env.run(&["dlq", "記事", "--jsonl"]).code(0).stdout, "");
        assert_eq!(env.run(&["log", "記事"]).code(0).stdout, "");
        assert_eq!(env.run(&["items", "記事", "--json"]).code(0).stdout, "");
        assert_eq!(env.run(&["requeue", "記事", "--all-failed"]).code(0).stdout, "記事: requeued 0 items\n");
        for args in [
            vec!["requeue", "記事", "k1"],
            vec!["skip", "記事", "k1", "--reason", "不要"],
            vec!["skip", "記事", "k1", "--reason", "不要", "--dry-run"],
            vec!["show", "記事", "k1"],
        ] {
            let ran = env.run(&args);
            assert!(ran.code(2).stderr.starts_with("nightshift: error: no item \"k1\" in batch \"記事\""), "{args:?}: {}", ran.stderr);
        }
        // A name neither the config nor the store knows is still refused.
        assert!(env.run(&["dlq", "nope"]).code(2).stderr.contains("unknown batch \"nope\""));
        // What the batch's first event is, the follower prints.
        env.add_items("記事", 1);
        common::wait_for("the follower to print the first event", || {
            env.output_of("follow").0.contains("added 1, already present 0")
        });
        assert_eq!(follow.try_wait().unwrap(), None, "{:?}", env.output_of("follow"));
    }

    /// SIGTERM to a long requeue while a runner holds the batch (so the
    /// requeue goes in short chunks): it stops after the chunk in hand and
    /// says exactly how many items moved, which is what the store holds;
    /// running it again moves the rest.
    fn sigterm_stops_a_requeue_beside_a_runner_and_says_exactly_how_far_it_got(env) {
        const N: i64 = 30_000;
        let (gate, started) = (env.path("gate"), env.path("started"));
        let slow = env.script("slow.sh", &format!(
            "cat >/dev/null\ntouch {}\nwhile [ ! -e {} ]; do sleep 0.05; done\necho '\"ok\"'",
            started.display(), gate.display()));
        env.config(&format!("[batch.b]\nworker = [\"{}\"]\nconcurrency = 1\n", slow.display()));
        env.add_items("b", N as usize);
        env.exec("UPDATE items SET status = 'failed', tier = 'manual', error_class = 'Boom', error_message = 'boom'");
        common::add_keys(&env, "b", &["slow"]);
        // The runner's one slot is busy with `slow`: it claims nothing else.
        let mut runner = env.spawn("run", &["run", "b"]);
        common::wait_for("the runner's worker", || started.exists());

        let pending = || env.int("SELECT count(*) FROM items WHERE status = 'pending'");
        let mut requeue = env.spawn("requeue", &["requeue", "b", "--all-failed"]);
        // Stepped in short slices, stopped between them, so that its first
        // chunk is seen with the rest still to do however loaded the
        // machine (a poll alone could miss the whole requeue).
        use nix::sys::signal::Signal::{SIGCONT, SIGSTOP, SIGTERM};
        let pid = requeue.id();
        common::signal(pid, SIGSTOP);
        common::wait_for("the first chunk", || {
            if pending() > 0 {
                return true;
            }
            common::signal(pid, SIGCONT);
            std::thread::sleep(std::time::Duration::from_millis(2));
            common::signal(pid, SIGSTOP);
            false
        });
        assert!(pending() < N, "the requeue ended within one slice");
        common::signal(pid, SIGTERM);
        common::signal(pid, SIGCONT);
        let code = exit_code(&mut requeue);
        let (out, err) = env.output_of("requeue");
        let moved = pending();
        assert_eq!(code, Some(130), "{out}{err}");
        assert!(moved < N, "the requeue ended before the signal");
        assert_eq!(err, format!(
            "nightshift: error: {moved} of {N} failed items requeued before SIGTERM; run it again for the rest\n"));
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'failed'"), N - moved);
        assert_eq!(env.int("SELECT count(*) FROM events WHERE kind = 'requeued'"), moved);
        env.assert_counts_consistent();

        let rest = env.run(&["requeue", "b", "--all-failed"]);
        assert_eq!(rest.code(0).stdout, format!("b: requeued {} items\n", N - moved));
        common::signal(runner.id(), nix::sys::signal::Signal::SIGTERM);
        // The worker ends only once the runner has taken the stop (said
        // after it is set): before that, a loaded machine could let the
        // worker end and its slot claim again ahead of the signal.
        common::wait_for("the runner to take the stop", || env.output_of("run").1.contains("stopping: no new items"));
        std::fs::write(&gate, "").unwrap();
        assert_eq!(exit_code(&mut runner), Some(130), "{:?}", env.output_of("run"));
        assert_eq!(pending(), N, "the runner claimed none of them");
        env.assert_counts_consistent();
    }

    /// `log B --key K` of a name no item of B has is refused as `show B K`
    /// refuses it (the same line, exit 2), with and without `--follow` and
    /// `--json`, in a batch the store has seen or only the config names.
    /// It printed nothing and exited 0, and `--follow` waited forever. An
    /// item with no event yet is still listed (empty) and followed.
    fn log_of_a_key_no_item_has_is_refused_as_show_refuses_it(env) {
        env.config("[batch.b]\nworker = [\"true\"]\n\n[batch.c]\nworker = [\"true\"]\n");
        env.add_items("b", 2);
        for batch in ["b", "c"] {
            let show = env.run(&["show", batch, "k9"]);
            assert!(show.code(2).stderr.starts_with(&format!("nightshift: error: no item \"k9\" in batch \"{batch}\"")), "{show:?}");
            for extra in [&[][..], &["--json"], &["--follow"], &["--follow", "--json"]] {
                let mut args = vec!["log", batch, "--key", "k9"];
                args.extend_from_slice(extra);
                let mut log = env.spawn("log", &args);
                assert_eq!(exit_code(&mut log), Some(2), "{args:?}: {:?}", env.output_of("log"));
                assert_eq!(env.output_of("log"), (json_error_if(&args, &show.stderr), show.stderr.clone()), "{args:?}");
            }
        }
        // k1 has no event yet: nothing to list, and followed until its first.
        assert_eq!(env.run(&["log", "b", "--key", "k1", "--json"]).code(0).stdout, "");
        let mut follow = env.spawn("follow", &["log", "b", "--key", "k1", "--follow"]);
        env.run(&["run", "b"]).code(0);
        common::wait_for("the follower to print k1's event", || env.output_of("follow").0.contains(" empty "));
        assert!(env.output_of("follow").0.lines().all(|l| l.contains(" k1 ")), "{:?}", env.output_of("follow"));
        assert_eq!(follow.try_wait().unwrap(), None, "{:?}", env.output_of("follow"));
    }

    /// `log --key K` without a batch names the item as `log B --key K`
    /// does, across every batch: a key some batch has (its events in each),
    /// else a label one item has; several with the label are listed, one
    /// line each; a name no batch has is refused, exit 2, with `--follow`
    /// too, before following. It printed nothing and exited 0 (and
    /// `--follow` waited forever) for a name no item had, and a label
    /// found nothing.
    fn log_of_a_key_without_a_batch_names_it_in_any_batch(env) {
        env.write(
            "b.jsonl",
            "{\"key\":\"k1\",\"label\":\"夏休みの記事\"}\n{\"key\":\"k2\",\"label\":\"一つだけ\"}\n",
        );
        env.write("c.jsonl", "{\"key\":\"k1\"}\n{\"key\":\"c2\",\"label\":\"夏休みの記事\"}\n");
        env.run(&["add", "b", "b.jsonl"]).code(0);
        env.run(&["add", "c", "c.jsonl"]).code(0);
        env.config("[batch.b]\nworker = [\"true\"]\n\n[batch.c]\nworker = [\"true\"]\n");
        env.run(&["run", "b"]).code(0);
        env.run(&["run", "c"]).code(0);

        let k1 = env.run(&["log", "--key", "k1", "--json"]).code(0).json_lines();
        let batches: std::collections::BTreeSet<_> = k1.iter().map(|e| e["batch"].as_str().unwrap().to_string()).collect();
        assert_eq!(batches.into_iter().collect::<Vec<_>>(), ["b", "c"], "a key: its events in every batch");
        assert!(k1.iter().all(|e| e["key"] == "k1"));

        let one = env.run(&["log", "--key", "一つだけ", "--json"]).code(0).json_lines();
        assert!(!one.is_empty() && one.iter().all(|e| e["key"] == "k2" && e["batch"] == "b"), "{one:?}");
        assert_eq!(one, env.run(&["log", "b", "--key", "k2", "--json"]).code(0).json_lines());

        let several = env.run(&["log", "--key", "夏休みの記事"]);
        assert_eq!(several.code(2).stdout, "");
        assert_eq!(
            several.stderr,
            "nightshift: error: 2 items have the label \"夏休みの記事\"; name one by its key:\n  \
             nightshift log b --key k1   (done/empty)\n  nightshift log c --key c2   (done/empty)\n"
        );

        let refusal = "nightshift: error: no batch has an item \"k9\" (neither a key nor a label of any \
                       item); to search one batch's keys and labels: nightshift items BATCH --search k9\n";
        for extra in [&[][..], &["--json"], &["--follow"], &["--follow", "--json"]] {
            let mut args = vec!["log", "--key", "k9"];
            args.extend_from_slice(extra);
            let mut log = env.spawn("log", &args);
            assert_eq!(exit_code(&mut log), Some(2), "{args:?}: {:?}", env.output_of("log"));
            assert_eq!(env.output_of("log"), (json_error_if(&args, refusal), refusal.to_string()), "{args:?}");
        }
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
    assert!(
        config.contains("\n# db = \"postgres://user@host/db\"\n"),
        "{config}"
    );
    assert!(env.run(&["init"]).code(0).stdout.contains("already exists"));
    // No file store appeared, and a PAUSED file in the working directory
    // is not an emergency stop of a database server.
    assert!(!env.path("nightshift.db").exists());
    env.write("PAUSED", "");
    let s = env.status();
    assert_eq!(s["emergency_stop"], serde_json::Value::Null);
    assert_eq!(env.int("SELECT count(*) FROM batches"), 0);
}

/// On PostgreSQL a persistent run's slots write on sessions of their own
/// (`runner::writer`'s lanes), so two slots' commits run side by side on
/// the server: the done marks are counted by two sessions (each lane is
/// given a counters' shard of its own, `PgStore::another_session`, where
/// the process id modulo 32 made two lanes share one now and then), and
/// every count stays exact.
#[test]
fn persistent_slots_write_on_sessions_of_their_own_on_postgresql() {
    require!(Tool::Python3);
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    env.write("worker.py", PERSISTENT);
    env.config("[batch.p]\nworker = [\"python3\", \"worker.py\"]\nmode = \"persistent\"\nconcurrency = 2\nretries = 0\n");
    env.add_items("p", 300);
    env.run(&["run", "p"]).code(1);
    let s = env.status();
    let p = batch(&s, "p");
    assert_eq!(
        (p["done"].as_i64(), p["manual"].as_i64()),
        (Some(270), Some(30))
    );
    assert_eq!(p["last_run"]["counts"]["done"], 270);
    assert_eq!(p["last_run"]["counts"]["cost"], 135.0);
    let sessions =
        env.int("SELECT count(DISTINCT shard) FROM counts WHERE bucket = 'done' AND n <> 0");
    assert_eq!(sessions, 2, "the done marks' sessions");
    env.assert_counts_consistent();
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

/// A password in the URL is never printed: not in help, status (an empty
/// store's included), or errors; nor one with a `/` in it, which the
/// driver reads as part of the password (a generated one often has one).
#[test]
fn the_password_of_a_url_is_never_shown() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    let run = |args: &[&str], db: &str| {
        common::ran(
            env.cmd()
                .env("NIGHTSHIFT_DB", db)
                .args(args)
                .output()
                .unwrap(),
        )
    };
    for password in ["s3cret", "Xk9/aB+c="] {
        // The test server trusts the socket: any password connects.
        let with_password = env.db.to_str().unwrap().replacen(
            "postgres:///",
            &format!("postgresql://postgres:{password}@/"),
            1,
        );
        let help = run(&["status", "--help"], &with_password);
        assert!(!help.stdout.contains(password), "{}", help.stdout);
        let status = run(&["status", "--json"], &with_password);
        let store = status.code(0).json()["store"].as_str().unwrap().to_string();
        assert!(store.contains("postgres:***@"), "{store}");
        let empty = run(&["status"], &with_password);
        let text = empty.code(0).stdout.clone();
        assert!(
            text.contains("postgres:***@") && !text.contains(password),
            "{text}"
        );
        let missing = with_password.replacen("/t_", "/missing_", 1);
        let err = run(&["status"], &missing);
        assert_eq!(err.code, 3, "{}", err.stderr);
        assert!(
            err.stderr.contains("***") && !err.stderr.contains(password),
            "{}",
            err.stderr
        );
    }
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

/// Takes the store back to the layout the previous release left, whose
/// newer migrations only add columns (the last three undone).
fn undo_column_migrations(env: &Env) {
    match env.backend {
        Backend::Sqlite => env
            .sql()
            .execute_batch(
                "ALTER TABLE items DROP COLUMN pool_wait_since; ALTER TABLE items DROP COLUMN retry_at;
                 ALTER TABLE run_usage DROP COLUMN reported_estimate;
                 ALTER TABLE daemons DROP COLUMN stopping_at;
                 ALTER TABLE batches DROP COLUMN cycle_fire_at; ALTER TABLE batches DROP COLUMN cycle_crashed;
                 ALTER TABLE batches DROP COLUMN queued_fire_at;
                 ALTER TABLE runs DROP COLUMN stopped;
                 ALTER TABLE batches DROP COLUMN fire_schedule; ALTER TABLE batches DROP COLUMN fire_timezone;
                 ALTER TABLE batches DROP COLUMN key_spec;
                 PRAGMA user_version = 21;",
            )
            .unwrap(),
        Backend::Pg => env
            .pg_sql()
            .batch_execute(
                "ALTER TABLE items DROP COLUMN pool_wait_since, DROP COLUMN retry_at;
                 ALTER TABLE run_usage DROP COLUMN reported_estimate;
                 ALTER TABLE daemons DROP COLUMN stopping_at;
                 ALTER TABLE batches DROP COLUMN cycle_fire_at, DROP COLUMN cycle_crashed, DROP COLUMN queued_fire_at;
                 ALTER TABLE runs DROP COLUMN stopped;
                 ALTER TABLE batches DROP COLUMN fire_schedule, DROP COLUMN fire_timezone;
                 DROP TABLE item_keys; ALTER TABLE items ADD UNIQUE (batch_id, key);
                 ALTER TABLE batches DROP COLUMN key_spec;
                 UPDATE nightshift_meta SET value = '22' WHERE key = 'schema_version';",
            )
            .unwrap(),
    }
}

/// What `log` prints on stdout when refused with `stderr`: nothing, or
/// with `--json` the refusal as JSON.
fn json_error_if(args: &[&str], stderr: &str) -> String {
    if !args.contains(&"--json") {
        return String::new();
    }
    let says = stderr
        .strip_prefix("nightshift: error: ")
        .unwrap()
        .trim_end();
    format!(
        "{}\n",
        serde_json::json!({"error": {"command": "log", "says": says, "exit": 2}})
    )
}
