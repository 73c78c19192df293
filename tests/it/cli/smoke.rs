//! The shortest path through the product: init, add, run, status.

use crate::support as common;

use common::Env;

#[test]
fn add_run_status() {
    let env = Env::new();
    env.add_items("b", 5);
    let worker = env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.cmd()
        .args(["run", "b", "--"])
        .arg(&worker)
        .assert()
        .success();
    let status = env.status();
    assert_eq!(status["batches"][0]["done"], 5);
    assert_eq!(status["batches"][0]["pending"], 0);
}
