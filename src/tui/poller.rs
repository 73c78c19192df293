//! Store reads off the UI thread: a thread that polls every interval (and
//! at once when the query changes or after a write) and sends the result
//! back as an arrival. Each poll is one short read transaction that never
//! takes a lock a runner waits for; a poll of unchanged files reads
//! nothing; a vanished or broken file becomes a "stale" header instead of
//! a crash. At the same cadence it looks at the config file, and sends
//! the config when the file changed (see `config_file`).
//!
//! Read-only dashboards read through SQLite's read-only shared memory
//! (`Access::ReadOnly`). A dashboard that may write reads through a normal
//! connection instead: SQLite shares one shared-memory mapping per file and
//! process, and a read-only one would make the effects thread's writes in
//! this same process fail with "attempt to write a readonly database".

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::Msg;
use super::action::Arrival;
use super::config_file::ConfigFile;
use crate::model::Millis;
use crate::store::{Access, AliveWatch, DashQuery, Store};
use crate::util::time::now_ms;

/// Between the polls of a search still scanning: lets input and the UI in.
const SEARCH_PAUSE: Duration = Duration::from_millis(5);

pub enum Cmd {
    /// Read this from now on (polls at once), as the answer to question
    /// `asked` (see `App::asked`).
    Query { query: Box<DashQuery>, asked: u64 },
    /// Poll at once (after a write).
    Now,
    /// Summarise what changed since a moment, once.
    Since(Millis),
}

pub struct Poller {
    tx: Sender<Cmd>,
    /// Says the thread has closed its connection.
    done: Receiver<()>,
}

impl Poller {
    /// Polls the store at `db`, and `config` (if any) for changes.
    pub fn spawn(
        db: PathBuf,
        access: Access,
        interval: Duration,
        config: Option<ConfigFile>,
        out: Sender<Msg>,
    ) -> Poller {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("nightshift-poller".into())
            .spawn(move || {
                let mut source = Source {
                    db,
                    access,
                    store: None,
                };
                let config = config.map(|file| Looks {
                    file,
                    due: Instant::now(),
                });
                poll_loop(&mut source, config, interval, &rx, &out);
                drop(source);
                let _ = done_tx.send(());
            })
            .expect("spawning the poller thread");
        Poller { tx, done }
    }

    /// Stops the thread and waits (at most `wait`) for it to close its
    /// connection. Exiting in the middle of SQLite closing the last
    /// connection would leave a `-wal` without its `-shm`, which read-only
    /// readers cannot use.
    pub fn stop(self, wait: Duration) {
        let Poller { tx, done } = self;
        drop(tx);
        let _ = done.recv_timeout(wait);
    }

    pub fn send(&self, cmd: Cmd) {
        // The poller only stops when the dashboard does.
        let _ = self.tx.send(cmd);
    }
}

/// The open store, and which file it is.
/// What makes a poll's answer the same as the last one: the store's change
/// marker, whether the `PAUSED` file was there, the question, the minute
/// (or the poll's own time while a pool's buckets refill: see [`refilling`]).
type Marker = (Vec<u8>, bool, (DashQuery, u64), i64);

/// A pool whose shown use changes with time alone, with nothing written:
/// a drawn bucket refills, a hold ends, a lapsed place in flight is gone.
fn refilling(d: &crate::store::Dashboard) -> bool {
    d.pools
        .iter()
        .any(|p| p.dims.iter().any(|d| d.used > 0) || p.in_flight > 0 || p.hold.is_some())
}

struct Source {
    db: PathBuf,
    access: Access,
    store: Option<(Store, Option<FileId>)>,
}

type FileId = (u64, u64);

/// The store file's identity (none for a database server).
fn file_id(path: &Path) -> std::io::Result<Option<FileId>> {
    crate::store::file_id(path)
}

