//! Signals to real processes, filling what `runner::stop`, `daemon` and
//! `tui::pty` leave out: SIGINT and SIGHUP to `run` (graceful, like
//! SIGTERM), a second signal that stops in-flight workers at once, the same
//! for the daemon, and the dashboard restoring the terminal after SIGINT
//! and SIGQUIT sent as signals (not keys), and after a signal that arrives
//! while a prompt or an overlay is open; and a signal to a long `add`
//! (here; `requeue`: `cli::backends`), which stops it between chunks.
#![cfg(unix)]

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::{Background, Env, add_keys, assert_no_process_left, signal, wait_for};
use nix::sys::signal::Signal;

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// A worker that marks its start, then sleeps `secs` (in a child carrying
/// `marker`, so a leak can be found) and succeeds.
fn sleeper(env: &Env, secs: &str, marker: &str) -> String {
    env.waiting_worker(&format!("sleep {secs}; :"), marker)
}

/// A worker that marks its start, then waits (in a child carrying
/// `marker`) until `gate` exists, and succeeds.
fn gated(env: &Env, gate: &Path, marker: &str) -> String {
    env.waiting_worker(
        &format!("while [ ! -e {} ]; do sleep 0.02; done", p(gate)),
        marker,
    )
}

/// Waits for a background process to end; its exit code.
fn exit_code(child: &mut Background) -> Option<i32> {
    let mut code = None;
    wait_for("the process to exit", || match child.try_wait().unwrap() {
        Some(status) => {
            code = Some(status.code());
            true
        }
        None => false,
    });
    code.unwrap()
}

/// A runner that inherited ignored signals (started under `nohup`, or as
/// a shell script's background job) does not pass them on: its workers, in
/// either mode and in a directory of their own or not, start with no
/// signal ignored, so that a stop sent to a worker's group reaches it
/// whatever started the runner. (The runner handles SIGHUP, SIGINT and
/// SIGTERM itself, which `exec` resets; the others stayed ignored in its
/// workers.)
#[test]
fn workers_start_with_no_signal_ignored_whatever_the_runner_inherited() {
    // What the worker ignores, read by a child of the worker's shell; then
    // an answer to each request line (process mode: its payload has none).
    let worker = r#"grep '^SigIgn:' /proc/$$/status > ignored
while IFS= read -r line; do
  key=$(printf '%s' "$line" | sed 's/.*"key":"\([^"]*\)".*/\1/')
  echo "{\"key\":\"$key\",\"result\":\"ok\"}"
done"#;
    // A config named by its path runs the workers in its directory (started
    // another way than in the current one).
    for (mode, in_its_dir) in [("process", false), ("process", true), ("persistent", false)] {
        let env = Env::new();
        env.script("w.sh", worker);
        let config = env.config(&format!(
            "[batch.b]\nworker = [\"./w.sh\"]\nmode = \"{mode}\"\n"
        ));
        add_keys(&env, "b", &["a"]);
        let mut args = vec!["run".to_string(), "b".to_string()];
        if in_its_dir {
            args.extend(["--config".to_string(), p(&config)]);
        }
        let dir = if in_its_dir { "in its directory" } else { "" };
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                "trap '' HUP INT QUIT TERM USR1 USR2 ALRM; exec \"$0\" \"$@\"",
            ])
            .arg(common::bin())
            .args(&args)
            .current_dir(env.dir.path())
            .env("NIGHTSHIFT_DB", &env.db)
            .env_remove("NIGHTSHIFT_CONFIG")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(out.status.success(), "{mode} {dir}: {out:?}");
        assert_eq!(env.item("a").0, "done", "{mode} {dir}");
        let line = std::fs::read_to_string(env.path("ignored")).unwrap();
        let hex = line.trim().trim_start_matches("SigIgn:").trim();
        let mask = u64::from_str_radix(hex, 16).unwrap();
        // The C library ignores its two internal signals (32, 33) itself.
        assert_eq!(mask & !(0b11 << 31), 0, "{mode} {dir}: {line}");
    }
}

