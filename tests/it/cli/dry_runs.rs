//! Dry runs of the bulk actions, on both stores: `prune --dry-run` names
//! the items it would delete, `skip --dry-run` and `add --dry-run` say
//! exactly what they would change (the same refusals as the real thing),
//! and none of them changes a byte.

use crate::support as common;

both_backends! {
    /// The old done items are listed (and failed ones only with
    /// `--include-failed`), in text and JSON; nothing changes.
    fn prune_dry_run_lists_the_items_it_would_remove(env) {
        env.failing_batch("b");
        env.exec("UPDATE items SET updated_at = updated_at - 3456000000 WHERE key IN ('k1', 'k5', 'k6')");
        let before = env.snapshot();
        let dry = env.run(&["prune", "--older-than", "30d", "--dry-run"]);
        let text = dry.code(0).stdout.clone();
        assert!(text.starts_with("would remove: 2 done items,"), "{text}");
        assert!(text.contains("the items it would remove (2):\n"), "{text}");
        let rows: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("BATCH")).skip(1).collect();
        assert_eq!(rows.len(), 2, "{text}");
        // A label that is only the key again is left out, as `items` does.
        assert!(rows[0].starts_with("b      k5          done"), "{text}");
        assert!(rows[1].starts_with("b      k6          done"), "{text}");

        let json = env.run(&["prune", "--older-than", "30d", "--dry-run", "--include-failed", "--json"]).code(0).json();
        let keys: Vec<(&str, &str)> = json["items"].as_array().unwrap().iter()
            .map(|i| (i["key"].as_str().unwrap(), i["state"].as_str().unwrap())).collect();
        assert_eq!(keys, [("k1", "failed/manual"), ("k5", "done"), ("k6", "done")], "{json}");
        assert_eq!(json["would_remove"]["done_items"], 2);
        assert_eq!(env.snapshot(), before, "a dry run changes nothing");
        let real = env.run(&["prune", "--older-than", "30d", "--json"]).code(0).json();
        assert!(real["items"].is_null(), "{real}");
        assert_eq!(real["removed"]["done_items"], 2);
    }

    /// What would be skipped and what is done already; the same refusals
    /// as a real skip (an unknown key: nothing at all); nothing changes.
    fn skip_dry_run_says_what_it_would_mark_and_changes_nothing(env) {
        env.failing_batch("b");
        let before = env.snapshot();
        let dry = env.run(&["skip", "b", "k1", "k5", "k2", "--reason", "手で処理済み", "--dry-run"]);
        let text = dry.code(0).stdout.clone();
        assert!(text.starts_with("b: would skip 2 items, 1 done already\n"), "{text}");
        assert!(text.contains("k1   be skipped\n") && text.contains("k2   be skipped\n"), "{text}");
        assert!(text.contains("k5   stay as it is (done already)\n"), "{text}");
        let json = env.run(&["skip", "b", "k1", "k5", "--reason", "手で処理済み", "--dry-run", "--json"]).code(0).json();
        assert_eq!(json["dry_run"], true);
        assert_eq!(json["skipped"], serde_json::json!(["k1"]));
        assert_eq!(json["already_done"], serde_json::json!(["k5"]));
        let unknown = env.run(&["skip", "b", "k1", "nope", "--reason", "x", "--dry-run"]);
        assert!(unknown.code(2).stderr.contains("nope"), "{unknown:?}");
        assert!(unknown.stdout.is_empty(), "{unknown:?}");
        assert_eq!(env.snapshot(), before, "a dry run changes nothing");
        assert!(env.events("b", "skipped").is_empty());

        let real = env.run(&["skip", "b", "k1", "k5", "--reason", "手で処理済み", "--json"]).code(0).json();
        assert_eq!((real["dry_run"].clone(), real["skipped"].clone()), (serde_json::json!(false), serde_json::json!(["k1"])));
        assert_eq!(env.item("k1").0, "done");
    }

    /// How many keys are new and how many present (pruned ones named), for
    /// an existing batch and a new one; a bad line is refused as in a real
    /// add; nothing changes.
    fn add_dry_run_counts_new_and_present_keys_and_changes_nothing(env) {
        common::add_keys(&env, "b", &["a1", "a2", "a3"]);
        env.exec("UPDATE items SET status = 'done', outcome = 'done' WHERE key = 'a3'");
        env.exec("UPDATE items SET updated_at = updated_at - 3456000000 WHERE key = 'a3'");
        env.run(&["prune", "--older-than", "30d"]).code(0);
        env.write("more.jsonl", "{\"key\":\"a1\"}\n{\"key\":\"a3\"}\n{\"key\":\"新しい\"}\n{\"key\":\"b4\"}\n");
        let before = env.snapshot();
        let text = env.run(&["add", "b", "more.jsonl", "--dry-run"]).code(0).stdout.clone();
        assert!(text.starts_with("b: would add 2, already present 2 (1 of them done and pruned on "), "{text}");
        let json = env.run(&["add", "b", "more.jsonl", "--dry-run", "--json"]).code(0).json();
        assert_eq!((json["dry_run"].as_bool(), json["added"].as_u64(), json["present"].as_u64(), json["pruned"].as_u64()),
            (Some(true), Some(2), Some(2), Some(1)), "{json}");
        assert_eq!(json["new_batch"], false);
        let fresh = env.run(&["add", "new", "more.jsonl", "--dry-run", "--json"]).code(0).json();
        assert_eq!((fresh["added"].as_u64(), fresh["new_batch"].as_bool()), (Some(4), Some(true)), "{fresh}");
        env.write("bad.jsonl", "{\"key\":\"ok\"}\nnot json\n");
        let bad = env.run(&["add", "b", "bad.jsonl", "--dry-run"]);
        assert!(bad.code(2).stderr.contains("line 2"), "{bad:?}");
        assert_eq!(env.snapshot(), before, "a dry run changes nothing");

        let real = env.run(&["add", "b", "more.jsonl", "--json"]).code(0).json();
        assert_eq!((real["dry_run"].as_bool(), real["added"].as_u64()), (Some(false), Some(2)));
    }
}
