//! The README's example workers (`assets/examples/`) run by the real binary
//! against a local fake of the API they call (127.0.0.1, a port the OS
//! picks): the idempotency key goes out as a header, 429 and 503 are
//! retried, a 400 is quarantined, an empty result stays `empty`, and a long
//! operation is resumed from its op id without a second (paid) request.
//! Also: the example config loads. The workers need `python3`
//! (`support/require.rs`: skipped loudly without it, failed under CI).

use crate::support as common;
use crate::support::require::Tool;

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use common::Env;
use serde_json::{Value, json};

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("assets/examples")
        .join(name)
}

/// A remote operation of the fake API.
struct Op {
    slug: String,
    done: bool,
}

/// What the fake API has seen, and the switch that finishes `long`.
#[derive(Default)]
struct Api {
    /// (Idempotency-Key, slug) of every POST that created an operation.
    posts: Vec<(String, String)>,
    /// Slugs already answered once (for "fails the first time").
    seen: HashSet<String>,
    ops: HashMap<String, Op>,
    /// GETs of operations, by operation id.
    polls: HashMap<String, usize>,
    release_long: bool,
}

struct Reply {
    code: u16,
    body: Value,
    retry_after: Option<u32>,
}

fn reply(code: u16, body: Value) -> Reply {
    Reply {
        code,
        body,
        retry_after: None,
    }
}

impl Api {
    fn op_json(&self, id: &str) -> Value {
        let op = &self.ops[id];
        let done = op.done || (op.slug == "long" && self.release_long);
        match (done, op.slug.as_str()) {
            (false, _) => json!({"id": id, "done": false}),
            (true, "nothing") => json!({"id": id, "done": true, "result": null}),
            (true, slug) => json!({
                "id": id, "done": true, "cost": 0.01,
                "result": {"title": slug.to_uppercase()}
            }),
        }
    }

    fn handle(&mut self, method: &str, path: &str, key: &str, body: &str) -> Reply {
        match (method, path) {
            ("POST", "/v1/operations") => {
                let body: Value = serde_json::from_str(body).unwrap_or(Value::Null);
                let slug = body["input"]["slug"].as_str().unwrap_or("").to_string();
                let first = self.seen.insert(slug.clone());
                match slug.as_str() {
                    "busy" if first => Reply {
                        retry_after: Some(1),
                        ..reply(429, json!({"error": "slow down"}))
                    },
                    "overloaded" if first => reply(503, json!({"error": "try later"})),
                    "bad" => reply(400, json!({"error": "no title"})),
                    _ => {
                        let id = format!("op-{}", self.ops.len() + 1);
                        self.posts.push((key.to_string(), slug.clone()));
                        let done = slug != "long";
                        self.ops.insert(id.clone(), Op { slug, done });
                        reply(202, self.op_json(&id))
                    }
                }
            }
            ("GET", p) if p.starts_with("/v1/operations/") => {
                let id = &p["/v1/operations/".len()..];
                if !self.ops.contains_key(id) {
                    return reply(404, json!({"error": "no such operation"}));
                }
                *self.polls.entry(id.to_string()).or_default() += 1;
                reply(200, self.op_json(id))
            }
            _ => reply(404, json!({"error": "no such endpoint"})),
        }
    }
}

fn serve(stream: TcpStream, api: &Mutex<Api>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut parts = request_line.split_whitespace();
    let (method, path) = (
        parts.next().unwrap_or("").to_string(),
        parts.next().unwrap_or("").to_string(),
    );
    let mut length = 0;
    let mut key = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "idempotency-key" => key = value.trim().to_string(),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let r = api
        .lock()
        .unwrap()
        .handle(&method, &path, &key, &String::from_utf8_lossy(&body));
    let text = r.body.to_string();
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        r.code,
        text.len()
    );
    if let Some(s) = r.retry_after {
        head.push_str(&format!("Retry-After: {s}\r\n"));
    }
    let mut stream = stream;
    let _ = stream.write_all(format!("{head}\r\n{text}").as_bytes());
}

/// Starts the fake API; its base URL.
fn start_api(api: Arc<Mutex<Api>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let api = api.clone();
            std::thread::spawn(move || serve(stream, &api));
        }
    });
    url
}

fn items(env: &Env, batch: &str) -> HashMap<String, Value> {
    let out = env.cmd().args(["items", batch, "--json"]).output().unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|i| {
            let slug = i["label"].as_str().unwrap().rsplit(':').next().unwrap();
            (slug.to_string(), i)
        })
        .collect()
}

