//! The dashboard end to end in a real pseudo-terminal: counts on screen,
//! keys that change the store (recorded with who did it), a runner that
//! outlives the dashboard, read-only that writes no byte, hostile text
//! that stays inert, and the terminal restored on the way out.

use crate::support as common;
use crate::support::fixture;
use crate::support::pty;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Env;
use nightshift::model::{NewItem, Tier, Trigger};
use nightshift::store::{Access, Failure, Store};
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");
const ENTER: &str = "\r";
const ESC: &str = "\x1b";

fn now() -> i64 {
    nightshift::util::time::now_ms()
}

/// The fixture store (no run in progress), its times around now.
fn fixture_env() -> Env {
    let env = Env::bare();
    fixture::build(
        &env.db,
        &fixture::Options {
            now: now(),
            running: false,
        },
    );
    env
}

fn open(env: &Env, args: &[&str]) -> Dash {
    Dash::open(Path::new(BIN), env.dir.path(), &env.db, args, (80, 24))
}

fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn item(env: &Env, key: &str) -> serde_json::Value {
    let out = env
        .cmd()
        .args(["show", "articles", key, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["item"].clone()
}

fn row_of<'a>(screen: &'a str, name: &str) -> &'a str {
    screen.lines().find(|l| l.contains(name)).unwrap_or("")
}

