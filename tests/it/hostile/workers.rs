//! Hostile input to every parser that reads text from users or workers:
//! JSON-lines import, the config file, the worker's structured error line,
//! the `@nightshift` stderr channel (op ids, cost), and the persistent-worker
//! protocol. Property tests (proptest, a few thousand cases, seconds): no
//! panic, and whatever is kept is bounded and inert. Plus the real binary
//! and real workers for what only shows end to end: a huge line, an op-id
//! flood, a persistent worker that never ends its line.
#![cfg(unix)]

use crate::support as common;

use std::path::Path;
use std::time::Duration;

use nightshift::config::{BATCH_FIELDS, Config};
use nightshift::key::{self, KeySpec, MAX_KEY_LEN};
use nightshift::runner::child::output::{self, MAX_OP_IDS, StderrLine};
use nightshift::runner::child::persistent::{self, Call, Line, Persistent, Request};
use nightshift::runner::classify::{self, Answer, MAX_MESSAGE, Rules};
use nightshift::runner::cost::{Cost, MAX_COST};
use nightshift::util::sanitize;
use proptest::prelude::*;
use serde_json::Value;

use common::{Env, ran};

/// Text a terminal would act on (what `sanitize::line` must remove).
fn dangerous(s: &str) -> bool {
    s.chars().any(|c| {
        c.is_control()
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    })
}

/// The most characters one character becomes once made inert (`\u{2069}`).
const ESCAPED: usize = 8;

/// Hostile fragments mixed into generated text.
const NASTY: &[&str] = &[
    "\x1b[2J",
    "\x1b]52;c;aGk=\x07",
    "\x1bP1$r\x1b\\",
    "\u{9b}31m",
    "\u{202e}",
    "\u{2066}",
    "\0",
    "\x07",
    "\x08",
    "\r",
    "\n",
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    "\\u0000",
    "\\ud800",
    "@nightshift ",
    "op_id=",
    "cost=",
    "1e999",
    "-0",
    "NaN",
    "\u{feff}",
    "𝕏",
];

/// Strings built from arbitrary text and hostile fragments.
fn hostile_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => any::<String>(),
            2 => prop::sample::select(NASTY).prop_map(str::to_string),
            1 => "[a-z_]{1,8}",
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

/// Arbitrary JSON values, nested a few levels, with hostile strings.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        hostile_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    hostile_string(),
                    prop::sample::select(vec![
                        "key",
                        "label",
                        "error_class",
                        "transient",
                        "message",
                        "retry_after_s",
                        "cost",
                        "result",
                        "error",
                        "op_id",
                        "site",
                        "slug",
                    ])
                    .prop_map(str::to_string),
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// JSON text, sometimes damaged: a slice replaced by hostile text.
fn json_text() -> impl Strategy<Value = String> {
    (
        json_value(),
        any::<bool>(),
        any::<usize>(),
        hostile_string(),
    )
        .prop_map(|(value, damage, at, junk)| {
            let text = value.to_string();
            if !damage {
                return text;
            }
            let mut cut = at % (text.len() + 1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}{junk}{}", &text[..cut], &text[cut..])
        })
}

