//! Read-only reads while writers in other processes come and go: a writer
//! opening the store creates `-wal` then `-shm`, the last one closing
//! removes them. A reader caught in between must still get an answer.

use crate::support as common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::Env;
use nightshift::store::{Access, Store};

#[test]
fn reads_survive_writers_opening_and_closing() {
    let env = Env::new();
    env.add_items("b", 3);
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let s = stop.clone();
            let mut cmd = env.cmd();
            cmd.args(["pause", "b", "--reason", "churn"]);
            std::thread::spawn(move || {
                let mut runs = 0;
                while !s.load(Ordering::SeqCst) {
                    cmd.assert().success();
                    runs += 1;
                }
                runs
            })
        })
        .collect();
    let reader = Store::open(&env.db, Access::ReadOnly).unwrap();
    let start = Instant::now();
    let (mut reads, mut errors) = (0, Vec::new());
    while start.elapsed() < Duration::from_secs(2) {
        match reader.counts("b") {
            Ok(c) => assert_eq!(c.pending, 3),
            Err(e) => errors.push(e.to_string()),
        }
        reads += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let runs: i32 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(runs > 10 && reads > 10, "{runs} writer runs, {reads} reads");
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
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let s = stop.clone();
            let mut cmd = env.cmd();
            cmd.args(["pause", "b", "--reason", "churn"]);
            std::thread::spawn(move || {
                let mut runs = 0;
                while !s.load(Ordering::SeqCst) {
                    cmd.assert().success();
                    runs += 1;
                }
                runs
            })
        })
        .collect();
    let start = Instant::now();
    let (mut reads, mut errors) = (0, Vec::new());
    while start.elapsed() < Duration::from_secs(2) {
        // A fresh store per snapshot, as each `status` is a fresh process.
        let read = Store::open(&env.db, Access::ReadOnly)
            .and_then(|reader| reader.snapshot(|s| s.counts("b"))?);
        match read {
            Ok(c) => assert_eq!(c.pending, 3),
            Err(e) => errors.push(e.to_string()),
        }
        reads += 1;
    }
    stop.store(true, Ordering::SeqCst);
    let runs: i32 = writers.into_iter().map(|w| w.join().unwrap()).sum();
    assert!(runs > 10 && reads > 10, "{runs} writer runs, {reads} reads");
    assert!(
        errors.is_empty(),
        "{} of {reads} snapshots failed ({runs} writer runs), e.g. {}",
        errors.len(),
        errors[0]
    );
}
