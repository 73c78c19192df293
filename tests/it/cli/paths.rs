//! A store and config given by relative paths (`NIGHTSHIFT_DB=nightshift.db`,
//! as in a crontab line run from the data directory).

use crate::support as common;

use common::Env;

#[test]
fn a_relative_store_runs_workers_beside_its_config() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.write("nightshift.toml", "[batch.b]\nworker = [\"./w.sh\"]\n");
    env.add_items("b", 3);
    env.cmd()
        .env("NIGHTSHIFT_DB", "nightshift.db")
        .args(["run", "b"])
        .assert()
        .success();
    let status = env.status();
    assert_eq!(status["batches"][0]["done"], 3, "{status}");
}