fn show(env: &Env, batch: &str, key: &str) -> Value {
    let out = env
        .cmd()
        .args(["show", batch, key, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["item"].clone()
}

#[test]
fn the_example_worker_against_a_flaky_api() {
    require!(Tool::Python3);
    let api = Arc::new(Mutex::new(Api::default()));
    let url = start_api(api.clone());
    let env = Env::new();
    env.write(
        "nightshift.toml",
        &format!(
            "[batch.articles]\nworker = [\"python3\", {:?}, {url:?}]\n\
             key_fields = [\"site\", \"category\", \"slug\"]\n\
             concurrency = 2\nretries = 1\nbackoff = \"50ms\"\nbackoff_max = \"100ms\"\n",
            example("worker.py").display().to_string()
        ),
    );
    let slugs = ["hello", "busy", "overloaded", "bad", "nothing", "long"];
    let lines: String = slugs
        .iter()
        .map(|s| format!("{{\"site\":\"blog\",\"category\":\"ai\",\"slug\":\"{s}\"}}\n"))
        .collect();
    env.cmd()
        .args(["add", "articles", "-"])
        .write_stdin(lines)
        .assert()
        .success();

    // The worker waits 0.3 s for an operation, then leaves it to a later attempt.
    let run = || {
        env.cmd()
            .env("WAIT_S", "0.3")
            .env("POLL_S", "0.05")
            .args(["run", "articles"])
            .output()
            .unwrap()
    };
    let out = run();
    assert_eq!(
        out.status.code(),
        Some(1),
        "something failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = items(&env, "articles");
    let state = |slug: &str| {
        let i = &got[slug];
        (
            i["status"].as_str().unwrap().to_string(),
            i["outcome"]
                .as_str()
                .or(i["tier"].as_str())
                .unwrap_or("")
                .to_string(),
            i["error_class"].as_str().unwrap_or("").to_string(),
        )
    };
    for slug in ["hello", "busy", "overloaded"] {
        assert_eq!(
            state(slug),
            ("done".into(), "done".into(), "".into()),
            "{slug}"
        );
    }
    assert_eq!(got["busy"]["attempts"], 2, "429 retried: {}", got["busy"]);
    assert_eq!(got["overloaded"]["attempts"], 2, "503 retried");
    assert_eq!(state("nothing"), ("done".into(), "empty".into(), "".into()));
    assert_eq!(
        state("bad"),
        ("failed".into(), "manual".into(), "HTTP400".into())
    );
    assert_eq!(
        state("long"),
        ("failed".into(), "retry".into(), "OperationPending".into())
    );
    let hello = show(&env, "articles", got["hello"]["key"].as_str().unwrap());
    assert_eq!(hello["result"]["result"]["title"], "HELLO", "{hello}");
    let long_key = got["long"]["key"].as_str().unwrap().to_string();
    let op = show(&env, "articles", &long_key)["op_id"].clone();
    assert!(op.is_string(), "the op id was recorded: {}", got["long"]);

    // Every operation was requested with the item's own key.
    let polled = {
        let api = api.lock().unwrap();
        for (key, slug) in &api.posts {
            assert_eq!(key, got[slug]["key"].as_str().unwrap(), "{slug}");
        }
        let long_posts = api.posts.iter().filter(|(_, s)| s == "long").count();
        assert_eq!(long_posts, 1, "two attempts, one operation");
        api.polls[op.as_str().unwrap()]
    };

    // The operation finishes; the item, sent back, resumes it: no new POST.
    api.lock().unwrap().release_long = true;
    env.cmd()
        .args(["requeue", "articles", &long_key])
        .assert()
        .success();
    let out = run();
    assert_eq!(out.status.code(), Some(0));
    let long = show(&env, "articles", &long_key);
    assert_eq!(long["status"], "done", "{long}");
    assert_eq!(long["result"]["op_id"], op, "{long}");
    assert_eq!(long["result"]["result"]["title"], "LONG");
    let api = api.lock().unwrap();
    assert_eq!(
        api.posts.iter().filter(|(_, s)| s == "long").count(),
        1,
        "the resume paid nothing twice"
    );
    assert!(
        api.polls[op.as_str().unwrap()] > polled,
        "it polled the old one"
    );
}

#[test]
fn the_minimal_worker() {
    require!(Tool::Python3);
    let env = Env::new();
    env.write(
        "nightshift.toml",
        &format!(
            "[batch.notes]\nworker = [\"python3\", {:?}]\n",
            example("minimal_worker.py").display().to_string()
        ),
    );
    env.cmd()
        .args(["add", "notes", "-"])
        .write_stdin("{\"key\":\"a\",\"title\":\"two words\"}\n{\"key\":\"b\"}\n")
        .assert()
        .success();
    env.cmd().args(["run", "notes"]).assert().code(1);
    let a = show(&env, "notes", "a");
    assert_eq!(a["status"], "done");
    assert_eq!(a["result"], json!({"key": "a", "words": 2}));
    let b = show(&env, "notes", "b");
    assert_eq!(
        (b["status"].as_str(), b["tier"].as_str()),
        (Some("failed"), Some("manual"))
    );
    assert_eq!(b["error_class"], "NoTitle");
}

/// The README's example config is valid: its schedule is read as written.
#[test]
fn the_example_config_loads() {
    let env = Env::new();
    let out = env
        .cmd()
        .arg("--config")
        .arg(example("nightshift.toml"))
        .args(["schedule", "articles", "--next", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("`0 2 * * *` in Asia/Tokyo"), "{stdout}");
    assert!(stdout.contains("02:00:00 JST"), "{stdout}");
}

/// The prompts the fake messages API was sent, with when.
type Sent = Arc<Mutex<Vec<(String, std::time::Instant)>>>;

/// A fake messages API for `paid_api_worker.py`: the prompt `busy` gets a
/// 429 with `Retry-After: 2` the first time; every answer carries usage.
fn start_messages_api() -> (String, Sent) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/messages", listener.local_addr().unwrap());
    let seen: Sent = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && !line.trim().is_empty() {
                if let Some((k, v)) = line.split_once(':')
                    && k.eq_ignore_ascii_case("content-length")
                {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let prompt = serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null)["prompt"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let first = {
                let mut seen = log.lock().unwrap();
                let first = !seen.iter().any(|(p, _)| *p == prompt);
                seen.push((prompt.clone(), std::time::Instant::now()));
                first
            };
            let (status, extra, text) = if prompt == "busy" && first {
                (
                    "429 Too Many Requests",
                    "Retry-After: 2\r\n",
                    json!({"error": "slow down"}),
                )
            } else {
                let usage = json!({"input_tokens": prompt.len(), "output_tokens": 10});
                (
                    "200 OK",
                    "",
                    json!({"text": prompt.to_uppercase(), "usage": usage}),
                )
            };
            let text = text.to_string();
            let mut stream = stream;
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                )
                .as_bytes(),
            );
        }
    });
    (url, seen)
}