proptest! {
    // 300 cases each by default (seconds); PROPTEST_CASES=N for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(300),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// A JSON line becomes an item or an error, never a panic; an item's key
    /// is bounded and free of control characters, its payload is the line.
    #[test]
    fn import_lines_never_panic(text in json_text(), fields in prop::collection::vec("[a-z]{1,5}|key|site|slug", 0..3)) {
        for spec in [KeySpec::Explicit, KeySpec::from_fields(Some(&fields))] {
            match key::derive_line(&text, &spec) {
                Ok(item) => {
                    prop_assert!(!item.key.is_empty());
                    prop_assert!(item.key.chars().count() <= MAX_KEY_LEN.max(32));
                    prop_assert!(!item.key.chars().any(char::is_control), "{:?}", item.key);
                    prop_assert_eq!(item.payload.as_str(), text.trim());
                    // What `add` accepted, the store and every reader can parse.
                    prop_assert!(serde_json::from_str::<Value>(&item.payload).is_ok());
                }
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }

    /// Any text as a config: parsed or refused with a message naming the
    /// file, never a panic.
    #[test]
    fn config_text_never_panics(text in config_text()) {
        let file = Path::new("/x/nightshift.toml");
        if let Err(e) = Config::parse(&text, file) {
            let msg = e.to_string();
            prop_assert!(msg.contains("nightshift.toml"), "{msg}");
        }
    }

    /// The structured error line: any stderr line parses or is ignored;
    /// what it yields is bounded once classified.
    #[test]
    fn error_lines_never_panic(line in json_text()) {
        if let Some(e) = classify::parse_error_line(&line) {
            if let Some(r) = e.retry_after {
                prop_assert!(r <= classify::MAX_RETRY_AFTER);
            }
            prop_assert!(sane(&e.cost), "{:?}", e.cost);
        }
        let bounded = classify::bound_message(&line);
        prop_assert!(bounded.chars().count() <= MAX_MESSAGE + 1);
        prop_assert!(!dangerous(&bounded), "{bounded:?}");
    }

    /// The `@nightshift` channel: an op id that is kept is one a worker can
    /// get back in its environment.
    #[test]
    fn stderr_markers_never_panic(rest in hostile_string(), op in hostile_string()) {
        for line in [rest.clone(), format!("@nightshift {rest}"), format!("@nightshift op_id={op}"), format!("@nightshift cost={rest}"), format!("@nightshift usage {rest}")] {
            match output::parse_stderr_line(&line) {
                StderrLine::OpId(id) => {
                    prop_assert!(!id.is_empty() && id.len() <= 1024);
                    prop_assert!(!id.chars().any(char::is_control), "{id:?}");
                }
                StderrLine::Cost(c) => prop_assert!(sane(&c), "{c:?}"),
                StderrLine::Usage(u) => prop_assert!(usage_sane(&u), "{u:?}"),
                StderrLine::BadMarker | StderrLine::Text => {}
            }
        }
    }

    /// A persistent worker's answer object: a verdict, never a panic; a
    /// failure's class and message are bounded and inert.
    #[test]
    fn persistent_answers_never_panic(value in json_value(), class in hostile_string()) {
        let rules = Rules { transient_exit_codes: vec![75], transient_error_classes: vec![class] };
        let mut objects = Vec::new();
        if let Value::Object(obj) = &value {
            objects.push(obj.clone());
        }
        objects.push(serde_json::Map::from_iter([("error".to_string(), value.clone())]));
        objects.push(serde_json::Map::from_iter([("result".to_string(), value.clone()), ("cost".to_string(), value.clone())]));
        for obj in &objects {
            match classify::answer(obj, None, &rules) {
                Answer::Failed { class, message, retry_after, .. } => {
                    prop_assert!(class.chars().count() <= MAX_MESSAGE + 1);
                    prop_assert!(message.chars().count() <= MAX_MESSAGE + 1);
                    prop_assert!(!dangerous(&class) && !dangerous(&message), "{class:?} {message:?}");
                    prop_assert!(retry_after.is_none_or(|r| r <= classify::MAX_RETRY_AFTER));
                }
                Answer::Done { result, cost, .. } => {
                    if let Some(r) = result {
                        prop_assert!(serde_json::from_str::<Value>(&r).is_ok());
                    }
                    prop_assert!(cost.is_none_or(|c| (0.0..=MAX_COST).contains(&c)), "{cost:?}");
                }
            }
        }
    }

    /// A persistent worker's stdout line: a protocol line, a stray or an
    /// error, never a panic; what is quoted is bounded and inert.
    #[test]
    fn persistent_lines_never_panic(text in json_text()) {
        match persistent::parse_line(&text) {
            Ok(Some(Line::Stray(quoted))) => {
                prop_assert!(quoted.chars().count() <= ESCAPED * 81, "{quoted:?}");
                prop_assert!(!dangerous(&quoted), "{quoted:?}");
            }
            Ok(Some(Line::Answer { .. } | Line::OpId { .. }) | None) => {
                let protocol = text.trim_start().starts_with('{') || text.trim().is_empty();
                prop_assert!(protocol, "{text:?}");
            }
            Err(why) => {
                let brace = text.trim_start().starts_with('{');
                prop_assert!(brace, "{why}");
                prop_assert!(!dangerous(&why), "{why:?}");
                prop_assert!(why.chars().count() <= 2 * ESCAPED * 81 + 300, "{why}");
            }
        }
    }

    /// Durations (config and command line) and sanitizing itself.
    #[test]
    fn durations_and_sanitize_never_panic(s in hostile_string()) {
        let _ = nightshift::duration::parse_duration(&s);
        prop_assert!(!dangerous(&sanitize::line(&s)));
        let text = sanitize::text(&s);
        prop_assert!(!text.chars().any(|c| c != '\n' && (c.is_control() || dangerous(&c.to_string()))));
        let json = sanitize::json(serde_json::to_string(&s).unwrap());
        prop_assert_eq!(serde_json::from_str::<String>(&json).unwrap(), s);
        prop_assert!(!dangerous(&json), "{json:?}");
    }
}

/// Config text: arbitrary, or lines of known fields with hostile values.
fn config_text() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        hostile_string().prop_map(|s| format!("{s:?}")),
        hostile_string(),
        any::<i64>().prop_map(|n| n.to_string()),
        prop::collection::vec(hostile_string().prop_map(|s| format!("{s:?}")), 0..4)
            .prop_map(|v| format!("[{}]", v.join(", "))),
        Just("\"0 2 * * *\"".to_string()),
        Just("\"Asia/Tokyo\"".to_string()),
        Just("\"10m\"".to_string()),
    ];
    let line = (prop::sample::select(BATCH_FIELDS), value).prop_map(|(f, v)| format!("{f} = {v}"));
    prop_oneof![
        1 => any::<String>(),
        1 => hostile_string(),
        4 => (hostile_string(), prop::collection::vec(line, 0..10), hostile_string()).prop_map(
            |(name, lines, top)| {
                format!("db = {top:?}\n[batch.{name:?}]\n{}\n[batch.ok]\n", lines.join("\n"))
            }
        ),
    ]
}