/// SIGINT and SIGHUP each stop `run` like SIGTERM: no new claims, the
/// in-flight item finishes within the grace period, the rest stays
/// pending, exit 130, the run recorded as aborted.
#[test]
fn sigint_and_sighup_stop_a_run_gracefully() {
    for sig in [Signal::SIGINT, Signal::SIGHUP] {
        let env = Env::new();
        env.config("[batch.b]\nconcurrency = 1\ngrace = \"30s\"\n");
        add_keys(&env, "b", &["a", "b", "c"]);
        let marker = format!("graceful-{}", env.dir.path().display());
        // The item ends only once the runner has taken the stop: a worker
        // on a timer could end first on a loaded machine, and its slot
        // claim the next item before the signal is seen.
        let gate = env.path("gate");
        let w = gated(&env, &gate, &marker);
        let mut run = env.spawn("run", &["run", "b", "--", &w]);
        wait_for("the first item in flight", || env.started("a"));
        signal(run.id(), sig);
        wait_for("the graceful stop to begin", || {
            env.output_of("run").1.contains("nightshift: stopping")
        });
        // Through the grace period every view says it stops: its runner
        // takes nothing more (it said the runner would take them).
        wait_for("status to say it stops", || {
            env.status()["batches"][0]["lock"]["stop_asked_by"] == "a signal to its runner"
        });
        let said = env.run(&["status"]).code(0).stdout.clone();
        assert!(
            said.contains("stopping (asked by a signal to its runner)")
                && !said.contains("for the runner that holds the lock"),
            "{sig}: {said}"
        );
        std::fs::write(&gate, "").unwrap();
        assert_eq!(
            exit_code(&mut run),
            Some(130),
            "{sig}: {:?}",
            env.output_of("run")
        );
        assert_eq!(
            env.item("a").0,
            "done",
            "{sig}: finished in the grace period"
        );
        assert_eq!(env.item("b"), ("pending".into(), None, 0), "{sig}");
        assert_eq!(env.item("c"), ("pending".into(), None, 0), "{sig}");
        assert_eq!(env.run_states(), ["aborted"], "{sig}");
        let (out, err) = env.output_of("run");
        assert!(out.contains("stopped: interrupted"), "{sig}: {out}");
        assert!(err.contains("nightshift: stopping"), "{sig}: {err}");
        assert_no_process_left(&marker);
    }
}

/// A run stopped by a signal exits 130 even when an item failed in it
/// before the stop: the code says what became of the run (recorded
/// `aborted`, its unfinished items back to pending), as the README's
/// exit codes and signals say; the summary still counts the failure.
#[test]
fn a_stopped_run_exits_130_even_with_a_failure_in_it() {
    let env = Env::new();
    env.config("[batch.b]\nconcurrency = 1\nretries = 0\ngrace = \"1000s\"\n");
    add_keys(&env, "b", &["bad", "a", "b"]);
    let marker = format!("failed-then-stopped-{}", env.dir.path().display());
    let started = env.path("started");
    std::fs::create_dir_all(&started).unwrap();
    let w = p(&env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\ntouch {dir}/$NIGHTSHIFT_KEY\n\
             if [ \"$NIGHTSHIFT_KEY\" = bad ]; then echo '不正な入力' >&2; exit 3; fi\n\
             sh -c 'sleep 1000; :' {marker}\necho '\"ok\"'",
            dir = p(&started)
        ),
    ));
    let mut run = env.spawn("run", &["run", "b", "--", &w]);
    wait_for("the second item in flight", || {
        env.path("started/a").exists()
    });
    signal(run.id(), Signal::SIGTERM);
    wait_for("the graceful stop to begin", || {
        env.output_of("run").1.contains("nightshift: stopping")
    });
    signal(run.id(), Signal::SIGTERM);
    assert_eq!(exit_code(&mut run), Some(130), "{:?}", env.output_of("run"));
    assert_eq!(env.item("bad"), ("failed".into(), Some("manual".into()), 1));
    assert_eq!(env.item("a"), ("pending".into(), None, 0));
    assert_eq!(env.run_states(), ["aborted"]);
    let (out, _) = env.output_of("run");
    assert!(out.contains("1 failed (0 retry, 1 manual)"), "{out}");
    assert!(out.contains("stopped: interrupted"), "{out}");
    assert_no_process_left(&marker);
}

