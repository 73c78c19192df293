//! `nightshift demo` as a newcomer runs it: in a real terminal, with the
//! dashboard in front of a runner and the daemon. The counts rise on
//! screen; `q` ends the demo, and nothing of it is left running.

use crate::support as common;
use crate::support::pty;

use std::path::Path;
use std::time::{Duration, Instant};

use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");

/// The done count of `batch` in the Batches pane (BATCH PENDING CLAIMED DONE ...).
fn done_on_screen(screen: &str, batch: &str) -> Option<u64> {
    let row = screen
        .lines()
        .find(|l| l.starts_with(&format!("│{batch} ")))?;
    row.split_whitespace().nth(3)?.parse().ok()
}

fn status(db: &Path) -> serde_json::Value {
    let out = std::process::Command::new(BIN)
        .args(["status", "--json", "--db"])
        .arg(db)
        .env_remove("NIGHTSHIFT_CONFIG")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn demo_shows_counts_rising_and_quits_leaving_nothing_running() {
    let tmp = tempfile::tempdir().unwrap();
    let demo_dir = tmp.path().join("demo");
    // The harness points NIGHTSHIFT_DB somewhere: the demo must ignore it.
    let elsewhere = tmp.path().join("elsewhere.db");
    let mut dash = Dash::open(
        Path::new(BIN),
        tmp.path(),
        &elsewhere,
        &["demo", "--dir", demo_dir.to_str().unwrap()],
        (100, 30),
    );
    let first = dash.wait_for("the articles row with a count", |s| {
        pty::loaded(s) && done_on_screen(s, "articles").is_some()
    });
    let before = done_on_screen(&first, "articles").unwrap();
    assert!(first.contains("│reports "), "both batches shown:\n{first}");

    // The scheduled batch shows its schedule (the demo's config is loaded).
    dash.key("]");
    dash.wait_for("reports selected, with its schedule", |s| {
        s.lines()
            .nth(1)
            .is_some_and(|tabs| tabs.contains("reports"))
            && s.contains("*/20 * * * * * Asia/Tokyo · next")
    });

    // `r` on reports starts a runner from the dashboard; the demo stops it
    // too when it ends (outside the demo such a run outlives the dashboard).
    // If the daemon is running reports just then, it steps down at once and
    // its "finished" message may replace the "started" one.
    dash.key("r");
    let screen = dash.wait_text("run of reports (pid");
    if screen.contains("started a run of reports") {
        assert!(screen.contains("it stops when you quit"), "{screen}");
    }
    let pid: u32 = screen
        .split("run of reports (pid ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .and_then(|s| s.parse().ok())
        .unwrap();

    // The background runner works: the done count rises between two reads.
    dash.wait_for("the done count of articles to rise", |s| {
        done_on_screen(s, "articles").is_some_and(|n| n > before)
    });

    dash.key("q");
    assert_eq!(dash.wait_exit(), 0, "{}", dash.screen());
    assert!(
        dash.wait_restored(),
        "terminal not restored:\n{}",
        dash.screen()
    );
    let after = dash.wait_text("nothing of the demo is running");
    assert!(
        after.contains("the demo's directory is kept"),
        "the kept directory is named:\n{after}"
    );

    // Nothing of the demo runs any more: no runner, daemon or worker, and
    // the runner `r` started is gone too.
    let start = Instant::now();
    loop {
        let left = common::processes_in(&demo_dir);
        if left.is_empty() {
            break;
        }
        // A generous bound on a loaded machine, never a performance figure.
        assert!(
            start.elapsed() < pty::PATIENCE,
            "still running after the demo ended: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!nightshift::util::identity::process_alive(pid, None));

    // And it stopped cleanly: no claim, lock or run left behind.
    let db = demo_dir.join("nightshift.db");
    let status = status(&db);
    for batch in status["batches"].as_array().unwrap() {
        assert_eq!(batch["claimed"], 0, "{batch}");
        assert!(batch["lock"].is_null(), "{batch}");
        assert_ne!(batch["last_run"]["state"], "running", "{batch}");
    }
    let articles = &status["batches"][0];
    assert_eq!(articles["name"], "articles");
    assert!(articles["done"].as_u64().unwrap() > before, "{articles}");
    assert!(!elsewhere.exists(), "the demo touched NIGHTSHIFT_DB");
}

/// SIGTERM to the demo (a closed terminal, `kill`) ends it the same way.
#[test]
fn demo_stops_everything_on_sigterm() {
    let tmp = tempfile::tempdir().unwrap();
    let demo_dir = tmp.path().join("demo");
    let mut dash = Dash::open(
        Path::new(BIN),
        tmp.path(),
        &tmp.path().join("elsewhere.db"),
        &["demo", "--dir", demo_dir.to_str().unwrap()],
        (80, 24),
    );
    dash.wait_for("the articles at work", |s| {
        done_on_screen(s, "articles").is_some_and(|n| n > 0)
    });
    let pid = nix::unistd::Pid::from_raw(dash.pid() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(dash.wait_exit(), 130);
    assert!(dash.wait_restored(), "{}", dash.screen());
    assert_eq!(common::processes_in(&demo_dir), Vec::<String>::new());
    let status = status(&demo_dir.join("nightshift.db"));
    for batch in status["batches"].as_array().unwrap() {
        assert_eq!(batch["claimed"], 0, "{batch}");
        assert!(batch["lock"].is_null(), "{batch}");
    }
}

/// A demo killed with SIGKILL cannot clean up, but its runner and scheduler
/// are told by the kernel (SIGTERM on the parent's death) and stop on their
/// own: nothing keeps running, no lease or lock is left behind. The demo runs
/// under a shell that stays, as in a user's terminal: the terminal's hangup
/// does not come to the rescue.
#[cfg(target_os = "linux")]
#[test]
fn demo_killed_with_sigkill_leaves_nothing_running() {
    let tmp = tempfile::tempdir().unwrap();
    let demo_dir = tmp.path().join("demo");
    let script = format!(
        "'{BIN}' demo --dir '{}'; sleep 600",
        demo_dir.to_str().unwrap()
    );
    let dash = Dash::open(
        Path::new("/bin/sh"),
        tmp.path(),
        &tmp.path().join("elsewhere.db"),
        &["-c", &script],
        (80, 24),
    );
    dash.wait_for("the articles at work", |s| {
        done_on_screen(s, "articles").is_some_and(|n| n > 0)
    });
    let procs = common::processes_in(&demo_dir);
    let demo = procs
        .iter()
        .find(|p| p.contains(&format!(": {BIN} demo --dir ")))
        .and_then(|p| p.split(':').next())
        .and_then(|pid| pid.parse::<i32>().ok())
        .unwrap_or_else(|| panic!("no demo process among {procs:?}"));
    assert!(
        procs.len() >= 3,
        "the demo, its runner and daemon: {procs:?}"
    );
    let pid = nix::unistd::Pid::from_raw(demo);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    // The shell stays (it sleeps): everything else must go.
    let ours = || -> Vec<String> {
        common::processes_in(&demo_dir)
            .into_iter()
            .filter(|p| !p.contains(": /bin/sh -c "))
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut left = ours();
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
        left = ours();
    }
    assert_eq!(left, Vec::<String>::new());
    let status = status(&demo_dir.join("nightshift.db"));
    for batch in status["batches"].as_array().unwrap() {
        assert_eq!(batch["claimed"], 0, "{batch}");
        assert!(batch["lock"].is_null(), "{batch}");
    }
    drop(dash);
}

/// The demo started by a program replaced since it began (a rebuild or an
/// upgrade under it: Linux then reads its own path as "PATH (deleted)")
/// starts its runner and daemon, and its worker, from the program now at
/// that path, where it stopped at once: "starting the demo's runner: No
/// such file or directory".
#[cfg(target_os = "linux")]
#[test]
fn demo_runs_after_the_program_was_replaced() {
    let tmp = tempfile::tempdir().unwrap();
    let demo_dir = tmp.path().join("demo");
    let exe = tmp.path().join("nightshift");
    common::copy_program(Path::new(BIN), &exe);
    // The old program stays reachable through a descriptor of ours; a new
    // one is renamed over its path, as an installer does. Started through
    // the descriptor, the demo is the old program, replaced from its start.
    let old = std::fs::File::open(&exe).unwrap();
    let new = tmp.path().join("nightshift.new");
    common::copy_program(Path::new(BIN), &new);
    std::fs::rename(&new, &exe).unwrap();
    let through = format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        std::os::fd::AsRawFd::as_raw_fd(&old)
    );
    let mut dash = Dash::open(
        Path::new(&through),
        tmp.path(),
        &tmp.path().join("elsewhere.db"),
        &["demo", "--dir", demo_dir.to_str().unwrap()],
        (80, 24),
    );
    dash.wait_for("the articles at work", |s| {
        done_on_screen(s, "articles").is_some_and(|n| n > 0)
    });
    let config = std::fs::read_to_string(demo_dir.join("nightshift.toml")).unwrap();
    assert!(
        config.contains(&format!("worker = [\"{}\", \"agent\"]", exe.display())),
        "{config}"
    );
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0, "{}", dash.screen());
    let start = Instant::now();
    while !common::processes_in(&demo_dir).is_empty() {
        assert!(start.elapsed() < pty::PATIENCE, "the demo left processes");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(old);
}
