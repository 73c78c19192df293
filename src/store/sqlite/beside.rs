//! Checkpoints beside a writer of many commits (a requeue, the runner's
//! store thread): the WAL's pages are copied into the file by a thread of
//! their own, on a second connection, while the writer goes on with its
//! next chunk or group.
//!
//! SQLite's automatic checkpoint runs inside the `COMMIT` that fills the
//! WAL past 1,000 pages: it copies every page back and syncs the log and
//! the file (10–20 ms each here), and the writer waits for all of it
//! before its next statement. A passive checkpoint on another connection
//! needs no lock the writer holds, so the copying and the syncing overlap
//! the next chunk instead. Durability is unchanged: commits were never
//! synced (`synchronous = NORMAL`), and a checkpoint is only a copy.
//!
//! The log starts over only when a write begins with every page of it
//! copied, which a checkpoint running beside a busy writer never leaves
//! (a runner's log grew to 273 MB over a million items). A bulk write's
//! log starts over once it ends. For a writer that lasts (`Span::Lasting`),
//! once the log holds `RESTART_PAGES` the writer's own commit checkpoints
//! what the thread has not copied yet, as SQLite's automatic checkpoint
//! would, and its next transaction starts the log over: it waits for
//! those syncs a quarter as often as when it took every checkpoint itself.

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

use super::trace::{self, AUTOCHECKPOINT_PAGES as PAGES};

/// The log's length (pages) at which the writer's commit checkpoints it
/// itself, so that it starts over: four times SQLite's automatic one.
const RESTART_PAGES: i32 = 4 * PAGES;

/// How long the writer beside the thread goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    /// A bulk write (a requeue): its log starts over once it ends.
    Bulk,
    /// A writer with no end in sight (the runner's store thread).
    Lasting,
}

/// The way to wake the thread, shared with the commit hook: taken out
/// to stop it, whichever hook the connection has by then.
type Wake = Arc<Mutex<Option<mpsc::SyncSender<()>>>>;

/// A checkpointing thread and the way to wake it.
pub(super) struct Beside {
    wake: Wake,
    thread: Option<JoinHandle<()>>,
}

impl Beside {
    /// Starts the thread on its own connection to `file`, and has `conn`'s
    /// commits wake it instead of checkpointing themselves. `None` (and
    /// `conn` as it was) if the second connection cannot be had.
    pub(super) fn start(conn: &mut Connection, file: &Path, span: Span) -> Option<Beside> {
        let restart_at = match span {
            Span::Bulk => i32::MAX,
            Span::Lasting => RESTART_PAGES,
        };
        let other = Connection::open_with_flags(
            file,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .ok()?;
        // A full channel of one: wakes that come while a checkpoint runs
        // are one more checkpoint, not a queue of them.
        let (wake, woken) = mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("nightshift-checkpoint".into())
            .spawn(move || {
                while woken.recv().is_ok() {
                    // Passive: it waits for nobody and nobody waits for it;
                    // what it leaves, the next one (or the last close) takes.
                    let _ = other.execute_batch("PRAGMA wal_checkpoint(PASSIVE);");
                }
            })
            .ok()?;
        let wake: Wake = Arc::new(Mutex::new(Some(wake)));
        let waker = wake.clone();
        // The log's length at the last wake: the thread is woken for each
        // `PAGES` more, not at every commit past them.
        let mut woken_at = 0;
        let hooked = conn.wal_hook(Some(move |wal: &mut rusqlite::hooks::Wal, pages| {
            trace::note_released();
            // Each commit adds to the log: one no longer than at the last
            // wake started over since.
            if pages <= woken_at {
                woken_at = 0;
            }
            if pages >= restart_at {
                // Busy while the thread copies: tried again at the next commit.
                let _ = wal.checkpoint();
            } else if pages >= woken_at + PAGES
                && let Some(w) = waker.lock().ok().as_ref().and_then(|w| w.as_ref())
            {
                woken_at = pages;
                let _ = w.try_send(());
            }
            Ok(())
        }));
        let mut beside = Beside {
            wake,
            thread: Some(thread),
        };
        if hooked.is_err() {
            beside.stop();
            return None;
        }
        Some(beside)
    }

    /// Gives `conn` its own automatic checkpoints back and waits for the
    /// thread's last checkpoint to end.
    pub(super) fn finish(mut self, conn: &mut Connection) {
        // The pragma installs SQLite's own hook in place of ours; tracing
        // wraps it again.
        let _ = conn.wal_hook(None::<fn(&mut rusqlite::hooks::Wal, i32) -> rusqlite::Result<()>>);
        let _ = conn.execute_batch(&format!("PRAGMA wal_autocheckpoint = {PAGES};"));
        let _ = trace::install(conn);
        self.stop();
    }

    fn stop(&mut self) {
        if let Ok(mut w) = self.wake.lock() {
            *w = None;
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Beside {
    fn drop(&mut self) {
        self.stop();
    }
}
