//! Steering from the dashboard, in a real pseudo-terminal against a real
//! runner: `c` cancels the selected running item (its worker stopped, the
//! item to manual, never done), `X` stops the batch's runs; both ask first
//! and are recorded with who did it.
#![cfg(unix)]

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::{Env, add_keys, assert_no_process_left, wait_for};
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

#[test]
fn the_cancel_and_stop_keys_steer_a_live_run() {
    let env = Env::new();
    env.config("[batch.b]\nconcurrency = 2\ngrace = \"1s\"\n");
    add_keys(&env, "b", &["stuck", "hang", "later"]);
    let marker = format!("tui-steer-{}", env.dir.path().display());
    let w = env.waiting_worker("sleep 1000; :", &marker);
    let mut runner = env.spawn("run", &["run", "b", "--", &w]);
    wait_for("both workers", || {
        env.started("stuck") && env.started("hang")
    });

    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (100, 24));
    dash.wait_loaded();
    dash.key("3");
    dash.wait_for("stuck claimed on screen", |s| {
        s.lines()
            .any(|l| l.contains("stuck") && l.contains("claimed"))
    });
    dash.key("c");
    dash.wait_text("Cancel stuck of b? A worker running it is stopped");
    dash.key("y");
    dash.wait_text("asked the runner of stuck to stop its worker");
    wait_for("stuck cancelled", || {
        env.item("stuck") == ("failed".into(), Some("manual".into()), 1)
    });
    assert_eq!(env.item("hang").0, "claimed", "the rest carry on");

    dash.key("X");
    dash.wait_text("Stop the runs of b?");
    dash.key("y");
    // Named as every view names a runner: `host:pid`.
    dash.wait_text(&format!(
        "asked {}:{}",
        nightshift::util::identity::host(),
        runner.id()
    ));
    let status = runner.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{:?}", env.output_of("run"));
    assert_no_process_left(&marker);
    // hang had its grace period, then went back to pending; later never began.
    assert_eq!(env.item("hang"), ("pending".into(), None, 0));
    assert_eq!(env.item("later"), ("pending".into(), None, 0));
    assert_eq!(
        env.strings("SELECT actor FROM events WHERE kind IN ('cancel-asked', 'cancelled', 'stop-asked') ORDER BY id"),
        ["tester@ptyhost", "tester@ptyhost", "tester@ptyhost"]
    );
    assert_eq!(
        env.int("SELECT count(*) FROM events WHERE kind = 'done'"),
        0
    );
    dash.key("q");
    dash.wait_exit();
}

/// A run asked to stop says so until it ends, in every view: the
/// dashboard's state `stopping` and who asked, `status` and its JSON; it
/// read `running` through the whole grace period.
#[test]
fn a_run_asked_to_stop_shows_stopping_until_it_ends() {
    let env = Env::new();
    env.config("[batch.b]\nconcurrency = 1\ngrace = \"1h\"\n");
    add_keys(&env, "b", &["slow", "later"]);
    let marker = format!("tui-stopping-{}", env.dir.path().display());
    let w = env.waiting_worker("sleep 1000; :", &marker);
    let mut runner = env.spawn("run", &["run", "b", "--", &w]);
    wait_for("the worker", || env.started("slow"));

    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (100, 24));
    dash.wait_loaded();
    dash.key("X");
    dash.wait_text("Stop the runs of b?");
    dash.key("y");
    let screen = dash.wait_text("stopping (asked by tester@ptyhost)");
    let row = screen.lines().find(|l| l.starts_with("│b ")).unwrap_or("");
    assert!(row.contains("stopping"), "{screen}");
    let status = env.status();
    assert_eq!(
        status["batches"][0]["lock"]["stop_asked_by"], "tester@ptyhost",
        "{status}"
    );
    let out = env.cmd().args(["status", "b"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stopping (asked by tester@ptyhost)"),
        "{text}"
    );

    let out = env.cmd().args(["status", "--short"]).output().unwrap();
    let short = String::from_utf8_lossy(&out.stdout);
    assert!(short.contains("b 0✓ 2… ▶ stopping"), "{short}");

    // The second ask ends it at once.
    let out = env.cmd().args(["stop", "b", "--now"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(runner.wait().unwrap().code(), Some(130));
    assert_no_process_left(&marker);
    dash.wait_for("the run ended", |s| !s.contains("stopping"));
    dash.key("q");
    dash.wait_exit();
}
