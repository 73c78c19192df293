//! Waiting reasons (SPEC §11, Slurm's reason codes for batches): every
//! item neither finished nor being worked is counted under exactly one
//! reason, and `status --json` counts them per batch (the counts add up);
//! `status` says them in words, `show BATCH KEY` names every reason of
//! the item, the counted one first. Real
//! binary, real worker, real daemon, both backends.

use crate::support as common;
use nightshift::util::time::now_ms;

use common::Env;
use serde_json::Value;

/// `(reason, count)` of `status --json`, checking that the counts add up
/// to every item not finished (none is in flight in these tests).
fn reasons(env: &Env) -> Vec<(String, i64)> {
    let b = env.batch_status("b");
    let list: Vec<(String, i64)> = b["waiting"]
        .as_array()
        .unwrap_or_else(|| panic!("no waiting list: {b}"))
        .iter()
        .map(|w| {
            (
                w["reason"].as_str().unwrap().to_string(),
                w["count"].as_i64().unwrap(),
            )
        })
        .collect();
    let sum: i64 = list.iter().map(|(_, n)| n).sum();
    let open = b["pending"].as_i64().unwrap()
        + b["claimed"].as_i64().unwrap()
        + b["failed"].as_i64().unwrap();
    assert_eq!(sum, open, "every open item has one reason: {b}");
    list
}

