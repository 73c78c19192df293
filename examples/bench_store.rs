//! Store-level helpers for `bench/foundation.sh`, using only the library's
//! public API (the same code paths the runner and the CLI use).
//!
//! ```text
//! bench_store fail DB BATCH N      claim N pending items and fail them (dead letters)
//! bench_store status DB CALLS      time the store part of `status --json`
//! bench_store probe DB STOP_FILE   a runner-like writer: holds a batch lock
//!                                  and writes a little every 2 ms until
//!                                  STOP_FILE exists; reports how long its
//!                                  writes waited
//! bench_store scale DIR N...       for each N, a fresh store in DIR: time per
//!                                  item of adding N items, then of claiming
//!                                  and completing them all (the runner's
//!                                  store calls, 500 per group commit)
//! ```

use std::path::Path;
use std::time::{Duration, Instant};

use nightshift::model::{EventKind, Holder, NewEvent, NewItem, Outcome, Tier, Trigger};
use nightshift::store::{Access, Completion, Failure, Store};
use nightshift::util::time::now_ms;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["fail", db, batch, n] => fail(Path::new(db), batch, n.parse()?),
        ["status", db, calls] => status(Path::new(db), calls.parse()?),
        ["probe", db, stop] => probe(Path::new(db), Path::new(stop)),
        ["scale", dir, sizes @ ..] => {
            for n in sizes {
                scale(Path::new(dir), n.parse()?)?;
            }
            Ok(())
        }
        _ => {
            Err("usage: bench_store fail DB BATCH N | status DB CALLS | probe DB STOP_FILE".into())
        }
    }
}

