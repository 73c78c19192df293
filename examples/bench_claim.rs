//! The cost of one claim as the batch grows: `bench/README.md` has the
//! results (issue 18, priority and not-before).
//!
//! ```text
//! bench_claim [SIZES...]      batch sizes (default 10000 1000000)
//! ```
//!
//! For each backend and size: a fresh store with that many pending items
//! (priorities -3 to 3, every fifth held by a not-before time an hour
//! ahead), one run holding the batch lock, then 2,000 claims of one item
//! (as a runner at concurrency 1 makes them): the median and the 99th
//! percentile of a claim. PostgreSQL: `NIGHTSHIFT_BENCH_PG_URL` names a
//! database to use (its nightshift schema is dropped first!); without it a
//! private server is started as the tests do.

#[path = "../tests/support/pg.rs"]
mod pg;
// pg.rs asks it about PostgreSQL only.
#[allow(dead_code)]
#[path = "../tests/support/require.rs"]
mod require;

use std::time::Instant;

use nightshift::model::{Holder, NewItem, Trigger};
use nightshift::store::Store;
use nightshift::store::pg::PgStore;
use nightshift::util::time::now_ms;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const CLAIMS: usize = 2_000;

fn items(n: usize, now: i64) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem {
            key: format!("item-{i:07}"),
            label: format!("site:category:slug-{i}"),
            payload: format!(r#"{{"n":{i},"title":"an article about something"}}"#),
            priority: i32::try_from(i % 7).unwrap_or(0) - 3,
            not_before: (i % 5 == 0).then_some(now + 3_600_000),
            written_key: None,
        })
        .collect()
}

fn holder() -> Holder {
    Holder {
        host: "bench".into(),
        pid: std::process::id(),
        pid_start: None,
    }
}

/// A fresh store of `n` items on the backend, and the run holding its lock.
fn prepare(backend: &str, dir: &std::path::Path, pg_url: &str, n: usize) -> Res<(Store, i64)> {
    let now = now_ms();
    let mut s = if backend == "sqlite" {
        Store::create(&dir.join(format!("claim-{n}.db")))?.0
    } else {
        let mut admin = postgres::Client::connect(pg_url, postgres::NoTls)?;
        admin.batch_execute("DROP SCHEMA IF EXISTS nightshift CASCADE")?;
        Store::Pg(PgStore::create(pg_url)?.0)
    };
    s.add_items("b", &items(n, now), now, |_| {})?;
    if backend == "postgres" {
        let mut admin = postgres::Client::connect(pg_url, postgres::NoTls)?;
        admin.batch_execute("VACUUM ANALYZE")?;
    }
    let run = s.start_run("b", Trigger::Manual, None, &holder(), now, None)?;
    s.acquire_lock("b", "t", &holder(), Some(run), now + 3_600_000, now, &[], 1)?;
    Ok((s, run))
}

fn main() -> Res<()> {
    let mut sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    if sizes.is_empty() {
        sizes = vec![10_000, 1_000_000];
    }
    let pg_url = match std::env::var("NIGHTSHIFT_BENCH_PG_URL") {
        Ok(url) => url,
        Err(_) => pg::server()
            .ok_or("no PostgreSQL server binaries: install postgresql")?
            .database(),
    };
    let dir = tempfile::tempdir()?;
    println!("| backend | items | claim(1) median µs | p99 µs | plan |");
    println!("|---|---:|---:|---:|---|");
    for backend in ["sqlite", "postgres"] {
        for &n in &sizes {
            let (mut s, run) = prepare(backend, dir.path(), &pg_url, n)?;
            let plan = s
                .claim_plan("b")?
                .into_iter()
                .find(|l| l.contains("items_claimable"))
                .unwrap_or_default();
            let mut took = Vec::with_capacity(CLAIMS);
            let mut last = i32::MAX;
            for _ in 0..CLAIMS {
                let now = now_ms();
                let t = Instant::now();
                let c = s
                    .claim("b", run, 1, now + 600_000, now)?
                    .ok_or("lock lost")?;
                took.push(t.elapsed().as_secs_f64() * 1e6);
                let c = c.first().ok_or("queue empty")?;
                let p = s.item("b", &c.key)?.priority;
                assert!(p <= last, "claims in priority order");
                last = p;
            }
            took.sort_by(f64::total_cmp);
            println!(
                "| {backend} | {n} | {:.0} | {:.0} | `{}` |",
                took[CLAIMS / 2],
                took[CLAIMS * 99 / 100],
                plan.trim()
            );
            drop(s);
        }
    }
    Ok(())
}
