//! The dashboard in a real pseudo-terminal on a PostgreSQL store (given as
//! a URL in `NIGHTSHIFT_DB`): it loads, its keys write (recorded with who
//! did it), a change made by another process shows up at the next poll,
//! and a role that may not write gets a read-only dashboard by itself.

use crate::support as common;
use crate::support::fixture;
use crate::support::pty;

use std::path::Path;

use common::{Backend, Env};
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");
const ENTER: &str = "\r";

/// The dashboard fixture in a fresh PostgreSQL database.
fn fixture_env() -> Option<Env> {
    let env = Env::bare_for(Backend::Pg)?;
    fixture::build(
        &env.db,
        &fixture::Options {
            now: nightshift::util::time::now_ms(),
            running: false,
        },
    );
    Some(env)
}

#[test]
fn the_dashboard_reads_and_writes_a_postgres_store() {
    let Some(env) = fixture_env() else { return };
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (100, 30));
    let screen = dash.wait_loaded();
    assert!(screen.contains("articles"), "{screen}");
    // The header names the store without a password, by its URL.
    assert!(screen.contains("postgres"), "{screen}");
    dash.key("p");
    dash.wait_text("why?");
    dash.type_text("db migration");
    dash.key(ENTER);
    dash.wait_text("paused articles: db migration");
    let status = env.status();
    let articles = &status["batches"][0];
    assert_eq!(articles["paused_reason"], "db migration");
    assert_eq!(articles["paused_by"], "tester@ptyhost");
    // A change made by another process shows up at the next poll.
    env.cmd()
        .args(["pause", "articles", "--reason", "from the cli"])
        .assert()
        .success();
    dash.wait_text("PAUSED — from the cli");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
}

#[test]
fn a_role_that_may_only_read_gets_a_read_only_dashboard() {
    let Some(env) = fixture_env() else { return };
    let url = env.db.to_str().unwrap().to_string();
    let database = url.split('/').nth(3).unwrap().split('?').next().unwrap();
    let role = format!("ro_{database}");
    env.pg_sql()
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN;
             GRANT CONNECT ON DATABASE {database} TO {role};
             GRANT USAGE ON SCHEMA nightshift TO {role};
             GRANT SELECT ON ALL TABLES IN SCHEMA nightshift TO {role};"
        ))
        .unwrap();
    let ro = std::path::PathBuf::from(url.replace("user=postgres", &format!("user={role}")));
    let before = env.status();
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &ro, &[], (100, 30));
    dash.wait_loaded();
    dash.key("p");
    dash.wait_text("read-only: p (pause) is disabled");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert_eq!(env.status()["batches"], before["batches"]);
}

/// `r` starts a runner on the same database (given to it in its
/// environment), which finishes the batch.
#[test]
fn a_runner_started_from_the_dashboard_uses_the_same_database() {
    let Some(env) = fixture_env() else { return };
    env.script("fast.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.write(
        "nightshift.toml",
        "[batch.articles]\nworker = [\"./fast.sh\"]\nconcurrency = 2\n",
    );
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (100, 30));
    dash.wait_loaded();
    // The fixture's history has runs started from the dashboard too.
    let before = env.status()["batches"][0]["last_run"]["id"]
        .as_i64()
        .unwrap_or(0);
    dash.key("r");
    dash.wait_seen("started a run of articles (pid");
    let start = std::time::Instant::now();
    let last_run = loop {
        let status = env.status();
        let run = status["batches"][0]["last_run"].clone();
        if run["id"].as_i64() > Some(before)
            && run["trigger"] == "dashboard"
            && run["state"] != "running"
        {
            break run;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the run never finished: {status}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        last_run["counts"]["done"].as_i64().unwrap() > 0,
        "{last_run}"
    );
    assert_eq!(env.status()["batches"][0]["pending"], 0, "{last_run}");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
}

/// A warning the store gives while the dashboard owns the terminal (a
/// password file that others may read by now, met when the first write
/// opens its session) is shown in its footer, where it was written to
/// stderr over the screen; it is written out too once the terminal is
/// given back.
#[test]
fn a_warning_while_the_dashboard_runs_is_shown_by_it_not_drawn_over_it() {
    let Some(env) = fixture_env() else { return };
    let file = env.write("pgpass", "*:*:*:*:not-used\n");
    let chmod = |mode| {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    chmod(0o600);
    let vars = [("PGPASSFILE", file.to_str().unwrap()), ("PGPASSWORD", "")];
    let mut dash = Dash::open_env(
        Path::new(BIN),
        env.dir.path(),
        &env.db,
        &[],
        (100, 30),
        &vars,
    );
    dash.wait_loaded();
    chmod(0o644);
    dash.key("p");
    dash.wait_text("why?");
    dash.type_text("db migration");
    dash.key(ENTER);
    let screen = dash.wait_seen("warning: password file");
    // In the footer, over the rows above it where it is longer.
    let bottom: Vec<&str> = screen.lines().rev().take(4).collect();
    assert!(
        bottom.iter().any(|l| l.contains("warning: password file")),
        "in the footer:\n{screen}"
    );
    dash.wait_text("PAUSED — db migration");
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    assert!(dash.wait_restored());
    dash.wait_text("nightshift: warning: password file");
    // Nothing but the dashboard wrote while it held the alternate screen.
    let raw = String::from_utf8_lossy(&dash.raw.lock().unwrap()).into_owned();
    let enter = raw.find("\x1b[?1049h").unwrap();
    let leave = enter + raw[enter..].find("\x1b[?1049l").unwrap();
    assert!(
        !raw[enter..leave].contains("nightshift: warning"),
        "written over the dashboard"
    );
    assert!(raw[leave..].contains("nightshift: warning: password file"));
}
