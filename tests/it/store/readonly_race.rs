//! Read-only reads while writers in other processes come and go: a writer
//! opening the store creates `-wal` then `-shm`, the last one closing
//! removes them. A reader caught in between must still get an answer.

use crate::support as common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::Env;
use nightshift::store::{Access, Store};

/// Each churn goes on for at least this long, and until writers and
/// reader have each done this many: progress, not a time, ends it, so a
/// loaded machine only makes it slower.
const LEAST: (Duration, usize) = (Duration::from_secs(2), 11);

/// Two writer processes open and close the store (`pause`) over and over
/// while `read` reads it; every read that failed, with the counts done.
fn churn<E: ToString>(
    env: &Env,
    mut read: impl FnMut() -> Result<i64, E>,
) -> (usize, usize, Vec<String>) {
    let stop = Arc::new(AtomicBool::new(false));
    let runs = Arc::new(AtomicUsize::new(0));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, runs) = (stop.clone(), runs.clone());
            let mut cmd = env.cmd();
            cmd.args(["pause", "b", "--reason", "churn"]);
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    cmd.assert().success();
                    runs.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let (mut reads, mut errors) = (0, Vec::new());
    while start.elapsed() < LEAST.0 || reads < LEAST.1 || runs.load(Ordering::SeqCst) < LEAST.1 {
        match read() {
            Ok(pending) => assert_eq!(pending, 3),
            Err(e) => errors.push(e.to_string()),
        }
        reads += 1;
    }
    stop.store(true, Ordering::SeqCst);
    for w in writers {
        w.join().unwrap();
    }
    (runs.load(Ordering::SeqCst), reads, errors)
}

#[test]
fn reads_survive_writers_opening_and_closing() {
    let env = Env::new();
    env.add_items("b", 3);
    let reader = Store::open(&env.db, Access::ReadOnly).unwrap();
    let (runs, reads, errors) = churn(&env, || reader.counts("b").map(|c| c.pending));
    assert!(
        errors.is_empty(),
        "{} of {reads} reads failed ({runs} writer runs), e.g. {}",
        errors.len(),
        errors[0]
    );
}

/// The same churn, read the way `status` reads: every read of one command in
/// one snapshot. The snapshot's first read is where SQLite maps `-shm`, so a
/// writer's close removing it then must be retried like any open.
#[test]
fn snapshots_survive_writers_opening_and_closing() {
    let env = Env::new();
    env.add_items("b", 3);
    // A fresh store per snapshot, as each `status` is a fresh process.
    let (runs, reads, errors) = churn(&env, || {
        Store::open(&env.db, Access::ReadOnly)
            .and_then(|reader| reader.snapshot(|s| s.counts("b"))?)
            .map(|c| c.pending)
    });
    assert!(
        errors.is_empty(),
        "{} of {reads} snapshots failed ({runs} writer runs), e.g. {}",
        errors.len(),
        errors[0]
    );
}
