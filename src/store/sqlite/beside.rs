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

use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};

use super::trace::{self, AUTOCHECKPOINT_PAGES as PAGES};

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
    pub(super) fn start(conn: &mut Connection, file: &Path) -> Option<Beside> {
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
        let hooked = conn.wal_hook(Some(move |_: &mut rusqlite::hooks::Wal, pages| {
            trace::note_released();
            if pages >= PAGES
                && let Some(w) = waker.lock().ok().as_ref().and_then(|w| w.as_ref())
            {
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
