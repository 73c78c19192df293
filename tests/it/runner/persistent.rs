//! Persistent worker mode (`mode = "persistent"`) end to end: the real
//! binary, real Python and shell workers, real signals. One long-lived
//! worker per slot answers many items over JSON lines; classification,
//! retries, op ids, timeouts, crashes, garbage output, a worker that never
//! starts, and a runner SIGKILLed mid-batch. Each test on both backends.

use crate::support as common;
use crate::support::require::Tool;

use std::collections::{BTreeMap, HashSet};

use common::{Env, add_keys, assert_no_process_left, ran, signal, wait_for};
use nix::sys::signal::Signal;

/// A persistent worker whose behaviour depends on the item's key. Every
/// start is logged to `starts.log` (pid, batch, run, mode), every request to
/// `seen.log` (pid, key, attempt, op id).
const WORKER: &str = r#"
import json, os, subprocess, sys, time
pid = os.getpid()
with open("starts.log", "a") as f:
    f.write("%d %s %s %s\n" % (pid, os.environ.get("NIGHTSHIFT_BATCH"), os.environ.get("NIGHTSHIFT_RUN_ID"), os.environ.get("NIGHTSHIFT_MODE")))
def say(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    r = json.loads(line)
    k, a = r["key"], r["attempt"]
    def error(cls, transient, msg, **extra):
        say({"key": k, "error": dict(error_class=cls, transient=transient, message=msg, **extra)})
    with open("seen.log", "a") as f:
        f.write("%d %s %d %s\n" % (pid, k, a, r["op_id"]))
    if k == "perm":
        error("BadInput", False, "title missing")
    elif k == "flaky" and a == 1:
        error("Busy", True, "try again")
    elif k == "limited" and a == 1:
        error("RateLimitError", True, "429", retry_after_s=1)
    elif k == "op":
        if r["op_id"] is None:
            say({"key": k, "op_id": "op-42"})
            os._exit(3)  # dies after starting the remote operation
        say({"key": k, "result": {"resumed": r["op_id"]}})
    elif k == "crash" and a == 1:
        sys.stderr.write("segfault in the SDK\n")
        os._exit(9)
    elif k == "empty":
        say({"key": k, "result": None})
    elif k == "hang":
        # The marker as the shell's $0, so the child shows it on its command line.
        subprocess.Popen(["sh", "-c", "sleep 300; :", os.environ["MARKER"]])
        time.sleep(300)
    elif k == "garbage":
        sys.stdout.buffer.write(b"loading model...\n\xff\xfe not json \x00\n")
        say({"key": k, "result": "fine"})
    elif k == "huge":
        sys.stdout.write("x" * (3 << 20) + "\n")
        sys.stdout.flush()
    elif k == "nothing":
        say({"key": k, "status": "ok"})
        say({"key": k, "result": None})
    else:
        say({"key": k, "result": {"n": r["payload"]["n"], "pid": pid}})
"#;

/// Batch `p` in persistent mode running `worker.py`.
fn setup(env: &Env, extra: &str) {
    env.write("worker.py", WORKER);
    env.config(&format!(
        "[batch.p]\nworker = [\"python3\", \"worker.py\"]\nmode = \"persistent\"\n\
         backoff = \"10ms\"\nbackoff_max = \"50ms\"\n{extra}"
    ));
}

/// (status, tier, error class, result) of an item.
type Row = (String, Option<String>, Option<String>, Option<String>);

fn items(env: &Env) -> BTreeMap<String, Row> {
    env.rows("SELECT key, status, tier, error_class, result FROM items")
        .into_iter()
        .map(|r| {
            let [key, status, tier, class, result] = <[Option<String>; 5]>::try_from(r).unwrap();
            (key.unwrap(), (status.unwrap(), tier, class, result))
        })
        .collect()
}

fn starts(env: &Env) -> Vec<Vec<String>> {
    common::lines(&env.path("starts.log"))
        .iter()
        .map(|l| l.split(' ').map(str::to_string).collect())
        .collect()
}

/// No worker of this test's store is still running.
fn assert_no_workers(env: &Env) {
    let dir = env.dir.path().to_path_buf();
    wait_for("the workers to be gone", || {
        common::processes_in(&dir)
            .iter()
            .all(|p| !p.contains("worker.py"))
    });
}

/// A shell persistent worker: notes `started-KEY`, sleeps `$SLOW` seconds
/// if set, appends `HOST KEY` to `side-effects.log`, answers with its host.
const HOST_WORKER: &str = r#"while IFS= read -r line; do
  key=$(printf '%s' "$line" | sed 's/.*"key":"\([^"]*\)".*/\1/')
  touch "started-$key"
  if [ -n "$SLOW" ]; then sleep "$SLOW"; fi
  echo "${NIGHTSHIFT_HOST:-local} $key" >> side-effects.log
  echo "{\"key\":\"$key\",\"result\":\"${NIGHTSHIFT_HOST:-local}\"}"
done"#;

/// The issue's worker: a `{"log": ...}` line at every start-up, then one
/// answer per request echoing its key, or an error for `k4`. With `keyed`
/// as its argument its answers carry `"key"`; `k7` then crashes once
/// (so the start-up line comes again) and `k2` is preceded by stray prints
/// mid-stream. Starts go to `starts.log`.
const ECHO_WORKER: &str = r#"
import json, os, sys
keyed = sys.argv[1:] == ["keyed"]
with open("starts.log", "a") as f:
    f.write("%d\n" % os.getpid())
def say(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()
say({"log": "connected"})
for line in sys.stdin:
    r = json.loads(line)
    k = r["key"]
    if keyed and k == "k7" and r["attempt"] == 1:
        os._exit(3)
    if keyed and k == "k2":
        say({"progress": 0.5})
        sys.stdout.write("loading...\n[1, 2]\n")
    answer = {"error": {"error_class": "Bad", "transient": False, "message": "no"}} if k == "k4" else {"result": {"echo": k}}
    if keyed:
        answer["key"] = k
    say(answer)
"#;

/// Rows of items done with a result that is not their own echo.
fn misattributed(env: &Env) -> Vec<(String, Option<String>)> {
    items(env)
        .into_iter()
        .filter(|(k, (status, _, _, result))| {
            status == "done" && result.as_deref() != Some(format!("{{\"echo\":\"{k}\"}}").as_str())
        })
        .map(|(k, (_, _, _, result))| (k, result))
        .collect()
}

/// Every failed attempt of a batch: (key, error class, message), from the
/// retry events (retried at once) and the dead letters (the rest).
fn failures(env: &Env, batch: &str) -> Vec<(String, String, String)> {
    let mut all: Vec<_> = env
        .events(batch, "retry")
        .iter()
        .map(|e| {
            let text = |v: &serde_json::Value| v.as_str().unwrap().to_string();
            (
                text(&e["key"]),
                text(&e["fields"]["error_class"]),
                text(&e["fields"]["message"]),
            )
        })
        .collect();
    for r in env.rows("SELECT key, error_class, message FROM dead_letters ORDER BY id") {
        let [k, c, m] = <[Option<String>; 3]>::try_from(r)
            .unwrap()
            .map(Option::unwrap);
        all.push((k, c, m));
    }
    all
}

/// Hostile answers by key, each on attempt 1 only (`nan` on every attempt):
/// `dup` answers twice, `foreign` answers with the key of `a`, `nokey`
/// without a key, `nan` with `NaN` (as Python's `json.dumps` writes it);
/// the rest echo their key.
const HOSTILE_WORKER: &str = r#"
import json, os, sys
with open("starts.log", "a") as f:
    f.write("%d\n" % os.getpid())
def say(o):
    sys.stdout.write(json.dumps(o) + "\n")
    sys.stdout.flush()
for line in sys.stdin:
    r = json.loads(line)
    k, first = r["key"], r["attempt"] == 1
    answer = {"key": k, "result": {"echo": k}}
    if k == "dup" and first:
        sys.stdout.write(json.dumps(answer) + "\n" + json.dumps(answer) + "\n")
        sys.stdout.flush()
        continue
    if k == "foreign" and first:
        answer["key"] = "a"
    if k == "nokey" and first:
        del answer["key"]
    if k == "nan":
        answer["result"] = {"score": float("nan")}
    say(answer)
"#;

/// Reports costs by key: in the result object (process mode), or at the
/// top of the answer, in the result or in the error (persistent mode);
/// `marker`/`markers` on `@nightshift cost=` lines (process mode).
const COST_WORKER: &str = r#"
import json, os, sys
COST = {"ok": 0.25, "huge": 1e308, "big": 1e12, "neg": -1, "text": "Infinity"}
ERROR = {"error_class": "Busy", "transient": True, "message": "503", "cost": 1e308}
def answer(k):
    if k == "err":
        return {"key": k, "error": ERROR}
    if k == "big":
        return {"key": k, "result": {"n": 1, "cost": COST[k]}}
    return {"key": k, "result": {"n": 1}, "cost": COST[k]}
if os.environ.get("NIGHTSHIFT_MODE") == "persistent":
    for line in sys.stdin:
        print(json.dumps(answer(json.loads(line)["key"])), flush=True)
else:
    k = os.environ["NIGHTSHIFT_KEY"]
    sys.stdin.read()
    if k == "err":
        sys.stderr.write(json.dumps(ERROR) + "\n")
        sys.exit(1)
    if k == "marker":
        sys.stderr.write("@nightshift cost=NaN\n")
    if k == "markers":
        sys.stderr.write("@nightshift cost=600000000\n@nightshift cost=600000000\n")
    print(json.dumps({"n": 1, "cost": COST.get(k)}))
"#;

/// Answers with a cost or token count given twice in one object, as a
/// worker writing its JSON by hand might: `cost` on a result, `usage`'s
/// `input_tokens` on an error line (process mode), the answer's `cost`
/// and its error's (persistent mode).
const TWICE_WORKER: &str = r#"
import json, os, sys
if os.environ.get("NIGHTSHIFT_MODE") == "persistent":
    for line in sys.stdin:
        k = json.loads(line)["key"]
        if k == "cost":
            print('{"key": "cost", "result": {"n": 1}, "cost": 0.1, "cost": 5}', flush=True)
        else:
            print('{"key": "%s", "error": {"error_class": "Busy", "message": "503", "cost": 1, "cost": 2}}' % k, flush=True)
else:
    sys.stdin.read()
    if os.environ["NIGHTSHIFT_KEY"] == "cost":
        print('{"n": 1, "cost": 0.1, "cost": 5}')
    else:
        sys.stderr.write('{"error_class": "Busy", "message": "503", "usage": {"input_tokens": 5, "input_tokens": 500}}\n')
        sys.exit(1)
"#;

/// Answers naming their request, or their result, twice in one line, as a
/// worker writing its JSON by hand might; `ok` is answered plainly.
const NAMED_TWICE_WORKER: &str = r#"
import json, sys
for line in sys.stdin:
    k = json.loads(line)["key"]
    if k == "key":
        print('{"key": "ok", "result": "for ok", "key": "key"}', flush=True)
    elif k == "result":
        print('{"key": "result", "result": "first", "result": "second"}', flush=True)
    elif k == "escaped":
        print('{"key": "escaped", "error": {"error_class": "Busy"}, "\\u0065rror": {"error_class": "Other"}}', flush=True)
    else:
        print(json.dumps({"key": k, "result": "plain"}), flush=True)
"#;

both_backends! {
    /// A persistent answer giving `key`, `result` or `error` twice in one
    /// line was read as the last of each (serde_json's way): an answer
    /// that began "for ok" was recorded on another item, a result was one
    /// of two. Such a line is now a protocol break, naming the name, and
    /// nothing of it is recorded as an answer.
    fn an_answer_naming_its_key_or_result_twice_is_refused_not_guessed(env) {
        require!(Tool::Python3);
        env.write("named_twice.py", NAMED_TWICE_WORKER);
        env.config(
            "[batch.b]\nworker = [\"python3\", \"named_twice.py\"]\nmode = \"persistent\"\n\
             concurrency = 1\nretries = 0\n",
        );
        // `ok` first: a worker failing three items in a row is given up.
        add_keys(&env, "b", &["ok", "key", "result", "escaped"]);
        env.run(&["run", "b"]).code(1);
        let rows = env.rows("SELECT key, status, error_class, error_message, result FROM items ORDER BY key");
        let by_key: BTreeMap<String, Vec<Option<String>>> =
            rows.into_iter().map(|r| (r[0].clone().unwrap(), r[1..].to_vec())).collect();
        for (key, name) in [("key", "key"), ("result", "result"), ("escaped", "error")] {
            let row = &by_key[key];
            assert_eq!(
                (row[0].as_deref(), row[1].as_deref(), row[3].as_deref()),
                (Some("failed"), Some("ProtocolError"), None),
                "{key}: {row:?}"
            );
            let msg = row[2].as_deref().unwrap();
            assert!(msg.contains(&format!("a line giving {name:?} twice")), "{key}: {msg}");
        }
        assert_eq!(by_key["ok"][0].as_deref(), Some("done"), "{by_key:?}");
        assert_eq!(by_key["ok"][3].as_deref(), Some("\"plain\""), "not \"for ok\": {by_key:?}");
        env.assert_counts_consistent();
    }

    /// A worker's answer with its cost or a token count given twice in one
    /// object was read as the last (serde_json's way), silently: the run's
    /// cost and a pool's tokens were one guess of two. The report is now
    /// refused as any cost or usage that is no number is (`InvalidCost`,
    /// `InvalidUsage`, nothing counted), in both modes; the answer itself
    /// is not a protocol break.
    fn a_cost_or_count_given_twice_is_refused_not_guessed(env) {
        require!(Tool::Python3);
        env.write("twice.py", TWICE_WORKER);
        env.config(
            "[batch.proc]\nworker = [\"python3\", \"twice.py\"]\nretries = 0\n\
             [batch.pers]\nworker = [\"python3\", \"twice.py\"]\nmode = \"persistent\"\nretries = 0\n",
        );
        add_keys(&env, "proc", &["cost", "tokens"]);
        add_keys(&env, "pers", &["cost", "tokens"]);
        for (batch, class_of_the_error) in [("proc", "InvalidUsage"), ("pers", "InvalidCost")] {
            env.run(&["run", batch]).code(1);
            let rows = env.rows(&format!(
                "SELECT key, status, tier, error_class, error_message, cost FROM items \
                 WHERE batch_id = (SELECT id FROM batches WHERE name = '{batch}') ORDER BY key"
            ));
            for row in &rows {
                let class = if row[0].as_deref() == Some("cost") { "InvalidCost" } else { class_of_the_error };
                assert_eq!(
                    (row[1].as_deref(), row[2].as_deref(), row[3].as_deref(), row[5].as_deref()),
                    (Some("failed"), Some("manual"), Some(class), None),
                    "{batch}: {row:?}"
                );
                let msg = row[4].as_deref().unwrap();
                assert!(msg.contains("\"given twice in one object\""), "{batch}: {msg}");
            }
            assert_eq!(rows.len(), 2, "{batch}: {rows:?}");
        }
    }

    /// Process mode's `@nightshift cost=` line on a persistent worker's
    /// stderr went uncounted in silence (`max_cost` and budgets never
    /// tripped). It is still not read (no line says which request it is
    /// about), but the run says so, once, with what to use instead.
    fn a_cost_line_on_a_persistent_worker_s_stderr_is_said_not_read(env) {
        env.write(
            "pw.py",
            "import json, sys\nfor line in sys.stdin:\n    k = json.loads(line)[\"key\"]\n    \
             print(\"@nightshift cost=0.5\", file=sys.stderr, flush=True)\n    \
             print(json.dumps({\"key\": k, \"result\": 1}), flush=True)\n",
        );
        env.config("[batch.b]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\nconcurrency = 1\n");
        add_keys(&env, "b", &["k1", "k2", "k3"]);
        let out = env.run(&["run", "b"]);
        out.code(0);
        assert!(out.stderr.contains("printed `@nightshift cost=0.5` on stderr, which is not read in persistent mode"), "{}", out.stderr);
        let said = env.events("b", "stray-output");
        assert_eq!(said.len(), 2, "the first, then the count: {said:?}");
        assert!(said[0]["message"].as_str().unwrap().contains("\"cost\", \"usage\", \"op_id\""), "{said:?}");
        assert_eq!(said[1]["fields"]["count"], 3, "{said:?}");
    }

    /// Three slots, twelve items, each with its cost on stderr: said once
    /// a run (it was said once a slot, up to three times), and the run's
    /// end says how many such lines went unread (it never said).
    fn uncounted_cost_lines_are_said_once_and_counted(env) {
        env.write(
            "pw.py",
            "import json, sys\nfor line in sys.stdin:\n    k = json.loads(line)[\"key\"]\n    \
             print(\"@nightshift cost=0.5\", file=sys.stderr, flush=True)\n    \
             print(json.dumps({\"key\": k, \"result\": 1}), flush=True)\n",
        );
        env.config("[batch.\"記事\"]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\nconcurrency = 3\n");
        let keys: Vec<String> = (1..=12).map(|i| format!("要約{i}")).collect();
        add_keys(&env, "記事", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        let out = env.run(&["run", "記事"]);
        out.code(0);
        assert_eq!(out.stderr.matches("which is not read in persistent mode").count(), 1, "{}", out.stderr);
        let count = "the persistent workers printed 12 `@nightshift` lines on stderr in this run, \
                     none read (not counted; the first: `@nightshift cost=0.5`)";
        assert!(out.stderr.contains(&format!("nightshift: 記事: {count}\n")), "{}", out.stderr);
        let said = env.events("記事", "stray-output");
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[1]["message"], count, "{said:?}");
        assert_eq!(said[1]["fields"]["count"], 12, "{said:?}");
    }

    /// A worker that writes its `@nightshift` lines as it exits, after its
    /// last answer (a summary of what it spent), nearly a pipe's worth:
    /// every one is counted at the run's end, none lost to the worker's
    /// exit racing the reading of its stderr.
    fn cost_lines_written_at_exit_are_all_counted(env) {
        require!(Tool::Python3);
        env.write(
            "pw.py",
            "import json, sys\nfor line in sys.stdin:\n    k = json.loads(line)[\"key\"]\n    \
             print(json.dumps({\"key\": k, \"result\": 1}), flush=True)\n\
             sys.stderr.write(\"@nightshift cost=0.5\\n\" * 3000)\nsys.stderr.flush()\n",
        );
        env.config("[batch.\"記事\"]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\nconcurrency = 1\n");
        add_keys(&env, "記事", &["要約1", "要約2"]);
        let out = env.run(&["run", "記事"]);
        out.code(0);
        let count = "the persistent workers printed 3000 `@nightshift` lines on stderr in this run, \
                     none read (not counted; the first: `@nightshift cost=0.5`)";
        assert!(out.stderr.contains(&format!("nightshift: 記事: {count}\n")), "{}", out.stderr);
    }

    /// A worker that dies with its last words written without a newline
    /// (`sys.stderr.write(...)`, as a fatal error often is), after a
    /// `@nightshift` line: its failure names those words, as process mode's
    /// does, where it said only "the worker exited with status 3" (and a
    /// marker line was taken for the last words).
    fn a_dying_worker_s_last_words_need_no_newline(env) {
        require!(Tool::Python3);
        env.write(
            "pw.py",
            "import sys\nsys.stdin.readline()\n\
             sys.stderr.write(\"@nightshift cost=0.5\\n致命的: 認証に失敗しました\")\n\
             sys.stderr.flush()\nsys.exit(3)\n",
        );
        env.config("[batch.\"記事\"]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\nmax_attempts = 1\n");
        add_keys(&env, "記事", &["要約1"]);
        env.run(&["run", "記事"]).code(1);
        let failed = failures(&env, "記事");
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].1, "WorkerExited", "{failed:?}");
        assert!(
            failed[0].2.ends_with("the worker exited with status 3: 致命的: 認証に失敗しました"),
            "{failed:?}"
        );
    }

    /// Three slots whose workers print a stray stdout line before every
    /// answer: the run says it once, at once, on stderr and in the log, and
    /// at its end how many there were in the whole run. It was said once
    /// per slot (up to three times, in the log only) and counted per slot
    /// ("of one slot", up to three counts, none the run's).
    fn stray_stdout_lines_are_said_once_a_run_and_counted_at_its_end(env) {
        require!(Tool::Python3);
        env.write(
            "pw.py",
            "import json, os, sys\nopen(\"starts.log\", \"a\").write(\"%d\\n\" % os.getpid())\n\
             for line in sys.stdin:\n    k = json.loads(line)[\"key\"]\n    \
             print(\"読み込み中…\", flush=True)\n    \
             print(json.dumps({\"key\": k, \"result\": 1}), flush=True)\n",
        );
        env.config("[batch.\"記事\"]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\nconcurrency = 3\n");
        let keys: Vec<String> = (1..=12).map(|i| format!("要約{i}")).collect();
        add_keys(&env, "記事", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        let out = env.run(&["run", "記事"]);
        out.code(0);
        assert_eq!(common::lines(&env.path("starts.log")).len(), 3, "one worker a slot");
        let first = "the persistent worker printed a stdout line that is not part of the protocol \
                     (ignored; log to stderr): 読み込み中…";
        let count = "the persistent workers printed 12 stdout lines that are not part of the \
                     protocol in this run (ignored; the first: 読み込み中…)";
        let said = env.events("記事", "stray-output");
        assert_eq!(said.len(), 2, "the first, then the run's count: {said:?}");
        assert_eq!(said[0]["message"], first, "{said:?}");
        assert_eq!(said[1]["message"], count, "{said:?}");
        assert_eq!(said[1]["fields"]["count"], 12, "{said:?}");
        assert_eq!(said[1]["fields"]["line"], "読み込み中…", "{said:?}");
        assert_eq!(out.stderr.matches("not part of the protocol").count(), 2, "{}", out.stderr);
        assert!(out.stderr.contains(&format!("nightshift: 記事: {first}\n")), "{}", out.stderr);
        assert!(out.stderr.contains(&format!("nightshift: 記事: {count}\n")), "{}", out.stderr);
    }

    fn results_errors_op_ids_and_crashes_are_classified_like_process_mode(env) {
        require!(Tool::Python3);
        setup(&env, "concurrency = 2\nretries = 2\n");
        let mut keys: Vec<String> = (1..=40).map(|i| format!("k{i}")).collect();
        for k in ["perm", "flaky", "limited", "op", "crash", "empty"] {
            keys.push(k.to_string());
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        add_keys(&env, "p", &keys);

        let dry = env.run(&["run", "p", "--dry-run"]);
        dry.code(0);
        assert!(dry.stdout.contains("persistent mode"), "{dry:#?}");

        let out = env.run(&["run", "p"]);
        out.code(1); // `perm` failed
        let items = items(&env);
        for i in 1..=40 {
            let (status, _, _, result) = &items[&format!("k{i}")];
            assert_eq!(status, "done");
            let v: serde_json::Value = serde_json::from_str(result.as_deref().unwrap()).unwrap();
            assert_eq!(v["n"], i - 1);
        }
        // Permanent: quarantined; transient: retried and done.
        assert_eq!(
            items["perm"],
            (
                "failed".into(),
                Some("manual".into()),
                Some("BadInput".into()),
                None
            )
        );
        assert_eq!(items["flaky"].0, "done");
        assert_eq!(items["empty"].0, "done");
        assert_eq!(
            env.strings("SELECT outcome FROM items WHERE key = 'empty'"),
            ["empty"]
        );
        // retry_after: the batch was held in the store, and the item retried.
        assert_eq!(items["limited"].0, "done");
        assert!(!env.events("p", "hold").is_empty());
        // The op id was stored at once; the worker died; the next attempt (in a
        // fresh worker) got it back and resumed.
        assert_eq!(items["op"].0, "done");
        assert_eq!(
            items["op"].3.as_deref(),
            Some(r#"{"resumed":"op-42"}"#),
            "{items:?}"
        );
        assert_eq!(
            env.strings("SELECT op_id FROM items WHERE key = 'op'"),
            ["op-42"]
        );
        // The crash: a transient failure naming the worker's last words, then done.
        let retries = env.events("p", "retry");
        let crash = retries
            .iter()
            .find(|e| e["key"] == "crash")
            .expect("a retry of the crashed item");
        let msg = crash["message"].as_str().unwrap();
        assert!(
            msg.contains("WorkerExited") && msg.contains("segfault in the SDK"),
            "{msg}"
        );
        assert_eq!(items["crash"].0, "done");
        // One worker per slot, restarted only after the two deaths (op, crash).
        let starts = starts(&env);
        assert!(starts.len() <= 2 + 2, "{starts:?}");
        let run_id = env.int("SELECT max(id) FROM runs").to_string();
        for s in &starts {
            assert_eq!(s[1..], ["p", run_id.as_str(), "persistent"], "{starts:?}");
        }
        // Many items per worker process.
        let seen = common::lines(&env.path("seen.log"));
        let pids: HashSet<&str> = seen.iter().map(|l| l.split(' ').next().unwrap()).collect();
        assert!(pids.len() <= 4 && seen.len() >= 46, "{seen:?}");
        env.assert_counts_consistent();
        assert_no_workers(&env);
    }

    fn a_timeout_kills_the_worker_and_its_children_and_a_fresh_worker_goes_on(env) {
        require!(Tool::Python3);
        let marker = format!("ns-persist-hang-{}", env.dir.path().display());
        // 10 s, not 1 or 3: the fresh worker's first item counts its
        // Python start-up too, which a loaded CI machine (other tests beside
        // this one) has stretched past 3 s. Only `hang` waits it out.
        setup(&env, "concurrency = 1\nretries = 0\nitem_timeout = \"10s\"\n");
        add_keys(&env, "p", &["a", "b", "hang", "c", "d"]);
        let out = ran(env
            .cmd()
            .env("MARKER", &marker)
            .args(["run", "p"])
            .output()
            .unwrap());
        out.code(1);
        let items = items(&env);
        assert_eq!(
            (
                items["hang"].0.as_str(),
                items["hang"].1.as_deref(),
                items["hang"].2.as_deref()
            ),
            ("failed", Some("retry"), Some("Timeout"))
        );
        for k in ["a", "b", "c", "d"] {
            assert_eq!(items[k].0, "done", "{k}: {items:?}");
        }
        assert_eq!(starts(&env).len(), 2, "restarted once after the timeout");
        assert_no_process_left(&marker);
    }

    /// A worker that writes its answer with no line end (Python's
    /// `sys.stdout.write(json.dumps(a))`, a `printf` without `\n`) times out,
    /// and the timeout says what it wrote: it said only "no answer within
    /// 5s", though the answer sat in its stdout, a newline short.
    fn a_timeout_says_the_answer_written_with_no_line_end(env) {
        env.script(
            "unended.sh",
            "while read -r line; do\n               key=$(printf '%s' \"$line\" | sed 's/.*\"key\":\"\\([^\"]*\\)\".*/\\1/')\n               printf '{\"key\":\"%s\",\"result\":1}' \"$key\"\n             done\n",
        );
        env.config(
            "[batch.p]\nworker = [\"./unended.sh\"]\nmode = \"persistent\"\n\
             concurrency = 1\nretries = 0\nitem_timeout = \"5s\"\n",
        );
        add_keys(&env, "p", &["a"]);
        ran(env.cmd().args(["run", "p"]).output().unwrap()).code(1);
        let message = env.strings("SELECT error_class || ': ' || error_message FROM items");
        assert!(
            message[0].starts_with("Timeout: no answer within 5s")
                && message[0].contains("no line end")
                && message[0].contains(r#"{"key":"a","result":1}"#),
            "{message:?}"
        );
    }

    /// A worker that answers with no line end and exits (one item per
    /// worker, as `process.stdout.write(JSON.stringify(a))` then exit) has
    /// its answer recorded: the end of its stdout ends the last line, as for
    /// any text stream. Each item failed `WorkerExited: the worker exited
    /// with status 0`, its paid answer dropped, to be paid again.
    fn a_last_answer_ended_by_the_end_of_stdout_is_recorded(env) {
        env.script(
            "one_shot.sh",
            "read -r line\n             key=$(printf '%s' \"$line\" | sed 's/.*\"key\":\"\\([^\"]*\\)\".*/\\1/')\n             printf '{\"key\":\"%s\",\"result\":1}' \"$key\"\n",
        );
        env.config(
            "[batch.p]\nworker = [\"./one_shot.sh\"]\nmode = \"persistent\"\n\
             concurrency = 1\nretries = 0\n",
        );
        add_keys(&env, "p", &["a", "b", "c"]);
        ran(env.cmd().args(["run", "p"]).output().unwrap()).code(0);
        assert_eq!(
            env.strings("SELECT key || ' ' || status || ' ' || attempts || ' ' || coalesce(result, '') FROM items ORDER BY key"),
            ["a done 1 1", "b done 1 1", "c done 1 1"]
        );
    }

    /// A worker that takes longer to start than an item may take (a model
    /// load) has `start_timeout` more for its first item: every item is
    /// done, where each first item timed out and the slot gave up. The
    /// start-up is a gate the test opens, not a sleep raced against.
    fn start_timeout_gives_the_first_item_the_worker_s_start_up(env) {
        env.script(
            "slow_start.sh",
            "while [ ! -f started ]; do sleep 0.05; done\n             while read -r line; do\n               key=$(printf '%s' \"$line\" | sed 's/.*\"key\":\"\\([^\"]*\\)\".*/\\1/')\n               printf '{\"key\":\"%s\",\"result\":1}\\n' \"$key\"\n             done\n",
        );
        env.config(
            "[batch.p]\nworker = [\"./slow_start.sh\"]\nmode = \"persistent\"\nconcurrency = 1\n\
             item_timeout = \"1s\"\nstart_timeout = \"1h\"\nretries = 0\n",
        );
        add_keys(&env, "p", &["a", "b", "c"]);
        let mut run = env.spawn("p", &["run", "p"]);
        // Past item_timeout before the worker is ready.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        env.write("started", "");
        let status = run.wait().unwrap();
        let err = std::fs::read_to_string(env.path("p.err")).unwrap_or_default();
        assert!(status.success(), "{status:?}: {err}");
        let items = items(&env);
        for k in ["a", "b", "c"] {
            assert_eq!(items[k].0, "done", "{k}: {items:?}");
        }
    }

    fn garbage_output_gets_clear_error_classes_and_never_a_panic(env) {
        require!(Tool::Python3);
        setup(&env, "concurrency = 1\nretries = 0\n");
        add_keys(&env, "p", &["a", "garbage", "huge", "nothing", "b"]);
        let out = env.run(&["run", "p"]);
        out.code(1);
        assert!(!out.stderr.contains("panicked"), "{out:#?}");
        let items = items(&env);
        // Stray prints (even invalid UTF-8) before a real answer are ignored.
        assert_eq!(items["garbage"].0, "done");
        assert_eq!(items["garbage"].3.as_deref(), Some("\"fine\""));
        // A line over the limit: a protocol error, the worker restarted.
        assert_eq!(items["huge"].2.as_deref(), Some("ProtocolError"));
        // A JSON object that is no answer is a stray too: ignored.
        assert_eq!(items["nothing"].0, "done");
        for k in ["a", "b"] {
            assert_eq!(items[k].0, "done");
        }
        let msg = env.strings("SELECT message FROM dead_letters WHERE key = 'huge'");
        assert!(msg[0].contains("longer than"), "{msg:?}");
    }

    fn a_worker_that_never_starts_fails_items_visibly_and_the_run_ends(env) {
        env.script(
            "broken.sh",
            "echo 'ImportError: no module named sdk' >&2\nexit 3",
        );
        env.config(
            "[batch.p]\nworker = [\"./broken.sh\"]\nmode = \"persistent\"\nconcurrency = 1\n\
             backoff = \"10ms\"\n",
        );
        env.add_items("p", 20);
        let out = env.run(&["run", "p"]);
        out.code(1);
        let gave_up = env.events("p", "worker-failed");
        assert_eq!(gave_up.len(), 1, "{gave_up:?}");
        let msg = gave_up[0]["message"].as_str().unwrap();
        assert!(msg.contains("ImportError"), "{msg}");
        // A few items carry the failure; the rest wait, untouched, for a fix.
        let failed = env.int("SELECT count(*) FROM items WHERE status = 'failed'");
        assert!((1..=3).contains(&failed), "{failed}");
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'pending' AND attempts = 0"),
            20 - failed
        );
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'claimed'"),
            0
        );
        env.assert_counts_consistent();
    }

    fn a_runner_killed_mid_batch_loses_no_done_item_and_a_rerun_finishes(env) {
        require!(Tool::Python3);
        // Slow enough that the kill lands mid-run; logs every item it answers.
        env.write(
            "slow.py",
            r#"
import json, os, sys, time
for line in sys.stdin:
    r = json.loads(line)
    time.sleep(0.002)
    with open("answered.log", "a") as f:
        f.write("%s %s\n" % (os.environ["NIGHTSHIFT_RUN_ID"], r["key"]))
    sys.stdout.write(json.dumps({"key": json.loads(line)["key"], "result": 1}) + "\n")
    sys.stdout.flush()
"#,
        );
        env.config(
            "[batch.p]\nworker = [\"python3\", \"slow.py\"]\nmode = \"persistent\"\nconcurrency = 2\n",
        );
        env.add_items("p", 1500);
        let mut runner = env.spawn("run1", &["run", "p"]);
        wait_for("some items done", || {
            env.int("SELECT count(*) FROM items WHERE status = 'done'") >= 200
        });
        signal(runner.id(), Signal::SIGKILL);
        runner.wait().unwrap();
        let done_before: HashSet<String> = env
            .strings("SELECT key FROM items WHERE status = 'done'")
            .into_iter()
            .collect();
        assert!(
            !done_before.is_empty() && done_before.len() < 1500,
            "the kill landed mid-run"
        );

        env.run(&["run", "p"]).code(0);
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            1500
        );
        // Nothing done before the kill ran again.
        let second = env.int("SELECT max(id) FROM runs").to_string();
        let rerun: Vec<String> = common::lines(&env.path("answered.log"))
            .into_iter()
            .filter_map(|l| {
                let (run, key) = l.split_once(' ')?;
                (run == second).then(|| key.to_string())
            })
            .collect();
        assert_eq!(
            rerun.len() + done_before.len(),
            1500,
            "the re-run did the rest"
        );
        for key in &rerun {
            assert!(!done_before.contains(key), "{key} was done, yet ran again");
        }
        assert_eq!(
            env.int("SELECT count(*) FROM (SELECT item_id FROM events WHERE kind = 'done' GROUP BY item_id HAVING count(*) > 1) AS twice"),
            0,
            "an item was recorded done twice"
        );
        env.assert_counts_consistent();
        assert_no_workers(&env);
    }

    fn sigterm_shuts_the_workers_down_and_releases_what_was_not_answered(env) {
        require!(Tool::Python3);
        env.write(
            "slow.py",
            r#"
import json, sys, time
for line in sys.stdin:
    time.sleep(0.05)
    sys.stdout.write(json.dumps({"key": json.loads(line)["key"], "result": 1}) + "\n")
    sys.stdout.flush()
"#,
        );
        env.config(
            "[batch.p]\nworker = [\"python3\", \"slow.py\"]\nmode = \"persistent\"\nconcurrency = 2\n\
             grace = \"1s\"\n",
        );
        env.add_items("p", 400);
        let mut runner = env.spawn("run1", &["run", "p"]);
        wait_for("some items done", || {
            env.int("SELECT count(*) FROM items WHERE status = 'done'") >= 10
        });
        signal(runner.id(), Signal::SIGTERM);
        let status = runner.wait().unwrap();
        assert!(!status.success());
        assert_eq!(env.run_states(), ["aborted"]);
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'claimed'"),
            0
        );
        let done = env.int("SELECT count(*) FROM items WHERE status = 'done'");
        assert!(done < 400);
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'pending'"),
            400 - done
        );
        assert_no_workers(&env);
    }

    fn the_event_log_file_has_each_items_lines_whole_in_the_log_format(env) {
        require!(Tool::Python3);
        let noop = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/peers/noop_persistent.py");
        env.config(&format!(
            "log_dir = \"logs\"\n[batch.p]\nworker = [\"python3\", {:?}]\nmode = \"persistent\"\nconcurrency = 2\n",
            noop.display().to_string()
        ));
        let keys: Vec<String> = (0..3000).map(|i| format!("k{i}")).collect();
        add_keys(&env, "p", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        env.run(&["run", "p"]).code(0);
        let mut text = String::new();
        for f in std::fs::read_dir(env.path("logs")).unwrap() {
            text.push_str(&std::fs::read_to_string(f.unwrap().path()).unwrap());
        }
        assert!(text.ends_with('\n'), "the last line is whole");
        let (mut claimed, mut answered) = (HashSet::new(), HashSet::new());
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            let names: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
            if v["target"] != "nightshift::event" {
                continue;
            }
            assert_eq!(names, ["actor", "at", "batch", "fields", "key", "kind", "level", "message", "run", "target", "timestamp"], "{line}");
            // In the order of the other lines (tracing's JSON format).
            let order = ["timestamp", "level", "message", "at", "batch", "run", "key", "kind", "actor", "fields", "target"]
                .map(|k| line.find(&format!("\"{k}\":")).unwrap());
            assert!(order.is_sorted(), "{line}");
            let key = v["key"].as_str().unwrap().to_string();
            match v["kind"].as_str().unwrap() {
                "claimed" => assert!(claimed.insert(key), "{line}"),
                "empty" => {
                    let fields: serde_json::Value = serde_json::from_str(v["fields"].as_str().unwrap()).unwrap();
                    assert_eq!((v["message"].as_str(), &fields["attempt"]), (Some("done, empty result"), &serde_json::json!(1)), "{line}");
                    assert!(answered.insert(key), "{line}");
                }
                _ => {}
            }
        }
        let all: HashSet<String> = keys.into_iter().collect();
        assert_eq!((claimed == all, answered == all), (true, true), "one claimed and one empty line per item");
    }

    fn the_readme_example_worker_runs_in_persistent_mode(env) {
        require!(Tool::Python3);
        let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("assets/examples/persistent_worker.py");
        env.config(&format!(
            "[batch.p]\nworker = [\"python3\", {:?}]\nmode = \"persistent\"\nretries = 0\n",
            example.display().to_string()
        ));
        let file = env.write(
            "items.jsonl",
            "{\"key\":\"a\",\"title\":\"three small words\"}\n{\"key\":\"b\",\"title\":\"\"}\n",
        );
        env.cmd().args(["add", "p"]).arg(file).assert().success();
        env.run(&["run", "p"]).code(1);
        let items = items(&env);
        assert_eq!(items["a"].3.as_deref(), Some(r#"{"words":3}"#));
        assert_eq!(
            (items["b"].1.as_deref(), items["b"].2.as_deref()),
            (Some("manual"), Some("NoTitle"))
        );
    }

    fn a_stopped_runner_taken_over_has_its_late_answers_rejected(env) {
        env.script("w.sh", HOST_WORKER);
        env.config(
            "[batch.b]\nworker = [\"./w.sh\"]\nmode = \"persistent\"\nlock_ttl = \"1s\"\nconcurrency = 1\n",
        );
        env.add_items("b", 3);
        let mut a = env.spawn_with(
            "a",
            &["run", "b"],
            &[("NIGHTSHIFT_HOST", "host-x"), ("SLOW", "2")],
        );
        wait_for("k1 started", || env.path("started-k1").exists());
        // Its guard gone first, which would stop the worker as the seat
        // lapses (`runner::child::guard`): the lease token is then all that
        // fences the late answer (a guard killed, or not on Linux).
        #[cfg(target_os = "linux")]
        common::kill_guard(a.id());
        // Freeze runner A (its worker goes on) past its TTL; B takes over.
        signal(a.id(), Signal::SIGSTOP);
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
        };
        wait_for("the lock to expire", || {
            env.int("SELECT coalesce(max(expires_at), 0) FROM locks") < now() - 50
        });
        let b = ran(env
            .cmd()
            .env("NIGHTSHIFT_HOST", "host-y")
            .args(["run", "b"])
            .output()
            .unwrap());
        b.code(0);
        assert!(b.stdout.contains("3 done"), "{b:#?}");
        wait_for("A's worker to finish k1", || {
            common::lines(&env.path("side-effects.log")).contains(&"host-x k1".to_string())
        });
        signal(a.id(), Signal::SIGCONT);
        let status = a.wait().unwrap();
        assert!(status.code().is_some(), "A exited by itself: {status:?}");
        // B's results stand: A's late answer was rejected by its lease token.
        assert_eq!(
            env.strings("SELECT result FROM items ORDER BY key"),
            ["\"host-y\"", "\"host-y\"", "\"host-y\""]
        );
        assert_eq!(
            env.int("SELECT count(*) FROM events WHERE kind IN ('done', 'empty')"),
            3,
            "one accepted completion per key"
        );
        let a_run = env.int("SELECT min(id) FROM runs");
        assert_eq!(
            env.int(&format!(
                "SELECT done + empty + failed FROM runs WHERE id = {a_run}"
            )),
            0
        );
        let (out, err) = env.output_of("a");
        assert!(out.contains("lost the batch lock"), "{out} {err}");
        env.assert_counts_consistent();
    }

    /// The multi-host simulation's keys run twice with no take-back logged:
    /// a runner whose seat was taken (its heartbeat late under load) gave
    /// the items its worker was on back to pending itself, as "released,
    /// not started", racing the taker, who would have logged taking them
    /// back. A runner that lost its lock leaves its claims to the taker.
    fn a_runner_that_lost_its_lock_leaves_its_claims_to_the_taker(env) {
        env.script(
            "w.sh",
            r#"while IFS= read -r line; do
  key=$(printf '%s' "$line" | sed 's/.*"key":"\([^"]*\)".*/\1/')
  echo "${NIGHTSHIFT_HOST:-local} $key" >> side-effects.log
  while [ ! -e go ]; do sleep 0.02; done
  echo "{\"key\":\"$key\",\"result\":\"${NIGHTSHIFT_HOST:-local}\"}"
done"#,
        );
        env.config(
            "[batch.b]\nworker = [\"./w.sh\"]\nmode = \"persistent\"\nlock_ttl = \"2s\"\nconcurrency = 1\n",
        );
        env.add_items("b", 3);
        let mut a = env.spawn_with("a", &["run", "b"], &[("NIGHTSHIFT_HOST", "host-x")]);
        // A's worker did k1's side effect; its answer waits.
        wait_for("A's worker on k1", || {
            common::lines(&env.path("side-effects.log")).contains(&"host-x k1".to_string())
        });
        // Another runner took A's seat and has not yet taken its claims back.
        assert_eq!(env.exec("DELETE FROM locks"), 1);
        let status = a.wait().unwrap();
        assert_eq!(status.code(), Some(1), "A failed: it lost its lock");
        assert_eq!(
            env.strings("SELECT status FROM items WHERE key = 'k1'"),
            ["claimed"],
            "k1 is the taker's to take back; events: {:?}",
            env.strings("SELECT kind || ' ' || coalesce(key, '-') || ' ' || message FROM events ORDER BY id")
        );
        assert_eq!(env.int("SELECT count(*) FROM events WHERE kind = 'released'"), 0);

        env.write("go", "");
        let b = ran(env
            .cmd()
            .env("NIGHTSHIFT_HOST", "host-y")
            .args(["run", "b"])
            .output()
            .unwrap());
        b.code(0);
        assert!(b.stdout.contains("3 done"), "{b:#?}");
        // k1 ran twice, and the store says why: taken back from A's run.
        let reclaimed = env.strings(
            "SELECT key FROM events WHERE kind = 'reclaimed' AND key IS NOT NULL ORDER BY key",
        );
        assert_eq!(reclaimed, ["k1"]);
        assert_eq!(env.item("k1").2, 2, "both attempts counted");
        env.assert_counts_consistent();
    }

    /// A worker flooding op ids (each one a store write) gets at most
    /// `MAX_OP_IDS` recorded per item; repeats and ids with control characters
    /// are ignored; the item still completes.
    fn an_op_id_flood_is_bounded(env) {
        require!(Tool::Python3);
        env.write(
            "flood.py",
            r#"
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    for i in range(300):
        print(json.dumps({"key": r["key"], "op_id": "op-%d" % i}))
        print(json.dumps({"key": r["key"], "op_id": "op-%d" % i}))
    print(json.dumps({"key": r["key"], "op_id": "evil\u001b[2J"}))
    print(json.dumps({"key": r["key"], "result": "ok"}), flush=True)
"#,
        );
        env.config("[batch.p]\nworker = [\"python3\", \"flood.py\"]\nmode = \"persistent\"\n");
        add_keys(&env, "p", &["a"]);
        env.run(&["run", "p"]).code(0);
        let n = env.int("SELECT count(*) FROM events WHERE kind = 'op-id'");
        assert_eq!(n, 100, "op-id events recorded");
        assert_eq!(
            env.strings("SELECT op_id FROM items WHERE key = 'a'"),
            ["op-99"]
        );
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            1
        );
    }

    /// The issue's repro with a keyed worker: stray objects at start-up (at
    /// every restart) and mid-stream are ignored and counted; every item
    /// gets its own answer, the failing one stays failed.
    fn stray_objects_at_start_up_and_mid_stream_never_shift_answers(env) {
        require!(Tool::Python3);
        env.write("echo.py", ECHO_WORKER);
        env.config(
            "[batch.b]\nworker = [\"python3\", \"echo.py\", \"keyed\"]\nmode = \"persistent\"\n\
             concurrency = 1\nbackoff = \"10ms\"\n",
        );
        env.add_items("b", 10);
        env.run(&["run", "b"]).code(1);
        assert_eq!(misattributed(&env), []);
        let items = items(&env);
        assert_eq!(
            items["k4"],
            ("failed".into(), Some("manual".into()), Some("Bad".into()), None)
        );
        for i in (1..=10).filter(|i| *i != 4) {
            assert_eq!(items[&format!("k{i}")].0, "done", "{items:?}");
        }
        // Only the real failures were recorded: no protocol error.
        let failures: Vec<_> = failures(&env, "b").into_iter().map(|(k, c, _)| (k, c)).collect();
        assert_eq!(
            failures,
            [("k7".to_string(), "WorkerExited".to_string()), ("k4".into(), "Bad".into())]
        );
        assert_eq!(starts(&env).len(), 2, "restarted once, after k7's crash");
        // Two start-up lines and three mid-stream prints, counted in the log.
        let strays = env.events("b", "stray-output");
        assert!(strays[0]["message"].as_str().unwrap().contains(r#"{"log": "connected"}"#), "{strays:?}");
        assert_eq!(strays.last().unwrap()["fields"]["count"], 5, "{strays:?}");
        assert!(strays.len() <= 2, "{strays:?}");
        env.assert_counts_consistent();
    }

    /// The issue's repro as written: answers without `"key"` cannot be
    /// matched to their requests, so none is recorded; the worker fails
    /// visibly instead of shifting answers or spinning.
    fn a_worker_that_omits_the_key_fails_visibly_and_never_shifts_answers(env) {
        require!(Tool::Python3);
        env.write("echo.py", ECHO_WORKER);
        env.config(
            "[batch.b]\nworker = [\"python3\", \"echo.py\"]\nmode = \"persistent\"\n\
             concurrency = 1\nretries = 0\nbackoff = \"10ms\"\n",
        );
        env.add_items("b", 10);
        env.run(&["run", "b"]).code(1);
        assert_eq!(misattributed(&env), []);
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'done'"), 0);
        assert_eq!(env.item("k5").0, "pending", "k5 never ran");
        let gave_up = env.events("b", "worker-failed");
        assert_eq!(gave_up.len(), 1, "{gave_up:?}");
        let msg = gave_up[0]["message"].as_str().unwrap();
        assert!(msg.contains(r#"must carry the request's "key""#), "{msg}");
        let failed = env.strings("SELECT error_message FROM items WHERE status = 'failed'");
        assert_eq!(failed.len(), 3, "{failed:?}");
        for m in &failed {
            assert!(m.contains(r#""key""#), "{m}");
        }
        assert_eq!(
            env.strings("SELECT DISTINCT error_class FROM items WHERE status = 'failed'"),
            ["ProtocolError"]
        );
        env.assert_counts_consistent();
    }

    /// Answers that cannot be matched with certainty restart the worker;
    /// only the request at the head gets an attempt counted, the others are
    /// sent again; a `NaN` answer is a protocol error at once, not a wait
    /// for `item_timeout`.
    fn unmatched_answers_restart_the_worker_and_nan_fails_at_once(env) {
        require!(Tool::Python3);
        env.write("hostile.py", HOSTILE_WORKER);
        env.config(
            "[batch.b]\nworker = [\"python3\", \"hostile.py\"]\nmode = \"persistent\"\n\
             concurrency = 1\nretries = 1\nbackoff = \"10ms\"\nitem_timeout = \"60s\"\n",
        );
        add_keys(&env, "b", &["a", "dup", "after", "foreign", "b", "nokey", "nan", "c"]);
        env.run(&["run", "b"]).code(1);
        assert_eq!(misattributed(&env), []);
        let items = items(&env);
        for k in ["a", "dup", "after", "foreign", "b", "nokey", "c"] {
            assert_eq!(items[k].0, "done", "{k}: {items:?}");
        }
        // NaN: a protocol error quoting the line, on both attempts.
        assert_eq!(
            (items["nan"].0.as_str(), items["nan"].2.as_deref()),
            ("failed", Some("ProtocolError"))
        );
        let failures = failures(&env, "b");
        let nan: Vec<_> = failures.iter().filter(|f| f.0 == "nan").collect();
        assert_eq!(nan.len(), 2, "{nan:?}");
        for (_, class, msg) in nan {
            assert_eq!(class, "ProtocolError");
            assert!(msg.contains("not valid JSON") && msg.contains(r#"{"key": "nan", "result": {"score": NaN}}"#), "{msg}");
        }
        // Nothing else failed but the violations, each a protocol error
        // naming its rule, charged to the request at the head.
        let charged = |needle: &str| -> Vec<&str> {
            failures.iter().filter(|f| f.2.contains(needle)).map(|f| f.0.as_str()).collect()
        };
        assert_eq!(charged(r#"must carry the request's "key""#), ["nokey"], "{failures:?}");
        assert_eq!(charged(r#"an answer for "a""#), ["foreign"], "{failures:?}");
        // The second answer came after dup's own: whatever was next (if
        // anything was sent, and the worker had read it) carries it, else
        // the log does (on the request it never read, if one was sent).
        let dup_charged = charged(r#"a second answer for "dup""#).len();
        let dup_logged = ["protocol-error", "worker-restarted"]
            .iter()
            .flat_map(|kind| env.events("b", kind))
            .filter(|e| e["message"].as_str().unwrap().contains(r#"a second answer for "dup""#))
            .count();
        assert_eq!(dup_charged + dup_logged, 1, "{failures:?}");
        assert_eq!(failures.len(), 4 + dup_charged, "{failures:?}");
        assert!(failures.iter().all(|f| f.1 == "ProtocolError"), "{failures:?}");
        env.assert_counts_consistent();
        assert_no_workers(&env);
    }

    /// A cost that is not a finite number from 0 to the bound is refused as
    /// a worker error (quarantined, never counted), in both modes and from
    /// every place a cost is read.
    fn costs_beyond_the_bound_are_refused_in_both_modes(env) {
        require!(Tool::Python3);
        env.write("cost.py", COST_WORKER);
        env.config(
            "[batch.proc]\nworker = [\"python3\", \"cost.py\"]\nretries = 0\n\
             [batch.pers]\nworker = [\"python3\", \"cost.py\"]\nmode = \"persistent\"\nretries = 0\n",
        );
        let refused = ["huge", "big", "neg", "text", "err"];
        let mut proc_keys = vec!["ok", "marker", "markers"];
        proc_keys.extend(refused);
        let mut pers_keys = vec!["ok"];
        pers_keys.extend(refused);
        add_keys(&env, "proc", &proc_keys);
        add_keys(&env, "pers", &pers_keys);
        for (batch, keys) in [("proc", &proc_keys), ("pers", &pers_keys)] {
            env.run(&["run", batch]).code(1);
            let rows = env.rows(&format!(
                "SELECT key, status, tier, error_class, error_message, cost FROM items WHERE batch_id = (SELECT id FROM batches WHERE name = '{batch}')"
            ));
            assert_eq!(rows.len(), keys.len());
            for row in &rows {
                let key = row[0].as_deref().unwrap();
                if key == "ok" {
                    assert_eq!(row[1].as_deref(), Some("done"), "{batch}: {row:?}");
                    continue;
                }
                assert_eq!(
                    (row[1].as_deref(), row[2].as_deref(), row[3].as_deref(), row[5].as_deref()),
                    (Some("failed"), Some("manual"), Some("InvalidCost"), None),
                    "{batch}: {row:?}"
                );
                let msg = row[4].as_deref().unwrap();
                let shown = match key {
                    "huge" | "err" => "1e+308",
                    "big" => "1000000000000",
                    "neg" => "-1",
                    "text" => r#""Infinity""#,
                    "marker" => "NaN",
                    _ => "1200000000",
                };
                assert!(msg.contains(&format!("a cost of {shown}")) && msg.contains("from 0 to 1e9"), "{batch} {key}: {msg}");
                if key == "err" {
                    assert!(msg.contains("Busy: 503"), "{msg}");
                }
            }
            let status = env.status();
            let run = &status["batches"].as_array().unwrap().iter().find(|b| b["name"] == batch).unwrap()["last_run"];
            assert_eq!(run["counts"]["cost"].as_f64(), Some(0.25), "{batch}: {run}");
        }
        env.assert_counts_consistent();
    }

    /// An answer over the limit is cut the same way in both modes (1 MiB,
    /// as the README says; persistent mode took 1088 KiB whole) and the
    /// cost it reported counts (process mode dropped it with the rest).
    /// An error answer over the limit keeps its class and its cost.
    fn an_answer_over_the_limit_is_cut_alike_in_both_modes_and_its_cost_counts(env) {
        require!(Tool::Python3);
        env.write(
            "big.py",
            r#"
import json, os, sys
def answer(k):
    big = "x" * 1_050_000
    if k == "err":
        return {"key": k, "error": {"message": big, "error_class": "TooChatty", "transient": False, "cost": 0.5}}
    return {"key": k, "result": {"for": k, "big": big, "cost": 0.5}}
if os.environ.get("NIGHTSHIFT_MODE") == "persistent":
    for line in sys.stdin:
        print(json.dumps(answer(json.loads(line)["key"])), flush=True)
else:
    sys.stdin.read()
    print(json.dumps(answer(os.environ["NIGHTSHIFT_KEY"])["result"]))
"#,
        );
        env.config(
            "[batch.proc]\nworker = [\"python3\", \"big.py\"]\n\
             [batch.pers]\nworker = [\"python3\", \"big.py\"]\nmode = \"persistent\"\nretries = 0\n",
        );
        add_keys(&env, "proc", &["k1"]);
        add_keys(&env, "pers", &["k2", "err", "k3"]);
        env.run(&["run", "proc"]).code(0);
        env.run(&["run", "pers"]).code(1);
        for k in ["k1", "k2", "k3"] {
            let rows = env.rows(&format!("SELECT status, result, cost FROM items WHERE key = '{k}'"));
            let [status, result, cost] = <[Option<String>; 3]>::try_from(rows[0].clone()).unwrap();
            assert_eq!(status.as_deref(), Some("done"), "{k}");
            let result: serde_json::Value = serde_json::from_str(&result.unwrap()).unwrap();
            assert_eq!((&result["truncated"], &result["limit_bytes"]), (&serde_json::json!(true), &serde_json::json!(1 << 20)), "{k}");
            let head = result["head"].as_str().unwrap();
            assert!(head.len() <= 1 << 20 && head.contains(&format!("\"for\": \"{k}\"")), "{k}: {}", &head[..80]);
            assert_eq!(cost.unwrap().parse::<f64>().unwrap(), 0.5, "{k}");
        }
        assert_eq!(env.strings("SELECT error_class FROM items WHERE key = 'err'"), ["TooChatty"]);
        assert_eq!(env.strings("SELECT tier FROM items WHERE key = 'err'"), ["manual"]);
        let status = env.status();
        for (batch, cost) in [("proc", 0.5), ("pers", 1.5)] {
            let run = &status["batches"].as_array().unwrap().iter().find(|b| b["name"] == batch).unwrap()["last_run"];
            assert_eq!(run["counts"]["cost"].as_f64(), Some(cost), "{batch}: {run}");
        }
        // One worker answered all three: a long answer does not put it out
        // of step.
        assert_eq!(env.events("pers", "protocol-error").len(), 0);
        env.assert_counts_consistent();
    }

    /// An answer is durable soon after it comes, not once the rest of its
    /// batch is answered: behind a call that takes long (here, until the
    /// test lets it go), the calls answered before it are done, and a
    /// crash meanwhile runs none of them again.
    fn answers_are_durable_while_a_slow_call_behind_them_runs(env) {
        require!(Tool::Python3);
        let (calls, release) = (env.path("calls.log"), env.path("release"));
        env.write("w.py", &format!(r#"import json, os, sys, time
for line in sys.stdin:
    r = json.loads(line)
    with open({calls:?}, "a") as f:
        f.write(r["key"] + "\n")
    while r["key"] == "k12" and not os.path.exists({release:?}):
        time.sleep(0.05)
    print(json.dumps({{"key": r["key"], "result": {{"ok": 1}}}}), flush=True)
"#));
        env.config("[batch.p]\nworker = [\"python3\", \"w.py\"]\nmode = \"persistent\"\nconcurrency = 1\n");
        let keys: Vec<String> = (1..=40).map(|i| format!("k{i}")).collect();
        add_keys(&env, "p", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        let mut run = env.spawn("p", &["run", "p"]);
        let called = || common::lines(&calls);
        wait_for("the slow call", || called().contains(&"k12".to_string()));
        let before: Vec<String> = called().into_iter().take_while(|k| k != "k12").collect();
        assert_eq!(before.len(), 11, "{before:?}");
        let done = || env.strings("SELECT key FROM items WHERE status = 'done'").len();
        wait_for("the 11 answers before the slow call done", || done() == 11);
        signal(run.id(), Signal::SIGKILL);
        run.wait().unwrap();
        std::fs::write(&release, "").unwrap();
        env.run(&["run", "p"]).code(0);
        assert_eq!(done(), 40);
        let twice: Vec<String> = common::tally(&called())
            .into_iter()
            .filter(|(k, n)| *n > 1 && k != "k12")
            .map(|(k, _)| k)
            .collect();
        assert!(twice.is_empty(), "called again after the crash: {twice:?}");
    }

    /// A worker that stopped taking requests after one answer (it closed
    /// its stdin, or exited 0 to be replaced) charged the next item an
    /// attempt for a request it never read: with `max_attempts = 1` every
    /// second item was quarantined without ever running, as
    /// `WorkerExited: the worker exited` of a worker still alive. Such a
    /// request goes to a fresh worker, its attempt not counted, and the log
    /// says what the worker did.
    fn a_request_the_worker_never_took_costs_no_attempt(env) {
        require!(Tool::Python3);
        env.write(
            "w.py",
            "import json, os, sys, time\n\
             r = json.loads(sys.stdin.readline())\n\
             with open('exec.log', 'a') as f:\n\
             \x20   f.write('%s %d\\n' % (r['key'], r['attempt']))\n\
             if sys.argv[1] == 'close':\n\
             \x20   os.close(0)\n\
             print(json.dumps({'key': r['key'], 'result': 1}), flush=True)\n\
             if sys.argv[1] == 'close':\n\
             \x20   time.sleep(300)\n",
        );
        for (batch, how, said) in [
            ("closes", "close", "the worker closed its stdin (it took no more requests) and was still running 5s later: its process group was killed"),
            ("recycles", "exit", "exited with status 0"),
        ] {
            env.config(&format!(
                "[batch.{batch}]\nworker = [\"python3\", \"w.py\", \"{how}\"]\nmode = \"persistent\"\n\
                 concurrency = 1\nmax_attempts = 1\nitem_timeout = \"60s\"\n"
            ));
            let keys = [format!("{batch}1"), format!("{batch}2")];
            add_keys(&env, batch, &keys.iter().map(String::as_str).collect::<Vec<_>>());
            let out = env.run(&["run", batch]);
            out.code(0);
            for k in &keys {
                assert_eq!(env.item(k), ("done".into(), None, 1), "{batch}: {k}");
            }
            // Each key ran once, on its first attempt.
            let ran: Vec<String> = common::lines(&env.path("exec.log"))
                .into_iter()
                .filter(|l| l.starts_with(batch))
                .collect();
            let expected: Vec<String> = keys.iter().map(|k| format!("{k} 1")).collect();
            assert_eq!(ran, expected, "{batch}");
            let restarted = env.events(batch, "worker-restarted");
            assert!(!restarted.is_empty(), "{batch}");
            for e in &restarted {
                let m = e["message"].as_str().unwrap();
                assert!(m.contains(said) && m.contains("attempts not counted"), "{batch}: {m}");
            }
            env.assert_counts_consistent();
        }
        assert_no_workers(&env);
    }
}