/// A second signal does not wait for the grace period (here 1000 s): the
/// worker group is killed, its item goes back to pending with its attempt
/// uncounted, and the run ends with 130.
#[test]
fn a_second_signal_stops_a_run_at_once() {
    let env = Env::new();
    env.config("[batch.b]\nconcurrency = 1\ngrace = \"1000s\"\nmax_attempts = 1\n");
    add_keys(&env, "b", &["a", "b"]);
    let marker = format!("second-{}", env.dir.path().display());
    let w = sleeper(&env, "1000", &marker);
    let mut run = env.spawn("run", &["run", "b", "--", &w]);
    wait_for("the item in flight", || env.started("a"));
    signal(run.id(), Signal::SIGTERM);
    wait_for("the graceful stop to begin", || {
        env.output_of("run").1.contains("nightshift: stopping")
    });
    signal(run.id(), Signal::SIGINT);
    assert_eq!(exit_code(&mut run), Some(130), "{:?}", env.output_of("run"));
    assert_eq!(env.item("a"), ("pending".into(), None, 0));
    assert_eq!(env.item("b"), ("pending".into(), None, 0));
    assert_eq!(env.run_states(), ["aborted"]);
    assert_no_process_left(&marker);
}

/// SIGINT to a long `add` while a runner is live (so it adds in short
/// chunks): it stops after the chunk in hand and says exactly how many
/// items it added, which is what the store holds and what its `added`
/// event records; running it again adds the rest. (PostgreSQL adds in one
/// transaction: `store::contract` shows a stop there changing nothing.)
#[test]
fn sigint_stops_an_add_beside_a_runner_and_says_exactly_how_far_it_got() {
    const N: i64 = 100_000;
    let env = Env::new();
    env.config("[batch.r]\nconcurrency = 1\ngrace = \"30s\"\n");
    add_keys(&env, "r", &["slow"]);
    let gate = env.path("gate");
    let started = env.path("started");
    let w = p(&env.script(
        "gated.sh",
        &format!(
            "cat >/dev/null\ntouch {}\nwhile [ ! -e {} ]; do sleep 0.05; done\necho '\"ok\"'",
            p(&started),
            p(&gate)
        ),
    ));
    let mut runner = env.spawn("run", &["run", "r", "--", &w]);
    wait_for("the runner's worker", || started.exists());

    let lines: String = (1..=N).map(|i| format!("{{\"key\":\"k{i}\"}}\n")).collect();
    let file = p(&env.write("big.jsonl", &lines));
    let added = || {
        env.int(
            "SELECT count(*) FROM items i JOIN batches b ON b.id = i.batch_id WHERE b.name = 'b'",
        )
    };
    let mut add = env.spawn("add", &["add", "b", &file]);
    wait_for("the first chunk", || added() > 0);
    signal(add.id(), Signal::SIGINT);
    let code = exit_code(&mut add);
    let (out, err) = env.output_of("add");
    let n = added();
    assert_eq!(code, Some(130), "{out}{err}");
    assert!(n < N, "the add ended before the signal");
    assert_eq!(
        err,
        format!(
            "nightshift: error: {n} of {N} items added before SIGINT; run it again to add the rest \
             (adding is idempotent)\n"
        )
    );
    let events = env.events("b", "added");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["fields"]["added"], n);
    assert_eq!(events[0]["fields"]["cut_short"], "SIGINT");
    env.assert_counts_consistent();

    let again = env.run(&["add", "b", &file]);
    assert_eq!(
        again.code(0).stdout,
        format!("b: added {}, already present {n}\n", N - n)
    );
    signal(runner.id(), Signal::SIGTERM);
    std::fs::write(&gate, "").unwrap();
    assert_eq!(
        exit_code(&mut runner),
        Some(130),
        "{:?}",
        env.output_of("run")
    );
}

