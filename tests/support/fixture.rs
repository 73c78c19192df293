//! A dashboard fixture store, built through the library API with explicit
//! times: items in every state, dead letters of several classes on both
//! sides of the 24 h line, runs (ok, failed, lock-held, one running with its
//! lock), a paused batch, operator events. Deterministic for a given `now`.

#![allow(dead_code)]

use std::path::Path;

use nightshift::model::{
    EventKind, Fire, Holder, Millis, NewEvent, NewItem, Outcome, Pause, RunState, Tier, Trigger,
};
use nightshift::store::{AttemptLog, Completion, Failure, RunEnd, Selection, Store};

/// 2026-01-01T12:00:00Z.
pub const NOW: Millis = 1_767_268_800_000;
pub const MIN: Millis = 60_000;
pub const HOUR: Millis = 60 * MIN;
pub const ACTOR: &str = "ops@fixture";

pub struct Options {
    pub now: Millis,
    /// A run in progress holding the lock (snapshots); off for end-to-end
    /// tests that start a real runner.
    pub running: bool,
}

fn holder() -> Holder {
    Holder {
        host: "worker-1".into(),
        pid: 4242,
        pid_start: None,
    }
}

struct Run<'a> {
    store: &'a mut Store,
    batch: &'a str,
    id: i64,
}

impl Run<'_> {
    fn start(store: &mut Store, batch: &str, trigger: Trigger, at: Millis) -> i64 {
        let id = store
            .start_run(batch, trigger, None, &holder(), at, None)
            .unwrap();
        store
            .log_event(
                &NewEvent::new(
                    at,
                    batch,
                    EventKind::RunStarted,
                    format!("run {id} started ({trigger}) on worker-1:4242"),
                )
                .run(id),
            )
            .unwrap();
        id
    }

    /// Claims `n` pending items at `at`; returns (item id, key, token).
    /// Claims need the batch lock: a run that does not hold it (the
    /// finished runs of the history) takes it just for the claim.
    fn claim(&mut self, n: usize, at: Millis) -> Vec<(i64, String, i64)> {
        let claims = match self
            .store
            .claim(self.batch, self.id, n, at + 10 * MIN, at)
            .unwrap()
        {
            Some(claims) => claims,
            None => {
                let token = format!("fixture-{}", self.id);
                self.store
                    .acquire_lock(
                        self.batch,
                        &token,
                        &holder(),
                        Some(self.id),
                        at + MIN,
                        at,
                        &[],
                        1,
                    )
                    .unwrap();
                let claims = self
                    .store
                    .claim(self.batch, self.id, n, at + 10 * MIN, at)
                    .unwrap()
                    .expect("lock held");
                self.store.release_lock(self.batch, &token).unwrap();
                claims
            }
        };
        claims
            .into_iter()
            .map(|c| (c.item_id, c.key, c.token))
            .collect()
    }

    fn done(&mut self, c: &(i64, String, i64), outcome: Outcome, cost: Option<f64>, at: Millis) {
        let result = match outcome {
            Outcome::Empty => None,
            _ => Some(r#"{"url":"https://example.com/post","words":812}"#),
        };
        let kind = if outcome == Outcome::Empty {
            EventKind::Empty
        } else {
            EventKind::Done
        };
        let ok = self
            .store
            .complete(
                &Completion {
                    usage: None,
                    item_id: c.0,
                    token: c.2,
                    run_id: self.id,
                    outcome,
                    result,
                    cost,
                    version: None,
                    now: at,
                },
                &NewEvent::new(at, self.batch, kind, format!("{kind} (attempt 1)"))
                    .run(self.id)
                    .key(&c.1),
            )
            .unwrap();
        assert!(ok);
    }

    fn fail(&mut self, c: &(i64, String, i64), tier: Tier, class: &str, message: &str, at: Millis) {
        let kind = if tier == Tier::Retry {
            EventKind::Failed
        } else {
            EventKind::Quarantined
        };
        let ok = self
            .store
            .fail(
                &Failure {
                    item_id: c.0,
                    token: c.2,
                    run_id: self.id,
                    tier,
                    error_class: class,
                    message,
                    next_attempt_at: (tier == Tier::Retry).then_some(at + HOUR),
                    cost: None,
                    now: at,
                },
                &NewEvent::new(at, self.batch, kind, format!("{class}: {message}"))
                    .run(self.id)
                    .key(&c.1),
            )
            .unwrap();
        assert!(ok);
        // What the worker printed: a colour escape that must stay inert.
        let stderr = format!("投稿を開始します\n\u{1b}[31m{class}\u{1b}[0m: {message}\n");
        let log = AttemptLog {
            attempt: 1,
            run_id: Some(self.id),
            at,
            stderr,
            cut: false,
        };
        self.store.record_attempt_log(c.0, &log).unwrap();
    }

    fn finish(self, state: RunState, summary: &str, at: Millis) {
        self.store
            .finish_run(self.id, &RunEnd::new(state, summary), at)
            .unwrap();
        self.store
            .log_event(&NewEvent::new(at, self.batch, EventKind::RunFinished, summary).run(self.id))
            .unwrap();
    }
}

