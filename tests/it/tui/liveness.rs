//! The dashboard in a real pseudo-terminal tells who is alive: runners
//! killed with SIGKILL (which writes nothing to the store) show crashed
//! within a poll, their lock not held, their claims orphaned, and no ETA;
//! at 80×24 and 120×40, for a Japanese batch name and an ASCII one.

#![cfg(unix)]

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::{Background, Env, add_keys, pids_with, signal, wait_for};
use nix::sys::signal::Signal;
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");
const JA: &str = "夜間記事";
const ASCII: &str = "nightly";
/// The dashboard's host (see `pty::Dash::open`): the runners run "here".
const HOST: &str = "ptyhost";

fn row_of<'a>(screen: &'a str, name: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(&format!("│{name}")))
        .unwrap_or("")
}

/// The detail block of the selected batch: from its title down.
fn detail(screen: &str, name: &str) -> String {
    screen
        .lines()
        .skip_while(|l| !l.starts_with(&format!("┌ {name} ─")))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn killed_runners_show_crashed_at_once_at_both_sizes() {
    let env = Env::new();
    let marker = format!("hang-{}", env.dir.path().display());
    let worker = env.script(
        "w.sh",
        &format!("cat >/dev/null\nsh -c 'sleep 60; :' {marker}\necho '{{}}'"),
    );
    let w = worker.display();
    env.config(&format!(
        "[batch.\"{JA}\"]\nworker = [\"{w}\"]\nconcurrency = 2\nlock_ttl = \"1h\"\n\n\
         [batch.{ASCII}]\nworker = [\"{w}\"]\nconcurrency = 2\nlock_ttl = \"1h\"\n"
    ));
    env.add_items(JA, 2);
    env.add_items(ASCII, 2);
    let mut runners: Vec<Background> = [JA, ASCII]
        .iter()
        .map(|b| {
            env.spawn_with(
                &format!("run-{b}"),
                &["run", b],
                &[("NIGHTSHIFT_HOST", HOST)],
            )
        })
        .collect();
    wait_for("every item claimed", || {
        env.int("SELECT count(*) FROM items WHERE status = 'claimed'") == 4
    });

    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
    dash.wait_for("both running", |s| {
        row_of(s, JA).contains("running") && row_of(s, ASCII).contains("running")
    });
    let pids: Vec<u32> = runners.iter().map(|r| r.id()).collect();
    // Stopped first, so that they write nothing more (a stopped holder is
    // judged by its expiry: still running), and the dashboard polls once
    // more (it shows an item added after the stop; the header has no clock
    // to tell a poll by): then nothing in the store changes when they die,
    // and only the dashboard looking at the processes again can tell.
    for pid in &pids {
        signal(*pid, Signal::SIGSTOP);
    }
    let seen = row_of(&dash.screen(), ASCII).to_string();
    add_keys(&env, ASCII, &["after-the-stop"]);
    dash.wait_for("a poll after the stop", |s| {
        row_of(s, ASCII) != seen && row_of(s, JA).contains("running")
    });
    for r in &mut runners {
        signal(r.id(), Signal::SIGKILL);
        r.wait().unwrap();
    }

    for (cols, rows) in [(80, 24), (120, 40)] {
        if cols != 80 {
            dash.resize(cols, rows);
        }
        let screen = dash.wait_for(&format!("both crashed at {cols}×{rows}"), |s| {
            row_of(s, JA).trim_end().ends_with("crashed│")
                && row_of(s, ASCII).trim_end().ends_with("crashed│")
        });
        assert!(!screen.contains("running"), "{screen}");
        // The first batch (by name) is selected: then the other.
        for (i, name) in [ASCII, JA].iter().enumerate() {
            if i == 1 {
                dash.key("j");
            }
            let run = env.int(&format!(
                "SELECT r.id FROM runs r JOIN batches b ON b.id = r.batch_id WHERE b.name = '{name}'"
            ));
            let screen = dash.wait_for(&format!("{name} in detail"), |s| {
                detail(s, name).contains(&format!("#{run} crashed"))
            });
            let d = detail(&screen, name);
            let pid = pids[if *name == JA { 0 } else { 1 }];
            for want in [
                format!("#{run} crashed · manual · "),
                format!("runner pid {pid} is gone"),
                "crashed: its process is gone; not held".to_string(),
                "2 claimed items, taken back by the next run".to_string(),
                "no ETA: no run".to_string(),
            ] {
                assert!(d.contains(&want), "{want:?} at {cols}×{rows} in:\n{screen}");
            }
            assert!(
                !d.contains("left"),
                "no time left on a dead seat:\n{screen}"
            );
            // The tab bar names the selected batch and says it crashed.
            let tabs = screen.lines().nth(1).unwrap_or("");
            assert!(tabs.contains(name) && tabs.contains("crashed"), "{tabs}");
            assert!(!tabs.contains('▶'), "{tabs}");
        }
        dash.key("k");
    }
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    for pid in pids_with(&marker) {
        signal(pid, Signal::SIGKILL);
    }
}

/// `show BATCH KEY`'s claim line, run as a view on the dashboard's host.
fn claim_shown(env: &Env, batch: &str, key: &str) -> String {
    let out = env
        .cmd()
        .env("NIGHTSHIFT_HOST", HOST)
        .args(["show", batch, key])
        .output()
        .unwrap();
    let text = common::stdout(&out);
    text.lines()
        .find_map(|l| l.strip_prefix("claim:     "))
        .unwrap_or_else(|| panic!("no claim line in:\n{text}"))
        .to_string()
}

/// The item detail's claim line, from the drawn pane.
fn claim_drawn(screen: &str) -> Option<String> {
    let line = screen.lines().find(|l| l.contains("│claim     "))?;
    let text = line.split("│claim     ").nth(1)?;
    Some(text.trim_end().trim_end_matches('│').trim_end().to_string())
}

/// The item detail says who holds a claimed item, in the words and by the
/// rule of `show`: in flight in its run on its runner, leased until when;
/// once the runner is killed with SIGKILL, that its runner is gone and the
/// next run takes the item back. It said only "claimed".
#[test]
fn the_item_detail_says_who_holds_its_claim_as_show_does() {
    let env = Env::new();
    let marker = format!("hang-{}", env.dir.path().display());
    let worker = env.script(
        "w.sh",
        &format!("cat >/dev/null\nsh -c 'sleep 60; :' {marker}\necho '{{}}'"),
    );
    env.config(&format!(
        "[batch.\"{JA}\"]\nworker = [\"{}\"]\nlock_ttl = \"1h\"\n",
        worker.display()
    ));
    env.add_items(JA, 1);
    let mut runner = env.spawn_with("run", &["run", JA], &[("NIGHTSHIFT_HOST", HOST)]);
    wait_for("the item claimed", || {
        env.int("SELECT count(*) FROM items WHERE status = 'claimed'") == 1
    });
    let holder = format!("run #1 ({HOST}:{})", runner.id());

    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (160, 40));
    dash.wait_loaded();
    dash.key("3");
    dash.key("\r");
    let screen = dash.wait_for("the claim in the item detail", |s| claim_drawn(s).is_some());
    let drawn = claim_drawn(&screen).unwrap();
    assert!(
        drawn.starts_with(&format!("in flight in {holder}, leased until ")),
        "{screen}"
    );
    // The same line but for the seconds that pass between the two reads.
    let shown = claim_shown(&env, JA, "k1");
    let lease = |l: &str| l.split(" (in ").next().unwrap_or("").to_string();
    assert_eq!(lease(&drawn), lease(&shown), "{screen}");

    signal(runner.id(), Signal::SIGKILL);
    runner.wait().unwrap();
    let crashed =
        format!("{holder} crashed: its runner is gone; the next run takes this item back");
    let screen = dash.wait_for("the claim orphaned", |s| {
        claim_drawn(s).as_deref() == Some(crashed.as_str())
    });
    assert_eq!(claim_shown(&env, JA, "k1"), crashed, "{screen}");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    for pid in pids_with(&marker) {
        signal(pid, Signal::SIGKILL);
    }
}