fn daemon_config(env: &Env, grace: &str) {
    env.config(&format!(
        "log_dir = \"logs\"\n[batch.b]\nconcurrency = 1\ngrace = \"{grace}\"\n\
         schedule = \"* * * * * *\"\ntimezone = \"UTC\"\nworker = [\"./w.sh\"]\n"
    ));
}

/// SIGINT stops the daemon like SIGTERM: exit 0, the in-flight item
/// finished, nothing left claimed, "stopped" printed and logged. (SIGHUP
/// reloads its config: `daemon.rs`.)
#[test]
fn sigint_stops_the_daemon_gracefully() {
    let sig = Signal::SIGINT;
    let env = Env::new();
    daemon_config(&env, "30s");
    add_keys(&env, "b", &["a", "b", "c"]);
    let marker = format!("daemon-{}", env.dir.path().display());
    sleeper(&env, "0.5", &marker);
    let mut daemon = env.spawn("daemon", &["daemon"]);
    wait_for("an item in flight", || env.started("a"));
    signal(daemon.id(), sig);
    assert_eq!(
        exit_code(&mut daemon),
        Some(0),
        "{sig}: {:?}",
        env.output_of("daemon")
    );
    assert_eq!(env.item("a").0, "done", "{sig}");
    assert_eq!(
        env.int("SELECT count(*) FROM items WHERE status = 'claimed'"),
        0,
        "{sig}"
    );
    let (out, _) = env.output_of("daemon");
    assert!(out.contains("nightshift daemon: stopped"), "{sig}: {out}");
    assert_no_process_left(&marker);
}

/// A second signal to the daemon kills the in-flight worker instead of
/// waiting out a 1000 s grace period; the item is pending again.
#[test]
fn a_second_signal_stops_the_daemon_at_once() {
    let env = Env::new();
    daemon_config(&env, "1000s");
    add_keys(&env, "b", &["a"]);
    let marker = format!("daemon2-{}", env.dir.path().display());
    sleeper(&env, "1000", &marker);
    let mut daemon = env.spawn("daemon", &["daemon"]);
    wait_for("the item in flight", || env.started("a"));
    signal(daemon.id(), Signal::SIGTERM);
    wait_for("the graceful stop to begin", || {
        env.output_of("daemon").0.contains("stopping: no new fires")
    });
    signal(daemon.id(), Signal::SIGTERM);
    assert_eq!(
        exit_code(&mut daemon),
        Some(0),
        "{:?}",
        env.output_of("daemon")
    );
    assert_eq!(env.item("a"), ("pending".into(), None, 0));
    assert_no_process_left(&marker);
}

/// The dashboard, sent SIGINT or SIGQUIT as a signal (a `kill`, not a
/// key), and SIGTERM or SIGHUP while the help overlay or the pause prompt is
/// open: it ends (130, or 0 for a hangup) and the terminal is back on the
/// main screen with the cursor shown, read-only or not.
#[test]
fn the_dashboard_restores_the_terminal_after_any_signal() {
    let env = Env::new();
    env.add_items("b", 3);
    let cases: &[(&[&str], &[&str], Signal, u32)] = &[
        (&["watch"], &[], Signal::SIGINT, 130),
        (&["watch"], &[], Signal::SIGQUIT, 130),
        (&["watch", "--read-only"], &[], Signal::SIGINT, 130),
        (&["watch"], &["?"], Signal::SIGTERM, 130),
        (&["watch"], &["p", "h", "a"], Signal::SIGHUP, 0),
        (&["watch", "--read-only"], &["3", "\r"], Signal::SIGHUP, 0),
    ];
    for (args, keys, sig, code) in cases {
        let mut dash = pty::Dash::open(&common::bin(), env.dir.path(), &env.db, args, (80, 24));
        dash.wait_loaded();
        for k in *keys {
            dash.key(k);
        }
        signal(dash.pid(), *sig);
        assert_eq!(dash.wait_exit(), *code, "{args:?} {keys:?} {sig}");
        assert!(
            dash.wait_restored(),
            "{args:?} {keys:?} {sig}: terminal not restored:\n{}",
            dash.screen()
        );
    }
    // Nothing was paused by the interrupted prompt.
    assert_eq!(env.status()["batches"][0]["paused"], false);
}
