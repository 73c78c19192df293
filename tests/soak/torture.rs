//! Concurrency torture: eight runners started again and again on one batch
//! (half of them waiting for the lock, half stepping down), a storm of
//! `requeue --all-failed` from the CLI, a dashboard polling in a terminal
//! and a script polling `status --json`, all at once until the batch is
//! drained. Nothing crashes here, so every key's side effect happens once;
//! no "database is locked" reaches a user; every snapshot of the counters
//! equals a count of the items table.
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::pty;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

use common::{Env, lines, tally};

const BATCH: &str = "t";
const ITEMS: usize = 250;
const RUNNERS: usize = 8;

/// What the counters say against a count of the items, read in one
/// transaction (one snapshot); `None` when they agree.
fn counters_off(conn: &mut rusqlite::Connection) -> Option<String> {
    let tx = conn.transaction().unwrap();
    let rows: Vec<(String, i64, i64)> = {
        let mut st = tx
            .prepare(
                "SELECT c.bucket, c.n, (SELECT count(*) FROM items i WHERE i.batch_id = c.batch_id AND
                   (CASE i.status WHEN 'failed' THEN i.tier WHEN 'done' THEN i.outcome
                    ELSE i.status END) = c.bucket)
                 FROM counts c",
            )
            .unwrap();
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    tx.commit().unwrap();
    let off: Vec<_> = rows.iter().filter(|(_, n, m)| n != m).collect();
    (!off.is_empty()).then(|| format!("{off:?}"))
}

/// Problems a command's output shows a user: a lock, a crash.
fn complaint(what: &str, code: Option<i32>, ok: &[i32], stderr: &str) -> Option<String> {
    let lower = stderr.to_lowercase();
    if !code.is_some_and(|c| ok.contains(&c))
        || lower.contains("locked")
        || lower.contains("busy")
        || lower.contains("panick")
    {
        Some(format!("{what}: exit {code:?}: {stderr}"))
    } else {
        None
    }
}

#[test]
fn eight_runners_a_requeue_storm_and_pollers_on_one_batch() {
    let env = Env::new();
    env.config(&format!(
        "[batch.{BATCH}]\nconcurrency = 3\nretries = 0\nmax_attempts = 1000\n"
    ));
    let keys: Vec<String> = (0..ITEMS).map(|i| format!("k{i:04}")).collect();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    common::add_keys(&env, BATCH, &refs);
    let effects = env.path("effects.log");
    // A third of the executions fail permanently (the requeue storm sends
    // them back); the side effect happens only on success.
    let w = env
        .script(
            "w.sh",
            &format!(
                "cat >/dev/null\nr=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')\n\
                 sleep 0.00$((r % 8))\n\
                 if [ \"$r\" -lt 85 ]; then echo 'bad gateway' >&2; exit 2; fi\n\
                 echo \"$NIGHTSHIFT_KEY\" >> {}\necho '\"ok\"'",
                effects.display()
            ),
        )
        .display()
        .to_string();

    let drained = Arc::new(AtomicBool::new(false));
    let problems = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let requeues = Arc::new(AtomicUsize::new(0));
    let polls = Arc::new(AtomicUsize::new(0));
    let mut dash = pty::Dash::open(
        &common::bin(),
        env.dir.path(),
        &env.db,
        &["watch", "--interval", "100ms"],
        (100, 30),
    );
    dash.wait_loaded();

    let mut threads = Vec::new();
    for n in 0..RUNNERS {
        let (env_db, dir) = (env.db.clone(), env.dir.path().to_path_buf());
        let (drained, problems, runs, w) =
            (drained.clone(), problems.clone(), runs.clone(), w.clone());
        threads.push(thread::spawn(move || {
            while !drained.load(Ordering::SeqCst) {
                let mut cmd = std::process::Command::new(common::bin());
                cmd.current_dir(&dir)
                    .env("NIGHTSHIFT_DB", &env_db)
                    .env_remove("NIGHTSHIFT_CONFIG")
                    .env("NO_COLOR", "1")
                    .arg("run")
                    .arg(BATCH);
                if n % 2 == 0 {
                    cmd.arg("--wait");
                }
                let out = cmd.args(["--", &w]).output().unwrap();
                runs.fetch_add(1, Ordering::SeqCst);
                let err = String::from_utf8_lossy(&out.stderr);
                if let Some(p) = complaint("run", out.status.code(), &[0, 1], &err) {
                    problems.lock().unwrap().push(p);
                }
            }
        }));
    }
    {
        let (stop, problems1, requeues) = (drained.clone(), problems.clone(), requeues.clone());
        let db = env.db.clone();
        let cmd = move || {
            let mut c = std::process::Command::new(common::bin());
            c.env("NIGHTSHIFT_DB", &db).env("NO_COLOR", "1");
            c
        };
        let status_cmd = cmd.clone();
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let out = cmd()
                    .args(["requeue", BATCH, "--all-failed"])
                    .output()
                    .unwrap();
                requeues.fetch_add(1, Ordering::SeqCst);
                let err = String::from_utf8_lossy(&out.stderr);
                if let Some(p) = complaint("requeue", out.status.code(), &[0], &err) {
                    problems1.lock().unwrap().push(p);
                }
            }
        }));
        let (stop, problems2, polls) = (drained.clone(), problems.clone(), polls.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let out = status_cmd().args(["status", "--json"]).output().unwrap();
                polls.fetch_add(1, Ordering::SeqCst);
                let err = String::from_utf8_lossy(&out.stderr);
                if let Some(p) = complaint("status", out.status.code(), &[0], &err) {
                    problems2.lock().unwrap().push(p);
                }
            }
        }));
    }

    // Snapshots of the counters until every item is done.
    let mut conn = common_sql(&env);
    let mut snapshots = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    loop {
        if let Some(off) = counters_off(&mut conn) {
            problems
                .lock()
                .unwrap()
                .push(format!("counters differ from the items: {off}"));
        }
        snapshots += 1;
        let done: i64 = conn
            .query_row(
                "SELECT count(*) FROM items WHERE status = 'done'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if done == ITEMS as i64 || problems.lock().unwrap().len() > 10 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not drained: {done} of {ITEMS} done"
        );
        thread::sleep(std::time::Duration::from_millis(10));
    }
    drained.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }
    let screen = dash.screen();
    dash.key("q");
    assert_eq!(
        dash.wait_exit(),
        0,
        "the dashboard survived it all:\n{screen}"
    );

    let problems = problems.lock().unwrap().clone();
    let ran = tally(&lines(&effects));
    let twice: Vec<_> = ran.iter().filter(|(_, n)| **n > 1).collect();
    let failures = {
        let c = common_sql(&env);
        c.query_row("SELECT count(*) FROM dead_letters", [], |r| {
            r.get::<_, i64>(0)
        })
        .unwrap()
    };
    println!(
        "torture: {ITEMS} items, {} runs started by {RUNNERS} runners, {} requeues, {} status polls, \
         {snapshots} counter snapshots, {failures} failures requeued, {} keys run twice, {} problems",
        runs.load(Ordering::SeqCst),
        requeues.load(Ordering::SeqCst),
        polls.load(Ordering::SeqCst),
        twice.len(),
        problems.len(),
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(twice.is_empty(), "keys executed twice: {twice:?}");
    assert_eq!(ran.len(), ITEMS);
    assert!(failures > 0, "the requeue storm had nothing to do");
    assert_eq!(
        common_sql(&env)
            .query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
            .unwrap(),
        "ok"
    );
}

fn common_sql(env: &Env) -> rusqlite::Connection {
    env.sql()
}
