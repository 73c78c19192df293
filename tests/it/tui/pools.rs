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

/// Every row of `screen` fits `width` (by display width); then quits.
fn fits_then_quit(mut dash: Dash, screen: &str, width: u16, what: &str) {
    for l in screen.lines() {
        assert!(
            nightshift::util::text::width(l) <= width as usize,
            "{what}: {l:?}"
        );
    }
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
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
        fits_then_quit(dash, &screen, size.0, &what);
    }
}

/// A pool with room for a few tokens is full for a batch whose every call
/// reserves more: `tokens = "1000/h"`, a run drew 700 (its
/// `token_estimate`, nothing reported), so the next call of 700 fits only
/// in 24 minutes. Every view says so, by the rule that admits calls: the
/// Pools pane (for the largest call of its batches), `status`, its JSON,
/// the waiting reasons, the dry run and the batch detail; a batch of the
/// same pool whose calls of 200 fit waits for no pool. Every view said
/// the pool had room (`700 / 1,000`, no note; the items waiting only for a
/// runner), judging
/// "full" for a call of one token.
#[test]
fn a_pool_is_full_for_calls_bigger_than_its_room() {
    const SMALL: &str = "見出し";
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null\necho '{\"ok\":1}'");
    env.config(&format!(
        "[limit.\"{POOL}\"]\ntokens = \"1000/h\"\n\n\
         [batch.\"{BATCH}\"]\nworker = [\"./w.sh\"]\nlimit = \"{POOL}\"\ntoken_estimate = 700\n\n\
         [batch.\"{SMALL}\"]\nworker = [\"./w.sh\"]\nlimit = \"{POOL}\"\ntoken_estimate = 200\n"
    ));
    let items: String = (1..=5)
        .map(|i| format!("{{\"key\":\"k{i}\",\"label\":\"記事{i}\"}}\n"))
        .collect();
    env.write("items.jsonl", &items);
    env.run(&["add", BATCH, "items.jsonl"]).code(0);
    env.run(&["add", SMALL, "items.jsonl"]).code(0);
    env.run(&["run", BATCH, "--limit", "1"]).code(0);

    let status = env.status();
    let batch = |name: &str| {
        status["batches"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .cloned()
            .unwrap()
    };
    let waiting = &batch(BATCH)["waiting"][0];
    assert_eq!(
        (&waiting["reason"], &waiting["count"], &waiting["dimension"]),
        (&"rate-limit".into(), &4.into(), &"tokens/h".into()),
        "{status}"
    );
    assert_eq!(
        batch(SMALL)["waiting"][0]["reason"],
        "no-runner",
        "{status}"
    );
    let pool = &status["pools"][0];
    assert_eq!(pool["call_tokens"], 700, "{pool}");
    assert_eq!(pool["limits"][0]["free"], 300, "{pool}");
    assert!(pool["limits"][0]["next_slot"].is_string(), "{pool}");

    let text = env.run(&["status"]).stdout.clone();
    let lines: Vec<&str> = text.lines().collect();
    let under = |name: &str| {
        let at = lines
            .iter()
            .position(|l| *l == format!("{name}:"))
            .unwrap_or_else(|| panic!("no {name} in\n{text}"));
        lines[at + 1].to_string()
    };
    assert!(
        under(BATCH).starts_with(&format!(
            "  pool {POOL}: tokens/h 700/1000 (full for 700-token calls, next slot "
        )),
        "{text}"
    );
    let small = under(SMALL);
    assert!(
        small.starts_with(&format!("  pool {POOL}: tokens/h 700/1000;")),
        "{text}"
    );
    let dry = env.run(&["run", BATCH, "--dry-run"]).stdout.clone();
    assert!(
        dry.contains(&format!("{BATCH}: would wait until "))
            && dry.contains(&format!("for pool {POOL} (tokens/h)")),
        "{dry}"
    );

    for size in [(80, 24), (120, 40)] {
        let what = format!("{}×{}", size.0, size.1);
        let _ = std::fs::remove_dir_all(env.path("state"));
        let mut dash = Dash::open(
            Path::new(BIN),
            env.dir.path(),
            &env.db,
            &["watch", "--batch", BATCH],
            size,
        );
        let screen = dash.wait_for(&what, |s| pty::loaded(s) && s.contains("│waiting"));
        let line = row_of(&screen, "│waiting");
        assert!(
            line.contains("4 pending: waiting for pool"),
            "{what}: {line:?}\n{screen}"
        );
        dash.key("6");
        let screen = dash.wait_for(&what, |s| s.contains("today (UTC)"));
        let tokens = row_of(&screen, "tokens/h ");
        assert!(
            tokens.contains("700 / 1,000  full for 700-token calls"),
            "{what}: {tokens:?}\n{screen}"
        );
        if size.0 == 120 {
            assert!(tokens.contains(", next slot "), "{what}: {tokens:?}");
        }
        fits_then_quit(dash, &screen, size.0, &what);
    }
}

/// A live run whose claims wait for a place in their pool (one request
/// an hour, three slots): the batch detail says so, where it said "2 in
/// flight in another run" while the pool had no call in flight.
#[test]
fn claims_waiting_for_their_pool_are_said_so_on_screen() {
    let env = Env::new();
    env.script("w.sh", "cat >/dev/null\necho '{\"ok\":1}'");
    env.config(
        "[limit.p]\nrequests = \"1/h\"\n\n\
         [batch.a]\nworker = [\"./w.sh\"]\nlimit = \"p\"\nconcurrency = 3\n",
    );
    let items: String = (1..=3).map(|i| format!("{{\"key\":\"k{i}\"}}\n")).collect();
    env.write("items.jsonl", &items);
    env.run(&["add", "a", "items.jsonl"]).code(0);
    let mut run = env.spawn("a", &["run", "a"]);
    common::wait_for("one call done", || env.status()["batches"][0]["done"] == 1);
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (120, 40));
    let screen = dash.wait_for("the claims waiting for the pool", |s| {
        pty::loaded(s) && s.contains("2 claimed, waiting for a place in pool p")
    });
    let line = row_of(&screen, "│waiting");
    assert!(!line.contains("in flight"), "{line:?}\n{screen}");
    // A claimed item's detail names the pool its claim waits for, by the
    // rule of `show` (it said "its pool").
    dash.key("3");
    let mut claims = Vec::new();
    for _ in 0..3 {
        dash.key("\r");
        let screen = dash.wait_for("an item detail", |s| s.contains("│state     "));
        claims.extend(
            screen
                .lines()
                .filter_map(|l| l.split("│claim     ").nth(1))
                .map(|l| l.trim_end_matches('│').trim().to_string()),
        );
        dash.key("\x1b");
        dash.key("j");
    }
    assert!(
        claims
            .iter()
            .any(|c| c.contains("waiting for a place in pool p since")),
        "{claims:#?}"
    );
    dash.key("q");
    assert_eq!(dash.wait_exit(), 0);
    common::signal(run.id(), nix::sys::signal::Signal::SIGINT);
    run.wait().unwrap();
}