fn items(prefix: &str, n: usize) -> Vec<NewItem> {
    (1..=n)
        .map(|i| {
            let slug = format!("post-{i:02}");
            let label = if i == 7 {
                "ブログ:日記:こんにちは".to_string()
            } else {
                format!("{prefix}:rust:{slug}")
            };
            NewItem {
                key: format!("{prefix}-{i:02}"),
                label,
                payload: format!(
                    r#"{{"site":"{prefix}","category":"rust","slug":"{slug}","title":"Post number {i}","tags":["a","b"]}}"#
                ),
                ..Default::default()
            }
        })
        .collect()
}

pub fn build(db: &Path, opts: &Options) {
    let now = opts.now;
    let (mut store, created) = Store::create(db).unwrap();
    assert!(created);
    // In time order, so event ids and times agree as in real life.
    let r = "reports";
    store
        .add_items(r, &items("report", 5), now - 50 * HOUR, |_| {})
        .unwrap();
    let b = "articles";
    store
        .add_items(b, &items("blog", 60), now - 48 * HOUR, |_| {})
        .unwrap();

    // Run 1, 40 h ago: 8 done (1 empty), 2 failed: the previous 24 h.
    let t = now - 40 * HOUR;
    let id = Run::start(&mut store, b, Trigger::Schedule, t);
    let mut run = Run {
        store: &mut store,
        batch: b,
        id,
    };
    let c = run.claim(10, t);
    for (i, item) in c.iter().take(8).enumerate() {
        let outcome = if i == 3 {
            Outcome::Empty
        } else {
            Outcome::Done
        };
        run.done(item, outcome, None, t + (i as i64 + 1) * MIN);
    }
    run.fail(
        &c[8],
        Tier::Retry,
        "TimeoutError",
        "worker timed out after 600s",
        t + 9 * MIN,
    );
    run.fail(
        &c[9],
        Tier::Manual,
        "HTTP400",
        "bad request: slug already taken",
        t + 10 * MIN,
    );
    run.finish(
        RunState::Failed,
        "articles: 7 done, 1 empty, 2 failed (1 retry, 1 manual), 11m",
        t + 11 * MIN,
    );

    // Run 2, 30 h ago.
    let t = now - 30 * HOUR;
    let id = Run::start(&mut store, b, Trigger::Schedule, t);
    let mut run = Run {
        store: &mut store,
        batch: b,
        id,
    };
    let c = run.claim(10, t);
    for (i, item) in c.iter().take(7).enumerate() {
        run.done(item, Outcome::Done, None, t + (i as i64 + 1) * MIN);
    }
    run.fail(
        &c[7],
        Tier::Retry,
        "RateLimitError",
        "429 Too Many Requests (retry after 30s)",
        t + 8 * MIN,
    );
    run.fail(
        &c[8],
        Tier::Retry,
        "RateLimitError",
        "429 Too Many Requests (retry after 30s)",
        t + 8 * MIN,
    );
    run.fail(
        &c[9],
        Tier::Retry,
        "TimeoutError",
        "worker timed out after 600s",
        t + 9 * MIN,
    );
    run.finish(
        RunState::Failed,
        "articles: 7 done, 3 failed (3 retry), 10m",
        t + 10 * MIN,
    );

    // The second batch's one run.
    let t = now - 26 * HOUR;
    let id = Run::start(&mut store, r, Trigger::Schedule, t);
    let mut run = Run {
        store: &mut store,
        batch: r,
        id,
    };
    let c = run.claim(2, t);
    run.done(&c[0], Outcome::Done, None, t + MIN);
    run.done(&c[1], Outcome::Done, None, t + 2 * MIN);
    run.finish(RunState::Ok, "reports: 2 done, 2m", t + 2 * MIN);

    // Run 3, 20 h ago: stepped down, someone else held the lock.
    let t = now - 20 * HOUR;
    let id = store
        .start_run(b, Trigger::Manual, None, &holder(), t, None)
        .unwrap();
    store
        .finish_run(
            id,
            &RunEnd::new(
                RunState::LockHeld,
                "articles: lock-held: worker-2:77 is running it",
            ),
            t,
        )
        .unwrap();
    store
        .log_event(
            &NewEvent::new(
                t,
                b,
                EventKind::LockHeld,
                "articles: lock-held: worker-2:77 is running it",
            )
            .run(id),
        )
        .unwrap();

    // Run 4, 10 h ago: this side of the 24 h line.
    let t = now - 10 * HOUR;
    store
        .log_event(&NewEvent::new(
            t,
            b,
            EventKind::LockTakeover,
            "took over the lock of worker-2:77 (expired)",
        ))
        .unwrap();
    let id = Run::start(&mut store, b, Trigger::Schedule, t);
    let mut run = Run {
        store: &mut store,
        batch: b,
        id,
    };
    let c = run.claim(8, t);
    for (i, item) in c.iter().take(5).enumerate() {
        run.done(item, Outcome::Done, None, t + (i as i64 + 1) * MIN);
    }
    run.fail(
        &c[5],
        Tier::Retry,
        "TimeoutError",
        "worker timed out after 600s",
        t + 6 * MIN,
    );
    run.fail(
        &c[6],
        Tier::Manual,
        "TimeoutError",
        "worker timed out after 600s (attempt 5 of 5; quarantined)",
        t + 7 * MIN,
    );
    run.fail(
        &c[7],
        Tier::Manual,
        "ValidationError",
        "field \"title\" too long \x1b[31m(512 > 200)\x1b[0m",
        t + 7 * MIN,
    );
    run.finish(
        RunState::Failed,
        "articles: 5 done, 3 failed (1 retry, 2 manual), 8m",
        t + 8 * MIN,
    );

    // The second batch paused; its schedule fired into the pause.
    store
        .pause_batch(
            r,
            &Pause {
                reason: "waiting for the new API key".into(),
                by: ACTOR.into(),
                at: now - 3 * HOUR,
            },
        )
        .unwrap();
    store
        .record_fire(
            r,
            &Fire {
                at: now - 150 * MIN,
                outcome: "skipped".into(),
                reason: Some("paused".into()),
                run_id: None,
            },
            now - 150 * MIN,
        )
        .unwrap();

    // Run 5, 2 h ago, started from the dashboard, with cost.
    let t = now - 2 * HOUR;
    let id = Run::start(&mut store, b, Trigger::Dashboard, t);
    let mut run = Run {
        store: &mut store,
        batch: b,
        id,
    };
    let c = run.claim(6, t);
    for (i, item) in c.iter().take(5).enumerate() {
        let outcome = if i == 4 {
            Outcome::Empty
        } else {
            Outcome::Done
        };
        run.done(item, outcome, Some(0.02), t + (i as i64 + 1) * MIN);
    }
    run.fail(
        &c[5],
        Tier::Retry,
        "RateLimitError",
        "429 Too Many Requests",
        t + 6 * MIN,
    );
    run.finish(
        RunState::Failed,
        "articles: 4 done, 1 empty, 1 failed (1 retry), $0.10, 6m",
        t + 6 * MIN,
    );

    // Operator actions an hour ago.
    let t = now - HOUR;
    store
        .requeue(
            b,
            &Selection {
                keys: vec!["blog-09".into()],
                ..Selection::default()
            },
            false,
            false,
            ACTOR,
            t,
        )
        .unwrap();
    store
        .skip(
            b,
            &["blog-60".to_string()],
            "duplicate of blog-59",
            ACTOR,
            t,
        )
        .unwrap();

    if opts.running {
        // Run 6, started 5 min ago and still going: it holds the lock.
        let t = now - 5 * MIN;
        let id = Run::start(&mut store, b, Trigger::Schedule, t);
        store
            .acquire_lock(
                b,
                "fixture-token",
                &holder(),
                Some(id),
                now + 45_000,
                t,
                &[],
                1,
            )
            .unwrap();
        let mut run = Run {
            store: &mut store,
            batch: b,
            id,
        };
        let c = run.claim(5, t);
        run.done(&c[0], Outcome::Done, Some(0.03), now - 4 * MIN);
        run.done(&c[1], Outcome::Done, Some(0.03), now - 2 * MIN);
        run.done(&c[2], Outcome::Done, Some(0.03), now - 30_000);
        // The daemon that schedules them, heard from just now.
        let daemon = nightshift::model::Daemon {
            token: "fixture-daemon".into(),
            holder: holder(),
            started_at: now - 50 * HOUR,
            beat_at: now - 2_000,
            stopped_at: None,
            stopping_at: None,
            batches: vec![b.into(), r.into()],
        };
        store.daemon_started(&daemon, now).unwrap();
    }

    drop(store);

    // `add` records who added, from the environment: make it fixed.
    if nightshift::store::is_server(db) {
        let mut c = postgres::Client::connect(db.to_str().unwrap(), postgres::NoTls).unwrap();
        c.execute(
            "UPDATE nightshift.events SET actor = $1 WHERE kind = 'added'",
            &[&ACTOR],
        )
        .unwrap();
        return;
    }
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute("UPDATE events SET actor = ?1 WHERE kind = 'added'", [ACTOR])
        .unwrap();
}

