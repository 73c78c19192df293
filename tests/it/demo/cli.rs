//! `nightshift demo --headless`: the whole scenario runs to completion with
//! the promised outcome mix, and leaves no process behind.

use crate::support as common;

use assert_cmd::Command;

#[test]
fn headless_demo_shows_the_whole_outcome_mix() {
    let dir = tempfile::tempdir().unwrap();
    let demo_dir = dir.path().join("demo");
    // The user's own store, named in the environment: the demo must not
    // touch it (its runner and daemon work on the demo's store only).
    let mine = common::Env::new();
    mine.write("nightshift.toml", "[batch.reports]\nworker = [\"false\"]\n");
    let before = mine.fingerprint();
    let out = Command::cargo_bin("nightshift")
        .unwrap()
        .args(["demo", "--headless", "--dir"])
        .arg(&demo_dir)
        .env("NIGHTSHIFT_DB", &mine.db)
        .env("NIGHTSHIFT_CONFIG", mine.path("nightshift.toml"))
        .env("NO_COLOR", "1")
        .timeout(std::time::Duration::from_secs(180))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let db = demo_dir.join("nightshift.db");
    let status: serde_json::Value = serde_json::from_slice(
        &Command::cargo_bin("nightshift")
            .unwrap()
            .args(["status", "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let articles = status["batches"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "articles")
        .unwrap();
    let done = articles["done"].as_i64().unwrap();
    assert!(done > 140, "most articles done: {articles}");
    assert!(
        articles["empty"].as_i64().unwrap() > 0,
        "some empty results: {articles}"
    );
    assert!(
        articles["manual"].as_i64().unwrap() > 0,
        "a few quarantined: {articles}"
    );
    assert_eq!(articles["pending"], 0);
    assert_eq!(articles["claimed"], 0);
    // The agent's calls report no more tokens than their batches reserve
    // before each (the pool is not settled in arrears).
    for b in status["batches"].as_array().unwrap() {
        assert_eq!(
            b["last_run"]["usage"]["over_estimate"],
            serde_json::Value::Null,
            "{b}"
        );
    }

    let conn = rusqlite::Connection::open(&db).unwrap();
    let retried: i64 = conn
        .query_row("SELECT sum(retried) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert!(retried > 0, "some items were retried");
    let retried_then_done: i64 = conn
        .query_row(
            "SELECT count(*) FROM items WHERE status = 'done' AND attempts > 1 AND outcome = 'done'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(retried_then_done > 0, "some items were retried, then done");
    let redriven: i64 = conn
        .query_row(
            "SELECT count(*) FROM events WHERE kind = 'redriven'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(redriven > 0, "the retry tier was redriven by a later cycle");
    // The agent's flakiness, each kind seen and retried: 503s, 429s (with
    // retry_after_s), connection errors, the long operation's timeout.
    for class in [
        "ServiceUnavailable",
        "RateLimitError",
        "ConnectionError",
        "Timeout",
    ] {
        let n: i64 = conn
            .query_row(
                "SELECT count(*) FROM events WHERE kind = 'retry' AND message LIKE ?1 || ':%'",
                [class],
                |r| r.get(0),
            )
            .unwrap();
        assert!(n > 0, "no {class} was retried");
    }
    let quarantined_with_letters: i64 = conn
        .query_row(
            "SELECT count(*) FROM items i WHERE i.status = 'failed' AND i.tier = 'manual'
               AND EXISTS (SELECT 1 FROM dead_letters d WHERE d.item_id = i.id AND d.error_class = 'BadRequest')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        quarantined_with_letters > 0,
        "quarantined items carry dead letters"
    );
    let resumed: String = conn
        .query_row(
            "SELECT result FROM items WHERE label = 'blog:ai:a-very-long-essay'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        resumed.contains("resumed_from"),
        "the op-id resume happened: {resumed}"
    );
    assert!(stdout.contains("op-id"), "{stdout}");
    let scheduled: i64 = conn
        .query_row(
            "SELECT count(*) FROM runs r JOIN batches b ON b.id = r.batch_id
              WHERE b.name = 'reports' AND r.trigger = 'schedule' AND r.ended_at IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        scheduled >= 1,
        "the daemon ran the scheduled batch: {stdout}"
    );

    assert_eq!(mine.fingerprint(), before, "the user's store was written");

    // Nothing of the demo is left running (processes it stopped may take a
    // moment to go on a loaded machine: polled, with a generous deadline).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut left = common::processes_in(&demo_dir);
    while !left.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        left = common::processes_in(&demo_dir);
    }
    assert_eq!(left, Vec::<String>::new());
}
