//! Steering a live batch end to end: `nightshift cancel` and `nightshift
//! stop` against a real runner with real workers, on both backends, and
//! across two host identities (`NIGHTSHIFT_HOST`) on PostgreSQL.
#![cfg(unix)]

use crate::support as common;

use crate::support::require::Tool;

use std::collections::BTreeSet;
use std::path::Path;

use common::{Backend, Env, add_keys, assert_no_process_left, wait_for};

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// A process-mode worker: `stuck` hangs (a child process carrying
/// `marker`, so its group's end can be seen); the others succeed at once.
/// Each touches `started/KEY` first.
fn stuck_worker(env: &Env, marker: &str) -> String {
    env.waiting_worker(
        "if [ \"$NIGHTSHIFT_KEY\" = stuck ]; then sleep 1000; fi",
        marker,
    )
}

both_backends! {
    fn halt_in_a_row_pauses_the_batch_with_the_reason_and_alerts_once(env) {
        let alerts = env.path("alerts.log");
        env.config(&format!(
            "[batch.b]\nconcurrency = 1\nretries = 0\nhalt = \"3 in a row\"\n\
             alert = [\"sh\", \"-c\", \"cat >> {}\"]\n",
            p(&alerts)
        ));
        add_keys(&env, "b", &["ok1", "k1", "k2", "ok2", "k3", "k4", "k5", "k6", "k7"]);
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\ncase \"$NIGHTSHIFT_KEY\" in ok*) echo '\"ok\"'; exit 0 ;; esac\n\
             echo '{\"error_class\":\"ServiceUnavailable\",\"transient\":true,\"message\":\"503\"}' >&2\nexit 1",
        ));
        let out = env.run(&["run", "b", "--", &w]);
        out.code(1);
        let reason = "halted: 3 consecutive ServiceUnavailable";
        assert!(out.stdout.contains(reason), "{out:?}");
        // ok2 broke the first row: the trip came at k5; nothing after it ran.
        assert_eq!(env.item("k5"), ("failed".into(), Some("retry".into()), 1));
        assert_eq!(env.item("k6"), ("pending".into(), None, 0));
        let status = env.status();
        assert_eq!(status["batches"][0]["paused_reason"].as_str(), Some(reason), "{status}");
        // The alert fired once, for the run that tripped; a paused run does
        // nothing and alerts nothing.
        env.run(&["run", "b", "--", &w]).code(0);
        assert_eq!(common::lines(&alerts).len(), 1);
        assert!(common::lines(&alerts)[0].contains(reason));
        // Unpause clears it: the next run claims again (and trips again).
        env.run(&["unpause", "b"]).code(0);
        env.run(&["run", "b", "--", &w]).code(1);
        assert_eq!(env.item("k6").1.as_deref(), Some("retry"));
        assert_eq!(common::lines(&alerts).len(), 2);
    }

    /// A runner frozen (SIGSTOP) while `stop` was asked claims nothing when
    /// it wakes: the claim itself reads the ask, not only the heartbeat a
    /// moment later (such a runner claimed and started new calls first).
    /// The run still says who stopped it.
    fn a_runner_woken_after_a_stop_was_asked_claims_nothing(env) {
        let starts = env.path("starts.log");
        env.config("[batch.b]\nconcurrency = 1\n");
        add_keys(&env, "b", &["k1", "k2", "k3", "k4", "k5", "k6"]);
        let w = p(&env.script(
            "w.sh",
            &format!("cat >/dev/null\necho \"$NIGHTSHIFT_KEY\" >> {}\nsleep 0.3\necho '\"ok\"'", p(&starts)),
        ));
        let mut run = env.spawn("b", &["run", "b", "--", &w]);
        wait_for("two calls", || common::lines(&starts).len() >= 2);
        let pid = nix::unistd::Pid::from_raw(i32::try_from(run.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
        let started = common::lines(&starts).len();
        env.run(&["stop", "b"]).code(0);
        // The call in flight ends while its runner sleeps.
        std::thread::sleep(std::time::Duration::from_millis(600));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
        let status = run.wait().unwrap();
        assert_eq!(common::lines(&starts).len(), started, "no call started after the stop");
        let out = std::fs::read_to_string(env.path("b.out")).unwrap_or_default();
        assert!(out.contains("; stopped: stopped by "), "{status:?}: {out}");
    }

    /// A persistent worker's answers reach the circuit breaker in the
    /// order given: a success is heard as it comes, not when its batch is
    /// committed (it was heard after the failures that followed it, so a
    /// row broken by a success tripped anyway).
    fn a_persistent_worker_s_success_breaks_the_row_when_it_answers(env) {
        env.write(
            "pw.py",
            "import json, sys\nfor line in sys.stdin:\n    k = json.loads(line)[\"key\"]\n    \
             if k.startswith(\"ok\"):\n        print(json.dumps({\"key\": k, \"result\": 1}), flush=True)\n    \
             else:\n        print(json.dumps({\"key\": k, \"error\": {\"error_class\": \"Busy\", \"transient\": True}}), flush=True)\n",
        );
        env.config(
            "[batch.b]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\n\
             concurrency = 1\nretries = 0\nhalt = \"3 in a row\"\n",
        );
        // Answers in this order; ok2 breaks the row: the trip comes at k5.
        add_keys(&env, "b", &["ok1", "k1", "k2", "ok2", "k3", "k4", "k5", "k6", "k7", "k8"]);
        env.run(&["run", "b"]).code(1);
        let out = env
            .cmd()
            .args(["log", "b", "--json", "-n", "1000", "--kind", "failed,paused"])
            .output()
            .unwrap();
        let order: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|e| match e["kind"].as_str() {
                Some("paused") => "paused".to_string(),
                _ => e["key"].as_str().unwrap_or("?").to_string(),
            })
            .collect();
        // The pause is written as the trip is heard, before the failure
        // that tripped it.
        let paused = order.iter().position(|k| k == "paused").expect("the batch paused");
        assert_eq!(order[..paused], ["k1", "k2", "k3", "k4"], "{order:?}");
        assert_eq!(order.get(paused + 1).map(String::as_str), Some("k5"), "{order:?}");
    }

    /// The API goes down after a healthy phase: a persistent slot that had
    /// sent a batch ahead let every request of it through after the trip
    /// (46–64 paid calls at `concurrency = 1` where 3 tripped it). With a
    /// breaker, a slot has one request at its worker at a time: after the
    /// trip no call starts.
    fn a_persistent_breaker_lets_no_call_through_after_its_trip(env) {
        let calls = env.path("calls.log");
        let worker = r#"import json, sys
for line in sys.stdin:
    k = json.loads(line)["key"]
    open(CALLS, "a").write(k + "\n")
    if k < "k100":
        print(json.dumps({"key": k, "result": 1}), flush=True)
    else:
        error = {"error_class": "Down", "transient": True}
        print(json.dumps({"key": k, "error": error}), flush=True)
"#;
        env.write("pw.py", &worker.replace("CALLS", &format!("{:?}", calls.display().to_string())));
        env.config(
            "[batch.b]\nworker = [\"python3\", \"pw.py\"]\nmode = \"persistent\"\n\
             concurrency = 1\nretries = 0\nhalt = \"3 in a row\"\n",
        );
        let keys: Vec<String> = (0..200).map(|i| format!("k{:03}", i)).collect();
        add_keys(&env, "b", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        env.run(&["run", "b"]).code(1);
        let failing = common::lines(&calls).iter().filter(|k| k.as_str() >= "k100").count();
        assert_eq!(failing, 3, "calls to the failing API");
        assert_eq!(env.status()["batches"][0]["paused"], true);
    }

    fn halt_on_a_share_of_the_last_answers(env) {
        env.config("[batch.b]\nconcurrency = 1\nretries = 0\nhalt = \"50% of the last 4\"\n");
        // Answers: ok, fail, ok, fail -> 2 of the last 4 = 50%: trips at f2.
        add_keys(&env, "b", &["o1", "f1", "o2", "f2", "o3", "o4"]);
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\ncase \"$NIGHTSHIFT_KEY\" in o*) echo '\"ok\"'; exit 0 ;; esac\n\
             echo '{\"error_class\":\"Timeout\",\"transient\":true}' >&2\nexit 1",
        ));
        env.run(&["run", "b", "--", &w]).code(1);
        assert_eq!(env.item("f2").1.as_deref(), Some("retry"));
        assert_eq!(env.item("o3"), ("pending".into(), None, 0));
        let reason = "halted: 2 of the last 4 answers failed (the limit is 50%): 2 Timeout";
        assert_eq!(env.status()["batches"][0]["paused_reason"].as_str(), Some(reason));
        let paused = env.events("b", "paused");
        assert!(paused[0]["message"].as_str().unwrap().contains("halt = \"50% of the last 4\""), "{paused:?}");
    }

    /// The classes are the workers' own text: a storm of long, distinct
    /// ones (a class carrying the item's name) must not make the pause
    /// reason, shown by `run`, `status` and the dashboard, a screenful.
    fn a_halt_reason_names_a_few_classes_inert_and_cut(env) {
        env.config("[batch.b]\nconcurrency = 1\nretries = 0\nhalt = \"50% of the last 6\"\n");
        add_keys(&env, "b", &["k1", "k2", "k3", "k4", "k5", "k6", "k7"]);
        let w = p(&env.script(
            "w.sh",
            "cat >/dev/null\nlong=$(printf '\u{3042}%.0s' $(seq 1 200))\n\
             printf '{\"error_class\":\"\u{63a5}\u{7d9a}%s\\\\u001b[2J%s\",\"transient\":true}\\n' \"$NIGHTSHIFT_KEY\" \"$long\" >&2\nexit 1",
        ));
        let out = env.run(&["run", "b", "--", &w]);
        out.code(1);
        let reason = env.status()["batches"][0]["paused_reason"].as_str().unwrap().to_string();
        assert!(reason.starts_with("halted: 6 of the last 6 answers failed (the limit is 50%): 1 接続k1\\x1b[2Jあ"), "{reason}");
        assert!(reason.ends_with(", and 3 other classes"), "{reason}");
        assert_eq!(reason.matches('…').count(), 3, "{reason}");
        assert!(reason.chars().count() < 200, "{reason}");
        assert!(out.stdout.contains(&reason), "{out:?}");
        assert!(env.run(&["status"]).stdout.contains(&format!("PAUSED — {reason}")));
    }

    /// A skip naming keys no item has and an item in flight names them all
    /// in one refusal, by reason (with `--json` as JSON on stdout too), exit
    /// 2, nothing skipped: it said only the first ("no item \"zz\"") and
    /// the fixed command met the item in flight on the next try.
    fn every_key_a_skip_refuses_is_named_at_once(env) {
        env.config("[batch.b]\nconcurrency = 1\n");
        add_keys(&env, "b", &["stuck", "a1"]);
        let marker = format!("steer-skip-{}", env.dir.path().display());
        let w = stuck_worker(&env, &marker);
        let mut runner = env.spawn("run", &["run", "b", "--", &w]);
        wait_for("the stuck worker", || env.started("stuck"));
        let said = "nightshift: error: nothing was skipped in batch \"b\": no such item: zz, yy; \
                    in flight (claimed by a running runner): stuck (stop the run or `cancel` first, then skip again)";
        for dry in [false, true] {
            let mut args = vec!["skip", "b", "zz", "a1", "stuck", "yy", "--reason", "手で済み"];
            if dry {
                args.push("--dry-run");
            }
            let ran = env.run(&args);
            assert_eq!(ran.code(2).stdout, "", "{args:?}");
            assert_eq!(ran.error_line(), said, "{args:?}");
            args.push("--json");
            let ran = env.run(&args);
            assert_eq!(ran.code(2).error_line(), said, "{args:?}");
            assert_eq!(ran.json(), serde_json::json!({
                "batch": "b",
                "dry_run": dry,
                "refused": [
                    {"why": "unknown", "says": "no such item", "keys": [{"key": "zz"}, {"key": "yy"}]},
                    {"why": "in_flight", "says": "in flight (claimed by a running runner)", "keys": [{"key": "stuck"}]},
                ],
                "error": {
                    "command": "skip",
                    "says": said.strip_prefix("nightshift: error: ").unwrap(),
                    "exit": 2,
                },
            }), "{args:?}");
        }
        assert_eq!(env.item("a1").0, "pending", "nothing was skipped");
        assert!(env.events("b", "skipped").is_empty());
        env.run(&["cancel", "b", "stuck"]).code(0);
        assert_eq!(runner.wait().unwrap().code(), Some(0), "{:?}", env.output_of("run"));
        assert_no_process_left(&marker);
    }

    fn cancel_stops_one_running_worker_and_the_rest_carry_on(env) {
        env.config("[batch.b]\nconcurrency = 2\n");
        add_keys(&env, "b", &["stuck", "a1", "a2", "a3", "a4", "a5"]);
        let marker = format!("steer-cancel-{}", env.dir.path().display());
        let w = stuck_worker(&env, &marker);
        let mut runner = env.spawn("run", &["run", "b", "--", &w]);
        wait_for("the stuck worker", || env.started("stuck"));
        let out = env.run(&["cancel", "b", "stuck", "--reason", "runaway", "--json"]);
        out.code(0);
        let j = out.json();
        assert_eq!((j["state"].as_str(), j["to"].as_str()), (Some("asked"), Some("manual")), "{j}");
        // The runner stops that worker's group and finishes the rest.
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{:?}", env.output_of("run"));
        assert_no_process_left(&marker);
        assert_eq!(env.item("stuck"), ("failed".into(), Some("manual".into()), 1));
        for k in ["a1", "a2", "a3", "a4", "a5"] {
            assert_eq!(env.item(k).0, "done", "{k}");
        }
        assert_eq!(env.int("SELECT count(*) FROM events WHERE key = 'stuck' AND kind = 'done'"), 0);
        let cancelled = env.events("b", "cancelled");
        assert_eq!(cancelled.len(), 1, "{cancelled:?}");
        assert!(cancelled[0]["message"].as_str().unwrap().contains("runaway"), "{cancelled:?}");
        assert!(cancelled[0]["actor"].as_str().unwrap().contains('@'), "{cancelled:?}");
        assert_eq!(env.strings("SELECT error_class FROM items WHERE key = 'stuck'"), ["Cancelled"]);
        // The run's summary accounts for every claim: the cancelled one too.
        let (out, err) = env.output_of("run");
        assert!(format!("{out}{err}").contains("5 done, 0 empty, 0 failed (0 retry, 0 manual), 0 retried, 0 skipped-done, 1 cancelled"), "{out}{err}");
        let last = &env.status()["batches"][0]["last_run"];
        assert_eq!(last["counts"]["cancelled"], 1, "{last}");
        assert!(last["summary"].as_str().unwrap().contains("1 cancelled"), "{last}");
        env.assert_counts_consistent();
    }

    /// An item waiting out its immediate retry's backoff is still the
    /// run's (claimed): a cancel is heard within a heartbeat, not when the
    /// backoff (here ten minutes) is over, in both modes.
    fn a_cancel_is_heard_during_a_retry_backoff(env) {
        let w = p(&env.write(
            "w.py",
            "import json, sys\n\
             for line in sys.stdin:\n\
             \x20   req = json.loads(line)\n\
             \x20   if req['key'].endswith('flaky'):\n\
             \x20       a = {'error': {'error_class': '混雑', 'transient': True}}\n\
             \x20   else:\n\
             \x20       a = {'result': 1}\n\
             \x20   a['key'] = req['key']\n\
             \x20   print(json.dumps(a), flush=True)\n",
        ));
        let sh = p(&env.script(
            "w.sh",
            "cat >/dev/null\ncase \"$NIGHTSHIFT_KEY\" in *flaky) echo 混雑 >&2; exit 75 ;; esac\necho 1",
        ));
        for (mode, worker) in [("process", vec![sh.as_str()]), ("persistent", vec!["python3", w.as_str()])] {
            env.config(&format!(
                "[batch.{mode}]\nmode = \"{mode}\"\nconcurrency = 1\nretries = 2\nbackoff = \"10m\"\nbackoff_max = \"10m\"\n"
            ));
            let (flaky, fine) = (format!("{mode}-flaky"), format!("{mode}-fine"));
            add_keys(&env, mode, &[&flaky, &fine]);
            let mut args = vec!["run", mode, "--"];
            args.extend(&worker);
            let mut runner = env.spawn(mode, &args);
            wait_for("the first failure", || {
                env.int(&format!(
                    "SELECT count(*) FROM events e JOIN batches b ON b.id = e.batch_id \
                     WHERE b.name = '{mode}' AND e.kind = 'retry'"
                )) == 1
            });
            env.run(&["cancel", mode, &flaky]).code(0);
            wait_for("the cancel heard", || env.item(&flaky).1.as_deref() == Some("manual"));
            let status = runner.wait().unwrap();
            assert_eq!(status.code(), Some(0), "{mode}: {:?}", env.output_of(mode));
            assert_eq!(env.item(&fine).0, "done", "{mode}");
            let (out, _) = env.output_of(mode);
            assert!(out.contains("1 done") && out.contains("1 cancelled"), "{mode}: {out}");
        }
        env.assert_counts_consistent();
    }

    fn cancel_in_persistent_mode_restarts_only_that_worker(env) {
        // One slot: the items sent after the stuck one go to the next worker.
        env.config("[batch.b]\nmode = \"persistent\"\nconcurrency = 1\n");
        add_keys(&env, "b", &["stuck", "a1", "a2", "a3"]);
        let once = env.path("hung-once");
        let w = p(&env.write(
            "w.py",
            &format!(
                "import json, os, sys, time\n\
                 for line in sys.stdin:\n\
                 \x20   req = json.loads(line)\n\
                 \x20   if req['key'] == 'stuck' and not os.path.exists({once:?}):\n\
                 \x20       open({once:?}, 'w').close()\n\
                 \x20       time.sleep(1000)\n\
                 \x20   print(json.dumps({{'key': req['key'], 'result': 1}}), flush=True)\n",
                once = p(&once)
            ),
        ));
        let mut runner = env.spawn("run", &["run", "b", "--", "python3", &w]);
        wait_for("the stuck item", || once.exists());
        env.run(&["cancel", "b", "stuck", "--to", "pending"]).code(0);
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{:?}", env.output_of("run"));
        // Back to pending (the stopped attempt not counted, as a release's
        // is not), then run again by the same run: the cancelled attempt
        // left no done mark, the done one came after the cancel.
        assert_eq!(env.item("stuck"), ("done".into(), None, 1));
        for k in ["a1", "a2", "a3"] {
            assert_eq!(env.item(k).0, "done", "{k}");
        }
        assert_eq!(
            env.strings("SELECT kind FROM events WHERE key = 'stuck' ORDER BY id"),
            ["claimed", "cancel-asked", "cancelled", "claimed", "done"]
        );
        let cancelled = env.events("b", "cancelled");
        assert_eq!(cancelled.len(), 1);
        assert!(cancelled[0]["message"].as_str().unwrap().ends_with("now pending"), "{cancelled:?}");
        env.assert_counts_consistent();
    }

    /// A cancel of a request queued in the persistent worker's stdin,
    /// behind the item the worker was on, stopped the worker: that other
    /// item's call was cut short and made again from scratch, recorded
    /// nowhere, and the reply called the queued item running. The worker
    /// is left to its work now: the item it is on runs once, and the
    /// cancelled one's answer is not kept.
    fn cancel_of_a_request_queued_in_a_persistent_worker_cuts_no_other_call_short(env) {
        require!(Tool::Python3);
        env.config("[batch.b]\nmode = \"persistent\"\nconcurrency = 1\n");
        // Enough quick items before the slow one that the slot sends many
        // requests ahead (its batches grow as the worker proves fast; its
        // start-up, seconds on a loaded machine, counts in the first).
        let mut keys: Vec<String> = (1..=100).map(|i| format!("f{i}")).collect();
        keys.push("slow".into());
        keys.extend((1..=20).map(|i| format!("q{i}")));
        add_keys(&env, "b", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        // A reader thread notes each request as it arrives (`got.log`);
        // the calls are made one at a time (`exec.log`).
        let w = p(&env.write(
            "w.py",
            "import json, os, queue, sys, threading, time\n\
             q = queue.Queue()\n\
             def read():\n\
             \x20   for line in sys.stdin:\n\
             \x20       r = json.loads(line)\n\
             \x20       with open('got.log', 'a') as f:\n\
             \x20           f.write(r['key'] + '\\n')\n\
             \x20       q.put(r)\n\
             \x20   q.put(None)\n\
             threading.Thread(target=read, daemon=True).start()\n\
             while True:\n\
             \x20   r = q.get()\n\
             \x20   if r is None:\n\
             \x20       break\n\
             \x20   with open('exec.log', 'a') as f:\n\
             \x20       f.write('%s %d %d\\n' % (r['key'], os.getpid(), r['attempt']))\n\
             \x20   while r['key'] == 'slow' and not os.path.exists('release'):\n\
             \x20       time.sleep(0.02)\n\
             \x20   print(json.dumps({'key': r['key'], 'result': 1}), flush=True)\n",
        ));
        let mut runner = env.spawn("run", &["run", "b", "--", "python3", &w]);
        let lines = |f: &str| common::lines(&env.path(f));
        wait_for("q1 queued in the worker behind the slow call", || {
            lines("exec.log").iter().any(|l| l.starts_with("slow "))
                && lines("got.log").contains(&"q1".to_string())
        });
        let out = env.run(&["cancel", "b", "q1"]);
        out.code(0);
        assert!(!out.stdout.contains("running"), "{out:?}");
        assert!(out.stdout.contains("persistent worker"), "{out:?}");
        // A heartbeat (a second) for the runner to hear it while the slow
        // call goes on, then the slow call ends.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        env.write("release", "");
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{:?}", env.output_of("run"));
        let calls = lines("exec.log");
        let slow: Vec<_> = calls.iter().filter(|l| l.starts_with("slow ")).collect();
        assert_eq!(slow.len(), 1, "the slow call made once: {calls:?}");
        let pids: BTreeSet<&str> = calls.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
        assert_eq!(pids.len(), 1, "one worker, never stopped: {calls:?}");
        for k in keys.iter().filter(|k| *k != "q1") {
            assert_eq!(env.item(k), ("done".into(), None, 1), "{k}");
        }
        assert_eq!(env.item("q1").0, "failed");
        assert_eq!(env.strings("SELECT error_class FROM items WHERE key = 'q1'"), ["Cancelled"]);
        let cancelled = env.events("b", "cancelled");
        assert_eq!(cancelled.len(), 1, "{cancelled:?}");
        assert!(cancelled[0]["message"].as_str().unwrap().contains("answer came after the cancel and was not kept"), "{cancelled:?}");
        assert_eq!(env.int("SELECT count(*) FROM events WHERE key = 'q1' AND kind = 'done'"), 0);
        env.assert_counts_consistent();
    }

    fn cancel_of_an_item_not_running(env) {
        add_keys(&env, "b", &["p", "d"]);
        let w = p(&env.script("w.sh", "cat >/dev/null\necho '\"ok\"'"));
        env.cmd().args(["run", "b", "--key", "d", "--", &w]).assert().success();
        let out = env.run(&["cancel", "b", "p"]);
        out.code(0);
        assert!(out.stdout.contains("it was pending, not running; now manual"), "{out:?}");
        assert_eq!(env.item("p"), ("failed".into(), Some("manual".into()), 0));
        let again = env.run(&["cancel", "b", "p", "--json"]);
        assert_eq!(again.json()["state"], "unchanged");
        // Done: refused, unchanged. Unknown: named.
        let done = env.run(&["cancel", "b", "d"]);
        done.code(2);
        assert!(done.error_line().contains("\"d\" is already done"), "{done:?}");
        assert_eq!(env.item("d").0, "done");
        let unknown = env.run(&["cancel", "b", "zz"]);
        unknown.code(2);
        assert!(unknown.error_line().contains("\"zz\""), "{unknown:?}");
    }

    /// A runner killed with SIGKILL hears nothing: a cancel of its claim
    /// moves the item at once (before, it was "asked", and the next run
    /// took it back to pending and ran it), and a stop asks nobody.
    fn cancel_and_stop_after_the_runner_was_killed(env) {
        env.config("[batch.b]\nconcurrency = 3\n");
        add_keys(&env, "b", &["stuck", "other", "third", "rest"]);
        let marker = format!("steer-killed-{}", env.dir.path().display());
        let started_dir = env.path("started");
        let free = p(&env.path("free"));
        let w = env.waiting_worker(&format!("if [ ! -e {free} ]; then sleep 1000; fi"), &marker);
        let mut runner = env.spawn("run", &["run", "b", "--", &w]);
        wait_for("three workers", || ["stuck", "other", "third"].iter().all(|k| env.started(k)));
        common::signal(runner.id(), nix::sys::signal::Signal::SIGKILL);
        runner.wait().unwrap();
        let stop = env.run(&["stop", "b"]);
        stop.code(0);
        assert!(stop.stdout.contains("no runner holds it; nothing to stop"), "{stop:?}");
        let out = env.run(&["cancel", "b", "stuck"]);
        out.code(0);
        assert!(out.stdout.contains("stuck: cancelled at once; it was claimed by run 1, whose runner is gone; now manual"), "{out:?}");
        assert_eq!(env.item("stuck"), ("failed".into(), Some("manual".into()), 1));
        let json = env.run(&["cancel", "b", "other", "--to", "pending", "--json"]).json();
        assert_eq!((&json["state"], &json["was"], &json["run_id"]), (&"moved".into(), &"claimed".into(), &1.into()), "{json}");
        assert_eq!(env.item("other"), ("pending".into(), None, 0));
        // Nothing holds it: a skip marks it (it said "in flight: stop the
        // run or wait", and stop had nobody to ask).
        env.run(&["skip", "b", "third", "--reason", "手で済み"]).code(0);
        assert_eq!(env.item("third").0, "done");
        // The next run stops the dead run's workers and never runs the
        // cancelled or the skipped item.
        std::fs::write(env.path("free"), "").unwrap();
        std::fs::remove_file(started_dir.join("stuck")).unwrap();
        std::fs::remove_file(started_dir.join("third")).unwrap();
        env.run(&["run", "b", "--", &w]).code(0);
        assert!(!env.started("stuck"), "a cancelled item ran again");
        assert!(!env.started("third"), "a skipped item ran");
        assert_eq!(env.item("stuck").1.as_deref(), Some("manual"));
        assert_eq!((env.item("other").0, env.item("rest").0), ("done".into(), "done".into()));
        assert_no_process_left(&marker);
    }

    // Slow (a few seconds): a graceful stop waits for the in-flight item.
    fn stop_is_graceful_and_stop_now_is_the_second_signal(env) {
        env.config("[batch.b]\nconcurrency = 2\ngrace = \"10m\"\n");
        add_keys(&env, "b", &["stuck", "slow", "n1", "n2", "n3"]);
        let marker = format!("steer-stop-{}", env.dir.path().display());
        let go = env.path("go");
        let started_dir = env.path("started");
        std::fs::create_dir_all(&started_dir).unwrap();
        let w = p(&env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\ntouch {dir}/$NIGHTSHIFT_KEY\n\
                 if [ \"$NIGHTSHIFT_KEY\" = stuck ]; then sh -c 'sleep 1000; :' {marker}; fi\n\
                 while [ ! -e {go} ]; do sleep 0.05; done\necho '\"ok\"'",
                dir = p(&started_dir),
                go = p(&go)
            ),
        ));
        assert!(env.run(&["stop", "b"]).stdout.contains("no runner holds it"));
        let mut runner = env.spawn("run", &["run", "b", "--", &w]);
        wait_for("both workers", || env.started("stuck") && env.started("slow"));
        let out = env.run(&["stop", "b", "--json"]);
        out.code(0);
        let asked = out.json();
        assert_eq!(
            asked["runners"][0]["runner"].as_str().unwrap(),
            format!("{}:{}", asked["runners"][0]["host"].as_str().unwrap(), runner.id())
        );
        wait_for("the runner to hear the stop", || {
            env.output_of("run").1.contains("stopping (asked by")
        });
        // Graceful: the in-flight item finishes; nothing new is claimed.
        std::fs::write(&go, "").unwrap();
        wait_for("slow done", || env.item("slow").0 == "done");
        assert!(runner.try_wait().unwrap().is_none(), "the stuck item has its grace period");
        // --now: the stuck worker is stopped and its item released.
        let now = env.run(&["stop", "b", "--now"]);
        assert!(now.stdout.contains("to stop now"), "{now:?}");
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{:?}", env.output_of("run"));
        assert_no_process_left(&marker);
        assert_eq!(env.item("stuck"), ("pending".into(), None, 0));
        for k in ["n1", "n2", "n3"] {
            assert_eq!(env.item(k), ("pending".into(), None, 0), "{k}");
        }
        assert_eq!(env.run_states(), ["aborted"]);
        assert!(env.output_of("run").0.contains("stopped by"), "{:?}", env.output_of("run"));
        assert_eq!(env.events("b", "stop-asked").len(), 2);
    }

    /// A run queued behind the lock (`--wait`) is a run of the batch: a
    /// `nightshift stop` asked meanwhile stops it too (it took the lock and
    /// ran on), and a signal while it waits ends it with 130, as a signal
    /// ends a run (it exited 0). It says what it waits for.
    fn a_run_waiting_for_the_lock_hears_stop_and_signals(env) {
        env.config("[batch.b]\nconcurrency = 1\ngrace = \"10m\"\n");
        add_keys(&env, "b", &["slow", "n1", "n2"]);
        let go = env.path("go");
        let w = env.waiting_worker(&format!("while [ ! -e {} ]; do sleep 0.05; done", p(&go)), "steer-wait");
        let mut holder = env.spawn("holder", &["run", "b", "--", &w]);
        wait_for("the slow item", || env.started("slow"));
        // A signal while it waits.
        let mut waiting = env.spawn("waiting", &["run", "b", "--wait", "--", &w]);
        wait_for("the waiting run to say so", || {
            env.output_of("waiting").1.contains("waiting for the lock held by")
        });
        common::signal(waiting.id(), nix::sys::signal::Signal::SIGTERM);
        assert_eq!(waiting.wait().unwrap().code(), Some(130), "{:?}", env.output_of("waiting"));
        // A stop asked of the batch.
        let mut waiting = env.spawn("waiting2", &["run", "b", "--wait", "--", &w]);
        env.run(&["stop", "b"]).code(0);
        assert_eq!(waiting.wait().unwrap().code(), Some(130), "{:?}", env.output_of("waiting2"));
        let (out, _) = env.output_of("waiting2");
        assert!(out.contains("stopped by") && out.contains("while waiting for the lock"), "{out}");
        std::fs::write(&go, "").unwrap();
        assert_eq!(holder.wait().unwrap().code(), Some(130));
        assert_eq!(env.item("slow").0, "done");
        for k in ["n1", "n2"] {
            assert_eq!(env.item(k), ("pending".into(), None, 0), "{k}: nothing ran it");
        }
    }

    /// A runner on another host gone silent (frozen with SIGSTOP, its seat
    /// lapsed) is asked too, and said silent: woken, it stops as asked,
    /// claiming nothing more, where the ask used to be dropped and it ran
    /// the batch to its end.
    fn a_stop_asked_of_a_silent_runner_stops_it_when_it_comes_back(env) {
        env.config("[batch.b]\nconcurrency = 1\n");
        add_keys(&env, "b", &["k1", "k2", "k3"]);
        let marker = format!("steer-silent-{}", env.dir.path().display());
        let go = env.path("go");
        let w = env.waiting_worker(&format!("while [ ! -e {} ]; do sleep 0.05; done", p(&go)), &marker);
        let mut runner = env.spawn_with("run", &["run", "b", "--", &w], &[("NIGHTSHIFT_HOST", "host-x")]);
        wait_for("k1 started", || env.started("k1"));
        common::signal(runner.id(), nix::sys::signal::Signal::SIGSTOP);
        env.exec(&format!("UPDATE locks SET expires_at = {}", nightshift::util::time::now_ms() - 1_000));
        let stop = env.run(&["stop", "b"]);
        stop.code(0);
        assert!(stop.stdout.contains("host-x:"), "{stop:?}");
        assert!(stop.stdout.contains("(silent since "), "{stop:?}");
        assert!(stop.stdout.contains("should it come back"), "{stop:?}");
        let json = env.run(&["stop", "b", "--json"]).json();
        assert!(json["runners"][0]["silent_since"].is_string(), "{json}");

        common::signal(runner.id(), nix::sys::signal::Signal::SIGCONT);
        std::fs::write(&go, "").unwrap();
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{:?}", env.output_of("run"));
        assert_eq!(env.item("k1").0, "done", "in flight: it had its grace period");
        for k in ["k2", "k3"] {
            assert_eq!(env.item(k), ("pending".into(), None, 0), "{k}");
        }
        assert!(env.output_of("run").0.contains("stopped by"), "{:?}", env.output_of("run"));
    }
}

