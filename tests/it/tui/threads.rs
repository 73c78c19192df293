//! The dashboard's poller and effects threads share one process: polling
//! must never make the dashboard's own writes fail (SQLite shares one
//! shared-memory mapping per file and process; a read-only one would turn
//! every write into "attempt to write a readonly database").

use crate::support::fixture;

use std::sync::mpsc::channel;
use std::time::Duration;

use nightshift::store::{Access, DashQuery};
use nightshift::tui::Msg;
use nightshift::tui::action::{Arrival, Write};
use nightshift::tui::effects::{Effects, Job, RunnerSpawn};
use nightshift::tui::poller::{Cmd, Poller};

#[test]
fn writes_succeed_while_the_poller_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    fixture::build(
        &db,
        &fixture::Options {
            now: fixture::NOW,
            running: false,
        },
    );
    let (tx, rx) = channel();
    // As `tui::run` does for a dashboard that may write.
    let poller = Poller::spawn(
        db.clone(),
        Access::ReadWrite,
        Duration::from_millis(1),
        None,
        tx.clone(),
    );
    // The writes, from their own thread, each from a fresh effects thread
    // (which opens its own connection on its first write).
    let writer = {
        let db = db.clone();
        std::thread::spawn(move || {
            for round in 0..100 {
                let (etx, erx) = channel();
                let spawn = RunnerSpawn {
                    db: db.clone(),
                    config: None,
                    log: None,
                    runners: None,
                };
                let effects = Effects::spawn(spawn, etx);
                let write = if round % 2 == 0 {
                    Write::Pause {
                        batch: "articles".into(),
                        reason: format!("round {round}"),
                    }
                } else {
                    Write::Unpause {
                        batch: "articles".into(),
                    }
                };
                effects.send(Job::Write(write));
                match erx.recv_timeout(Duration::from_secs(30)).unwrap() {
                    Msg::Arrival(Arrival::Done { ok: true, .. }) => {}
                    Msg::Arrival(other) => return Err(format!("round {round}: {other:?}")),
                    _ => return Err(format!("round {round}: unexpected message")),
                }
                effects.stop(Duration::from_secs(5));
            }
            Ok(())
        })
    };
    // Meanwhile keep the poller reading: a new question each time (an
    // unchanged one on unchanged files is answered without reading).
    let mut minutes = 0;
    while !writer.is_finished() {
        minutes = minutes % 100 + 1;
        poller.send(Cmd::Query {
            query: Box::new(DashQuery {
                batch: Some("articles".into()),
                minutes,
                dlq: true,
                ..DashQuery::default()
            }),
            asked: 0,
        });
        std::thread::sleep(Duration::from_micros(200));
    }
    writer.join().unwrap().unwrap();
    poller.stop(Duration::from_secs(5));
    let polls = rx
        .try_iter()
        .filter(|m| matches!(m, Msg::Arrival(Arrival::Polled { result: Ok(_), .. })))
        .count();
    assert!(polls > 0);
}

/// While a pool's bucket refills (its shown use falls with time alone,
/// nothing written), every poll reads the store again; with no pool in
/// the question, an unchanged store is answered "unchanged".
#[test]
fn a_refilling_pool_is_read_again_at_every_poll() {
    use nightshift::config::limits::Measure;
    use nightshift::store::{PoolCall, PoolDim, PoolSpec, Store};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    let (mut store, _) = Store::create(&db).unwrap();
    let spec = PoolSpec {
        name: "openai".into(),
        dims: vec![PoolDim {
            // A day to refill: it is still refilling however slow the test.
            name: "tokens/day".into(),
            measure: Measure::Tokens,
            count: 600,
            per_us: 86_400_000_000,
        }],
        concurrency: None,
    };
    let now = nightshift::util::time::now_ms();
    let call = PoolCall {
        runner: "r".into(),
        estimate: 600,
        until: now + 60_000,
        item: None,
    };
    assert_eq!(store.pool_admit(&spec, &[call], now).unwrap().admitted, 1);
    drop(store);
    for (pools, refilling) in [(vec![spec.clone()], true), (Vec::new(), false)] {
        let (tx, rx) = channel();
        let poller = Poller::spawn(
            db.clone(),
            Access::ReadOnly,
            Duration::from_millis(5),
            None,
            tx,
        );
        poller.send(Cmd::Query {
            query: Box::new(DashQuery {
                pools,
                ..DashQuery::default()
            }),
            asked: 0,
        });
        let mut read = 0;
        let mut unchanged = 0;
        while read + unchanged < 6 {
            match rx.recv_timeout(Duration::from_secs(30)).unwrap() {
                Msg::Arrival(Arrival::Polled { result, .. }) => {
                    result.unwrap();
                    read += 1;
                }
                Msg::Arrival(Arrival::Unchanged { .. }) => unchanged += 1,
                _ => {}
            }
        }
        poller.stop(Duration::from_secs(5));
        if refilling {
            assert_eq!((read, unchanged), (6, 0), "a refilling pool");
        } else {
            // The first read, and one more should a minute begin meanwhile.
            assert!(read <= 2, "no pool: {read} read, {unchanged} unchanged");
        }
    }
}
