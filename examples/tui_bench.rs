//! Dashboard benchmarks (run by `bench/tui.sh`):
//!
//! - `gen DB`: a store with 1,000,000 items, 100,000 dead letters (through
//!   `Store::claim` + `Store::fail`) and 1,000,000 events;
//! - `poll DB`: store time per dashboard poll, for the default view and
//!   the heavier ones (filters, a search, the end of the list);
//! - `pty DB BIN`: the real dashboard in a pseudo-terminal: time to first
//!   frame with data, CPU and bytes written over an idle minute, peak RSS.

#[path = "../tests/support/pty.rs"]
mod pty;

use std::path::Path;
use std::time::{Duration, Instant};

use nightshift::model::{Claim, EventKind, Holder, NewEvent, NewItem, RunState, Tier, Trigger};
use nightshift::store::{Access, DashQuery, EventsQuery, Failure, ItemsQuery, RunEnd, Store};
use nightshift::util::time::now_ms;

const BATCH: &str = "big";
const ITEMS: usize = 1_000_000;
const DEAD: usize = 100_000;
const EVENTS: usize = 1_000_000;

/// Claims `n` items for `run` the way the runner does: holding the batch
/// lock (claims without it are refused).
fn claim_locked(store: &mut Store, run: i64, n: usize, at: i64) -> Vec<Claim> {
    let holder = Holder {
        host: "bench".into(),
        pid: 1,
        pid_start: None,
    };
    let token = format!("bench-{run}");
    store
        .acquire_lock(BATCH, &token, &holder, Some(run), at + 600_000, at, &[], 1)
        .expect("lock");
    let claims = store
        .claim(BATCH, run, n, at + 600_000, at)
        .expect("claim")
        .expect("lock held");
    store.release_lock(BATCH, &token).expect("unlock");
    claims
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    // `BENCH_WAL=1`: a writer keeps the database open in WAL mode (as a
    // live runner does), so readers go through the WAL index.
    let _writer = std::env::var_os("BENCH_WAL").map(|_| {
        let c = rusqlite::Connection::open(&args[2]).expect("open writer");
        c.execute_batch("PRAGMA journal_mode = WAL; BEGIN IMMEDIATE; UPDATE batches SET hold_until = hold_until; COMMIT;")
            .expect("wal");
        c
    });
    match args.get(1).map(String::as_str) {
        Some("gen") => generate(Path::new(&args[2])),
        Some("poll") => poll(Path::new(&args[2])),
        Some("pty") => pty_bench(Path::new(&args[2]), Path::new(&args[3]), &args[4..]),
        _ => eprintln!("usage: tui_bench gen|poll DB | pty DB BIN [idle-seconds]"),
    }
}

fn generate(db: &Path) {
    let started = Instant::now();
    let (mut store, _) = Store::create(db).expect("create");
    let now = now_ms();
    let classes = [
        "TimeoutError",
        "RateLimitError",
        "HTTP400",
        "ValidationError",
        "SpawnError",
    ];
    for chunk in 0..ITEMS / 100_000 {
        let items: Vec<NewItem> = (chunk * 100_000..(chunk + 1) * 100_000)
            .map(|i| NewItem {
                key: format!("{i:032x}"),
                label: format!("site:category:slug-{i}"),
                payload: format!(
                    r#"{{"site":"site","category":"category","slug":"slug-{i}","n":{i}}}"#
                ),
                ..NewItem::default()
            })
            .collect();
        store
            .add_items(BATCH, &items, now - 3 * 86_400_000, |_| {})
            .expect("add");
    }
    eprintln!("items: {:?}", started.elapsed());
    let holder = Holder {
        host: "bench".into(),
        pid: 1,
        pid_start: None,
    };
    // Dead letters over the last two days, and runs.
    let per_run = DEAD / 40;
    for r in 0..40 {
        let at = now - 48 * 3_600_000 + r as i64 * 3_600_000;
        let run = store
            .start_run(BATCH, Trigger::Schedule, None, &holder, at, None)
            .expect("run");
        store
            .group(|s| {
                let claims = claim_locked(s, run, per_run, at);
                for (n, c) in claims.iter().enumerate() {
                    let class = classes[n % classes.len()];
                    let t = at + (n as i64 * 10);
                    s.fail(
                        &Failure {
                            item_id: c.item_id,
                            token: c.token,
                            run_id: run,
                            tier: if n % 3 == 0 {
                                Tier::Manual
                            } else {
                                Tier::Retry
                            },
                            error_class: class,
                            message: "the remote side answered 503 Service Unavailable after 30s",
                            next_attempt_at: Some(t + 3_600_000),
                            cost: None,
                            now: t,
                        },
                        &NewEvent::new(t, BATCH, EventKind::Failed, format!("{class}: 503"))
                            .run(run)
                            .key(&c.key),
                    )
                    .expect("fail");
                }
            })
            .expect("group");
        store
            .finish_run(
                run,
                &RunEnd::new(RunState::Failed, "big: 0 done, 2500 failed"),
                at + 60_000,
            )
            .expect("finish");
    }
    // A rare class: 5 failures among 100,000.
    let run = store
        .start_run(BATCH, Trigger::Manual, None, &holder, now, None)
        .expect("run");
    for c in claim_locked(&mut store, run, 5, now) {
        let f = Failure {
            item_id: c.item_id,
            token: c.token,
            run_id: run,
            tier: Tier::Manual,
            error_class: "RareError",
            message: "once in a blue moon",
            next_attempt_at: None,
            cost: None,
            now,
        };
        store
            .fail(
                &f,
                &NewEvent::new(now, BATCH, EventKind::Quarantined, "RareError")
                    .run(run)
                    .key(&c.key),
            )
            .expect("fail");
    }
    store
        .finish_run(run, &RunEnd::new(RunState::Failed, "big: 5 failed"), now)
        .expect("finish");
    eprintln!("dead letters: {:?}", started.elapsed());
    let have: i64 = count_events(db);
    let missing = (EVENTS as i64 - have).max(0) as usize;
    for chunk in 0..missing.div_ceil(50_000) {
        store
            .group(|s| {
                for i in 0..50_000.min(missing - chunk * 50_000) {
                    let n = chunk * 50_000 + i;
                    let kind = if n % 10 == 0 {
                        EventKind::Empty
                    } else {
                        EventKind::Done
                    };
                    s.log_event(
                        &NewEvent::new(
                            now - 86_400_000 + n as i64,
                            BATCH,
                            kind,
                            "done (attempt 1)",
                        )
                        .key(&format!("{n:032x}")),
                    )
                    .expect("event");
                }
            })
            .expect("group");
    }
    drop(store);
    eprintln!(
        "events: {:?} ({} total)",
        started.elapsed(),
        count_events(db)
    );
}

