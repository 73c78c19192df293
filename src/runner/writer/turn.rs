//! Whose turn it is to write: the writer's own session or its lanes.
//!
//! On PostgreSQL every lane transaction holds the run's seat shared until
//! it commits, and every group of the writer's own session takes it
//! exclusively first (the lock order in `store::pg::locks`). PostgreSQL
//! lets a new shared locker pass an exclusive one that waits, so with the
//! lanes committing back to back the writer's groups (the heartbeat's
//! renewal among them) waited seconds for a moment with no lane inside:
//! at `-j16` a seat of 3 s went unrenewed for 12, the run seen as lapsed
//! while it worked. This turn keeps the order in the runner instead: once
//! the writer waits, no lane begins anew; the lanes inside finish, the
//! writer's group runs, then the lanes that waited go first.

use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Default)]
pub(super) struct Turn {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    lanes_in: usize,
    lanes_waiting: usize,
    /// Lanes let in before the writer's next group: those that waited
    /// for its last one.
    admit: usize,
    writer_in: bool,
    writer_waiting: bool,
}

/// A lane's transaction, or the writer's group, under way.
pub(super) struct Inside<'a> {
    turn: &'a Turn,
    writer: bool,
}

impl Turn {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait<'a>(&self, s: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed.wait(s).unwrap_or_else(|p| p.into_inner())
    }

    /// A lane's turn: at once unless the writer is in or waits, else
    /// after its group.
    pub(super) fn lane(&self) -> Inside<'_> {
        let mut s = self.state();
        if s.writer_in || s.writer_waiting {
            s.lanes_waiting += 1;
            while s.admit == 0 && (s.writer_in || s.writer_waiting) {
                s = self.wait(s);
            }
            s.admit = s.admit.saturating_sub(1);
            s.lanes_waiting -= 1;
        }
        s.lanes_in += 1;
        Inside {
            turn: self,
            writer: false,
        }
    }

    /// The writer's turn: once the lanes inside are done, and those let
    /// in after its last group.
    pub(super) fn writer(&self) -> Inside<'_> {
        let mut s = self.state();
        s.writer_waiting = true;
        while s.lanes_in > 0 || (s.admit > 0 && s.lanes_waiting > 0) {
            s = self.wait(s);
        }
        s.writer_waiting = false;
        s.writer_in = true;
        Inside {
            turn: self,
            writer: true,
        }
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        let mut s = self.turn.state();
        if self.writer {
            s.writer_in = false;
            s.admit = s.lanes_waiting;
        } else {
            s.lanes_in -= 1;
        }
        drop(s);
        self.turn.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::Duration;

    /// Lanes entering back to back, always one inside, do not keep the
    /// writer out: it gets in as soon as those inside leave, and is never
    /// inside with a lane.
    #[test]
    fn the_writer_gets_in_between_lanes_that_never_pause() {
        let turn = Arc::new(Turn::default());
        let inside = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let lanes: Vec<_> = (0..8)
            .map(|_| {
                let (turn, inside, stop) = (turn.clone(), inside.clone(), stop.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        let _in = turn.lane();
                        inside.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(2));
                        inside.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        // Were the lanes let in past a waiting writer, it would wait here
        // for ever: eight of them are never all outside at once.
        for _ in 0..50 {
            let _in = turn.writer();
            assert_eq!(
                inside.load(Ordering::SeqCst),
                0,
                "a lane inside with the writer"
            );
        }
        stop.store(true, Ordering::SeqCst);
        lanes.into_iter().for_each(|l| l.join().unwrap());
    }

    /// A writer with group after group does not keep the lanes out: those
    /// that waited for one group go before its next.
    #[test]
    fn lanes_that_waited_go_before_the_writers_next_group() {
        let turn = Arc::new(Turn::default());
        let writer_in = turn.writer();
        let done = Arc::new(AtomicUsize::new(0));
        let lanes: Vec<_> = (0..4)
            .map(|_| {
                let (turn, done) = (turn.clone(), done.clone());
                std::thread::spawn(move || {
                    let _in = turn.lane();
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        // Every lane waiting for the writer's group.
        while turn.state().lanes_waiting < 4 {
            std::thread::yield_now();
        }
        drop(writer_in);
        let _next = turn.writer();
        assert_eq!(done.load(Ordering::SeqCst), 4, "the next group went first");
        lanes.into_iter().for_each(|l| l.join().unwrap());
    }
}
