//! A dashboard left open follows its config file: a budget or a pool
//! added after it opened shows (it showed the batch `running` past its
//! budget, and no Pools tab, until reopened), and a bad edit keeps the
//! config as it was and says so.

#![cfg(unix)]

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::{Env, add_keys};
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

fn open(env: &Env) -> Dash {
    Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (120, 40))
}

#[test]
fn a_budget_added_while_the_dashboard_is_open_shows_and_holds() {
    // The day must not end during the test (the window is the UTC day).
    common::away_from_midnight();
    let env = Env::new();
    let worker = common::cost_worker(&env, "0.5");
    let config = format!(
        "[batch.\"記事\"]\nworker = [\"{}\"]\nconcurrency = 1\n",
        worker.display()
    );
    env.config(&config);
    add_keys(&env, "記事", &["k1", "k2"]);
    let dash = open(&env);
    let screen = dash.wait_for("the batch", |s| pty::loaded(s) && s.contains("記事"));
    assert!(!screen.contains("budget $"), "{screen}");
    env.config(&format!("{config}budget = \"0.50/day\"\n"));
    dash.wait_text("budget $0.00 of $0.50 today, resets 00:00Z");
    // k1 spends the budget; k2 waits for the reset (the run is stopped).
    let run = env.spawn("run", &["run", "記事"]);
    common::wait_for("the hold", || !env.events("記事", "budget").is_empty());
    common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
    let mut run = run;
    run.wait().unwrap();
    dash.wait_for("the budget reached, held", |s| {
        s.contains("budget reached ($0.50 of $0.50 today), resets 00:00Z")
            && s.lines().any(|l| l.contains("│記事") && l.contains("held"))
    });
}

#[test]
fn a_bad_edit_keeps_the_config_as_it_was_and_says_so() {
    let env = Env::new();
    let config = "[batch.b]\nworker = [\"cat\"]\nbudget = \"2/day\"\n";
    env.config(config);
    add_keys(&env, "b", &["k1"]);
    let dash = open(&env);
    dash.wait_text("budget $0.00 of $2.00 today");
    env.config(&format!("{config}concurrency = \"many\"\n"));
    let screen = dash.wait_seen("nightshift.toml has an error (line 4: batch.b.concurrency:");
    assert!(
        screen.contains("budget $0.00 of $2.00 today"),
        "the old config stays: {screen}"
    );
    // Mended (without its budget): followed again.
    env.config("[batch.b]\nworker = [\"cat\"]\n");
    dash.wait_for("the budget gone", |s| {
        pty::loaded(s) && s.contains("┌ b ─") && !s.contains("budget $")
    });
}

#[test]
fn a_config_written_after_the_dashboard_opened_brings_its_pool() {
    let env = Env::new();
    add_keys(&env, "b", &["k1"]);
    let dash = open(&env);
    let screen = dash.wait_for("the batch", |s| pty::loaded(s) && s.contains("┌ b ─"));
    assert!(!screen.contains("Pools"), "no pools, no tab: {screen}");
    env.config("[limit.api]\nconcurrency = 2\n\n[batch.b]\nworker = [\"cat\"]\nlimit = \"api\"\n");
    dash.wait_seen("nightshift.toml reloaded");
    dash.wait_text(" 6 Pools ");
}

/// At 80 columns a bad edit's message is read whole: what is wrong and
/// that the config shown is the one before. The footer cut it to one row,
/// `nightshift.toml has an error (line 4: batch."記事の投稿バッチ…`: the
/// line number was all it said, and not that the edit was left unused.
/// A message longer than the footer now takes the rows above it.
#[test]
fn a_bad_edit_is_said_whole_at_80_columns() {
    let env = Env::new();
    let batch = "記事の投稿バッチ・とても長い名前です";
    let config = format!("[batch.\"{batch}\"]\nworker = [\"cat\"]\nschedule = \"0 2 * * *\"\n");
    env.config(&format!("{config}timezone = \"Asia/Tokyo\"\n"));
    add_keys(&env, batch, &["k1"]);
    let dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
    dash.wait_for("the batch", |s| pty::loaded(s) && s.contains("Asia/Tokyo"));
    env.config(&format!("{config}timezone = \"Asia/東京\"\n"));
    let screen = dash.wait_seen("showing the config as it was");
    let joined: String = screen
        .lines()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .concat();
    for said in [
        "nightshift.toml has an error (line 4:",
        "timezone: unknown time zone \"Asia/東京\"",
        "): showing the config as it was",
    ] {
        let said: String = said.split_whitespace().collect();
        let joined: String = joined.split_whitespace().collect();
        assert!(joined.contains(&said), "{said:?} not on\n{screen}");
    }
    for row in screen.lines() {
        assert!(
            nightshift::util::text::width(row) <= 80,
            "{row:?}\n{screen}"
        );
    }
}
