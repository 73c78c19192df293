//! The demo's simulated "agent" worker (`nightshift agent`, hidden): behaves
//! like a flaky paid AI API, deterministically per key and attempt, so the
//! demo's outcome mix is the same every time.
//!
//! - latency 50–400 ms;
//! - ~3 % a transient 503 on the first attempt (retried at once, then done);
//! - ~2 % a connection error for three attempts (waits in the retry tier;
//!   the next cycle redrives it);
//! - ~3 % a 429 rate limit with `retry_after_s` (holds every batch of the pool);
//! - ~1 % a permanent 400 (quarantined for a human);
//! - ~4 % succeed with nothing (outcome `empty`);
//! - an item whose payload says `"slow": true` starts a remote operation,
//!   reports its id, and takes longer than the item timeout; the retry gets
//!   the id back in `NIGHTSHIFT_OP_ID` and resumes it instead of paying again.

use std::io::Read;
use std::time::Duration;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Exit status for a transient failure (EX_TEMPFAIL).
const TEMPFAIL: i32 = 75;

/// A number in 0..100 fixed by the key (and salt).
fn roll(key: &str, salt: &str) -> u64 {
    let digest = Sha256::digest(format!("{salt}:{key}").as_bytes());
    u64::from_le_bytes(digest[..8].try_into().unwrap_or([0; 8])) % 100
}

fn error_line(class: &str, transient: bool, message: &str, retry_after: Option<u64>) {
    let mut line = json!({"error_class": class, "transient": transient, "message": message});
    if let Some(s) = retry_after {
        line["retry_after_s"] = json!(s);
    }
    crate::util::stdio::err_line(&line.to_string());
}

/// Runs the simulated agent for one item; returns the exit status.
pub fn run() -> i32 {
    let mut input = String::new();
    let _ = std::io::stdin().read_to_string(&mut input);
    let payload: Value = serde_json::from_str(input.trim()).unwrap_or(Value::Null);
    let key = std::env::var("NIGHTSHIFT_KEY").unwrap_or_default();
    let attempt: u32 = std::env::var("NIGHTSHIFT_ATTEMPT")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let op_id = std::env::var("NIGHTSHIFT_OP_ID")
        .ok()
        .filter(|o| !o.is_empty());
    let latency = 50 + roll(&key, &format!("latency{attempt}")) * 35 / 10;
    std::thread::sleep(Duration::from_millis(latency));

    if payload.get("slow").and_then(Value::as_bool) == Some(true) {
        if let Some(op) = op_id {
            // Resume the operation an earlier attempt started: no new charge.
            crate::util::stdio::out_line(
                &json!({"summary": "resumed a finished remote operation", "resumed_from": op, "cost": 0.0})
                .to_string(),
            );
            return 0;
        }
        let op = format!("op-{}", &key[..key.len().min(12)]);
        crate::util::stdio::err_line(&format!(
            "{}{}",
            crate::runner::child::output::MARKER,
            format_args!("op_id={op}")
        ));
        // Far longer than the demo's item timeout: the runner kills us.
        std::thread::sleep(Duration::from_secs(600));
        return 0;
    }
    let r = roll(&key, "fate");
    match r {
        0 => {
            error_line(
                "BadRequest",
                false,
                "400 Bad Request: the input has no title",
                None,
            );
            1
        }
        1..=2 if attempt <= 3 => {
            // Down for a while: outlasts the immediate retries, so the item
            // waits in the retry tier and the next cycle redrives it.
            error_line("ConnectionError", true, "connection reset by peer", None);
            TEMPFAIL
        }
        3..=5 if attempt == 1 => {
            error_line(
                "ServiceUnavailable",
                true,
                "503 Service Unavailable: upstream overloaded",
                None,
            );
            TEMPFAIL
        }
        6..=8 if attempt == 1 => {
            error_line("RateLimitError", true, "429 Too Many Requests", Some(1));
            TEMPFAIL
        }
        9..=12 => 0, // succeeded, produced nothing
        _ => {
            let title = payload
                .get("slug")
                .or_else(|| payload.get("account"))
                .and_then(Value::as_str)
                .unwrap_or("item")
                .replace('-', " ");
            let words = 300 + roll(&key, "words") * 12;
            // 550 to 1144 tokens a call: within the 1200 its batch reserves
            // (`token_estimate`), as a worker bounded by max_tokens is.
            let (input, output) = (400 + words / 4, words / 4);
            crate::util::stdio::out_line(
                &json!({"title": title, "words": words, "model": "demo-agent-1", "cost": 0.002 + words as f64 * 0.000_01,
                    "usage": {"input_tokens": input, "output_tokens": output}})
                .to_string(),
            );
            0
        }
    }
}