/// Claims `n` pending items and fails them as the runner does (a dead
/// letter each), in group commits of 2,000. Error classes rotate over five
/// names; every third failure is transient (retry tier).
fn fail(db: &Path, batch: &str, n: usize) -> Res<()> {
    const CLASSES: [&str; 5] = [
        "TimeoutError",
        "RateLimitError",
        "ServerError",
        "BadRequest",
        "ParseError",
    ];
    let started = Instant::now();
    let mut store = Store::open(db, Access::ReadWrite)?;
    let holder = Holder {
        host: "bench".into(),
        pid: std::process::id(),
        pid_start: None,
    };
    let run = store.start_run(batch, Trigger::Manual, None, &holder, now_ms(), None)?;
    // Claims need the batch lock held by this run, as the runner holds it.
    store.acquire_lock(
        batch,
        "bench",
        &holder,
        Some(run),
        now_ms() + 3_600_000,
        now_ms(),
        &[],
        1,
    )?;
    let mut failed = 0;
    while failed < n {
        let now = now_ms();
        let claims = store
            .claim(batch, run, (n - failed).min(2_000), now + 600_000, now)?
            .ok_or("bench lock lost")?;
        if claims.is_empty() {
            break;
        }
        let results = store.group(|s| -> Res<()> {
            for (i, c) in claims.iter().enumerate() {
                let class = CLASSES[(failed + i) % CLASSES.len()];
                let tier = if (failed + i) % 3 == 0 {
                    Tier::Retry
                } else {
                    Tier::Manual
                };
                let f = Failure {
                    item_id: c.item_id,
                    token: c.token,
                    run_id: run,
                    tier,
                    error_class: class,
                    message: "simulated failure",
                    next_attempt_at: (tier == Tier::Retry).then_some(now + 3_600_000),
                    cost: None,
                    now,
                };
                let event = NewEvent::new(
                    now,
                    batch,
                    EventKind::Failed,
                    format!("{class}: simulated failure"),
                )
                .run(run)
                .key(&c.key);
                s.fail(&f, &event)?;
            }
            Ok(())
        })?;
        results?;
        failed += claims.len();
    }
    store.release_lock(batch, "bench")?;
    println!(
        "failed {failed} items in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// What `status --json` asks of the store: a read-only open and every
/// batch's counts, pause, lock and last run, in one read. Prints the
/// median, p99 and maximum over `calls` calls, in milliseconds.
fn status(db: &Path, calls: usize) -> Res<()> {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls.max(1) {
        let t = Instant::now();
        let store = Store::open(db, Access::ReadOnly)?;
        let infos = store.batch_infos(None)?;
        std::hint::black_box(infos);
        times.push(t.elapsed());
    }
    let (median, p99, max) = quantiles(&mut times);
    println!("store time per status call: median {median:.3} ms, p99 {p99:.3} ms, max {max:.3} ms");
    Ok(())
}

/// A stand-in for a runner's store writer: appends one small event every
/// 2 ms and records how long each write took, lock wait included.
fn probe(db: &Path, stop: &Path) -> Res<()> {
    let mut store = Store::open(db, Access::ReadWrite)?;
    // Holds a batch lock as a live runner does (bulk writers pace
    // themselves by it).
    let holder = Holder {
        host: "bench".into(),
        pid: std::process::id(),
        pid_start: None,
    };
    store.acquire_lock(
        "probe",
        "probe",
        &holder,
        None,
        now_ms() + 3_600_000,
        now_ms(),
        &[],
        1,
    )?;
    let mut times = Vec::new();
    while !stop.exists() {
        let event = NewEvent {
            at: now_ms(),
            kind: "probe".into(),
            message: "bench probe write".into(),
            ..NewEvent::default()
        };
        let t = Instant::now();
        store.log_event(&event)?;
        times.push(t.elapsed());
        std::thread::sleep(Duration::from_millis(2));
    }
    store.release_lock("probe", "probe")?;
    let writes = times.len();
    let (median, p99, max) = quantiles(&mut times);
    println!("probe writes: {writes}, median {median:.3} ms, p99 {p99:.3} ms, max {max:.3} ms");
    Ok(())
}

fn quantiles(times: &mut [Duration]) -> (f64, f64, f64) {
    if times.is_empty() {
        return (0.0, 0.0, 0.0);
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    (ms(at(0.5)), ms(at(0.99)), ms(times[times.len() - 1]))
}

/// CPU time (user + system) of this process so far.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    // Clock ticks of 10 ms (USER_HZ = 100 on Linux).
    Duration::from_millis(f.iter().sum::<u64>() * 10)
}

/// Time per item of an add of `n` items into a fresh store, then of
/// claiming and completing every one of them as the runner does.
fn scale(dir: &Path, n: usize) -> Res<()> {
    let db = dir.join(format!("scale-{n}.db"));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let (mut store, _) = Store::create(&db)?;
    let items: Vec<NewItem> = (0..n)
        .map(|i| {
            let label = format!("blog{}:c{}:post-{i}", i % 4, i % 37);
            NewItem {
                key: nightshift::key::hash_key(&label),
                payload: format!(
                    r#"{{"site":"blog{}","slug":"post-{i}","title":"Title {i}"}}"#,
                    i % 4
                ),
                label,
                ..NewItem::default()
            }
        })
        .collect();
    let per_item = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    let (t, cpu) = (Instant::now(), cpu_time());
    store.add_items("scale", &items, now_ms(), |_| {})?;
    let (add_wall, add_cpu) = (t.elapsed(), cpu_time() - cpu);
    drop(items);

    let holder = Holder {
        host: "bench".into(),
        pid: std::process::id(),
        pid_start: None,
    };
    let run = store.start_run("scale", Trigger::Manual, None, &holder, now_ms(), None)?;
    store.acquire_lock(
        "scale",
        "bench",
        &holder,
        Some(run),
        now_ms() + 3_600_000,
        now_ms(),
        &[],
        1,
    )?;
    let (t, cpu) = (Instant::now(), cpu_time());
    let mut done = 0;
    loop {
        let now = now_ms();
        let claims = store
            .claim("scale", run, 500, now + 600_000, now)?
            .ok_or("bench lock lost")?;
        if claims.is_empty() {
            break;
        }
        let results = store.group(|s| -> Res<()> {
            for c in &claims {
                let completion = Completion {
                    usage: None,
                    item_id: c.item_id,
                    token: c.token,
                    run_id: run,
                    outcome: Outcome::Done,
                    result: Some("{\"ok\":true}"),
                    cost: None,
                    version: None,
                    now,
                };
                let event = NewEvent::new(now, "scale", EventKind::Done, "done")
                    .run(run)
                    .key(&c.key);
                s.complete(&completion, &event)?;
            }
            Ok(())
        })?;
        results?;
        done += claims.len();
    }
    let (work_wall, work_cpu) = (t.elapsed(), cpu_time() - cpu);
    store.release_lock("scale", "bench")?;
    assert_eq!(done, n, "every item claimed and completed once");
    println!(
        "{n:>9} items: add {:.2} us/item (cpu {:.2}), claim+complete {:.2} us/item (cpu {:.2})",
        per_item(add_wall),
        per_item(add_cpu),
        per_item(work_wall),
        per_item(work_cpu)
    );
    drop(store);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    Ok(())
}
