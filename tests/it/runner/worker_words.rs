//! The worker's own words: the last 16 KiB of what each attempt printed on
//! stderr, kept per attempt by a real run on both stores, shown inert by
//! `show --attempts` (and `--json`), and pruned with the events.

use crate::support as common;

/// Attempt 1 prints about 40 KiB of Japanese lines with a colour escape,
/// then its last words, and fails transiently; attempt 2 says one line
/// and succeeds.
const WORKER: &str = r#"cat >/dev/null
if [ "$NIGHTSHIFT_ATTEMPT" = 1 ]; then
  i=0
  while [ $i -lt 2400 ]; do printf '夜間バッチの記録 %s\n' "$i" >&2; i=$((i+1)); done
  printf '\033[31m赤い警告\033[0m\n' >&2
  echo '最後の言葉: 接続が切れました' >&2
  exit 75
fi
echo '二回目は成功' >&2
echo '"ok"'"#;

both_backends! {
    /// The defect: a NUL a worker printed was kept as U+FFFD on PostgreSQL
    /// and as a NUL on SQLite, so the same bytes read back differently.
    /// Both keep it as the `\x00` every view shows it as: its stderr, the
    /// error its last line made, the dead letter, the run log.
    fn a_nul_a_worker_prints_reads_back_the_same_from_either_store(env) {
        env.config("[batch.b]\nretries = 0\n");
        let worker = env.script("worker.sh", "cat >/dev/null\nprintf 'bad\\000byte\\n' >&2\nexit 3");
        common::add_keys(&env, "b", &["k1"]);
        let out = env.cmd().args(["run", "b", "--"]).arg(&worker).output().unwrap();
        common::ran(out).code(1);
        let shown = env.run(&["show", "b", "k1", "--attempts", "--json"]).code(0).json();
        assert_eq!(shown["attempts"][0]["stderr"], "bad\\x00byte\n", "{shown}");
        assert_eq!(shown["item"]["error_message"], "exited with status 3: bad\\x00byte", "{shown}");
        let dl = env.run(&["dlq", "b", "--jsonl"]).code(0).stdout.clone();
        let dl: serde_json::Value = serde_json::from_str(dl.lines().next().unwrap()).unwrap();
        assert_eq!(dl["message"], shown["item"]["error_message"], "{dl}");
        let failed = env.events("b", "quarantined");
        assert!(failed[0]["message"].as_str().unwrap().contains("bad\\x00byte"), "{failed:?}");
    }

    /// A worker stopped for its timeout that prints much on SIGTERM (more
    /// than a pipe holds) is read while it stops: it ends by itself, and
    /// its last words are kept.
    fn a_timed_out_workers_last_words_on_sigterm_are_kept(env) {
        env.config("[batch.b]\nretries = 0\nitem_timeout = \"1s\"\ngrace = \"30s\"\n");
        let worker = env.script(
            "worker.sh",
            "cat >/dev/null\n\
             trap 'head -c 300000 /dev/zero | tr \"\\000\" x >&2; echo >&2; echo \"last words on SIGTERM\" >&2; exit 1' TERM\n\
             sleep 100 &\nwait\n",
        );
        common::add_keys(&env, "b", &["k1"]);
        let out = env.cmd().args(["run", "b", "--"]).arg(&worker).output().unwrap();
        common::ran(out).code(1);
        let shown = env.run(&["show", "b", "k1", "--attempts", "--json"]).code(0).json();
        let stderr = shown["attempts"][0]["stderr"].as_str().unwrap_or_default();
        assert!(stderr.ends_with("xxx\nlast words on SIGTERM\n"), "{shown}");
    }

    /// Both attempts' stderr is kept, newest first: the first cut at its
    /// start on a character boundary (Japanese intact) and marked, its
    /// escape shown as text; `show` without `--attempts` says how to see it.
    fn each_attempts_stderr_is_kept_bounded_and_shown_inert(env) {
        env.config("[batch.b]\nretries = 1\nbackoff = \"10ms\"\nbackoff_max = \"10ms\"\n");
        let worker = env.script("worker.sh", WORKER);
        common::add_keys(&env, "b", &["k1"]);
        let out = env.cmd().args(["run", "b", "--"]).arg(&worker).output().unwrap();
        common::ran(out).code(0);

        let shown = env.run(&["show", "b", "k1", "--attempts", "--json"]).code(0).json();
        let logs = shown["attempts"].as_array().unwrap();
        assert_eq!(logs.len(), 2, "{shown}");
        assert_eq!((logs[0]["attempt"].as_i64(), logs[1]["attempt"].as_i64()), (Some(2), Some(1)));
        assert_eq!(logs[0]["stderr"], "二回目は成功\n");
        assert_eq!(logs[0]["cut"], false);
        let first = logs[1]["stderr"].as_str().unwrap();
        assert_eq!(logs[1]["cut"], true);
        assert!(first.len() <= 16 * 1024 && first.len() > 16 * 1024 - 4, "{}", first.len());
        assert!(!first.contains('\u{FFFD}'), "a character was split");
        assert!(first.contains("夜間バッチの記録 2399\n"), "{first}");
        assert!(first.ends_with("\u{1b}[31m赤い警告\u{1b}[0m\n最後の言葉: 接続が切れました\n"));
        assert!(!first.contains("夜間バッチの記録 0\n"), "the start is cut");

        let text = env.run(&["show", "b", "k1", "--attempts"]).code(0).stdout.clone();
        assert!(!text.contains('\u{1b}'), "an escape reached the terminal: {text}");
        // Read from the stderr heading on: the failures above name attempt 1 too.
        let heading = text.find("stderr of the attempts (2 kept), newest first:").unwrap_or_else(|| panic!("{text}"));
        let at = |s: &str| heading + text[heading..].find(s).unwrap_or_else(|| panic!("no {s:?} in {text}"));
        assert!(heading < at("  attempt 2  "));
        assert!(at("    二回目は成功\n") < at("  attempt 1  "));
        assert!(at("  attempt 1  ") < at("    … earlier output cut"));
        assert!(at("    … earlier output cut") < at("    夜間バッチの記録 2399\n"));
        assert!(text.contains("    \\x1b[31m赤い警告\\x1b[0m\n    最後の言葉: 接続が切れました\n"), "{text}");

        let plain = env.run(&["show", "b", "k1"]).code(0).stdout.clone();
        assert!(plain.contains("stderr:    kept for 2 attempts: nightshift show b k1 --attempts"), "{plain}");
        assert!(!plain.contains("夜間バッチ"), "{plain}");
        let json = env.run(&["show", "b", "k1", "--json"]).code(0).json();
        assert!(json.get("attempts").is_none(), "{json}");
    }

    /// One attempt's stderr is counted as one: "kept for 1 attempt".
    fn one_kept_attempt_is_named_in_the_singular(env) {
        let worker = env.script("once.sh", "cat >/dev/null\necho '一度だけの警告' >&2\necho '\"ok\"'");
        common::add_keys(&env, "b", &["k1"]);
        let out = env.cmd().args(["run", "b", "--"]).arg(&worker).output().unwrap();
        common::ran(out).code(0);
        let plain = env.run(&["show", "b", "k1"]).code(0).stdout.clone();
        assert!(plain.contains("stderr:    kept for 1 attempt: nightshift show b k1 --attempts\n"), "{plain}");
    }

    /// A worker that prints nothing on stderr leaves nothing to keep.
    fn a_silent_worker_keeps_nothing(env) {
        let worker = env.script("quiet.sh", "cat >/dev/null\necho '\"ok\"'");
        common::add_keys(&env, "b", &["k1"]);
        let out = env.cmd().args(["run", "b", "--"]).arg(&worker).output().unwrap();
        common::ran(out).code(0);
        let shown = env.run(&["show", "b", "k1", "--attempts", "--json"]).code(0).json();
        assert_eq!(shown["attempts"], serde_json::json!([]));
        let text = env.run(&["show", "b", "k1", "--attempts"]).code(0).stdout.clone();
        assert!(text.contains("stderr of the attempts (0 kept), newest first:\nevents"), "{text}");
    }

    /// Kept stderr goes with the events when it is older than the cutoff,
    /// counted (and only counted by a dry run).
    fn prune_removes_old_attempts_stderr(env) {
        let worker = env.script("noisy.sh", "cat >/dev/null\necho 'working' >&2\necho '\"ok\"'");
        common::add_keys(&env, "b", &["k1", "k2"]);
        let out = env.cmd().args(["run", "b", "--"]).arg(&worker).output().unwrap();
        common::ran(out).code(0);
        assert_eq!(env.int("SELECT count(*) FROM attempt_logs"), 2);
        env.exec("UPDATE attempt_logs SET at = at - 3456000000 WHERE item_id = (SELECT id FROM items WHERE key = 'k1')");
        let dry = env.run(&["prune", "--older-than", "30d", "--dry-run", "--json"]).code(0).json();
        assert_eq!(dry["would_remove"]["attempt_logs"], 1, "{dry}");
        assert_eq!(env.int("SELECT count(*) FROM attempt_logs"), 2);
        let done = env.run(&["prune", "--older-than", "30d"]).code(0).stdout.clone();
        assert!(done.contains(", 1 attempts' stderr,"), "{done}");
        assert_eq!(env.int("SELECT count(*) FROM attempt_logs"), 1);
        let left = env.run(&["show", "b", "k2", "--attempts", "--json"]).code(0).json();
        assert_eq!(left["attempts"][0]["stderr"], "working\n");
    }

    /// The defect: a `@nightshift` line the runner does not understand
    /// (a word before the report, `cost:` for `cost=`) was dropped in
    /// silence, the cost it reported uncounted by the run, `max_cost` and
    /// the budgets. Such a line is said once a run, naming the item and
    /// quoting the line (inert), and counted at the run's end, on stderr
    /// and as `stray-output` events; the items are done as answered.
    fn a_nightshift_line_the_runner_cannot_read_is_said_once_and_counted(env) {
        env.config("[batch.\"記事\"]\nconcurrency = 2\n");
        let worker = env.script(
            "worker.sh",
            "cat >/dev/null\necho '@nightshift 日本語の報告 cost=0.1' >&2\n\
             printf '@nightshift cost: 0.5 \\033[31m\\n' >&2\necho '{\"ok\": 1}'",
        );
        common::add_keys(&env, "記事", &["要約1", "要約2", "要約3"]);
        let out = env.cmd().args(["run", "記事", "--"]).arg(&worker).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        assert_eq!(stderr.matches("which the runner does not read").count(), 1, "{stderr}");
        assert!(!stderr.contains('\x1b'), "inert: {stderr:?}");
        let said = env.events("記事", "stray-output");
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0]["key"].as_str().is_some_and(|k| k.starts_with("要約")), "{said:?}");
        let first = said[0]["fields"]["stderr"].as_str().unwrap().to_string();
        assert!(first.starts_with("@nightshift "), "{said:?}");
        assert_eq!(said[1]["fields"]["count"], 6, "{said:?}");
        let count = said[1]["message"].as_str().unwrap();
        assert!(count.contains("printed 6 `@nightshift` lines on stderr in this run"), "{count}");
        assert!(stderr.contains(count), "{stderr}");
    }
}
