//! A store and config found by their default relative names
//! (`./nightshift.db`, `./nightshift.toml`): the worker must start.

use crate::support as common;

use common::Env;

#[test]
fn worker_runs_when_the_config_is_found_relative_to_the_current_directory() {
    let env = Env::new();
    env.add_items("b", 2);
    env.script("w.sh", "cat >/dev/null; echo '{\"ok\":true}'");
    env.write("nightshift.toml", "[batch.b]\nworker = [\"./w.sh\"]\n");
    env.cmd()
        .env_remove("NIGHTSHIFT_DB")
        .args(["run", "b"])
        .assert()
        .success();
    assert_eq!(env.status()["batches"][0]["done"], 2);
}
