//! `NIGHTSHIFT_TRACE_TX=1`: prints how long each write transaction held the
//! write lock, for `bench/foundation.sh`. Undocumented for users.
//!
//! The time runs from `BEGIN IMMEDIATE` to the moment the commit released
//! the lock. SQLite runs the automatic WAL checkpoint after that, inside the
//! same `COMMIT` call; a checkpoint does not block other writers, so it is
//! left out: a WAL hook (called once the lock is released, and then doing
//! the checkpoint exactly as SQLite's default hook does) notes the moment.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Instant;

use rusqlite::Connection;

/// SQLite's default: checkpoint once the WAL holds this many pages.
pub(super) const AUTOCHECKPOINT_PAGES: i32 = 1000;

thread_local! {
    static RELEASED: Cell<Option<Instant>> = const { Cell::new(None) };
}

pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("NIGHTSHIFT_TRACE_TX").is_some_and(|v| !v.is_empty()))
}

/// Replaces the automatic-checkpoint hook with one that behaves the same
/// and notes when the lock was released. Only when tracing.
pub(crate) fn install(conn: &mut Connection) -> rusqlite::Result<()> {
    if !enabled() {
        return Ok(());
    }
    conn.wal_hook(Some(|wal: &mut rusqlite::hooks::Wal, pages| {
        RELEASED.with(|r| r.set(Some(Instant::now())));
        if pages >= AUTOCHECKPOINT_PAGES {
            // As the default hook: a failed checkpoint is not the commit's error.
            let _ = wal.checkpoint();
        }
        Ok(())
    }))
}

/// Notes that a commit just released the lock, for a commit hook other
/// than this module's (`beside`).
pub(crate) fn note_released() {
    if enabled() {
        RELEASED.with(|r| r.set(Some(Instant::now())));
    }
}

/// Times one write transaction; `None` unless tracing.
pub(crate) struct TxTimer(Instant);

impl TxTimer {
    pub(crate) fn start() -> Option<TxTimer> {
        enabled().then(|| {
            RELEASED.with(|r| r.set(None));
            TxTimer(Instant::now())
        })
    }

    /// Call after `COMMIT` returned.
    pub(crate) fn finish(self) {
        let released = RELEASED.with(Cell::take).unwrap_or_else(Instant::now);
        crate::util::stdio::err_line(&format!(
            "nightshift: trace: write transaction held the lock {:.3} ms",
            released.duration_since(self.0).as_secs_f64() * 1e3
        ));
    }
}
