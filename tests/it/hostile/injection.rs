//! Terminal injection: hostile text in every place a user or a worker can
//! put it (keys, labels, payloads, worker results and errors, error
//! classes, op ids, pause and skip reasons, actor and host names, arguments)
//! comes out of every CLI command and every dashboard pane inert: the raw
//! bytes hold no ESC, no C1 control, no bidi control, no NUL, BEL,
//! backspace or carriage return, and are valid UTF-8; `--json` output stays
//! JSON that decodes to the same text.
#![cfg(unix)]

use crate::support as common;

use common::{Env, Ran, ran};

/// The corpus: CSI (colour, clear screen, cursor home), OSC 0 (title),
/// OSC 52 (clipboard write), DCS, 8-bit CSI and NEL as UTF-8 C1, bidi
/// override and isolate, NUL, BEL, backspace, CR.
const EVIL: &str = "E\x1b[31mR\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]52;c;aGk=\x07\x1bP1$r\x1b\\\
                    \u{9b}2J\u{85}\u{202e}desrever\u{202c}\u{2066}iso\u{2069}N\0B\x07S\x08C\rZ";

/// The same bytes a shell `printf` produces from this format string.
const EVIL_PRINTF: &str = r"E\033[31mR\033[2J\033[H\033]0;pwned\007\033]52;c;aGk=\007\033P1$r\033\\\302\233\
2J\302\205\342\200\256desrever\342\200\254\342\201\246iso\342\201\251NB\007S\010C\rZ\377\376bad-utf8";

/// Why `bytes` would act on a terminal, if it would.
fn hostile_byte(bytes: &[u8]) -> Option<String> {
    if let Err(e) = std::str::from_utf8(bytes) {
        return Some(format!("invalid UTF-8: {e}"));
    }
    let text = std::str::from_utf8(bytes).unwrap();
    for (i, c) in text.char_indices() {
        let bad = matches!(c, '\x1b' | '\0' | '\x07' | '\x08' | '\r' | '\x7f')
            || ('\u{80}'..='\u{9f}').contains(&c)
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}');
        if bad {
            let around: String = text[i..].chars().take(40).collect();
            return Some(format!("{c:?} at byte {i}: {around:?}"));
        }
    }
    None
}

#[track_caller]
fn assert_inert(what: &str, bytes: &[u8]) {
    if let Some(why) = hostile_byte(bytes) {
        panic!("{what}: {why}");
    }
}

/// Runs the binary with hostile environment variables (actor, host).
/// Arguments and environment cannot hold NUL: it is dropped from them.
fn run_raw(env: &Env, args: &[&str]) -> (std::process::Output, Ran) {
    let args: Vec<String> = args.iter().map(|a| a.replace('\0', "")).collect();
    let out = env
        .cmd()
        .env("USER", format!("user{}", EVIL.replace('\0', "")))
        .env("NIGHTSHIFT_HOST", format!("host{}", EVIL.replace('\0', "")))
        .args(&args)
        .output()
        .unwrap();
    let r = ran(out.clone());
    assert!(!r.stderr.contains("panicked"), "{args:?} panicked: {r:#?}");
    (out, r)
}

/// Runs a command and checks both of its streams; returns what it printed.
#[track_caller]
fn check(env: &Env, args: &[&str]) -> Ran {
    let (out, r) = run_raw(env, args);
    assert_inert(&format!("stdout of {args:?}"), &out.stdout);
    assert_inert(&format!("stderr of {args:?}"), &out.stderr);
    r
}