/// The worker's error in the Japanese store: long enough to wrap.
pub const JA_ERROR: &str = "投稿に失敗しました：サーバーが応答しません（503）。しばらくしてから再度お試しください。認証トークンの有効期限が切れている可能性があります。管理画面で再ログインしてください🙇 詳細はログを参照（e\u{301}chec）";

/// A store of Japanese text, built as `build` builds its own: labels in
/// kanji and kana, with emoji and combining marks, hashed keys as
/// `--key-fields` makes them, and one run that quarantined half of them
/// with a long Japanese error under a Japanese error class.
pub fn build_japanese(db: &Path, now: Millis) {
    let (mut store, created) = Store::create(db).unwrap();
    assert!(created);
    let labels = [
        "ブログ:技術記事:記事01",
        "ブログ:日記:記事02",
        "ブログ:技術記事:記事03",
        "ブログ:お知らせ:記事04",
        "絵文字:🎉:お祝い🎊",
        "ブログ:café:e\u{301}te\u{301}",
        "ブログ:技術記事:とても長いタイトルの記事でラベルが列に収まらない場合",
        "ﾌﾞﾛｸﾞ:半角ｶﾀｶﾅ:ｷｼﾞ08",
    ];
    let items: Vec<NewItem> = labels
        .iter()
        .map(|label| NewItem {
            key: nightshift::key::hash_key(label),
            label: label.to_string(),
            payload:
                serde_json::json!({"label": label, "title": "記事 🎉 café", "tags": ["一", "二"]})
                    .to_string(),
            ..Default::default()
        })
        .collect();
    let b = "blogs";
    store.add_items(b, &items, now - HOUR, |_| {}).unwrap();
    let t = now - 30 * MIN;
    let id = Run::start(&mut store, b, Trigger::Manual, t);
    let mut run = Run {
        store: &mut store,
        batch: b,
        id,
    };
    let c = run.claim(labels.len(), t);
    for (i, item) in c.iter().enumerate() {
        let at = t + (i as i64 + 1) * 10_000;
        if i % 2 == 0 {
            run.fail(item, Tier::Manual, "投稿エラー", JA_ERROR, at);
        } else {
            run.done(item, Outcome::Done, None, at);
        }
    }
    run.finish(
        RunState::Failed,
        "blogs: 4 done, 0 empty, 4 failed (0 retry, 4 manual), 0 retried, 0 skipped-done, 1m20s",
        t + 2 * MIN,
    );
}