fn until_of(env: &Env, reason: &str) -> Value {
    let b = env.batch_status("b");
    b["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["reason"] == reason)
        .unwrap()["until"]
        .clone()
}

/// `show b KEY --json`'s first reason (the one `status` counts it under).
fn item_reason(env: &Env, key: &str) -> Value {
    env.run(&["show", "b", key, "--json"]).code(0).json()["waiting"]["reason"].clone()
}

/// `(reason, until)` of each of an item's waits in `--json`, with the
/// pool and dimension where there is one.
fn waits_of(waiting: &Value) -> Vec<(String, bool, String)> {
    waiting
        .as_array()
        .unwrap_or_else(|| panic!("waiting is not a list: {waiting}"))
        .iter()
        .map(|w| {
            let pool = match (w["pool"].as_str(), w["dimension"].as_str()) {
                (Some(p), Some(d)) => format!("{p} {d}"),
                _ => String::new(),
            };
            (
                w["reason"].as_str().unwrap().to_string(),
                w["until"].is_string(),
                pool,
            )
        })
        .collect()
}

fn pairs(list: &[(&str, i64)]) -> Vec<(String, i64)> {
    list.iter().map(|(r, n)| (r.to_string(), *n)).collect()
}

/// Keys ending in 1 fail transiently (75): they land in the retry tier,
/// not due for a minute; keys ending in 2 fail permanently; the rest
/// succeed.
const WORKER: &str = "cat >/dev/null\ncase \"$NIGHTSHIFT_KEY\" in\n  *1) exit 75 ;;\n  *2) exit 1 ;;\nesac\necho '\"ok\"'\n";

/// Batch `a`'s calls answer 429 (retry after an hour), `b`'s cost 1.00
/// each: both draw from pool `openai`.
const HELD: &str = "cat >/dev/null\n\
if [ \"$NIGHTSHIFT_BATCH\" = a ]; then\n\
  echo '{\"error_class\":\"RateLimitError\",\"transient\":true,\"retry_after_s\":259200}' >&2; exit 75\n\
fi\n\
echo '@nightshift cost=1.00' >&2\n\
echo '{\"ok\":1}'\n";

both_backends! {
    /// A paused batch whose pool a 429 holds and whose daily budget is
    /// spent: `show`, `show --json`, `items`, `items --json` and the
    /// dashboard's item detail name every reason its item will not run
    /// now, each until when; they said only "paused". `status` still
    /// counts it once, under the first.
    fn a_paused_item_names_its_pools_hold_and_its_budget_too(env) {
        common::away_from_midnight();
        let w = env.script("w.sh", HELD);
        env.config(&format!(
            "[limit.openai]\nrequests = \"1000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"openai\"\nretries = 0\nmax_hold = \"3d\"\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"openai\"\nbudget = \"0.50/day\"\n",
            w = w.display()
        ));
        // b's first call spends its budget; a's 429 then holds the pool.
        common::add_keys(&env, "b", &["k1"]);
        env.run(&["run", "b"]).code(0);
        common::add_keys(&env, "a", &["a1"]);
        env.run(&["run", "a"]);
        common::add_keys(&env, "b", &["k2"]);
        env.run(&["pause", "b", "--reason", "deploy"]).code(0);
        // A dry run says the pause, and what would still stop the run once
        // it is lifted (it said only the pause).
        let dry = env.run(&["run", "b", "--dry-run"]).code(0).stdout.clone();
        assert!(dry.contains("b: paused (deploy): a run would do nothing"), "{dry}");
        let still = "  once unpaused it would still wait: ";
        // In `status`'s words (it said `until T (in …) for pool openai (hold)`).
        assert!(dry.contains(&format!("{still}held until ")) && dry.contains(" (retry-after for pool openai), in "), "{dry}");
        assert!(dry.contains(&format!("{still}budget reached ($1.00 of $0.50 today), resets 00:00Z\n")), "{dry}");

        // The latest end first: the pool's hold (three days, `max_hold`
        // too: always past the budget's reset at midnight, whatever the
        // hour) before the budget's.
        let all = vec![
            ("paused".to_string(), false, String::new()),
            // The pool's hold is a hold, naming the pool (it was `rate-limit`).
            ("hold".to_string(), true, "openai hold".to_string()),
            ("budget".to_string(), true, String::new()),
        ];
        let shown = env.run(&["show", "b", "k2", "--json"]).code(0).json();
        assert_eq!(waits_of(&shown["waiting_all"]), all, "{shown}");
        assert_eq!(shown["waiting"], shown["waiting_all"][0], "the one it is counted under: {shown}");
        assert_eq!(shown["waiting_all"][2]["until"], common::next_midnight().as_str(), "{shown}");
        let hold_ends = shown["waiting_all"][1]["until"].as_str().unwrap_or_default().to_string();
        assert!(hold_ends.as_str() > common::next_midnight().as_str(), "held days, not clamped to an hour: {shown}");
        let listed = env.run(&["items", "b", "--json"]).code(0).stdout.clone();
        let k2: Value = listed
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|i| i["key"] == "k2")
            .unwrap();
        assert_eq!(waits_of(&k2["waiting_all"]), all, "{k2}");
        assert_eq!(k2["waiting"]["reason"], "paused", "{k2}");
        let k1: Value = listed
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|i| i["key"] == "k1")
            .unwrap();
        assert_eq!(k1["waiting_all"], serde_json::json!([]), "a done item waits for nothing");
        assert_eq!(k1["waiting"], serde_json::Value::Null, "{k1}");
        // Counted once, under the first.
        assert_eq!(reasons(&env), pairs(&[("paused", 1)]));

        let text = env.run(&["show", "b", "k2"]).code(0).stdout.clone();
        let lines: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("waiting:"))
            .take(3)
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], "waiting:   1 waits: the batch is paused", "{text}");
        assert!(lines[1].starts_with("           1 held until ") && lines[1].contains(" (retry-after for pool openai)"), "{text}");
        assert!(lines[2].starts_with("           1 waits: budget reached, resets "), "{text}");
        let table = env.run(&["items", "b"]).code(0).stdout.clone();
        let row = table.lines().find(|l| l.starts_with("k2 ")).unwrap_or_else(|| panic!("{table}"));
        assert!(row.contains("paused, hold until "), "{table}");
        assert!(row.contains(", budget until "), "{table}");

        // The dashboard's item detail, a line each.
        let mut dash = crate::support::pty::Dash::open(
            std::path::Path::new(env!("CARGO_BIN_EXE_nightshift")),
            env.dir.path(),
            &env.db,
            &["watch", "--read-only"],
            (100, 30),
        );
        dash.wait_loaded();
        dash.key("]");
        let screen = dash.wait_text("PAUSED — deploy");
        // The header marks b as `status --short` does: held by its pool
        // and by its budget (it said only `budget`).
        let short = env.run(&["status", "--short"]).code(0).stdout.clone();
        assert!(short.contains("b 1✓ 1… ⏸ held budget"), "{short}");
        let tabs = screen.lines().nth(1).unwrap_or_default();
        assert!(tabs.contains("b 50% ✓1 …1 held budget ⏸"), "{screen}");
        dash.key("3");
        dash.key("/");
        dash.type_text("k2");
        dash.key("\r");
        dash.wait_text("1 of 1");
        dash.key("\r");
        let screen = dash.wait_text("budget reached");
        let at = screen
            .lines()
            .position(|l| l.contains("waiting   1 waits: the batch is paused"))
            .unwrap_or_else(|| panic!("{screen}"));
        let row = |text: &str| screen.lines().position(|l| l.contains(text)).unwrap_or_else(|| panic!("{text}: {screen}"));
        assert_eq!(row("│          1 held until "), at + 1, "{screen}");
        assert!(row("│          1 waits: budget reached, resets ") > at + 1, "{screen}");
        dash.key("q");
        assert_eq!(dash.wait_exit(), 0);
    }

    /// no-runner, paused, hold, not-due and quarantined, each counted in
    /// `status --json`, said in `status`, and named for one item by `show`.
    fn each_waiting_reason_is_counted_said_and_shown(env) {
        let worker = env.script("w.sh", WORKER);
        env.config(&format!(
            "[batch.b]\nworker = [\"{}\"]\nretries = 0\nbackoff = \"10m\"\nbackoff_max = \"10m\"\n",
            worker.display()
        ));
        env.add_items("b", 4);
        assert_eq!(reasons(&env), pairs(&[("no-runner", 4)]));
        assert_eq!(item_reason(&env, "k3"), "no-runner");
        let text = env.run(&["status"]).code(0).stdout.clone();
        assert!(text.contains("waiting: 4 wait for a run: no runner is live and no schedule fires (`nightshift run` starts one)"), "{text}");

        env.run(&["pause", "b", "--reason", "deploy"]).code(0);
        assert_eq!(reasons(&env), pairs(&[("paused", 4)]));
        let shown = env.run(&["show", "b", "k3"]).code(0).stdout.clone();
        assert!(shown.contains("\nwaiting:   1 waits: the batch is paused\n"), "{shown}");
        env.run(&["unpause", "b"]).code(0);

        // k1 transient (retry tier, due in a minute), k2 quarantined, k3
        // and k4 done; two new items wait for a runner.
        env.run(&["run", "b"]).code(1);
        common::add_keys(&env, "b", &["n3", "n4"]);
        assert_eq!(
            reasons(&env),
            pairs(&[("quarantined", 1), ("not-due", 1), ("no-runner", 2)])
        );
        assert!(until_of(&env, "not-due").is_string());
        assert_eq!(item_reason(&env, "k1"), "not-due");
        assert_eq!(item_reason(&env, "k2"), "quarantined");
        assert_eq!(item_reason(&env, "k3"), Value::Null, "a done item waits for nothing");

        // A retry-after hold an hour long, as a worker's answer leaves it.
        env.exec(&format!(
            "UPDATE batches SET hold_until = {} WHERE name = 'b'",
            now_ms() + 3_600_000
        ));
        assert_eq!(
            reasons(&env),
            pairs(&[("quarantined", 1), ("not-due", 1), ("hold", 2)])
        );
        assert!(until_of(&env, "hold").is_string());
        assert_eq!(item_reason(&env, "n3"), "hold");
    }

    /// A paused batch (or one the emergency stop stops) with items
    /// waiting for a time (the retry tier, a retry-after hold): `status`,
    /// `show` and `status --json` said "and no runner is live (`nightshift
    /// run` starts one)" beside each, though such a run steps down and
    /// runs nothing. Unpaused, they say it again.
    fn a_paused_batch_never_says_a_run_would_start(env) {
        let worker = env.script("w.sh", WORKER);
        env.config(&format!(
            "[batch.b]\nworker = [\"{}\"]\nretries = 0\nbackoff = \"10m\"\nbackoff_max = \"10m\"\n",
            worker.display()
        ));
        common::add_keys(&env, "b", &["k1", "k3"]);
        env.run(&["run", "b"]).code(1);
        common::add_keys(&env, "b", &["n3"]);
        env.exec(&format!(
            "UPDATE batches SET hold_until = {} WHERE name = 'b'",
            now_ms() + 3_600_000
        ));
        let hint = "`nightshift run` starts one";
        let said = |env: &Env| {
            [
                env.run(&["status"]).code(0).stdout.clone(),
                env.run(&["status", "b", "--json"]).code(0).stdout.clone(),
                env.run(&["show", "b", "k1"]).code(0).stdout.clone(),
                env.run(&["show", "b", "n3"]).code(0).stdout.clone(),
            ]
        };
        // Unpaused, a run would take them once their time comes.
        for text in said(&env) {
            assert!(text.contains(hint) || text.contains("\"no_runner\":true"), "{text}");
        }
        env.run(&["pause", "b", "--reason", "deploy"]).code(0);
        assert_eq!(reasons(&env), pairs(&[("not-due", 1), ("paused", 1)]));
        for text in said(&env) {
            assert!(!text.contains(hint), "a paused batch's run steps down: {text}");
            assert!(!text.contains("\"no_runner\":true"), "{text}");
        }
        let shown = env.run(&["show", "b", "n3"]).code(0).stdout.clone();
        assert!(shown.contains("\nwaiting:   1 waits: the batch is paused\n"), "{shown}");
        assert!(shown.contains(" (retry-after)\n"), "the hold is still said: {shown}");
        let text = env.run(&["run", "b", "--dry-run"]).code(0).stdout.clone();
        assert!(!text.contains(hint), "{text}");
    }

    /// With a live daemon firing the schedule, what could run waits for
    /// its next fire, at the time `status` gives as the next fire, said to
    /// the second when it has seconds (it named the minute after); with the
    /// daemon gone, for a runner.
    fn a_live_daemon_makes_it_wait_for_the_next_fire(env) {
        env.script("w.sh", "cat >/dev/null; echo '\"ok\"'");
        // Once a year: no fire during the test.
        env.config("[batch.b]\nworker = [\"./w.sh\"]\nschedule = \"5 0 0 1 1 *\"\n");
        env.add_items("b", 3);
        assert_eq!(reasons(&env), pairs(&[("no-runner", 3)]), "a schedule no daemon fires starts nothing");
        let mut daemon = env.spawn("daemon", &["daemon"]);
        common::wait_for("the daemon to be live", || env.batch_status("b")["next_fire"]["fires"] == true);
        assert_eq!(reasons(&env), pairs(&[("next-fire", 3)]));
        let b = env.batch_status("b");
        assert_eq!(until_of(&env, "next-fire"), b["next_fire"]["at"]);
        assert_eq!(item_reason(&env, "k2"), "next-fire");
        let text = env.run(&["status"]).code(0).stdout.clone();
        let at = b["next_fire"]["at"].as_str().unwrap().replace('T', " ");
        assert!(at.ends_with(":00:05Z"), "{b}");
        assert!(text.contains(&format!("waiting: 3 wait for the schedule's next fire at {at}")), "{text}");
        common::signal(daemon.id(), nix::sys::signal::Signal::SIGTERM);
        common::wait_for("the daemon to exit", || daemon.try_wait().unwrap().is_some());
        assert_eq!(reasons(&env), pairs(&[("no-runner", 3)]));
    }
}