#[test]
fn shows_the_counts_and_requeues_one_item_and_a_class() {
    let env = fixture_env();
    let status = env.status();
    let articles = &status["batches"][0];
    assert_eq!(articles["name"], "articles");
    let mut dash = open(&env, &[]);
    let screen = dash.wait_loaded();
    let row = row_of(&screen, "│articles");
    for field in ["pending", "finished"] {
        let n = articles[field].to_string();
        assert!(
            row.split_whitespace().any(|w| w == n),
            "{field} {n} not in {row:?}"
        );
    }
    assert!(row.contains(&format!("{} (", articles["failed"])), "{row}");

    // Items, failed only: the first is blog-10 (HTTP400, quarantined).
    dash.key("3");
    dash.key("S");
    dash.wait_text("status: failed");
    dash.wait_for("blog-10 selected", |s| {
        row_of(s, "blog-10").contains("failed/manual")
    });
    dash.key("R");
    dash.wait_text("requeued 1 item: blog:rust:post-10 (blog-10)");
    assert_eq!(item(&env, "blog-10")["status"], "pending");

    // Dead letters: the TimeoutError class (first: most in the last 24 h).
    dash.key("4");
    let screen = dash.wait_for("the dead letters", |s| {
        s.contains("Dead letters ·") && s.contains("│TimeoutError")
    });
    let failed_now: i64 = row_of(&screen, "│TimeoutError")
        .split_whitespace()
        .nth(5)
        .and_then(|w| w.parse().ok())
        .unwrap();
    dash.key("A");
    let ask = format!("Requeue {failed_now} failed items: class TimeoutError in articles?");
    dash.wait_text(&ask);
    dash.key("y");
    dash.wait_text(&format!("requeued {failed_now} items: class TimeoutError"));
    let out = env
        .cmd()
        .args([
            "items",
            "articles",
            "--class",
            "TimeoutError",
            "--status",
            "failed",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        json_lines(&out.stdout).is_empty(),
        "none of the class is failed any more"
    );

    // Every change is an event naming who made it.
    let out = env
        .cmd()
        .args(["log", "articles", "--kind", "requeued", "--json"])
        .output()
        .unwrap();
    let events = json_lines(&out.stdout);
    let mine: Vec<_> = events
        .iter()
        .filter(|e| e["actor"] == "tester@ptyhost")
        .collect();
    assert_eq!(mine.len() as i64, 1 + failed_now, "{events:?}");

    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert!(
        dash.wait_restored(),
        "terminal not restored:\n{}",
        dash.screen()
    );
}

/// Space marks items in a list (kept across polls), the title counts
/// them, and `R` asks to requeue exactly the marked ones, then does,
/// recorded with who did it.
#[test]
fn marked_items_are_requeued_together() {
    let env = fixture_env();
    let failed_before = failed_count(&env);
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("3");
    dash.key("S");
    dash.wait_text("status: failed");
    dash.wait_for("blog-10 selected", |s| {
        row_of(s, "blog-10").contains("failed/manual")
    });
    dash.key(" ");
    dash.wait_text("1 marked");
    dash.key("j");
    dash.key(" ");
    let screen = dash.wait_text("2 marked");
    assert_eq!(screen.matches('●').count(), 2, "{screen}");
    // A poll later (an item added meanwhile shows in the header's count
    // of what is left to do), the marks are still there.
    let todo = |s: &str| {
        s.lines()
            .nth(1)
            .and_then(|l| l.split('…').nth(1))
            .and_then(|t| t.split_whitespace().next())
            .map(str::to_string)
    };
    let first = todo(&screen);
    assert!(first.is_some(), "{screen}");
    common::add_keys(&env, "articles", &["added-while-marked"]);
    let later = dash.wait_for("a later poll", |s| todo(s).is_some() && todo(s) != first);
    assert!(later.contains("2 marked"), "{later}");
    dash.key("R");
    dash.wait_text("Requeue 2 failed items: the 2 marked?");
    dash.key("y");
    dash.wait_text("requeued 2 items: the 2 marked");
    dash.wait_for("the marks cleared", |s| {
        !s.contains("marked") || s.contains("requeued 2")
    });
    assert_eq!(failed_count(&env), failed_before - 2);
    assert_eq!(item(&env, "blog-10")["status"], "pending");
    let out = env
        .cmd()
        .args(["log", "articles", "--kind", "requeued", "--json"])
        .output()
        .unwrap();
    let mine = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["actor"] == "tester@ptyhost")
        .count();
    assert_eq!(mine, 2);

    // `x` on a marked set: skipped, each with its event.
    dash.key("g");
    dash.key(" ");
    dash.wait_text("1 marked");
    dash.key("x");
    dash.wait_text("Mark 1 marked item of articles skipped (done without running)?");
    dash.key("y");
    dash.wait_text("skipped 1 marked item (done without running)");
    assert_eq!(failed_count(&env), failed_before - 3);
    let out = env
        .cmd()
        .args(["log", "articles", "--kind", "skipped", "--json"])
        .output()
        .unwrap();
    let skipped: Vec<_> = json_lines(&out.stdout)
        .into_iter()
        .filter(|e| e["actor"] == "tester@ptyhost")
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0]["fields"]["reason"], "skipped from the dashboard");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
}

fn failed_count(env: &Env) -> usize {
    let out = env
        .cmd()
        .args(["items", "articles", "--status", "failed", "--json"])
        .output()
        .unwrap();
    json_lines(&out.stdout).len()
}

#[test]
fn confirm_defaults_to_no() {
    let env = fixture_env();
    let before = env.status();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("4");
    dash.wait_text("TimeoutError");
    dash.key("A");
    dash.wait_text("Requeue");
    dash.key(ENTER);
    dash.wait_text("cancelled: nothing was changed");
    dash.key("q");
    dash.wait_exit();
    assert_eq!(env.status()["batches"], before["batches"]);
}

/// A batch the config names and the store has not seen yet (nothing
/// added, never run) is listed, and has no failed items to requeue nor a
/// runner to stop: the requeue of all failed said "cannot count the
/// failed items: unknown batch" of a batch on the screen, and the stop
/// "nothing changed: unknown batch".
#[test]
fn a_batch_not_yet_in_the_store_has_no_failed_items_to_requeue() {
    let env = Env::new();
    env.config("[batch.\"日報\"]\nworker = [\"true\"]\n");
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.wait_text("日報");
    dash.key("3");
    dash.key("A");
    let screen = dash.wait_text("no failed items to requeue");
    assert!(!screen.contains("cannot count"), "{screen}");
    // Nor a runner to stop ("nothing changed: unknown batch", as well).
    dash.key("1");
    dash.key("X");
    dash.wait_text("y yes");
    dash.key("y");
    let screen = dash.wait_text("no runner holds 日報; nothing to stop");
    assert!(!screen.contains("unknown batch"), "{screen}");
    dash.key("q");
    dash.wait_exit();
}

