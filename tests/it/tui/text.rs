//! Text on the real screen: the real binary in a pseudo-terminal, on a
//! store filled by a real run whose worker fails some items with a long
//! error, in Japanese (with emoji and combining marks) and in ASCII, at
//! 80×24 and 120×40. Labels are never cut to nothing, wrapped text loses
//! no character, every cut ends in `…`, and fast keys from an item's
//! detail open the next item instead of leaving it loading.

use crate::support as common;
use crate::support::pty;

use std::path::Path;

use common::Env;
use pty::Dash;

const BIN: &str = env!("CARGO_BIN_EXE_nightshift");
const ENTER: &str = "\r";
const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

/// One language's store: items (category, slug, title, fails) and the
/// error the worker gives the failing ones.
struct Lang {
    name: &'static str,
    site: &'static str,
    items: &'static [(&'static str, &'static str, bool)],
    error: &'static str,
}

const JAPANESE: Lang = Lang {
    name: "Japanese",
    site: "ブログ",
    items: &[
        ("技術記事", "記事01", true),
        ("日記", "記事02", false),
        ("技術記事", "記事03", true),
        ("お知らせ", "記事04", false),
        ("絵文字", "お祝い🎉🎊", true),
        ("café", "e\u{301}te\u{301}", false),
    ],
    error: "投稿に失敗しました：サーバーが応答しません（503）。しばらくしてから再度お試しください。\
            認証トークンの有効期限が切れている可能性があります。管理画面で再ログインしてください🙇 \
            詳細はログを参照（e\u{301}chec）",
};

const ASCII: Lang = Lang {
    name: "ASCII",
    site: "blog",
    items: &[
        ("tech", "post-01", true),
        ("diary", "post-02", false),
        ("tech", "post-03", true),
        ("news", "post-04", false),
        ("tech", "post-05", true),
        ("news", "post-06", false),
    ],
    error: "upstream answered 503 Service Unavailable while posting the article; the session \
            token may have expired, so log in again from the admin console and retry the request \
            (code E503, see the log for details)",
};

/// An item of the store: key, label, whether it failed.
struct Item {
    key: String,
    label: String,
    fails: bool,
}

/// The store, filled through the CLI and one real run.
fn store(lang: &Lang) -> (Env, Vec<Item>) {
    let env = Env::new();
    let lines: String = lang
        .items
        .iter()
        .map(|(category, slug, fails)| {
            format!(
                "{}\n",
                serde_json::json!({
                    "site": lang.site,
                    "category": category,
                    "slug": slug,
                    "title": format!("{slug} 🎉 café"),
                    // A page longer than 120×40 shows, to scroll.
                    "tags": ["一", "二", "三", "四", "五", "六", "七", "八", "九", "十"],
                    "fail": fails,
                })
            )
        })
        .collect();
    let file = env.write("items.jsonl", &lines);
    env.cmd()
        .args(["add", "blogs", "--key-fields", "site,category,slug"])
        .arg(file)
        .assert()
        .success();
    let failure = serde_json::json!({
        "error_class": "PostError",
        "transient": false,
        "message": lang.error,
    });
    let worker = env.script(
        "worker.sh",
        &format!(
            "if grep -q '\"fail\": *true'; then printf '%s\\n' '{failure}' >&2; exit 1; fi\n\
             echo '{{\"ok\":true}}'"
        ),
    );
    let out = env
        .cmd()
        .args(["run", "blogs", "--"])
        .arg(worker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let listed = env
        .cmd()
        .args(["items", "blogs", "--json"])
        .output()
        .unwrap();
    let items = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            Item {
                key: v["key"].as_str().unwrap().to_string(),
                label: v["label"].as_str().unwrap().to_string(),
                fails: v["status"] == "failed",
            }
        })
        .collect::<Vec<_>>();
    assert_eq!(items.len(), lang.items.len());
    assert_eq!(
        items.iter().filter(|i| i.fails).count(),
        lang.items.iter().filter(|i| i.2).count()
    );
    (env, items)
}