impl Source {
    /// The store, opened afresh when the file was replaced or removed (an
    /// open connection would go on reading the old file).
    fn get(&mut self) -> Result<&Store, String> {
        let now_id = file_id(&self.db).ok();
        if let Some((_, id)) = &self.store
            && now_id.as_ref() != Some(id)
        {
            self.store = None;
        }
        if self.store.is_none() {
            let store = Store::open(&self.db, self.access).map_err(|e| e.to_string())?;
            self.store = Some((store, now_id.flatten()));
        }
        self.store
            .as_ref()
            .map(|(s, _)| s)
            .ok_or_else(|| "store not open".to_string())
    }
}

/// The config file, and when to look at it next: once an interval, not
/// with each step of a search.
struct Looks {
    file: ConfigFile,
    due: Instant,
}

fn poll_loop(
    src: &mut Source,
    mut config: Option<Looks>,
    interval: Duration,
    rx: &Receiver<Cmd>,
    out: &Sender<Msg>,
) {
    let mut query: Option<(DashQuery, u64)> = None;
    let mut due = Instant::now();
    let mut last: Option<Marker> = None;
    // Who the last read found alive: a runner killed writes nothing, so
    // the marker alone would never show it gone.
    let mut alive = AliveWatch::default();
    let mut moving = false;
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
                Cmd::Query { query: q, asked } => {
                    query = Some((*q, asked));
                    poll = true;
                }
                Cmd::Now => poll = true,
                Cmd::Since(t) => {
                    if let Ok(s) = src
                        .get()
                        .and_then(|s| s.since(t, now_ms()).map_err(|e| e.to_string()))
                    {
                        let _ = out.send(Msg::Arrival(Arrival::Since(Box::new(s))));
                    }
                }
            }
        }
        let Some((q, asked)) = query.as_ref().filter(|_| poll) else {
            continue;
        };
        let asked = *asked;
        if let Some(looks) = config.as_mut()
            && looks.due <= Instant::now()
        {
            looks.due = Instant::now() + interval;
            // Sent before the poll: a question the new config changes
            // (its budgets, its pools) is asked again at once.
            if let Some(read) = looks.file.look()
                && out.send(Msg::Arrival(Arrival::Config(read))).is_err()
            {
                return;
            }
        }
        let now = now_ms();
        // Same files, same question, same minute: the answer is the same
        // (the minute matters for rates and the 24 h windows). A question
        // asked again (a new `asked`) is read again.
        // Open (or reopen a replaced file) first: the marker is then the
        // store's as it is now, and the first read already has one (else the
        // second poll of an unchanged store read it all again).
        let _ = src.get();
        let marker = src.store.as_ref().map(|(s, _)| {
            let stop = crate::runner::paused_file(&src.db).is_some();
            let clock = if moving { now } else { now / 60_000 };
            (s.change_marker(), stop, (q.clone(), asked), clock)
        });
        if marker.is_some() && marker == last && !alive.changed(now) {
            if out
                .send(Msg::Arrival(Arrival::Unchanged { at: now, asked }))
                .is_err()
            {
                return;
            }
            due = Instant::now() + interval;
            continue;
        }
        let result = src
            .get()
            .and_then(|s| s.dashboard(q, now).map_err(|e| e.to_string()))
            .map(|mut d| {
                d.emergency = crate::runner::paused_file(&src.db);
                Box::new(d)
            });
        // A search still scanning goes on at once (each poll scans for a
        // few milliseconds, see `Store::dashboard`).
        let searching =
            matches!(&result, Ok(d) if d.items.as_ref().is_some_and(|p| p.searching.is_some()));
        if let Ok(d) = &result {
            alive = d.alive_watch(now);
            moving = refilling(d);
        }
        last = match &result {
            Ok(_) if !searching => marker,
            Ok(_) => None,
            Err(_) => {
                src.store = None;
                None
            }
        };
        if out
            .send(Msg::Arrival(Arrival::Polled {
                at: now,
                asked,
                result,
            }))
            .is_err()
        {
            return;
        }
        due = Instant::now() + if searching { SEARCH_PAUSE } else { interval };
    }
}