/// The hostile text as it is written into a JSON string.
fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A store with hostile text in every field a user or a worker fills.
fn hostile_store() -> Env {
    let env = Env::new();
    env.config("[batch.inj]\nretries = 0\nmax_attempts = 3\n");
    // Keys may not hold control characters (rejected at `add`); bidi
    // characters they may.
    let lines = [
        format!(
            r#"{{"key":"done-\u202ekey","label":{},"text":{}}}"#,
            json_str(&format!("label{EVIL}")),
            json_str(EVIL)
        ),
        format!(r#"{{"key":"json","text":{}}}"#, json_str(EVIL)),
        format!(r#"{{"key":"classed","text":{}}}"#, json_str(EVIL)),
        r#"{"key":"plain"}"#.to_string(),
        r#"{"key":"long"}"#.to_string(),
        r#"{"key":"skipme"}"#.to_string(),
    ];
    let file = env.write("items.jsonl", &(lines.join("\n") + "\n"));
    check(&env, &["add", "inj", file.to_str().unwrap()]).code(0);
    let worker = env.script(
        "evil-worker.sh",
        &format!(
            r#"cat >/dev/null
evil() {{ printf '{EVIL_PRINTF}'; }}
case "$NIGHTSHIFT_KEY" in
  done-*) printf '@nightshift op_id=op-'; evil >&2; echo >&2; printf '@nightshift op_id=op-\342\200\256-\302\240x\n' >&2; evil ;;
  json) printf '{{"r":"\302\233\342\200\256 \\u001b[2J \177"}}' ;;
  classed) {{ printf '{{"error_class":"Cls\\u001b[31m\302\233\342\200\256","transient":false,"message":"M\302\233\342\200\256\\u001b[2J"}}\n'; }} >&2; exit 1 ;;
  plain) evil >&2; exit 2 ;;
  long) head -c 300000 /dev/zero | tr '\0' 'A' >&2; evil >&2; exit 1 ;;
  *) echo '{{}}' ;;
esac"#
        ),
    );
    let w = worker.to_str().unwrap();
    let r = check(&env, &["run", "inj", "--verbose", "--", w]);
    assert_eq!(r.code, 1, "{r:#?}");
    check(
        &env,
        &["skip", "inj", "skipme", "--reason", &format!("why{EVIL}")],
    )
    .code(0);
    check(&env, &["requeue", "inj", "plain"]).code(0);
    check(&env, &["pause", "inj", "--reason", &format!("pause{EVIL}")]).code(0);
    env
}

/// Every command that shows stored text, human and JSON, and every error
/// that echoes what was typed: all inert, JSON still JSON.
#[test]
fn every_cli_output_is_inert() {
    let env = hostile_store();
    // The worker's text was stored (it is data, not lost), yet never shown raw.
    let status = check(&env, &["show", "inj", "classed", "--json"]).json();
    let class = status["item"]["error_class"].as_str().unwrap().to_string();
    assert!(class.starts_with("Cls"), "{class:?}");
    // An op id with control characters is refused; one with bidi stored.
    let done = check(&env, &["show", "inj", "done-\u{202e}key", "--json"]).json();
    assert_eq!(done["item"]["op_id"], "op-\u{202e}-\u{a0}x");

    let human = [
        vec!["status"],
        vec!["status", "inj"],
        vec!["status", "--short"],
        vec!["status", "--prometheus"],
        vec!["items", "inj"],
        vec!["items", "inj", "--status", "failed"],
        vec!["items", "inj", "--search", "Cls"],
        vec!["show", "inj", "done-\u{202e}key"],
        vec!["show", "inj", "json"],
        vec!["show", "inj", "classed"],
        vec!["show", "inj", "plain"],
        vec!["show", "inj", "long"],
        vec!["show", "inj", "skipme"],
        vec!["log"],
        vec!["log", "inj", "-n", "1000"],
        vec!["log", "--key", "done-\u{202e}key"],
        vec!["dlq", "inj"],
        vec!["requeue", "inj", "--all-failed", "--dry-run"],
        vec!["run", "inj", "--dry-run", "--", "true"],
        vec!["prune", "--older-than", "1s", "--dry-run"],
    ];
    // Filters that carry hostile text (echoed in "nothing matches" lines).
    let human: Vec<Vec<&str>> = human
        .into_iter()
        .chain([
            vec!["items", "inj", "--class", EVIL],
            vec!["items", "inj", "--search", EVIL],
            vec!["dlq", "inj", "--class", EVIL],
            vec!["requeue", "inj", "--class", EVIL, "--dry-run"],
        ])
        .collect();
    for args in &human {
        let r = check(&env, args);
        assert_eq!(r.code, 0, "{args:?}: {r:#?}");
    }
    let json = [
        vec!["status", "--json"],
        vec!["items", "inj", "--json"],
        vec!["show", "inj", "done-\u{202e}key", "--json"],
        vec!["show", "inj", "json", "--json"],
        vec!["show", "inj", "classed", "--json"],
        vec!["log", "--json", "-n", "1000"],
        vec!["dlq", "inj", "--json"],
        vec!["dlq", "inj", "--jsonl"],
        vec!["requeue", "inj", "--all-failed", "--dry-run", "--json"],
        vec!["run", "inj", "--dry-run", "--json", "--", "true"],
    ];
    for args in &json {
        let r = check(&env, args);
        assert_eq!(r.code, 0, "{args:?}: {r:#?}");
        if serde_json::from_str::<serde_json::Value>(&r.stdout).is_err() {
            r.json_lines();
        }
    }
    // JSON escapes keep the meaning: the label decodes to the hostile text
    // (its NUL kept as the `\x00` every view shows, which every store holds).
    let item = check(&env, &["show", "inj", "done-\u{202e}key", "--json"]).json();
    assert_eq!(
        item["item"]["label"],
        format!("label{}", EVIL.replace('\0', "\\x00"))
    );
    let pause = check(&env, &["status", "--json"]).json();
    assert_eq!(
        pause["batches"][0]["paused_reason"],
        format!("pause{}", EVIL.replace('\0', ""))
    );

    // Errors that echo what was typed.
    let errors = [
        vec!["show", "inj", EVIL],
        vec!["show", EVIL, "k"],
        vec!["items", EVIL],
        vec!["status", EVIL],
        vec!["dlq", EVIL],
        vec!["log", EVIL],
        // No item has that key or label: refused, naming it.
        vec!["log", "--key", EVIL],
        vec!["run", EVIL, "--", "true"],
        vec!["pause", EVIL],
        vec!["unpause", EVIL],
        vec!["requeue", "inj", EVIL],
        vec!["skip", "inj", EVIL, "--reason", EVIL],
        vec!["schedule", EVIL],
        vec!["items", "inj", "--status", EVIL],
        // Not one of the event kinds: refused, naming the valid ones.
        vec!["log", "--kind", EVIL],
        vec!["dlq", "inj", "--since", EVIL],
        vec!["prune", "--older-than", EVIL],
        vec!["run", "inj", "--max-duration", EVIL],
        vec!["watch", "--interval", EVIL],
        vec![EVIL],
        vec!["--db", EVIL, "status"],
        vec!["--config", EVIL, "status"],
        vec!["add", EVIL, "items.jsonl"],
        vec!["add", "inj", EVIL],
    ];
    for args in &errors {
        let r = check(&env, args);
        assert_ne!(r.code, 0, "{args:?} should fail: {r:#?}");
    }
    // No batch may be named with control characters.
    assert_eq!(
        env.strings("SELECT name FROM batches"),
        vec!["inj".to_string()]
    );
}

