//! Store-level throughput of the two backends with several concurrent
//! claimers, each on its own connection (as runners on several hosts would
//! be): `bench/backends.sh` runs it and `bench/README.md` has the results.
//!
//! ```text
//! bench_backends [ITEMS]      ITEMS per measurement (default 4000)
//! ```
//!
//! For each backend and 1, 2, 4, 8 claimers: a fresh store with ITEMS
//! pending items, one run holding the batch lock, and the claimers, each
//! looping `claim(1)` then `complete` (a no-op worker) until the queue is
//! empty: items/s. Then the same with `claim(1)` alone: claims/s.
//!
//! PostgreSQL: `NIGHTSHIFT_BENCH_PG_URL` names a database to use (its
//! nightshift schema is dropped first!); without it a private server is
//! started as the tests do (`tests/support/pg.rs`, `NIGHTSHIFT_PG_OPTS` for
//! extra server settings).

#[path = "../tests/support/pg.rs"]
mod pg;
// pg.rs asks it about PostgreSQL only.
#[allow(dead_code)]
#[path = "../tests/support/require.rs"]
mod require;

use std::path::PathBuf;
use std::sync::Barrier;
use std::time::Instant;

use nightshift::model::{Claim, EventKind, Holder, NewEvent, NewItem, Outcome, Trigger};
use nightshift::store::pg::PgStore;
use nightshift::store::{Access, Completion, Store};
use nightshift::util::time::now_ms;

type Res<T> = Result<T, Box<dyn std::error::Error>>;
/// Opens one more connection to the prepared store.
type Opener = Box<dyn Fn() -> Res<Box<dyn Queue>> + Sync>;

/// What a claimer does, on either backend.
trait Queue: Send {
    fn claim_one(&mut self, run: i64) -> Res<Option<Claim>>;
    fn complete(&mut self, run: i64, c: &Claim) -> Res<()>;
}

fn completion(run: i64, c: &Claim) -> (Completion<'static>, NewEvent) {
    (
        Completion {
            usage: None,
            item_id: c.item_id,
            token: c.token,
            run_id: run,
            outcome: Outcome::Done,
            result: Some("{}"),
            cost: None,
            version: None,
            now: now_ms(),
        },
        NewEvent::new(now_ms(), "b", EventKind::Done, "done").key(&c.key),
    )
}

impl Queue for Store {
    fn claim_one(&mut self, run: i64) -> Res<Option<Claim>> {
        let now = now_ms();
        let claims = self
            .claim("b", run, 1, now + 600_000, now)?
            .ok_or("lock lost")?;
        Ok(claims.into_iter().next())
    }
    fn complete(&mut self, run: i64, c: &Claim) -> Res<()> {
        let (done, event) = completion(run, c);
        Store::complete(self, &done, &event)?;
        Ok(())
    }
}

fn items(n: usize) -> Vec<NewItem> {
    (0..n)
        .map(|i| NewItem {
            key: format!("item-{i:07}"),
            label: format!("site:category:slug-{i}"),
            payload: format!(r#"{{"n":{i},"title":"an article about something"}}"#),
            ..NewItem::default()
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

enum Backend {
    Sqlite(tempfile::TempDir),
    Postgres(String),
}

impl Backend {
    /// A fresh store with `n` pending items and a run holding the lock.
    fn prepare(&self, n: usize) -> Res<(i64, Opener)> {
        let now = now_ms();
        match self {
            Backend::Sqlite(dir) => {
                let path: PathBuf = dir.path().join(format!("b{}.db", fastrand::u64(..)));
                let (mut s, _) = Store::create(&path)?;
                s.add_items("b", &items(n), now, |_| {})?;
                let run = s.start_run("b", Trigger::Manual, None, &holder(), now, None)?;
                s.acquire_lock("b", "t", &holder(), Some(run), now + 3_600_000, now, &[], 1)?;
                let open = move || -> Res<Box<dyn Queue>> {
                    Ok(Box::new(Store::open(&path, Access::ReadWrite)?))
                };
                Ok((run, Box::new(open)))
            }
            Backend::Postgres(url) => {
                let mut admin = postgres::Client::connect(url, postgres::NoTls)?;
                admin.batch_execute("DROP SCHEMA IF EXISTS nightshift CASCADE")?;
                let mut s = Store::Pg(PgStore::create(url)?.0);
                s.add_items("b", &items(n), now, |_| {})?;
                let run = s.start_run("b", Trigger::Manual, None, &holder(), now, None)?;
                s.acquire_lock("b", "t", &holder(), Some(run), now + 3_600_000, now, &[], 1)?;
                admin.batch_execute("VACUUM ANALYZE")?;
                let url = url.clone();
                let open = move || -> Res<Box<dyn Queue>> {
                    Ok(Box::new(Store::Pg(PgStore::open(&url, Access::ReadWrite)?)))
                };
                Ok((run, Box::new(open)))
            }
        }
    }
}

/// Items (or claims) per second with `k` claimers draining `n` items.
fn measure(backend: &Backend, n: usize, k: usize, complete: bool) -> Res<f64> {
    let (run, open) = backend.prepare(n)?;
    let start = Barrier::new(k + 1);
    let start = &start;
    let open = &open;
    let elapsed = std::thread::scope(|scope| -> Res<f64> {
        let handles: Vec<_> = (0..k)
            .map(|_| {
                scope.spawn(move || -> Result<usize, String> {
                    let mut q = open().map_err(|e| e.to_string())?;
                    start.wait();
                    let mut done = 0;
                    while let Some(c) = q.claim_one(run).map_err(|e| e.to_string())? {
                        if complete {
                            q.complete(run, &c).map_err(|e| e.to_string())?;
                        }
                        done += 1;
                    }
                    Ok(done)
                })
            })
            .collect();
        start.wait();
        let t = Instant::now();
        let mut total = 0;
        for h in handles {
            total += h.join().map_err(|_| "a claimer panicked")??;
        }
        let secs = t.elapsed().as_secs_f64();
        if total != n {
            return Err(format!("drained {total} of {n} items").into());
        }
        Ok(secs)
    })?;
    Ok(n as f64 / elapsed)
}

fn main() -> Res<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(4000);
    let pg_url = match std::env::var("NIGHTSHIFT_BENCH_PG_URL") {
        Ok(url) => url,
        Err(_) => pg::server()
            .ok_or("no PostgreSQL server binaries: install postgresql")?
            .database(),
    };
    let backends = [
        ("sqlite", Backend::Sqlite(tempfile::tempdir()?)),
        ("postgres", Backend::Postgres(pg_url)),
    ];
    println!("| backend | claimers | items/s (claim + complete) | claims/s (claim only) |");
    println!("|---|---:|---:|---:|");
    for (name, backend) in &backends {
        for k in [1, 2, 4, 8] {
            let items = measure(backend, n, k, true)?;
            let claims = measure(backend, n, k, false)?;
            println!("| {name} | {k} | {items:.0} | {claims:.0} |");
        }
    }
    Ok(())
}