fn open(env: &Env, size: (u16, u16)) -> Dash {
    // No "since you last looked" from the size before.
    let _ = std::fs::remove_dir_all(env.dir.path().join("state"));
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], size);
    dash.wait_loaded();
    dash.key("3");
    // The rows are there (the title counts them) before keys move in them.
    dash.wait_for("the items", |s| {
        s.contains("Items · blogs") && s.contains(" · 1 of ")
    });
    dash
}

/// The rows of the pane (inside its borders), trailing spaces removed.
fn pane_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter_map(|l| l.strip_prefix('│'))
        .filter_map(|l| l.strip_suffix('│'))
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// The key column's text for an item: a prefix of the key and `…`.
fn shown_key(key: &str, cols: u16) -> String {
    let keep = if cols >= 120 { 12 } else { 8 };
    format!("{}…", &key[..keep])
}

fn no_space(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[test]
fn item_lists_show_the_whole_label_and_every_cut_ends_in_an_ellipsis() {
    for lang in [&JAPANESE, &ASCII] {
        let (env, items) = store(lang);
        for size in SIZES {
            let what = format!("{} at {}×{}", lang.name, size.0, size.1);
            let mut dash = open(&env, size);
            let screen = dash.wait_for("the rows", |s| s.contains(&items[0].label));
            let rows = pane_rows(&screen);
            for item in &items {
                let key = shown_key(&item.key, size.0);
                let row = rows
                    .iter()
                    .find(|r| r.starts_with(&key))
                    .unwrap_or_else(|| panic!("{what}: no row for {key}:\n{screen}"));
                assert!(
                    row.contains(&item.label),
                    "{what}: the label {:?} is cut:\n{row}",
                    item.label
                );
                if item.fails {
                    assert!(
                        row.contains("PostError: ") && row.ends_with('…'),
                        "{what}: the error is cut without …:\n{row}"
                    );
                }
            }

            // The run log names the failed items by label too (whole, or
            // at 80 columns a long one cut with `…` beside the message),
            // and cuts its messages with `…`.
            dash.key("5");
            // The pane's title can be drawn a poll before its events (and
            // under load, over the last pane's rows): wait for them.
            let screen = dash.wait_for("the run log's quarantined events", |s| {
                s.contains("Run log")
                    && items.iter().filter(|i| i.fails).all(|i| {
                        let key = shown_key(&i.key, size.0);
                        s.lines()
                            .any(|l| l.contains("quarantined") && l.contains(&key))
                    })
            });
            let rows = pane_rows(&screen);
            for item in items.iter().filter(|i| i.fails) {
                let key = shown_key(&item.key, size.0);
                let row = rows
                    .iter()
                    .find(|r| r.contains("quarantined") && r.contains(&key))
                    .unwrap_or_else(|| {
                        panic!("{what}: no quarantined event of {}:\n{screen}", item.key)
                    });
                let label = row.split(&key).nth(1).unwrap().trim_start();
                let whole = label.starts_with(&format!("{} ", item.label));
                let cut = label.split_once('…').is_some_and(|(head, _)| {
                    head.chars().count() >= 8 && item.label.starts_with(head)
                });
                assert!(whole || (size.0 < 120 && cut), "{what}: {row}");
                assert!(row.ends_with('…'), "{what}: {row}");
            }

            // The batch's last run: its summary whole (wrapped under its
            // label into rows left free), or cut with `…`.
            dash.key("1");
            let screen = dash.wait_text("last run");
            let at = screen.lines().position(|l| l.contains("last run")).unwrap();
            let mut rows = vec![screen.lines().nth(at).unwrap()];
            rows.extend(
                screen
                    .lines()
                    .skip(at + 1)
                    .take_while(|l| l.starts_with(&format!("│{}", " ".repeat(10)))),
            );
            let last_run = rows
                .iter()
                .map(|l| l.trim_start_matches('│').trim_end_matches('│').trim())
                .collect::<Vec<_>>()
                .join(" ");
            assert!(last_run.contains("#1 failed"), "{what}: {last_run}");
            let summary = env.status()["batches"][0]["last_run"]["summary"]
                .as_str()
                .unwrap()
                .to_string();
            assert!(
                last_run.contains(&summary) || last_run.ends_with('…'),
                "{what}: {last_run}"
            );
            // A fresh batch's rate is over the minutes it has, not an hour;
            // under a minute old, the minute's figure is the only one.
            let rate = screen.lines().find(|l| l.contains("│rate ")).unwrap();
            assert!(!rate.contains("last hour"), "{what}: {rate}");
            assert!(!rate.contains("last 1 min"), "{what}: {rate}");
            let windows = rate.matches("last ").count();
            assert!(
                windows == 1
                    || ["last 2 min", "last 3 min"]
                        .iter()
                        .any(|w| rate.contains(w)),
                "{what}: {rate}"
            );
            // The activity window: no older than the store.
            dash.key("2");
            let screen = dash.wait_text("succeeded/min, last ");
            let minutes: u32 = screen
                .split("succeeded/min, last ")
                .nth(1)
                .and_then(|s| s.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert!(
                minutes <= 3,
                "{what}: a fresh store shows {minutes} minutes"
            );
            dash.key("q");
            dash.wait_exit();
        }
    }
}

/// The lines of a detail field (`error`), from its name to the next field
/// or blank line, without the field column.
fn field_text(screen: &str, field: &str) -> String {
    let rows = pane_rows(screen);
    let start = rows
        .iter()
        .position(|r| r.starts_with(&format!("{field:<10}")))
        .unwrap_or_else(|| panic!("no {field} in\n{screen}"));
    let mut text = rows[start][10..].to_string();
    for row in &rows[start + 1..] {
        match row.strip_prefix("          ") {
            Some(more) if !more.starts_with(' ') && !more.is_empty() => text.push_str(more),
            _ => break,
        }
    }
    text
}

#[test]
fn the_item_detail_wraps_by_width_and_drops_nothing() {
    for lang in [&JAPANESE, &ASCII] {
        let (env, items) = store(lang);
        for size in SIZES {
            let what = format!("{} at {}×{}", lang.name, size.0, size.1);
            let mut dash = open(&env, size);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    dash.key("j");
                }
                if !item.fails {
                    continue;
                }
                dash.key(ENTER);
                let screen = dash.wait_for("the detail", |s| {
                    s.contains(&format!("key       {}", item.key)) && s.contains("error     ")
                });
                let error = field_text(&screen, "error");
                assert_eq!(
                    no_space(&error),
                    no_space(&format!("PostError: {}", lang.error)),
                    "{what}: characters lost in the wrapped error:\n{screen}"
                );
                assert_eq!(field_text(&screen, "label"), item.label, "{what}");
                // The title names the item by its label.
                let title = screen.lines().nth(2).unwrap();
                assert!(title.contains(&item.label), "{what}: {title}");
                dash.key("\x1b");
                dash.wait_for("the list again", |s| s.contains("LAST ERROR"));
            }
            dash.key("q");
            dash.wait_exit();
        }
    }
}