#[test]
fn pause_asks_why_and_records_who() {
    let env = fixture_env();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("p");
    dash.wait_text("why?");
    dash.type_text("db migration");
    dash.key(ENTER);
    dash.wait_text("paused articles: db migration");
    dash.wait_text("PAUSED — db migration (tester@ptyhost");
    let status = env.status();
    let articles = &status["batches"][0];
    assert_eq!(articles["paused"], true);
    assert_eq!(articles["paused_reason"], "db migration");
    assert_eq!(articles["paused_by"], "tester@ptyhost");
    // And back: p asks first.
    dash.key("p");
    dash.wait_text("Unpause articles?");
    dash.key("y");
    dash.wait_text("unpaused articles");
    assert_eq!(env.status()["batches"][0]["paused"], false);
    // A change made elsewhere shows up at the next poll.
    env.cmd()
        .args(["pause", "articles", "--reason", "from the cli"])
        .assert()
        .success();
    dash.wait_text("PAUSED — from the cli");
    dash.key("q");
    dash.wait_exit();
}

#[test]
fn resume_starts_a_runner_that_outlives_the_dashboard() {
    let env = fixture_env();
    env.script("slow.sh", "cat >/dev/null; sleep 0.4; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.articles]\nworker = [\"./slow.sh\"]\nconcurrency = 2\n",
    );
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("r");
    let screen = dash.wait_seen("started a run of articles (pid");
    let pid: u32 = screen
        .split("(pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    // Quit at once and hang up the terminal, as a dropped SSH link would.
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    drop(dash);
    // The runner lives on: its lock appears (it may still be starting)...
    let start = Instant::now();
    loop {
        let status = env.status();
        if status["batches"][0]["lock"]["holder"] == format!("ptyhost:{pid}") {
            break;
        }
        assert!(
            start.elapsed() < pty::PATIENCE,
            "no lock of the runner {pid}: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(nightshift::util::identity::process_alive(pid, None));
    // ...and finishes the run on its own.
    let start = Instant::now();
    let last_run = loop {
        let status = env.status();
        let run = status["batches"][0]["last_run"].clone();
        if run["trigger"] == "dashboard" && run["state"] != "running" {
            break run;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the run never finished: {status}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        last_run["counts"]["done"].as_i64().unwrap() > 0,
        "{last_run}"
    );
    // Recorded as the dashboard user's run.
    assert_eq!(last_run["actor"], "tester@ptyhost", "{last_run}");
    assert_eq!(env.status()["batches"][0]["pending"], 0);
}

/// `r` still starts a run after the program was replaced under the open
/// dashboard (an upgrade or a rebuild while it sits in a tmux pane): the
/// program now at its path runs, where the dashboard said "cannot start a
/// runner: No such file or directory".
#[test]
fn resume_after_the_program_was_replaced() {
    let env = fixture_env();
    env.write("nightshift.toml", "[batch.articles]\nworker = [\"cat\"]\n");
    let exe = env.dir.path().join("nightshift");
    common::copy_program(Path::new(BIN), &exe);
    let mut dash = Dash::open(&exe, env.dir.path(), &env.db, &[], (80, 24));
    dash.wait_loaded();
    // Replaced as an installer does: a new file renamed over the old.
    let new = env.dir.path().join("nightshift.new");
    common::copy_program(Path::new(BIN), &new);
    std::fs::rename(&new, &exe).unwrap();
    dash.key("r");
    dash.wait_seen("started a run of articles (pid");
    let start = Instant::now();
    loop {
        let run = env.status()["batches"][0]["last_run"].clone();
        if run["trigger"] == "dashboard" && run["state"] != "running" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no run finished: {run}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
}

/// `r` on batches with odd names: a Japanese one (a quoted `[batch."記事"]`
/// in the config) starts its run and the runner gets the name as itself; a
/// name made before the batch-name rule that reads as an option
/// (`--config=…`) starts nothing and says why.
#[test]
fn resume_with_odd_batch_names() {
    let env = Env::new();
    env.config("[batch.\"記事\"]\nworker = [\"cat\"]\n");
    {
        let item = |key: &str| NewItem {
            key: key.into(),
            label: key.into(),
            payload: format!("{{\"key\":\"{key}\"}}"),
            ..Default::default()
        };
        let mut store = Store::open(&env.db, Access::ReadWrite).unwrap();
        store
            .add_items("--config=/nonexistent.toml", &[item("a")], now(), |_| {})
            .unwrap();
        store
            .add_items("記事", &[item("k1"), item("k2")], now(), |_| {})
            .unwrap();
    }
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    // Batches in name order: the odd one first (`[` stops there).
    dash.key("[");
    dash.wait_text("┌ --config=");
    dash.key("r");
    dash.wait_text("cannot start a run of \"--config=");
    dash.key(ESC);
    dash.key("]");
    dash.wait_text("┌ 記事");
    dash.key("r");
    // "started a run of 記事 (pid N)", or already "the run of 記事 (pid N)
    // finished": `cat` is quick.
    dash.wait_text("run of 記事 (pid");
    let start = Instant::now();
    loop {
        let status = env.status();
        let batches = status["batches"].as_array().unwrap();
        let japanese = batches.iter().find(|b| b["name"] == "記事").unwrap();
        if japanese["done"] == 2 && japanese["last_run"]["state"] == "ok" {
            assert_eq!(japanese["last_run"]["trigger"], "dashboard");
            break;
        }
        assert!(
            start.elapsed() < pty::PATIENCE,
            "the run of 記事 never finished: {status}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    let status = env.status();
    let odd = &status["batches"][0];
    assert_eq!(odd["name"], "--config=/nonexistent.toml");
    assert_eq!(
        (odd["pending"].clone(), odd["last_run"].clone()),
        (1.into(), serde_json::Value::Null)
    );
}

/// Every key, in every pane, read-only: not a byte of the database, its
/// `-wal` or its `-shm` changes, while a writer keeps the WAL open.
#[test]
fn read_only_writes_nothing_whatever_is_pressed() {
    let env = fixture_env();
    let writer = env.sql();
    writer.execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE IF NOT EXISTS t (x); INSERT INTO t VALUES (1);").unwrap();
    let before = env.fingerprint();
    assert!(
        before.iter().all(|(_, h)| h.is_some()),
        "db, -wal and -shm exist: {before:?}"
    );
    let mut dash = open(&env, &["watch", "--read-only"]);
    dash.wait_text("READ-ONLY");
    dash.wait_loaded();
    let keys = [
        "j", "k", "G", "g", "\x1b[6~", "\x1b[5~", "\t", "\x1b[Z", "]", "[", ENTER, ESC, "r", "p",
        "R", "A", "x", "y", "s", "f", "b", "/", "z", ENTER, ESC, "?", ESC,
    ];
    for pane in ["1", "2", "3", "4", "5"] {
        dash.key(pane);
        for k in keys {
            dash.key(k);
        }
        // Into the detail or a class, and the write keys there too.
        dash.key(pane);
        dash.key(ENTER);
        dash.key(ENTER);
        for k in ["R", "A", "x", "p", "r", "y", ENTER, "y", ESC, ESC] {
            dash.key(k);
        }
    }
    dash.key("3");
    dash.key("x");
    dash.wait_text("read-only: x (skip) is disabled");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    // Before the writer closes (closing checkpoints and removes the WAL).
    assert_eq!(before, env.fingerprint());
    drop(writer);
}

#[test]
fn read_only_is_automatic_when_the_file_is_not_writable() {
    if nix::unistd::geteuid().is_root() {
        // access(2) grants root write access whatever the mode says.
        return;
    }
    let env = fixture_env();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&env.db, std::fs::Permissions::from_mode(0o400)).unwrap();
    let before = env.fingerprint();
    let mut dash = open(&env, &[]);
    dash.wait_text("READ-ONLY");
    dash.key("p");
    dash.wait_text("read-only: p (pause) is disabled");
    dash.key("q");
    dash.wait_exit();
    assert_eq!(before, env.fingerprint());
}

/// A worker error full of escape sequences, bidi overrides and a 100 KB
/// line: shown as inert text; the screen around it stays intact and the
/// window title is never set.
#[test]
fn hostile_text_renders_inert() {
    let env = Env::bare();
    let (mut store, _) = Store::create(&env.db).unwrap();
    let t = now();
    let evil_label = "label\u{202e}txet\x1b]52;c;aGk=\x07";
    store
        .add_items(
            "inj",
            &[
                NewItem {
                    key: "evil".into(),
                    label: evil_label.into(),
                    payload: r#"{"x":"\u001b[2J"}"#.into(),
                    ..Default::default()
                },
                NewItem {
                    key: "good".into(),
                    label: "good".into(),
                    payload: "{}".into(),
                    ..Default::default()
                },
            ],
            t,
            |_| {},
        )
        .unwrap();
    let holder = nightshift::model::Holder {
        host: "h".into(),
        pid: 1,
        pid_start: None,
    };
    let run = store
        .start_run("inj", Trigger::Manual, None, &holder, t, None)
        .unwrap();
    store
        .acquire_lock("inj", "tok", &holder, Some(run), t + 60_000, t, &[], 1)
        .unwrap();
    let claims = store.claim("inj", run, 2, t + 60_000, t).unwrap().unwrap();
    let message = format!(
        "boom\x1b[2J\x1b[H\x1b]0;pwned\x07\u{202e}desrever\u{202c} {}",
        "A".repeat(100 * 1024)
    );
    for c in &claims {
        store
            .fail(
                &Failure {
                    item_id: c.item_id,
                    token: c.token,
                    run_id: run,
                    tier: Tier::Manual,
                    error_class: "Evil\x1b[31mClass",
                    message: &message,
                    next_attempt_at: None,
                    cost: None,
                    now: t,
                },
                &nightshift::model::NewEvent::new(
                    t,
                    "inj",
                    nightshift::model::EventKind::Failed,
                    message.clone(),
                )
                .key(&c.key),
            )
            .unwrap();
    }
    store.release_lock("inj", "tok").unwrap();
    drop(store);

    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    let intact = |screen: &str| {
        let rows: Vec<&str> = screen.lines().collect();
        rows.len() == 24
            && rows[0].contains("nightshift")
            && rows[1].contains("1 Batches")
            && rows[2].starts_with('┌')
            && rows[22].starts_with('└')
    };
    for pane in ["3", "4", "5"] {
        dash.key(pane);
        let screen = dash.wait_for("the hostile text, escaped", |s| {
            s.contains("\\x1b[2J") || s.contains("\\x1b[31m")
        });
        assert!(intact(&screen), "pane {pane} broken:\n{screen}");
    }
    dash.key("3");
    dash.key(ENTER);
    let screen = dash.wait_text("\\x1b]0;pwned\\x07\\u{202e}");
    assert!(intact(&screen), "detail broken:\n{screen}");
    assert!(
        screen.contains("label\\u{202e}txet\\x1b]52;c;aGk=\\x07"),
        "{screen}"
    );
    // The 100 KB message is cut (after 24 lines), saying how much is left.
    dash.key("\x1b[6~");
    let screen = dash.wait_text("more characters)");
    assert!(intact(&screen), "detail broken:\n{screen}");
    dash.key("q");
    dash.wait_exit();
    assert!(
        !dash.title_set.load(std::sync::atomic::Ordering::SeqCst),
        "the window title was set"
    );
    assert!(
        !dash.clipboard.load(std::sync::atomic::Ordering::SeqCst),
        "the clipboard was written"
    );
}

#[test]
fn small_terminals_and_resizes() {
    let env = fixture_env();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.resize(60, 20);
    dash.wait_text("needs at least 80×24");
    dash.resize(100, 30);
    dash.wait_for("the batches again", |s| {
        s.contains("│articles") && !s.contains("needs at least")
    });
    dash.key("q");
    dash.wait_exit();
}

#[test]
fn sigterm_and_hangup_restore_the_terminal() {
    let env = fixture_env();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    let pid = nix::unistd::Pid::from_raw(dash.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(dash.wait_exit(), 130);
    assert!(dash.wait_restored(), "{}", dash.screen());

    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    let pid = nix::unistd::Pid::from_raw(dash.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    assert_eq!(dash.wait_exit(), 0);
    assert!(dash.wait_restored(), "{}", dash.screen());

    // Ctrl-C is a key in raw mode: a quit like q.
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("\x03");
    assert_eq!(dash.wait_exit(), 0);
    assert!(dash.wait_restored());
}

/// A visit after which nothing happened says so in a line; the first key
/// (here `?`) does what it says, where a box took it.
#[test]
fn a_quiet_night_is_a_line_and_the_first_key_works() {
    let env = fixture_env();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("q");
    dash.wait_exit();
    let mut dash = open(&env, &[]);
    let screen = dash.wait_text("nothing failed, ran or fired since your last visit");
    assert!(!screen.contains("Since you last looked"), "{screen}");
    dash.key("?");
    dash.wait_text("Keys — j/↓ scroll down · k/↑ scroll up · Esc/?/Enter close");
    dash.key("q");
    dash.wait_exit();
}

#[test]
fn since_you_last_looked_on_the_next_visit() {
    let env = fixture_env();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("q");
    dash.wait_exit();
    // Meanwhile, a failure.
    let mut store = Store::open(&env.db, nightshift::store::Access::ReadWrite).unwrap();
    let holder = nightshift::model::Holder {
        host: "h".into(),
        pid: 1,
        pid_start: None,
    };
    let t = now();
    let run = store
        .start_run("articles", Trigger::Manual, None, &holder, t, None)
        .unwrap();
    store
        .acquire_lock("articles", "tok", &holder, Some(run), t + 60_000, t, &[], 1)
        .unwrap();
    let c = store
        .claim("articles", run, 1, t + 60_000, t)
        .unwrap()
        .unwrap()
        .remove(0);
    store.release_lock("articles", "tok").unwrap();
    store
        .fail(
            &Failure {
                item_id: c.item_id,
                token: c.token,
                run_id: run,
                tier: Tier::Manual,
                error_class: "NewClassError",
                message: "it broke overnight",
                next_attempt_at: None,
                cost: None,
                now: t + 1,
            },
            &nightshift::model::NewEvent::new(
                t,
                "articles",
                nightshift::model::EventKind::Quarantined,
                "x",
            )
            .key(&c.key),
        )
        .unwrap();
    drop(store);
    let mut dash = open(&env, &[]);
    let screen = dash.wait_text("Since you last looked");
    assert!(screen.contains("NewClassError"), "{screen}");
    assert!(screen.contains("1 new failure, 1 quarantined"), "{screen}");
    dash.key(ESC);
    dash.wait_for("dismissed", |s| !s.contains("Since you last looked"));
    dash.key("q");
    dash.wait_exit();
}

/// Pastes `text` as a terminal does: inside the bracketed-paste markers
/// when the program turned that mode on, else as typed keys (a line
/// break as Enter).
fn paste(dash: &mut Dash, text: &str) {
    let raw = String::from_utf8_lossy(&dash.raw.lock().unwrap()).into_owned();
    let bracketed = match (raw.rfind("\x1b[?2004h"), raw.rfind("\x1b[?2004l")) {
        (Some(on), Some(off)) => on > off,
        (on, _) => on.is_some(),
    };
    if bracketed {
        dash.keys_at_once(&format!("\x1b[200~{text}\x1b[201~"));
    } else {
        // A terminal sends a pasted line break as the Enter key sends it.
        dash.keys_at_once(&text.replace('\n', "\r"));
    }
}

/// A reason pasted into the pause prompt stays text, its lines joined by
/// a space. The dashboard did not ask for bracketed paste, so a pasted
/// line break was Enter: it paused with the first line alone, and the
/// next line's letters were read as keys (`r` of `restart` started a run).
#[test]
fn a_pasted_reason_with_a_line_break_is_text_not_keys() {
    let env = fixture_env();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.key("p");
    dash.wait_text("why?");
    paste(&mut dash, "db migration\nrestart at 3");
    dash.wait_text("restart at 3█");
    dash.key(ENTER);
    dash.wait_text("PAUSED — db migration restart at 3 (tester@ptyhost");
    let status = env.status();
    let articles = &status["batches"][0];
    assert_eq!(articles["paused_reason"], "db migration restart at 3");
    assert_eq!(articles["running"], false);
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert!(dash.wait_restored());
    let raw = String::from_utf8_lossy(&dash.raw.lock().unwrap()).into_owned();
    assert!(
        raw.rfind("\x1b[?2004l") > raw.rfind("\x1b[?2004h"),
        "bracketed paste is turned off on the way out"
    );
}

/// A key bound in another pane, pressed on the Batches pane at 80×24 (a
/// Japanese batch selected): the footer says where it works, or, read-only,
/// that it is disabled; it did nothing and said nothing. Nothing changes.
#[test]
fn a_key_of_another_pane_says_where_it_works() {
    let env = Env::new();
    env.config("[batch.\"記事の要約\"]\nworker = [\"cat\"]\n");
    common::add_keys(&env, "記事の要約", &["要約1", "要約2"]);
    let before = env.fingerprint();
    let mut dash = open(&env, &[]);
    dash.wait_loaded();
    dash.wait_text("記事の要約");
    for (key, says) in [
        ("R", "R (requeue) works only in 3 Items and 4 Dead letters"),
        (
            "A",
            "A (requeue all) works only in 3 Items and 4 Dead letters",
        ),
        ("x", "x (skip) works only in 3 Items and 4 Dead letters"),
        ("c", "c (cancel) works only in 3 Items and 4 Dead letters"),
        (" ", "Space (mark) works only in 3 Items and 4 Dead letters"),
        ("s", "s (status) works only in 3 Items"),
        ("/", "/ (filter) works only in 3 Items and 5 Run log"),
        ("f", "f (follow) works only in 5 Run log"),
    ] {
        dash.key(key);
        dash.wait_seen(says);
    }
    // Enter opens nothing on the Activity and Pools panes.
    dash.key("2");
    dash.key(ENTER);
    dash.wait_seen("Enter (open) works only in 1 Batches, 3 Items, 4 Dead letters and 5 Run log");
    // An item open: the list's keys would change the list behind it.
    dash.key("3");
    dash.key(ENTER);
    dash.wait_text("┌ Item 要約");
    for (key, says) in [
        (
            "s",
            "s (status) acts on the list: Esc closes the item first",
        ),
        (
            "/",
            "/ (filter) acts on the list: Esc closes the item first",
        ),
        (
            ENTER,
            "Enter (open) acts on the list: Esc closes the item first",
        ),
    ] {
        dash.key(key);
        dash.wait_seen(says);
    }
    dash.key(ESC);
    dash.wait_text("┌ Items · 記事の要約 · status: all · 1 of 2");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    let mut dash = open(&env, &["watch", "--read-only"]);
    dash.wait_text("READ-ONLY");
    dash.wait_loaded();
    for (key, says) in [
        ("R", "read-only: R (requeue) is disabled"),
        ("c", "read-only: c (cancel) is disabled"),
        (" ", "read-only: Space (mark) is disabled"),
        ("s", "s (status) works only in 3 Items"),
    ] {
        dash.key(key);
        dash.wait_seen(says);
    }
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert_eq!(env.fingerprint(), before);
}

/// The help's line for a key (as the key column writes it): what follows
/// the key column.
fn help_line<'a>(help: &'a [String], key: &str) -> Option<&'a str> {
    help.iter().find_map(|l| {
        let inner = l.split('│').nth(2)?.trim_start();
        let (keys, rest) = inner.split_once("  ")?;
        (keys == key).then(|| rest.trim())
    })
}

/// Every write key, read-only, in every pane at 80×24 (a Japanese batch
/// selected): each is refused in one sentence that names the key with
/// the words the help gives it, the same in every pane. `A` was `A
/// (requeue all)` on Items but `A (all)` on Batches, and `Space` on
/// Items named no key at all.
#[test]
fn read_only_names_each_write_key_as_the_help_does() {
    let env = Env::new();
    env.config(
        "[limit.api]\nrequests = \"60/min\"\n\n\
         [batch.\"記事の要約\"]\nworker = [\"cat\"]\nlimit = \"api\"\n",
    );
    common::add_keys(&env, "記事の要約", &["要約1", "要約2"]);
    let before = env.fingerprint();
    let mut dash = open(&env, &["watch", "--read-only"]);
    dash.wait_text("READ-ONLY");
    dash.wait_loaded();
    dash.wait_text("記事の要約");
    // The help, scrolled to its end.
    dash.key("?");
    let mut help: Vec<String> = Vec::new();
    for _ in 0..60 {
        for row in dash.rows() {
            if !help.contains(&row) {
                help.push(row);
            }
        }
        dash.key("j");
    }
    dash.key(ESC);
    dash.wait_for("the help closed", |s| !s.contains("Keys —"));
    let keys = [
        ("r", "r"),
        ("p", "p"),
        (" ", "Space"),
        ("R", "R"),
        ("A", "A"),
        ("x", "x"),
        ("c", "c"),
        ("X", "X"),
    ];
    let mut said: Vec<(&str, String)> = Vec::new();
    for pane in ["1", "2", "3", "4", "5", "6"] {
        dash.key(pane);
        for (key, label) in keys {
            dash.key(key);
            let screen = dash.wait_seen(&format!("read-only: {label} ("));
            let line = screen
                .lines()
                .find(|l| l.contains("read-only: "))
                .unwrap()
                .trim()
                .to_string();
            said.push((label, line));
        }
    }
    for (_, label) in keys {
        let lines: Vec<&String> = said
            .iter()
            .filter(|(l, _)| *l == label)
            .map(|(_, s)| s)
            .collect();
        assert!(
            lines.iter().all(|l| *l == lines[0]),
            "{label} is named two ways: {lines:#?}"
        );
        let name = lines[0]
            .strip_prefix(&format!("read-only: {label} ("))
            .and_then(|r| r.strip_suffix(") is disabled"))
            .unwrap_or_else(|| panic!("{label}: {}", lines[0]));
        let shown = help_line(&help, label)
            .unwrap_or_else(|| panic!("{label} is not in the help: {help:#?}"));
        assert!(
            shown == name
                || shown.starts_with(&format!("{name}:"))
                || shown.starts_with(&format!("{name}  ")),
            "{label}: the message says `{name}`, the help `{shown}`"
        );
    }
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert_eq!(env.fingerprint(), before);
}
