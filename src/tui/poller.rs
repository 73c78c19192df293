//! Store reads off the UI thread: a thread that polls every interval (and
//! at once when the query changes or after a write) and sends the result
//! back as an action. Each poll is one short read transaction on a
//! read-only open, so it never takes a lock a runner waits for, and a
//! vanished or broken file becomes a "stale" header instead of a crash.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::Msg;
use super::action::Action;
use crate::model::Millis;
use crate::store::{Access, DashQuery, Store};
use crate::util::time::now_ms;

pub enum Cmd {
    /// Read this from now on (polls at once).
    Query(Box<DashQuery>),
    /// Poll at once (after a write).
    Now,
    /// Summarise what changed since a moment, once.
    Since(Millis),
}

pub struct Poller {
    tx: Sender<Cmd>,
}

impl Poller {
    pub fn spawn(db: PathBuf, interval: Duration, out: Sender<Msg>) -> Poller {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("nightshift-poller".into())
            .spawn(move || poll_loop(&db, interval, &rx, &out))
            .expect("spawning the poller thread");
        Poller { tx }
    }

    pub fn send(&self, cmd: Cmd) {
        // The poller only stops when the dashboard does.
        let _ = self.tx.send(cmd);
    }
}

fn poll_loop(db: &std::path::Path, interval: Duration, rx: &Receiver<Cmd>, out: &Sender<Msg>) {
    let mut store: Option<Store> = None;
    let mut query: Option<DashQuery> = None;
    let mut due = Instant::now();
    let mut last: Option<(Vec<u8>, DashQuery, i64)> = None;
    loop {
        let first = if query.is_none() {
            match rx.recv() {
                Ok(cmd) => Some(cmd),
                Err(_) => return,
            }
        } else {
            match rx.recv_timeout(due.saturating_duration_since(Instant::now())) {
                Ok(cmd) => Some(cmd),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        };
        let mut poll = first.is_none();
        // Take everything queued: only the newest query matters.
        for cmd in first.into_iter().chain(rx.try_iter()) {
            match cmd {
                Cmd::Query(q) => {
                    query = Some(*q);
                    poll = true;
                }
                Cmd::Now => poll = true,
                Cmd::Since(t) => {
                    if let Ok(s) =
                        open(db, &mut store).and_then(|s| s.since(t).map_err(|e| e.to_string()))
                    {
                        let _ = out.send(Msg::Action(Action::Since(Box::new(s))));
                    }
                }
            }
        }
        let Some(q) = query.as_ref().filter(|_| poll) else {
            continue;
        };
        let now = now_ms();
        // Same files, same question, same minute: the answer is the same
        // (the minute matters for rates and the 24 h windows).
        let marker = store
            .as_ref()
            .map(|s| (s.change_marker(), q.clone(), now / 60_000));
        if marker.is_some() && marker == last {
            if out
                .send(Msg::Action(Action::Unchanged { at: now }))
                .is_err()
            {
                return;
            }
            due = Instant::now() + interval;
            continue;
        }
        let result = open(db, &mut store)
            .and_then(|s| s.dashboard(q, now).map_err(|e| e.to_string()))
            .map(Box::new);
        last = match &result {
            Ok(_) => marker,
            Err(_) => {
                // Open afresh next time: the file may have been replaced.
                store = None;
                None
            }
        };
        if out
            .send(Msg::Action(Action::Polled { at: now, result }))
            .is_err()
        {
            return;
        }
        due = Instant::now() + interval;
    }
}

fn open<'a>(db: &std::path::Path, store: &'a mut Option<Store>) -> Result<&'a Store, String> {
    if store.is_none() {
        *store = Some(Store::open(db, Access::ReadOnly).map_err(|e| e.to_string())?);
    }
    store.as_ref().ok_or_else(|| "store not open".to_string())
}