#[test]
fn fast_keys_from_an_item_detail_open_the_next_item() {
    for lang in [&JAPANESE, &ASCII] {
        let (env, items) = store(lang);
        for size in SIZES {
            let what = format!("{} at {}×{}", lang.name, size.0, size.1);
            let mut dash = open(&env, size);
            let detail_of = |dash: &Dash, item: &Item| {
                dash.wait_for(&format!("{what}: the detail of {}", item.label), |s| {
                    s.contains(&format!("key       {}", item.key)) && !s.contains("loading…")
                })
            };
            dash.key(ENTER);
            detail_of(&dash, &items[0]);
            // Esc, ↓, Enter pressed quickly: one read of `ESC ESC [ B CR`.
            dash.keys_at_once("\x1b\x1b[B\r");
            let screen = detail_of(&dash, &items[1]);
            assert!(
                screen.contains("· blogs ·"),
                "{what}: the batch changed:\n{screen}"
            );
            // And back up: Esc, ↑, Enter.
            dash.keys_at_once("\x1b\x1b[A\r");
            detail_of(&dash, &items[0]);
            // Esc and Enter at once reopen the same item (scrolled back to
            // its top), with its data, not "loading…".
            dash.key("\x1b[6~");
            dash.wait_for("scrolled", |s| !s.contains("lines 1–"));
            dash.keys_at_once("\x1b\r");
            let screen = dash.wait_for(&format!("{what}: reopened"), |s| {
                s.contains("lines 1–") && s.contains(&items[0].label) && !s.contains("loading…")
            });
            assert!(
                screen.contains(&format!("key       {}", items[0].key)),
                "{what}:\n{screen}"
            );
            dash.key("q");
            dash.wait_exit();
        }
    }
}