/// Deep nesting: a line is accepted exactly when its payload can be read
/// back as a value (serde_json stops at 128 levels); 100,000 levels is a
/// clear error, not a stack overflow.
#[test]
fn deep_nesting_is_accepted_only_when_it_can_be_read_back() {
    for depth in (120..=140).chain([1_000, 100_000]) {
        for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
            let inner = if open == "[" { "" } else { "1" };
            let line = format!(
                "{{\"key\":\"k\",\"x\":{}{inner}{}}}",
                open.repeat(depth),
                close.repeat(depth)
            );
            let readable = serde_json::from_str::<Value>(&line).is_ok();
            match key::derive_line(&line, &KeySpec::Explicit) {
                Ok(_) => assert!(readable, "depth {depth} {open} accepted"),
                Err(e) => {
                    assert!(!readable, "depth {depth} {open} refused: {e}");
                    assert!(e.to_string().contains("levels deep"), "{e}");
                }
            }
        }
    }
}

// ---- End to end: bounded memory ----

/// A 16 MB JSON line that never closes its string: refused whole, with
/// one short message naming the line, nothing imported.
#[test]
fn a_huge_import_line_is_refused_cleanly() {
    let env = Env::new();
    let mut big = Vec::with_capacity(16 << 20);
    big.extend_from_slice(b"{\"key\":\"k\",\"x\":\"");
    big.resize(16 << 20, b'A');
    big.extend_from_slice(b"\n{\"key\":\"k2\"}\n");
    let file = env.path("big.jsonl");
    std::fs::write(&file, &big).unwrap();
    let out = env.cmd().args(["add", "b"]).arg(&file).output().unwrap();
    let r = ran(out);
    r.code(2);
    assert!(r.stderr.len() < 400, "{}", r.stderr.len());
    assert!(r.stderr.contains("line 1: malformed JSON"), "{r:?}");
    assert!(env.strings("SELECT key FROM items").is_empty());
}

/// A 200 KB label (labels have no limit) still lets the worker start: one
/// environment string may not pass 128 KiB, so `NIGHTSHIFT_LABEL` is cut to
/// 4096 bytes (the label itself is kept whole). A batch name is bounded at
/// `add`.
#[test]
fn a_huge_label_does_not_stop_the_worker() {
    let env = Env::new();
    env.config("[batch.b]\nretries = 0\n");
    let line = serde_json::json!({"key": "k", "label": "é".repeat(100_000)}).to_string();
    let file = env.write("items.jsonl", &format!("{line}\n"));
    env.cmd().args(["add", "b"]).arg(&file).assert().success();
    let w = env.script(
        "w.sh",
        "cat >/dev/null; printf '%s' \"$NIGHTSHIFT_LABEL\" | wc -c > label.bytes; echo '{}'",
    );
    env.cmd()
        .args(["run", "b", "--"])
        .arg(&w)
        .assert()
        .success();
    assert_eq!(env.item("k").0, "done");
    let bytes = std::fs::read_to_string(env.path("label.bytes")).unwrap();
    assert_eq!(bytes.trim(), "4096");
    assert_eq!(
        env.int("SELECT length(label) FROM items WHERE key = 'k'"),
        100_000
    );
    let r = ran(env
        .cmd()
        .args(["add", &"b".repeat(300)])
        .arg(&file)
        .output()
        .unwrap());
    r.code(2);
    assert!(
        r.stderr.starts_with("error: invalid value 'bbbb")
            && r.stderr
                .contains("a batch name must be at most 256 characters"),
        "{r:?}"
    );
}