/// The emergency stop (the `PAUSED` file beside the store) shows in the
/// header and pauses every batch on screen, though no row changes; it goes
/// when the file does.
#[test]
fn the_emergency_stop_shows_at_a_glance_and_goes_with_its_file() {
    let env = Env::new();
    env.config(&format!(
        "[batch.\"{JA}\"]\nworker = [\"cat\"]\n\n[batch.{ASCII}]\nworker = [\"cat\"]\n"
    ));
    env.add_items(JA, 2);
    env.add_items(ASCII, 2);
    let stop = env.db.parent().unwrap().join("PAUSED");
    for size in [(80, 24), (120, 40)] {
        let dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], size);
        dash.wait_for("both idle", |s| {
            row_of(s, JA).contains("idle") && row_of(s, ASCII).contains("idle")
        });
        assert!(!dash.screen().contains("EMERGENCY STOP"));
        std::fs::write(&stop, "").unwrap();
        let screen = dash.wait_for("the emergency stop", |s| {
            s.lines().next().unwrap_or("").contains("⛔ EMERGENCY STOP")
                && row_of(s, JA).contains("paused")
                && row_of(s, ASCII).contains("paused")
        });
        assert!(!row_of(&screen, JA).contains("idle"), "{screen}");
        std::fs::remove_file(&stop).unwrap();
        dash.wait_for("the stop lifted", |s| {
            !s.contains("EMERGENCY STOP") && row_of(s, JA).contains("idle")
        });
    }
}

/// Idle, the dashboard leaves the terminal alone: polls (ten a second
/// here) that find nothing new write nothing, and the header has no clock
/// that ticks. Only a minute's turn may change a cell (the young batch's
/// "last 2 min" label), so five seconds hold at most one small frame.
#[test]
fn an_idle_dashboard_writes_nothing_while_nothing_changes() {
    use std::sync::atomic::Ordering;
    let env = Env::new();
    env.config(&format!("[batch.{ASCII}]\nworker = [\"cat\"]\n"));
    env.add_items(ASCII, 2);
    let dash = Dash::open(
        Path::new(BIN),
        env.dir.path(),
        &env.db,
        &["watch", "--interval", "100ms"],
        (80, 24),
    );
    // Past the first ten seconds, when the rate turns from "—" to a figure.
    dash.wait_for("idle, with a rate", |s| {
        pty::loaded(s) && row_of(s, ASCII).contains("/min") && row_of(s, ASCII).contains("idle")
    });
    let before = dash.bytes.load(Ordering::SeqCst);
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let written = dash.bytes.load(Ordering::SeqCst) - before;
    assert!(
        written < 300,
        "{written} bytes written in 5 s of nothing changing:\n{}",
        dash.screen()
    );
    assert!(pty::loaded(&dash.screen()), "{}", dash.screen());
}