/// Cancel and stop asked from another host: the runner on host-a hears
/// both within a heartbeat, and the log names who asked, on host-b.
#[test]
fn cancel_and_stop_from_another_host_on_postgresql() {
    let Some(env) = Env::for_backend(Backend::Pg) else {
        return;
    };
    env.config("[batch.b]\nconcurrency = 2\ngrace = \"10m\"\n");
    add_keys(&env, "b", &["stuck", "other", "n1"]);
    let marker = format!("steer-hosts-{}", env.dir.path().display());
    let w = env.waiting_worker("sleep 1000; :", &marker);
    let mut runner = env.spawn_with(
        "run",
        &["run", "b", "--", &w],
        &[("NIGHTSHIFT_HOST", "host-a")],
    );
    wait_for("both workers", || {
        env.started("stuck") && env.started("other")
    });
    let cancel = env
        .cmd()
        .env("NIGHTSHIFT_HOST", "host-b")
        .args(["cancel", "b", "stuck"])
        .output()
        .unwrap();
    assert!(cancel.status.success(), "{cancel:?}");
    wait_for("the cancel honoured", || {
        env.item("stuck") == ("failed".into(), Some("manual".into()), 1)
    });
    let stop = env
        .cmd()
        .env("NIGHTSHIFT_HOST", "host-b")
        .args(["stop", "b", "--now"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&stop.stdout);
    assert!(said.contains(&format!("host-a:{}", runner.id())), "{said}");
    let status = runner.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{:?}", env.output_of("run"));
    assert_no_process_left(&marker);
    assert_eq!(env.item("other"), ("pending".into(), None, 0));
    let cancelled = env.events("b", "cancelled");
    assert!(
        cancelled[0]["actor"].as_str().unwrap().ends_with("@host-b"),
        "{cancelled:?}"
    );
    let asked = env.events("b", "stop-asked");
    assert!(
        asked[0]["actor"].as_str().unwrap().ends_with("@host-b"),
        "{asked:?}"
    );
    assert_eq!(
        env.int("SELECT count(*) FROM events WHERE kind = 'done'"),
        0
    );
}