fn count_events(db: &Path) -> i64 {
    let c = rusqlite::Connection::open(db).expect("open");
    c.query_row("SELECT count(*) FROM events", [], |r| r.get(0))
        .expect("count")
}

fn query() -> DashQuery {
    // What the dashboard reads at 80x24: an items window of 54 rows, the
    // newest 500 events, dead letters, 150 minutes, 30 runs.
    DashQuery {
        batch: Some(BATCH.into()),
        minutes: 150,
        runs: 30,
        items: Some(ItemsQuery {
            limit: 54,
            ..ItemsQuery::default()
        }),
        class_items: None,
        dlq: true,
        events: Some(EventsQuery {
            limit: 500,
            ..EventsQuery::default()
        }),
        detail: None,
        pools: Vec::new(),
        spend: Vec::new(),
    }
}

fn time(store: &Store, q: &DashQuery, n: usize) -> (Duration, Duration, Duration) {
    let mut samples: Vec<Duration> = (0..n)
        .map(|_| {
            let t = Instant::now();
            store.dashboard(q, now_ms()).expect("poll");
            t.elapsed()
        })
        .collect();
    samples.sort();
    (samples[n / 2], samples[n * 95 / 100], samples[n - 1])
}

fn poll(db: &Path) {
    let store = Store::open(db, Access::ReadOnly).expect("open");
    let base = query();
    let mut variants: Vec<(&str, DashQuery)> =
        vec![("default view (items top, log, dead letters)", base.clone())];
    let mut q = base.clone();
    q.items.as_mut().unwrap().status = Some(nightshift::model::Status::Failed);
    variants.push(("items filtered: failed", q));
    let mut q = base.clone();
    q.items.as_mut().unwrap().offset = ITEMS - 54;
    variants.push(("items at the end (G)", q));
    let mut q = base.clone();
    q.class_items = Some(ItemsQuery {
        class: Some("TimeoutError".into()),
        limit: 54,
        ..ItemsQuery::default()
    });
    variants.push(("dead letters: one class's items", q));
    let mut q = base.clone();
    q.class_items = Some(ItemsQuery {
        class: Some("RareError".into()),
        limit: 54,
        ..ItemsQuery::default()
    });
    variants.push((
        "dead letters: a rare class's items (5 of 100,005 failed)",
        q,
    ));
    let mut q = base.clone();
    q.events.as_mut().unwrap().kinds = vec!["empty".into()];
    variants.push(("log filtered: kind empty", q));
    let mut q = base.clone();
    q.events.as_mut().unwrap().kinds = vec!["lock-held".into()];
    variants.push(("log filtered: kind lock-held (none)", q));
    let mut q = base.clone();
    q.detail = Some(format!("{:032x}", 7));
    variants.push(("item detail open", q));
    println!("| poll | median | p95 | max |");
    println!("| --- | --- | --- | --- |");
    {
        // A dashboard that may write polls through a normal connection.
        let rw = Store::open(db, Access::ReadWrite).expect("open read-write");
        let (median, p95, max) = time(&rw, &base, 100);
        println!(
            "| default view, read-write dashboard (one kept connection) | {median:.2?} | {p95:.2?} | {max:.2?} |"
        );
    }
    for (name, q) in &variants {
        let (median, p95, max) = time(&store, q, 100);
        println!("| {name} | {median:.2?} | {p95:.2?} | {max:.2?} |");
    }
    for text in ["slug-99999", "slug-4", "nothing-like-this"] {
        search(db, &base, text);
    }
}

