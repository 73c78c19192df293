//! The Pools pane and the waiting reasons in a real terminal, at 80×24
//! and 120×40, on a store a real run filled: a Japanese batch drawing
//! from a Japanese pool whose `requests = "2/h"` the run used up, its
//! worker reporting tokens on stderr. The pool's row shows the full
//! bucket with its next slot, the calls in flight against the
//! concurrency, the tokens per minute and today's tokens; the batch
//! detail says its pending items wait for that pool.

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::Env;
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");
const BATCH: &str = "記事の要約";
const POOL: &str = "本番アカウント";

fn row_of<'a>(screen: &'a str, text: &str) -> &'a str {
    screen.lines().find(|l| l.contains(text)).unwrap_or("")
}

fn store() -> Env {
    let env = Env::new();
    env.script(
        "w.sh",
        "cat >/dev/null\necho '@nightshift usage input_tokens=60 output_tokens=40' >&2\necho '{\"ok\":1}'",
    );
    env.config(&format!(
        "[limit.\"{POOL}\"]\nrequests = [\"2/h\", \"1000/day\"]\ntokens = \"6000/min\"\n\
         concurrency = 4\n\n[batch.\"{BATCH}\"]\nworker = [\"./w.sh\"]\nlimit = \"{POOL}\"\n\
         token_estimate = 100\n"
    ));
    let items: String = (1..=5)
        .map(|i| format!("{{\"key\":\"k{i}\",\"label\":\"記事{i}\"}}\n"))
        .collect();
    env.write("items.jsonl", &items);
    env.run(&["add", BATCH, "items.jsonl"]).code(0);
    // Two calls use up `2/h`; the other three wait for the next slot.
    env.run(&["run", BATCH, "--limit", "2"]).code(0);
    env
}

#[test]
fn the_pools_pane_and_the_waiting_reason_on_screen() {
    let env = store();
    let status = env.status();
    let waiting = &status["batches"][0]["waiting"];
    assert_eq!(waiting[0]["reason"], "rate-limit", "{status}");
    assert_eq!(waiting[0]["count"], 3, "{status}");
    for size in [(80, 24), (120, 40)] {
        let what = format!("{}×{}", size.0, size.1);
        let _ = std::fs::remove_dir_all(env.path("state"));
        let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], size);
        let screen = dash.wait_for(&what, |s| pty::loaded(s) && s.contains("waiting"));
        let line = row_of(&screen, "│waiting");
        let said = format!("3 pending: waiting for pool {POOL}, requests/h, next slot ");
        if size.0 == 80 {
            // Cut by display width, with `…`.
            assert!(
                line.contains("3 pending: waiting for pool"),
                "{what}: {line:?}\n{screen}"
            );
        } else {
            assert!(line.contains(&said), "{what}: {line:?}\n{screen}");
        }
        // The tabs name the key; `6` opens the pane.
        assert!(
            screen.lines().nth(1).unwrap_or("").contains("6 Pools"),
            "{what}\n{screen}"
        );
        dash.key("6");
        let screen = dash.wait_for(&what, |s| s.contains("today (UTC)"));
        let head = row_of(&screen, &format!("▸ {POOL}"));
        assert!(head.contains(BATCH), "{what}: {head:?}\n{screen}");
        let requests = row_of(&screen, "requests/h ");
        assert!(
            requests.contains("2 / 2  full, next slot "),
            "{what}: {requests:?}\n{screen}"
        );
        assert!(
            row_of(&screen, "requests/day").contains("2 / 1,000"),
            "{what}\n{screen}"
        );
        assert!(
            row_of(&screen, "tokens/min").contains("/ 6,000"),
            "{what}\n{screen}"
        );
        assert!(
            row_of(&screen, "in flight").contains("0 / 4"),
            "{what}\n{screen}"
        );
        let spark = row_of(&screen, "tokens drawn");
        assert!(spark.contains('█'), "{what}: {spark:?}\n{screen}");
        let today = row_of(&screen, "today (UTC)");
        assert!(
            today.contains("120 in + 80 out tokens, 2 calls"),
            "{what}: {today:?}\n{screen}"
        );
        for l in screen.lines() {
            assert!(
                nightshift::util::text::width(l) <= size.0 as usize,
                "{what}: {l:?}"
            );
        }
        dash.key("q");
        assert_eq!(dash.wait_exit(), 0);
    }
}
