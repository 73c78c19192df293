//! The dashboard's command line, without a terminal: clear refusals,
//! nothing changed.

use crate::support as common;

use common::Env;
use predicates::str::contains;

#[test]
fn without_a_terminal_the_dashboard_says_what_to_use_instead() {
    let env = Env::new();
    let before = env.fingerprint();
    env.cmd()
        .assert()
        .code(2)
        .stderr(contains("the dashboard needs a terminal"))
        .stderr(contains("nightshift status"));
    env.cmd().arg("watch").assert().code(2);
    assert_eq!(before, env.fingerprint());
}

#[test]
fn bad_watch_arguments_are_refused() {
    let env = Env::new();
    env.cmd()
        .args(["watch", "--interval", "soon"])
        .assert()
        .code(2)
        .stderr(contains("invalid duration"));
    env.cmd()
        .args(["watch", "--interval", "0"])
        .assert()
        .code(2)
        .stderr(contains(
            "'0' for '--interval <DUR>': \"0\" is no time at all",
        ));
    env.cmd()
        .args(["watch", "--interval", "50ms"])
        .assert()
        .code(2)
        .stderr(contains("--interval must be at least 100ms"));
}

#[test]
fn watch_is_documented() {
    let env = Env::new();
    env.cmd()
        .args(["watch", "--help"])
        .assert()
        .success()
        .stdout(contains("--read-only"))
        .stdout(contains("--interval"))
        .stdout(contains("--batch"));
}