/// A search polled as the dashboard's poller does: again at once until
/// the scan is complete. Each poll is timed; then the polls a search takes,
/// their total store time and what it found.
fn search(db: &Path, base: &DashQuery, text: &str) {
    let store = Store::open(db, Access::ReadOnly).expect("open");
    let mut q = base.clone();
    q.items.as_mut().unwrap().search = text.into();
    let mut samples = Vec::new();
    let page = loop {
        let started = Instant::now();
        let d = store.dashboard(&q, now_ms()).expect("poll");
        samples.push(started.elapsed());
        let page = d.items.expect("items");
        if page.searching.is_none() {
            break page;
        }
    };
    let total: Duration = samples.iter().sum();
    let polls = samples.len();
    samples.sort();
    println!(
        "| items search \"{text}\", each poll ({polls} polls to complete, {total:.0?} in all; {} found{}) | {:.2?} | {:.2?} | {:.2?} |",
        page.total,
        if page.capped { "+" } else { "" },
        samples[polls / 2],
        samples[polls * 95 / 100],
        samples[polls - 1]
    );
}

fn proc_stat(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the name.
    let utime = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0);
    let stime = f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    (utime, stime)
}

fn peak_rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn pty_bench(db: &Path, bin: &Path, rest: &[String]) {
    let idle: u64 = rest.first().and_then(|s| s.parse().ok()).unwrap_or(60);
    let dir = tempfile::tempdir().expect("tempdir");
    let started = Instant::now();
    let mut dash = pty::Dash::open(bin, dir.path(), db, &["watch", "--read-only"], (80, 24));
    let first_frame = loop {
        if dash.screen().contains("nightshift") {
            break started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let with_data = loop {
        let screen = dash.screen();
        // "live" in the header: a poll has answered (no ticking clock).
        if screen.contains("│big") && screen.contains(" live") {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no data:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    // Settle, then measure an idle stretch.
    std::thread::sleep(Duration::from_secs(3));
    let pid = dash.pid();
    let ticks = 100.0; // USER_HZ on Linux
    let (u0, s0) = proc_stat(pid);
    let b0 = dash.bytes.load(std::sync::atomic::Ordering::SeqCst);
    let t0 = Instant::now();
    // Which cells change while idle: sample the screen every 200 ms.
    let mut changed = std::collections::BTreeMap::<usize, (usize, usize)>::new();
    let mut prev = dash.rows();
    while t0.elapsed() < Duration::from_secs(idle) {
        std::thread::sleep(Duration::from_millis(200));
        let now = dash.rows();
        for (y, (a, b)) in prev.iter().zip(&now).enumerate() {
            let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
            for x in 0..a.len().max(b.len()) {
                if a.get(x) != b.get(x) {
                    let e = changed.entry(y).or_insert((x, x));
                    e.0 = e.0.min(x);
                    e.1 = e.1.max(x);
                }
            }
        }
        prev = now;
    }
    let (u1, s1) = proc_stat(pid);
    let b1 = dash.bytes.load(std::sync::atomic::Ordering::SeqCst);
    let wall = t0.elapsed().as_secs_f64();
    let cpu = ((u1 + s1) - (u0 + s0)) as f64 / ticks;
    let rss = peak_rss_kb(pid);
    let last_screen = dash.screen();
    dash.key("q");
    dash.wait_exit();
    let cells: Vec<String> = changed
        .iter()
        .map(|(y, (a, b))| format!("row {y} cols {a}–{b}"))
        .collect();
    println!("| measure | result |");
    println!("| --- | --- |");
    println!("| time to first frame (header drawn) | {first_frame:.0?} |");
    println!("| time to first frame with data (batch row shown) | {with_data:.0?} |");
    println!(
        "| CPU while idle ({idle} s at the 1 s interval) | {:.2} s = {:.2} % of one core |",
        cpu,
        cpu / wall * 100.0
    );
    println!("| peak RSS (VmHWM) | {:.1} MB |", rss as f64 / 1024.0);
    println!(
        "| bytes written to the terminal while idle | {} in {idle} s ({:.0} per minute) |",
        b1 - b0,
        (b1 - b0) as f64 / wall * 60.0
    );
    println!(
        "| cells that changed while idle | {} (row 0 is the header; it says `live`, with no clock) |",
        if cells.is_empty() {
            "none".to_string()
        } else {
            cells.join("; ")
        }
    );
    eprintln!("{last_screen}");
}
