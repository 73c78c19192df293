//! The dashboard's counts, pace and status filter in a real terminal, at
//! 80×24 and 120×40, on a Japanese and an ASCII batch filled by real runs:
//! the header's ✓ ✗ … are what `status --json` calls finished, failed and
//! to do; a run that stepped down does not hide the run that did work; an
//! idle batch shows no ETA; `s` lists the items that succeeded with
//! nothing, `S` goes back to the failed ones at once.

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::Env;
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");
const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

/// Key prefix → what the worker does: `d` a result, `e` nothing (outcome
/// `empty`), `m` quarantined, `r` the retry tier.
const WORKER: &str = r#"cat >/dev/null
case "$NIGHTSHIFT_KEY" in
  d*) echo '{"ok":1}' ;;
  e*) ;;
  m*) echo '{"error_class":"BadInput","transient":false,"message":"no"}' >&2; exit 1 ;;
  r*) exit 75 ;;
esac"#;

struct Lang {
    batch: &'static str,
    /// (key, label)
    items: &'static [(&'static str, &'static str)],
}

const JAPANESE: Lang = Lang {
    batch: "記事",
    items: &[
        ("d1", "ブログ:技術記事:記事01"),
        ("d2", "ブログ:日記:記事02"),
        ("e1", "ブログ:お知らせ:空の記事🎉"),
        ("e2", "ブログ:café:e\u{301}te\u{301}"),
        ("m1", "ブログ:技術記事:記事05"),
        ("r1", "ブログ:技術記事:記事06"),
    ],
};

const ASCII: Lang = Lang {
    batch: "articles",
    items: &[
        ("d1", "blog:tech:post-01"),
        ("d2", "blog:diary:post-02"),
        ("e1", "blog:news:empty-one"),
        ("e2", "blog:news:empty-two"),
        ("m1", "blog:tech:post-05"),
        ("r1", "blog:tech:post-06"),
    ],
};

fn lines(items: &[(&str, &str)]) -> String {
    items
        .iter()
        .map(|(k, l)| format!("{}\n", serde_json::json!({"key": k, "label": l})))
        .collect()
}

/// One run that did work (exit 1: failures), two items added after it,
/// then a run that found the batch paused and stepped down.
fn store(lang: &Lang) -> Env {
    let env = Env::new();
    env.script("w.sh", WORKER);
    env.config(&format!(
        "[batch.\"{}\"]\nworker = [\"./w.sh\"]\nretries = 0\n",
        lang.batch
    ));
    env.write("items.jsonl", &lines(lang.items));
    env.run(&["add", lang.batch, "items.jsonl"]).code(0);
    env.run(&["run", lang.batch]).code(1);
    env.write("more.jsonl", &lines(&[("p1", "p1"), ("p2", "p2")]));
    env.run(&["add", lang.batch, "more.jsonl"]).code(0);
    env.run(&["pause", lang.batch, "--reason", "見直し"])
        .code(0);
    env.run(&["run", lang.batch]).code(0);
    env.run(&["unpause", lang.batch]).code(0);
    env
}

fn row_of<'a>(screen: &'a str, text: &str) -> &'a str {
    screen.lines().find(|l| l.contains(text)).unwrap_or("")
}

#[test]
fn counts_pace_and_the_outcome_filter_on_screen() {
    for lang in [&JAPANESE, &ASCII] {
        let env = store(lang);
        let status = env.status();
        let b = &status["batches"][0];
        assert_eq!(b["name"], lang.batch);
        let n = |f: &str| b[f].as_i64().unwrap();
        assert_eq!((n("finished"), n("failed"), n("to_do")), (4, 2, 2), "{b}");
        assert_eq!(b["last_run"]["state"], "failed", "{b}");
        assert_eq!(b["stepped_down"]["state"], "paused", "{b}");
        for size in SIZES {
            let what = format!("{} at {}×{}", lang.batch, size.0, size.1);
            // No "since you last looked" over the screen.
            let _ = std::fs::remove_dir_all(env.path("state"));
            let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], size);
            let screen = dash.wait_for(&what, |s| pty::loaded(s) && s.contains("#2 paused"));
            // Finished, failed, to do: the retry tier once, in ✗ only.
            let tabs = &screen.lines().nth(1).unwrap_or_default();
            assert!(
                tabs.contains(&format!("{} 50% ✓4 ✗2 …2", lang.batch)),
                "{what}: {tabs:?}\n{screen}"
            );
            let table_row = row_of(&screen, &format!("│{}", lang.batch));
            assert_eq!(
                table_row
                    .split_whitespace()
                    .skip(1)
                    .take(5)
                    .collect::<Vec<_>>(),
                ["2", "0", "4", "2", "(1·1)"],
                "{what}: {table_row:?}"
            );
            let progress = row_of(&screen, "│progress");
            assert!(
                progress.contains("4/8 finished: 2 done · 2 empty · 0 skipped"),
                "{what}: {progress:?}"
            );
            let rate = row_of(&screen, "│rate");
            assert!(rate.contains("no ETA: no run"), "{what}: {rate:?}");
            assert!(
                row_of(&screen, "│last run").contains("#1 failed"),
                "{what}:\n{screen}"
            );
            assert!(
                row_of(&screen, "│then").contains("#2 paused"),
                "{what}:\n{screen}"
            );

            // Items: `s` steps to the empty ones (after pending, claimed, done).
            dash.key("3");
            for _ in 0..4 {
                dash.key("s");
            }
            // The title changes at the key; the rows come with the next
            // poll: wait for them.
            let empty_keys: Vec<&str> = lang
                .items
                .iter()
                .map(|(k, _)| *k)
                .filter(|k| k.starts_with('e'))
                .collect();
            dash.wait_for(&format!("{what}: the empty items"), |s| {
                s.contains("status: empty")
                    && s.contains("of 2")
                    && empty_keys
                        .iter()
                        .all(|key| row_of(s, &format!("│{key} ")).contains("done/empty"))
            });
            dash.key("\x1b");
            dash.wait_text("status: all");
            dash.key("S");
            dash.wait_for(&format!("{what}: the failed items"), |s| {
                s.contains("status: failed")
                    && row_of(s, "│m1 ").contains("failed/manual")
                    && row_of(s, "│r1 ").contains("failed/retry")
            });
            dash.key("q");
            assert_eq!(dash.wait_exit(), 0, "{what}");
        }
    }
}
