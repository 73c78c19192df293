//! `run`'s live progress line on a real terminal (a pseudo-terminal read
//! by `vt100`): claims waiting out a backoff said apart from those running.
#![cfg(unix)]

use crate::support as common;
use common::{pty, signal, wait_for};
use nix::sys::signal::Signal;

both_backends! {
    /// The line counted the runner's in-flight map, which keeps claims
    /// waiting out a backoff: it said `2 running` for the whole backoff
    /// while `status` said they waited to retry. It now counts them by the
    /// rule every view uses, in both worker modes.
    fn the_progress_line_says_claims_waiting_to_retry_apart(env) {
        let flaky = env.script(
            "flaky.sh",
            "cat >/dev/null\n\
             echo '{\"error_class\":\"ConnectionError\",\"transient\":true,\"message\":\"reset\"}' >&2\n\
             exit 75",
        );
        env.write(
            "flaky.py",
            "import json, sys\n\
             for line in sys.stdin:\n    \
                 key = json.loads(line)[\"key\"]\n    \
                 error = {\"error_class\": \"ConnectionError\", \"transient\": True, \"message\": \"reset\"}\n    \
                 print(json.dumps({\"key\": key, \"error\": error}), flush=True)\n",
        );
        let slow = "concurrency = 2\nretries = 1\nbackoff = \"1h\"\nbackoff_max = \"2h\"\n";
        env.config(&format!(
            "[batch.a]\nworker = [\"{}\"]\n{slow}\n\
             [batch.b]\nworker = [\"python3\", \"flaky.py\"]\nmode = \"persistent\"\n{slow}",
            flaky.display()
        ));
        for batch in ["a", "b"] {
            env.add_items(batch, 2);
            let mut dash = pty::Dash::open(&common::bin(), env.dir.path(), &env.db, &["run", batch], (120, 24));
            wait_for("both retry events", || env.events(batch, "retry").len() == 2);
            // (A redraw between the two failures says 1 and 1.)
            dash.wait_text(&format!("{batch}: 0 done, 0 empty, 0 failed, 0 running, 2 waiting to retry, 0 left · "));
            // As `status` counts them at the same time.
            let status = env.batch_status(batch);
            let waiting = status["waiting"].as_array().unwrap();
            assert!(
                waiting.iter().any(|w| w["reason"] == "backoff" && w["count"] == 2),
                "{batch}: {waiting:?}"
            );
            assert!(waiting.iter().all(|w| w["reason"] != "in-flight"), "{batch}: {waiting:?}");
            signal(dash.pid(), Signal::SIGINT);
            dash.wait_exit();
        }
    }
}