/// A retry-after hold on screen: a real run's worker answered one item
/// (with a label in the store's language) with `retry_after_s: 30000`; the
/// batch row says `held`, its detail until when (the hold clamped to
/// `max_hold`, an hour) and by which item, named by its label with its
/// key beside it, cut with `…` to the pane's key width. In a limit pool
/// the same answer holds the pool too: said once, as the pool's, naming
/// the item alike (it said the hold twice, the pool's by a bare key).
#[test]
fn the_batch_detail_shows_a_retry_after_hold_and_whose_it_is() {
    for (lang, pooled) in [(&JAPANESE, false), (&ASCII, false), (&JAPANESE, true)] {
        let (env, _) = store(lang);
        let label = format!("{}:{}:{}", lang.site, lang.items[0].0, "429");
        let line = serde_json::json!({
            "site": lang.site, "category": lang.items[0].0, "slug": "429", "limited": true,
        });
        let file = env.write("limited.jsonl", &format!("{line}\n"));
        env.cmd()
            .args(["add", "blogs", "--key-fields", "site,category,slug"])
            .arg(file)
            .assert()
            .success();
        // No immediate retry: it would wait out the hour at the gate.
        let pool = if pooled {
            "[limit.api]\nrequests = \"100/min\"\n[batch.blogs]\nlimit = \"api\"\n"
        } else {
            "[batch.blogs]\n"
        };
        env.write("nightshift.toml", &format!("{pool}retries = 0\n"));
        let worker = env.script(
            "limited.sh",
            r#"echo '{"error_class":"RateLimitError","transient":true,"message":"429","retry_after_s":30000}' >&2
exit 75"#,
        );
        let out = env
            .cmd()
            .args(["run", "blogs", "--"])
            .arg(worker)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let status: serde_json::Value = serde_json::from_slice(
            &env.cmd()
                .args(["status", "--json"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let batch = &status["batches"][0];
        assert_eq!(batch["hold_label"], label.as_str());
        let key = batch["hold_by"].as_str().unwrap().to_string();
        let until = chrono::DateTime::parse_from_rfc3339(batch["hold_until"].as_str().unwrap())
            .unwrap()
            .timestamp_millis();
        let now = nightshift::util::time::now_ms();
        assert!(
            until > now + 3_500_000 && until <= now + 3_600_000,
            "clamped to an hour"
        );
        let clock = nightshift::util::time::utc_clock(until, now);
        // The text view names the item by its key with its label beside it.
        let text = env.cmd().arg("status").output().unwrap();
        let text = String::from_utf8(text.stdout).unwrap();
        assert!(
            text.contains(&format!(
                "  held until {clock} by a retry-after from {key} ({label}); "
            )),
            "{}: {text}",
            lang.name
        );
        // Its pool's line names the item alike.
        assert_eq!(
            text.contains(&format!(
                "; held until {clock} (a retry-after from {key} ({label}) of blogs)"
            )),
            pooled,
            "{}: {text}",
            lang.name
        );
        for size in SIZES {
            let what = format!("{} at {}×{}", lang.name, size.0, size.1);
            let _ = std::fs::remove_dir_all(env.dir.path().join("state"));
            let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], size);
            let from = format!(
                "by a retry-after from {label} ({})",
                shown_key(&key, size.0)
            );
            let screen = dash.wait_for(&format!("{what}: the hold"), |s| s.contains(&from));
            assert_eq!(screen.matches("HELD until").count(), 1, "{what}:\n{screen}");
            assert_eq!(
                screen.contains(&format!("HELD until {clock}")) && screen.contains("by pool api:"),
                pooled,
                "{what}:\n{screen}"
            );
            // The time left as the screen was drawn, by the dashboard's rule
            // (whole minutes from the middle of the drawing's minute, `1h0m`
            // past the hour): as it reads now or up to two minutes earlier
            // (a loaded machine draws it a while before this reads the clock).
            let now = nightshift::util::time::now_ms();
            let lefts: Vec<String> = (0..=2)
                .map(|k| nightshift::util::time::relative_by_minute(until, now - k * 60_000))
                .collect();
            assert!(
                lefts
                    .iter()
                    .any(|left| screen.contains(&format!("HELD until {clock} ({left})"))),
                "{what}: no time ({lefts:?}):\n{screen}"
            );
            let row = screen
                .lines()
                .find(|l| l.contains("│blogs"))
                .unwrap_or_else(|| panic!("{what}: no batch row:\n{screen}"));
            assert!(
                row.trim_end_matches('│').trim_end().ends_with("held"),
                "{what}: {row}"
            );
            dash.key("q");
            dash.wait_exit();
        }
    }
}

/// Halfwidth katakana with sound marks (`ｶﾞｷﾞｸﾞ`, common in business data)
/// on the real screen: the detail's title keeps the whole key and its
/// `)` (one cell was lost per mark, with no `…`), as ratatui and the
/// terminal now measure the text alike.
#[test]
fn halfwidth_sound_marks_leave_the_detail_title_whole() {
    let env = Env::new();
    let lines = "{\"key\":\"abcdef\",\"label\":\"ｶﾞｷﾞｸﾞ test\"}\n";
    let file = env.write("kana.jsonl", lines);
    env.run(&["add", "example", file.to_str().unwrap()]).code(0);
    for size in SIZES {
        let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], size);
        dash.wait_loaded();
        dash.key("3");
        dash.wait_for("the item", |s| s.contains("abcdef pending"));
        dash.key(ENTER);
        let screen = dash.wait_for("the detail", |s| s.contains("Esc back"));
        let title = screen.lines().find(|l| l.contains("Esc back")).unwrap();
        assert!(
            title.contains("ガギグ test (abcdef) · example"),
            "{size:?}: {title}"
        );
    }
}

