//! The batch detail says the batch's budget in a real terminal: what the
//! window has spent of it and when it resets; once reached, that no call
//! starts until the reset, as the waiting reason too.

#![cfg(unix)]

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::{Env, add_keys};
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

#[test]
fn the_batch_detail_says_the_budget_spent_and_its_reset() {
    // The day must not end during the test (the window is the UTC day).
    common::away_from_midnight();
    let env = Env::new();
    let worker = common::cost_worker(&env, "0.25");
    env.config(&format!(
        "[batch.\"記事\"]\nworker = [\"{}\"]\nconcurrency = 1\nbudget = \"0.50/day\"\n",
        worker.display()
    ));
    add_keys(&env, "記事", &["k1"]);
    env.run(&["run", "記事"]).code(0);
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (120, 40));
    dash.wait_for("the budget line", |s| {
        s.contains("budget $0.25 of $0.50 today, resets 00:00Z")
    });
    dash.key("q");
    add_keys(&env, "記事", &["k2", "k3"]);
    // k2 spends the rest; k3 waits for the reset (the run is stopped).
    let run = env.spawn("run", &["run", "記事"]);
    common::wait_for("the hold", || !env.events("記事", "budget").is_empty());
    common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
    let mut run = run;
    run.wait().unwrap();
    let dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (120, 40));
    let screen = dash.wait_for("the budget reached", |s| {
        s.contains("budget reached ($0.50 of $0.50 today), resets 00:00Z")
            && s.contains("1 waits: budget reached, resets 00:00Z")
    });
    assert!(!screen.contains("never run"), "{screen}");
}

/// The run's spend and the budget's, on adjacent lines of the batch
/// detail, are one amount: a cost finer than a millionth is cut down to
/// it in both (the spend line rounded it up, the budget line down).
#[test]
fn the_spend_and_the_budget_show_one_amount() {
    common::away_from_midnight();
    let env = Env::new();
    let worker = common::cost_worker(&env, "0.123456789");
    env.config(&format!(
        "[batch.a]\nworker = [\"{}\"]\nbudget = \"100/day\"\n",
        worker.display()
    ));
    add_keys(&env, "a", &["k1"]);
    env.run(&["run", "a"]).code(0);
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
    let screen = dash.wait_for("the spend and the budget", |s| {
        s.contains("budget $0.123456 of $100.00 today") && s.contains("spend ")
    });
    let spend = screen.lines().find(|l| l.contains("spend ")).unwrap();
    assert!(spend.contains("$0.123456 last run"), "{screen}");
    dash.key("q");
}

/// A batch whose budget is reached says `held` in the table even when
/// another batch is selected (its spend was read for the selected batch
/// only, and it said `running` or `idle`), and the header's summary says
/// `budget`, as `status --short` does.
#[test]
fn every_row_and_the_header_say_a_budget_reached() {
    common::away_from_midnight();
    let env = Env::new();
    let worker = common::cost_worker(&env, "0.5");
    env.config(&format!(
        "[batch.a]\nworker = [\"{w}\"]\n\n[batch.\"記事\"]\nworker = [\"{w}\"]\nconcurrency = 1\nbudget = \"0.50/day\"\n",
        w = worker.display()
    ));
    add_keys(&env, "a", &["a1"]);
    env.run(&["run", "a"]).code(0);
    add_keys(&env, "記事", &["k1", "k2"]);
    let run = env.spawn("run", &["run", "記事"]);
    common::wait_for("the hold", || !env.events("記事", "budget").is_empty());
    common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
    let mut run = run;
    run.wait().unwrap();
    assert!(env.run(&["status", "--short"]).stdout.contains("budget"));
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (120, 40));
    let screen = dash.wait_for("both rows", |s| {
        s.lines().any(|l| l.contains("記事") && l.contains("held"))
            && s.lines().any(|l| l.contains("│a ") && l.contains("idle"))
    });
    assert!(screen.contains("┌ a ─"), "a is the one selected: {screen}");
    dash.key("j");
    let screen = dash.wait_for("the header's mark", |s| {
        s.lines()
            .nth(1)
            .is_some_and(|l| l.contains("記事") && l.contains("budget"))
    });
    assert!(
        !screen.lines().nth(1).unwrap().contains("running"),
        "{screen}"
    );
}

/// A run its `max_cost` stopped is `ok` on the dashboard too, and its last
/// run line says why it stopped beside the state, before a summary the
/// pane's edge may cut (it said `aborted`).
#[test]
fn a_run_its_max_cost_stopped_says_ok_and_why() {
    let env = Env::new();
    let worker = common::cost_worker(&env, "1.0");
    env.config(&format!(
        "[batch.a]\nworker = [\"{}\"]\nconcurrency = 1\nmax_cost = 2.5\n",
        worker.display()
    ));
    add_keys(&env, "a", &["k1", "k2", "k3", "k4", "k5"]);
    env.run(&["run", "a"]).code(0);
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
    let screen = dash.wait_for("the last run", |s| s.contains("last run  #1 "));
    let line = screen
        .lines()
        .find(|l| l.contains("last run  #1 "))
        .unwrap();
    assert!(
        line.contains("#1 ok, max_cost reached · manual"),
        "{screen}"
    );
    dash.key("q");
}