/// A store in a directory whose name is hostile (anything but NUL and
/// `/`): the paths commands print are inert too, and a log directory that
/// cannot be created is named inertly in the warning.
#[test]
fn hostile_paths_are_inert() {
    let env = Env::bare();
    let dir = env.path(&EVIL.replace(['\0', '/'], ""));
    std::fs::create_dir(&dir).unwrap();
    let db = dir.join("n.db");
    let db_arg = db.to_str().unwrap();
    check(&env, &["--db", db_arg, "init"]).code(0);
    check(&env, &["--db", db_arg, "init"]).code(0);
    check(&env, &["--db", db_arg, "status"]).code(0);
    check(&env, &["--db", db_arg, "status", "--json"]).json();
    // A log_dir under a file cannot be created: the run warns and goes on.
    std::fs::write(dir.join("nightshift.toml"), "log_dir = \"n.db/logs\"\n").unwrap();
    let items = env.write("items.jsonl", "{\"key\":\"k\"}\n");
    check(&env, &["--db", db_arg, "add", "b", items.to_str().unwrap()]).code(0);
    let r = check(&env, &["--db", db_arg, "run", "b", "--", "true"]);
    r.code(0);
    assert!(r.stderr.contains("cannot write logs to"), "{r:#?}");
}

/// A bad JSON-lines file full of hostile text: the error names the line
/// and shows the text inert.
#[test]
fn add_errors_are_inert() {
    let env = Env::new();
    let mut bytes = Vec::new();
    bytes.extend_from_slice(EVIL.as_bytes());
    bytes.push(b'\n');
    bytes.extend_from_slice(b"{\"key\":\"a\x1b[2J\"}\n");
    bytes.extend_from_slice(b"{\"key\":\"\\u001b]0;t\\u0007\"}\n");
    bytes.extend_from_slice(b"\xff\xfe\x1b]52;c;aGk=\x07\n");
    bytes.extend_from_slice(format!("{{\"key\":\"d\",\"label\":{}}}\n", json_str(EVIL)).as_bytes());
    bytes.extend_from_slice(format!("{{\"key\":\"d\",\"label\":{}}}\n", json_str(EVIL)).as_bytes());
    let file = env.path("bad.jsonl");
    std::fs::write(&file, &bytes).unwrap();
    let r = check(&env, &["add", "b", file.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:#?}");
    for n in 1..=4 {
        assert!(r.stderr.contains(&format!("line {n}:")), "{r:#?}");
    }
    assert!(r.stderr.contains("line 6: duplicate key"), "{r:#?}");
    assert!(env.strings("SELECT name FROM batches").is_empty());
}

// ---- The dashboard ----

use crate::support::pty;

use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The dashboard in a pseudo-terminal, every byte it writes kept.
struct RawDash {
    raw: Arc<Mutex<Vec<u8>>>,
    parser: Arc<Mutex<vt100::Parser<pty::Watch>>>,
    title_set: Arc<std::sync::atomic::AtomicBool>,
    clipboard: Arc<std::sync::atomic::AtomicBool>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
    _master: Box<dyn portable_pty::MasterPty + Send>,
}

impl RawDash {
    fn open(env: &Env, args: &[&str]) -> RawDash {
        use portable_pty::{CommandBuilder, PtySize, native_pty_system};
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_nightshift"));
        cmd.args(args);
        cmd.cwd(env.dir.path());
        cmd.env("NIGHTSHIFT_DB", &env.db);
        cmd.env("XDG_STATE_HOME", env.dir.path().join("state"));
        cmd.env("TERM", "xterm-256color");
        cmd.env("USER", format!("user{}", EVIL.replace('\0', "")));
        cmd.env("NIGHTSHIFT_HOST", format!("host{}", EVIL.replace('\0', "")));
        cmd.env_remove("NO_COLOR");
        cmd.env_remove("NIGHTSHIFT_CONFIG");
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let watch = pty::Watch::default();
        let (title_set, clipboard) = (watch.title_set.clone(), watch.clipboard.clone());
        let parser = Arc::new(Mutex::new(vt100::Parser::new_with_callbacks(
            std::num::NonZeroU16::new(24).unwrap(),
            std::num::NonZeroU16::new(80).unwrap(),
            0,
            watch,
        )));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let mut reader = pair.master.try_clone_reader().unwrap();
        let (p, r) = (parser.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    return;
                }
                r.lock().unwrap().extend_from_slice(&buf[..n]);
                p.lock().unwrap().process(&buf[..n]);
            }
        });
        RawDash {
            raw,
            parser,
            title_set,
            clipboard,
            writer: pair.master.take_writer().unwrap(),
            child,
            _master: pair.master,
        }
    }

    fn key(&mut self, bytes: &str) {
        self.writer.write_all(bytes.as_bytes()).unwrap();
        self.writer.flush().unwrap();
        std::thread::sleep(Duration::from_millis(40));
    }

    fn screen(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < pty::PATIENCE,
                "waited for {what}; the screen shows:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_exit(&mut self) -> u32 {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            assert!(start.elapsed() < pty::PATIENCE, "{}", self.screen());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RawDash {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// What the dashboard may never send, whatever the data: only its own
/// drawing sequences (CSI) and UTF-8 text, never an OSC (title,
/// clipboard), DCS, C1 control, bidi control, NUL, BEL or backspace.
fn dashboard_bytes_clean(bytes: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("invalid UTF-8: {e}"))?;
    for (i, c) in text.char_indices() {
        let next = text[i + c.len_utf8()..].chars().next();
        let bad = matches!(c, '\0' | '\x07' | '\x08' | '\x7f')
            || ('\u{80}'..='\u{9f}').contains(&c)
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}')
            || (c == '\x1b' && matches!(next, Some(']' | 'P' | '_' | '^' | 'X')));
        if bad {
            let around: String = text[i..].chars().take(40).collect();
            return Err(format!("{c:?} at byte {i}: {around:?}"));
        }
    }
    Ok(())
}