/// The README's paid-API worker: its usage reaches the run's sums, and a
/// 429's retry-after header holds the pool (the next call to the API
/// comes after it).
#[test]
fn the_paid_api_worker_reports_usage_and_maps_retry_after() {
    require!(Tool::Python3);
    let env = Env::new();
    let (url, seen) = start_messages_api();
    env.config(&format!(
        "[limit.api]\nrequests = \"600/min\"\n\n[batch.ask]\nworker = [\"python3\", \"{}\"]\n\
         mode = \"persistent\"\nlimit = \"api\"\ntoken_estimate = 100\nconcurrency = 1\nbackoff = \"10ms\"\n",
        example("paid_api_worker.py").display()
    ));
    let file = env.write(
        "items.jsonl",
        "{\"key\":\"1\",\"prompt\":\"busy\"}\n{\"key\":\"2\",\"prompt\":\"calm\"}\n",
    );
    env.cmd().args(["add", "ask"]).arg(file).assert().success();
    let out = env
        .cmd()
        .args(["run", "ask"])
        .env("API_URL", &url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "busy twice, calm once: {seen:?}");
    assert!(
        seen[1].1.duration_since(seen[0].1) >= std::time::Duration::from_secs(2),
        "the call after the 429 came within its retry-after: {seen:?}"
    );
    let status = env.status();
    let usage = &status["batches"][0]["last_run"]["usage"];
    assert_eq!(usage["input_tokens"], 8, "{usage}");
    assert_eq!(usage["output_tokens"], 20, "{usage}");
    let holds = env.events("ask", "hold");
    assert_eq!(holds.len(), 1);
}