/// A cost report that is kept is a finite number within the bound.
fn sane(cost: &Cost) -> bool {
    match cost {
        Cost::Absent => true,
        Cost::Valid(c) => (0.0..=MAX_COST).contains(c),
        Cost::Refused(shown) => !dangerous(shown) && shown.chars().count() <= ESCAPED * 41,
    }
}

fn usage_sane(usage: &nightshift::runner::usage::Usage) -> bool {
    use nightshift::runner::usage::{MAX_TOKENS, Usage};
    match usage {
        Usage::Absent => true,
        Usage::Valid(t) => [t.input, t.output]
            .into_iter()
            .flatten()
            .all(|n| (0..=MAX_TOKENS).contains(&n)),
        Usage::Refused(shown) => !dangerous(shown) && shown.chars().count() <= ESCAPED * 81,
    }
}

/// Costs reported on stderr that are beyond the bound (and would add up
/// to infinity): refused as a worker error, nothing counted.
#[test]
fn reported_costs_beyond_the_bound_are_refused() {
    let env = Env::new();
    env.config("[batch.b]\nretries = 0\n");
    common::add_keys(&env, "b", &["k"]);
    let w = env.script(
        "w.sh",
        "cat >/dev/null; echo '@nightshift cost=1e308' >&2; echo '@nightshift cost=1e308' >&2; echo '\"ok\"'",
    );
    env.cmd().args(["run", "b", "--"]).arg(&w).assert().code(1);
    let run = &env.status()["batches"][0]["last_run"];
    let cost = run["counts"]["cost"].as_f64();
    assert_eq!(cost, Some(0.0), "{run}");
    assert_eq!(env.item("k").0, "failed");
    let msg = env.strings("SELECT error_message FROM items WHERE key = 'k'");
    assert!(msg[0].contains("a cost of 1e308"), "{msg:?}");
}

/// A worker that floods the op-id channel: at most `MAX_OP_IDS` distinct
/// ids are stored and logged per attempt, the last one wins, ids with
/// control characters are ignored, and the item still completes.
#[test]
fn an_op_id_flood_is_bounded() {
    let env = Env::new();
    env.config("[batch.b]\nretries = 0\n");
    common::add_keys(&env, "b", &["k"]);
    let w = env.script(
        "flood.sh",
        r#"cat >/dev/null
i=0
while [ $i -lt 3000 ]; do echo "@nightshift op_id=op-$i" >&2; echo "@nightshift op_id=op-$i" >&2; i=$((i+1)); done
printf '@nightshift op_id=bad\033[2J\n' >&2
printf '@nightshift op_id=nul\001\n' >&2
echo '"ok"'"#,
    );
    env.cmd()
        .args(["run", "b", "--"])
        .arg(&w)
        .assert()
        .success();
    let op_events = env.int("SELECT count(*) FROM events WHERE kind = 'op-id'");
    assert_eq!(op_events, MAX_OP_IDS as i64);
    assert_eq!(
        env.strings("SELECT op_id FROM items WHERE key = 'k'"),
        vec![format!("op-{}", MAX_OP_IDS - 1)]
    );
    assert_eq!(env.item("k").0, "done");
}

/// A persistent worker that writes an endless answer line: the call fails
/// (transient) once the line passes its bound, instead of buffering forever.
#[tokio::test]
async fn a_persistent_worker_endless_line_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\nread line\nprintf '{\"result\":\"'\nexec cat /dev/zero\n",
    )
    .unwrap();
    let argv = vec!["sh".to_string(), path.display().to_string()];
    let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let (_keep, never) = tokio::sync::oneshot::channel();
    let req = Request {
        key: "k\u{202e}\x1b[2J",
        label: "l\n\0",
        attempt: 1,
        op_id: Some("op\"\n"),
        run_id: 1,
        payload: "{\"x\":1}",
    };
    let r = w
        .call(&req, Duration::from_secs(60), &Rules::default(), &tx, never)
        .await;
    match r {
        Err(Answer::Failed {
            transient: true,
            message,
            ..
        }) => assert!(message.contains("longer than"), "{message}"),
        Err(other) => panic!("{other:?}"),
        Ok(Call::Answer(v)) => panic!("{v:?}"),
        Ok(Call::Killed(_)) => panic!("killed"),
    }
    w.kill().await;
}