/// The rows of the box whose top border names `title`, borders included,
/// up to its bottom border.
fn boxed_rows<'a>(screen: &'a str, title: &str) -> Vec<&'a str> {
    screen
        .lines()
        .skip_while(|l| !l.starts_with(&format!("┌ {title} ─")))
        .skip(1)
        .take_while(|l| !l.starts_with('└'))
        .collect()
}

/// The reasons the wrapping tests pause a batch with, and the text each
/// ends with: one whose `ー` fell at the start of a row, one whose family
/// emoji (a ZWJ sequence: one grapheme) fell across two.
fn long_reasons() -> [(String, &'static str); 2] {
    [
        (format!("{}ーです", "漢".repeat(29)), "ーです"),
        (
            format!("{}{FAMILY}{}", "あ".repeat(27), "い".repeat(10)),
            "いいいいいいいいい (",
        ),
    ]
}

const FAMILY: &str = "👨\u{200d}👩\u{200d}👧";

/// A store whose batch `b` is paused with `reason`.
fn paused(reason: &str) -> Env {
    let env = Env::new();
    common::add_keys(&env, "b", &["k1"]);
    env.run(&["pause", "b", "--reason", reason]).code(0);
    env
}

/// Checks the rows of the batch detail's box: each keeps both borders
/// (and, with `width`, fills the terminal's width exactly), none starts
/// with what Japanese line breaking keeps off a row's start or with a
/// piece of an emoji ZWJ sequence, and the pause reason is all there.
fn check_detail(screen: &str, reason: &str, width: Option<usize>) {
    let rows = boxed_rows(screen, "b");
    assert!(!rows.is_empty(), "{screen}");
    for row in &rows {
        assert!(
            row.starts_with('│') && row.trim_end().ends_with('│'),
            "a row without its borders: {row:?}\n{screen}"
        );
        if let Some(w) = width {
            assert_eq!(nightshift::util::text::width(row), w, "{row:?}\n{screen}");
        }
    }
    let inside: Vec<&str> = rows
        .iter()
        .map(|r| {
            r.trim_start_matches('│')
                .trim_end()
                .trim_end_matches('│')
                .trim()
        })
        .collect();
    for text in &inside {
        for mark in ["ー", "。", "、", "\u{200d}", "👩", "👧"] {
            assert!(
                !text.starts_with(mark),
                "a row starts with {mark:?}\n{screen}"
            );
        }
    }
    let paused = inside
        .iter()
        .position(|t| t.starts_with("PAUSED — "))
        .unwrap_or_else(|| panic!("{screen}"));
    let joined: String = inside[paused..].concat();
    assert!(joined.contains(&format!("PAUSED — {reason} (")), "{screen}");
}

/// The batch detail wraps a long pause reason as the item detail wraps
/// its text (`text::wrap`: by grapheme and display width, with Japanese
/// line breaking): no row starts with `ー`, and every row keeps the box's
/// borders. It wrapped by code point, and `ー` began a row.
#[test]
fn the_batch_detail_wraps_a_long_reason_as_the_item_detail_does() {
    let (reason, tail) = &long_reasons()[0];
    let env = paused(reason);
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
    let screen = dash.wait_for("the reason", |s| s.contains(tail));
    check_detail(&screen, reason, None);
    dash.key("q");
    dash.wait_exit();
}

/// The same in tmux, which draws an emoji ZWJ sequence as the one
/// grapheme of two cells it is (`vt100` draws its emoji apart): the
/// family stays whole on one row and every row of the box is 80 cells,
/// its borders in place. Split by code point, it took the left border
/// with it and left a stray `─`.
#[test]
fn the_batch_detail_keeps_an_emoji_sequence_whole_and_the_box_intact_in_tmux() {
    require!(crate::support::require::Tool::Tmux);
    for (reason, tail) in long_reasons() {
        let env = paused(&reason);
        let tmux = common::tmux::Tmux::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
        let screen = tmux.wait_for("the reason", |s| s.contains(tail));
        check_detail(&screen, &reason, Some(80));
    }
}

/// Backspace in the pause prompt and the search box takes back the last
/// character as the screen shows it: a whole grapheme, an emoji ZWJ
/// sequence or a letter with its combining mark. It took back one code
/// point: the family lost its last member (`👨‍👩‍` and a dangling
/// joiner were kept as the reason), `é` became `e`, and the search
/// looked for what was no longer on screen, matching nothing.
#[test]
fn backspace_takes_back_a_whole_grapheme_in_the_prompt_and_the_search() {
    const BACKSPACE: &str = "\x7f";
    let env = paused("x");
    env.run(&["unpause", "b"]).code(0);
    let mut dash = Dash::open(Path::new(BIN), env.dir.path(), &env.db, &[], (80, 24));
    dash.wait_loaded();
    dash.key("p");
    dash.wait_text("why?");
    dash.type_text(&format!("停止{FAMILY}"));
    dash.key(BACKSPACE);
    dash.type_text("カフェe\u{301}");
    dash.key(BACKSPACE);
    dash.key(ENTER);
    dash.wait_text("PAUSED — 停止カフェ (");
    let status = env.run(&["status", "--json"]).json();
    assert_eq!(status["batches"][0]["paused_reason"], "停止カフェ");
    dash.key("3");
    dash.wait_text(" · 1 of 1");
    dash.key("/");
    dash.type_text(&format!("k1{FAMILY}"));
    dash.key(BACKSPACE);
    dash.wait_for("k1 found by its search", |s| {
        s.contains("search: \"k1\" · 1 of 1")
    });
    dash.key(ENTER);
    dash.key("q");
    dash.wait_exit();
}