/// The `PAUSED` file beside a SQLite store (PostgreSQL has none) stops
/// every batch: the emergency stop comes before the batch's own pause.
#[test]
fn the_emergency_stop_is_the_reason_before_a_pause() {
    let env = Env::new();
    env.config("[batch.b]\nworker = [\"true\"]\n");
    env.add_items("b", 2);
    env.run(&["pause", "b", "--reason", "x"]).code(0);
    env.write("PAUSED", "");
    assert_eq!(reasons(&env), pairs(&[("emergency-stop", 2)]));
    assert_eq!(item_reason(&env, "k1"), "emergency-stop");
}

/// Under the emergency stop alone (the batch not paused), a retry-after
/// hold is not said with "`nightshift run` starts one": every run steps
/// down while `PAUSED` exists.
#[test]
fn the_emergency_stop_never_says_a_run_would_start() {
    let env = Env::new();
    env.config("[batch.b]\nworker = [\"true\"]\n");
    env.add_items("b", 2);
    env.exec(&format!(
        "UPDATE batches SET hold_until = {} WHERE name = 'b'",
        now_ms() + 3_600_000
    ));
    let shown = env.run(&["show", "b", "k1"]).code(0).stdout.clone();
    assert!(shown.contains("`nightshift run` starts one"), "{shown}");
    env.write("PAUSED", "");
    for text in [
        env.run(&["status"]).code(0).stdout.clone(),
        env.run(&["show", "b", "k1"]).code(0).stdout.clone(),
    ] {
        assert!(!text.contains("`nightshift run` starts one"), "{text}");
    }
}
