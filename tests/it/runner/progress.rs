//! `run`'s live progress line on a real terminal (a pseudo-terminal read
//! by `vt100`): one row, redrawn in place and fitted to the terminal's
//! width, and claims waiting out a backoff said apart from those running.
#![cfg(unix)]

use crate::support as common;
use nightshift::util::text::width;

use common::{Env, pty, signal, wait_for};
use nix::sys::signal::Signal;

/// 42 cells: with its counts, wider than an 80-column terminal.
const LONG: &str = "夜間バッチ：ブログ記事の自動整形と投稿処理";

/// The screen's rows that hold the progress line (`N done`), trimmed.
fn progress_rows(dash: &pty::Dash) -> Vec<String> {
    dash.rows()
        .into_iter()
        .filter(|r| r.contains(" done, "))
        .map(|r| r.trim_end().to_string())
        .collect()
}

/// The line was written as it came and redrawn with `\r\x1b[2K`: wider
/// than the terminal it wrapped, and each redraw cleared only its second
/// row, so the screen filled with copies of the first. It is now one row,
/// cut to the terminal's width with `…`, and a narrower window after a
/// resize is read at the next redraw.
#[test]
fn the_progress_line_is_one_row_fitted_to_the_terminal() {
    let env = Env::new();
    let marker = format!("ns-progress-{}", std::process::id());
    let w = env.waiting_worker("sleep 30", &marker);
    env.config(&format!(
        "[batch.\"{LONG}\"]\nworker = [\"{w}\"]\nconcurrency = 2\ngrace = \"1s\"\n"
    ));
    env.add_items(LONG, 3);
    let mut dash = pty::Dash::open(
        &common::bin(),
        env.dir.path(),
        &env.db,
        &["run", LONG],
        (80, 24),
    );
    wait_for("both workers", || env.started("k1") && env.started("k2"));
    dash.wait_text("2 running");
    // Several redraws (one each half second).
    std::thread::sleep(std::time::Duration::from_millis(1600));
    let rows = progress_rows(&dash);
    assert_eq!(
        rows.len(),
        1,
        "one row, redrawn in place:\n{}",
        dash.screen()
    );
    let row = &rows[0];
    // The name gives way to the counts.
    assert!(row.starts_with("夜間バッ") && width(row) < 80, "{row}");
    assert!(
        row.contains("…: 0 done, 0 empty, 0 failed, 2 running, 1 left · "),
        "{row}"
    );
    assert_eq!(
        dash.rows().iter().filter(|r| r.contains("夜間")).count(),
        1,
        "{}",
        dash.screen()
    );

    // Narrower: the next redraws fit 60 columns.
    dash.resize(60, 24);
    dash.wait_for("a line fitted to 60 columns", |_| {
        progress_rows(&dash)
            .iter()
            .any(|r| r.ends_with('…') && width(r) < 60 && r.contains("2 running"))
    });
    signal(dash.pid(), Signal::SIGINT);
    dash.wait_exit();
    common::assert_no_process_left(&marker);
}

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

    /// A pool held by another batch's retry-after: the run's claims wait
    /// for the hold, which `status` says (`2 held until T (retry-after for
    /// pool P)`), but the line said `2 waiting for a place in its pool`,
    /// as if the pool were short of places, and not until when. It now
    /// says them held, and the hold in `status`'s words, with the pool's
    /// Japanese name whole.
    fn the_progress_line_says_a_pool_held_by_a_retry_after(env) {
        common::away_from_midnight();
        let w = env.script(
            "w.sh",
            "cat >/dev/null\n\
             if [ \"$NIGHTSHIFT_BATCH\" = a ]; then\n  \
               echo '{\"error_class\":\"RateLimitError\",\"transient\":true,\"retry_after_s\":3600}' >&2; exit 75\n\
             fi\n\
             echo '{\"ok\":1}'\n",
        );
        env.config(&format!(
            "[limit.\"本番アカウント\"]\nrequests = \"1000/min\"\n\n\
             [batch.a]\nworker = [\"{w}\"]\nlimit = \"本番アカウント\"\nretries = 0\n\n\
             [batch.b]\nworker = [\"{w}\"]\nlimit = \"本番アカウント\"\nconcurrency = 2\n",
            w = w.display()
        ));
        env.add_items("a", 1);
        env.run(&["run", "a"]);
        let until = env.status()["pools"][0]["hold_until"].as_str().unwrap_or_else(|| panic!("no hold")).to_string();
        let clock = &until[11..19];
        env.add_items("b", 2);
        let mut dash = pty::Dash::open(&common::bin(), env.dir.path(), &env.db, &["run", "b"], (140, 24));
        let screen = dash.wait_text("b: 0 done, 0 empty, 0 failed, 0 running, 2 held, 0 left · ");
        let row = progress_rows(&dash).join("\n");
        assert!(
            row.contains(" · held until ") && row.ends_with(&format!("{clock}Z (retry-after for pool 本番アカウント)")),
            "{screen}"
        );
        assert!(!row.contains("waiting for a place"), "{screen}");
        // As `status` says them at the same time.
        let text = env.run(&["status", "b"]).code(0).stdout.clone();
        assert!(text.contains("2 held until ") && text.contains(&format!("{clock}Z (retry-after for pool 本番アカウント)")), "{text}");
        signal(dash.pid(), Signal::SIGINT);
        dash.wait_exit();
    }
}