/// Every pane, the item detail, a dead-letter class, the help overlay and
/// the prompts, over a store full of hostile text (including a lock held by
/// a hostile host): the screen shows the text escaped and the frame intact,
/// and the raw bytes carry nothing a terminal would act on.
#[test]
fn every_dashboard_pane_is_inert() {
    use nightshift::model::{Holder, Trigger};
    use nightshift::store::{Access, Store};
    let env = hostile_store();
    {
        let mut store = Store::open(&env.db, Access::ReadWrite).unwrap();
        let t = nightshift::util::time::now_ms();
        let holder = Holder {
            host: format!("host{EVIL}"),
            pid: 1,
            pid_start: None,
        };
        let run = store
            .start_run("inj", Trigger::Manual, None, &holder, t, None)
            .unwrap();
        store
            .acquire_lock("inj", "tok", &holder, Some(run), t + 3_600_000, t, &[], 1)
            .unwrap();
    }
    let mut dash = RawDash::open(&env, &["watch"]);
    dash.wait_for("the first poll", pty::loaded);
    let intact = |screen: &str| {
        let rows: Vec<&str> = screen.lines().collect();
        rows.len() <= 24 && rows.first().is_some_and(|r| r.contains("nightshift"))
    };
    let pane_keys: &[&[&str]] = &[
        &["1"],
        &["1", "\r"],
        &["\x1b", "2"],
        &["3"],
        &["3", "j"],
        &["3", "\r"],
        &["\x1b", "3", "G", "\r"],
        &["\x1b", "4"],
        &["4", "\r"],
        &["\x1b", "4", "j", "\r"],
        &["\x1b", "5"],
        &["5", "G"],
        &["\x1b", "?"],
        &["\x1b", "p"],
        &["\x1b", "3", "/", "C", "l", "s"],
    ];
    for keys in pane_keys {
        for k in *keys {
            dash.key(k);
        }
        std::thread::sleep(Duration::from_millis(150));
        let screen = dash.screen();
        assert!(intact(&screen), "after {keys:?}:\n{screen}");
        if let Err(why) = dashboard_bytes_clean(&dash.raw.lock().unwrap()) {
            panic!("after {keys:?}: {why}\n{screen}");
        }
    }
    // The hostile text was shown (escaped), not dropped.
    dash.key("\x1b");
    dash.key("\x1b");
    dash.key("3");
    dash.key("g");
    dash.key("\r");
    dash.wait_for("the escaped label", |s| {
        s.contains("label") && s.contains("\\x1b")
    });
    dash.key("\x1b");
    dash.key("q");
    dash.wait_exit();
    // Opened on a batch name that is itself hostile: refused by the
    // batch-name rule, the name shown escaped.
    let arg = EVIL.replace('\0', "");
    let mut other = RawDash::open(&env, &["watch", "--batch", &arg]);
    other.wait_for("the refusal", |s| {
        s.contains("must not hold control or bidi characters")
    });
    assert_eq!(other.wait_exit(), 2);
    dashboard_bytes_clean(&other.raw.lock().unwrap()).unwrap();
    assert!(!other.title_set.load(Ordering::SeqCst));
    assert!(!dash.title_set.load(Ordering::SeqCst), "the title was set");
    assert!(
        !dash.clipboard.load(Ordering::SeqCst),
        "the clipboard was written"
    );
    dashboard_bytes_clean(&dash.raw.lock().unwrap()).unwrap();

    // New hostile failures since that visit: the "since you last looked"
    // summary names their classes, inert too.
    {
        let mut store = Store::open(&env.db, Access::ReadWrite).unwrap();
        store.release_lock("inj", "tok").unwrap();
    }
    check(&env, &["unpause", "inj"]);
    check(&env, &["requeue", "inj", "--all-failed"]);
    let worker = env.path("evil-worker.sh");
    check(&env, &["run", "inj", "--", worker.to_str().unwrap()]);
    let mut again = RawDash::open(&env, &["watch"]);
    again.wait_for("the summary of what changed", |s| {
        s.contains("Since you last looked")
    });
    again.key("\x1b");
    again.key("q");
    again.wait_exit();
    dashboard_bytes_clean(&again.raw.lock().unwrap()).unwrap();
    assert!(!again.title_set.load(Ordering::SeqCst));
    assert!(!again.clipboard.load(Ordering::SeqCst));
}
