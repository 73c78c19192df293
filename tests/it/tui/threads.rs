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
