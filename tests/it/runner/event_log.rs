//! The rolling event log file (`log_dir`) of a process-mode run: its
//! lines are handed to the file's writer in batches, so they must still
//! come while the run goes, and all of them by its end.
#![cfg(unix)]

use crate::support as common;

use common::{add_keys, wait_for};

fn log_text(env: &common::Env) -> String {
    let Ok(dir) = std::fs::read_dir(env.path("logs")) else {
        return String::new();
    };
    dir.map(|f| std::fs::read_to_string(f.unwrap().path()).unwrap_or_default())
        .collect()
}

/// The event lines of `kind` for `key`.
fn lines_of(text: &str, kind: &str, key: &str) -> usize {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["target"] == "nightshift::event" && v["kind"] == kind && v["key"] == key)
        .count()
}

both_backends! {
    fn event_lines_reach_the_file_while_the_run_goes_and_all_by_its_end(env) {
        env.config("log_dir = \"logs\"\n[batch.b]\nconcurrency = 2\n");
        let keys: Vec<String> = (0..50).map(|i| format!("k{i}")).chain(["block".into()]).collect();
        add_keys(&env, "b", &keys.iter().map(String::as_str).collect::<Vec<_>>());
        let go = env.path("go");
        let w = env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\nif [ \"$NIGHTSHIFT_KEY\" = block ]; then\n\
                 while [ ! -e {go} ]; do sleep 0.02; done\nfi\necho '\"ok\"'",
                go = go.display()
            ),
        );
        let mut runner = env.spawn("run", &["run", "b", "--", &w.display().to_string()]);
        // The blocking item holds the run open: its claim is logged before
        // the run ends.
        wait_for("the blocking item's claimed line", || {
            lines_of(&log_text(&env), "claimed", "block") == 1
        });
        std::fs::write(&go, "").unwrap();
        let status = runner.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{:?}", env.output_of("run"));
        let text = log_text(&env);
        assert!(text.ends_with('\n'), "the last line is whole");
        for k in &keys {
            assert_eq!(lines_of(&text, "claimed", k), 1, "{k}");
            assert_eq!(lines_of(&text, "done", k), 1, "{k}");
        }
    }
}
