//! Pacing of bulk writes (add, requeue, prune): many short transactions instead
//! of one long one, so a runner waiting for the write lock is never held up
//! for long, whatever the machine's speed.

use std::time::{Duration, Instant};

/// How long one chunk should hold the write lock.
const TARGET: Duration = Duration::from_millis(20);
/// The same for inserts while a runner holds a lock. Each commit of an add
/// writes every page of the key index it touched, and keys (hashes) are
/// spread over all of them: short chunks at a million items write about a
/// page per item.
const INSERT_TARGET: Duration = Duration::from_millis(50);
/// ... and while no runner does: long chunks write each index page once for
/// thousands of items. A runner starting meanwhile waits for one chunk at
/// most, then the chunks shrink.
const INSERT_IDLE_TARGET: Duration = Duration::from_millis(1000);
/// Rest between chunks: other writers poll the lock every millisecond (see
/// `schema::wait_for_lock`), so this lets a waiting one in before the next
/// chunk.
const GAP: Duration = Duration::from_millis(2);
const MIN_ROWS: usize = 50;
/// The first chunk of an update in place while a runner is live: small
/// enough to stay under [`TARGET`] on a slow, loaded machine (at 100 µs a
/// row), before the first measure adapts it.
const FIRST_LIVE_ROWS: usize = 200;
/// ... and while none is, doubling from here towards [`INSERT_IDLE_TARGET`]
/// (starting at a second's worth of rows, 100,000, measured no faster: the
/// same CPU, more system time).
const FIRST_IDLE_ROWS: usize = 1_000;
const MAX_ROWS: usize = 20_000;
const MAX_INSERT_ROWS: usize = 250_000;

/// The size of the next chunk, adapted after each one to take about
/// [`TARGET`].
pub(crate) struct Chunks {
    size: usize,
    target: Duration,
    max: usize,
    /// A chunk has run: the next one first leaves the lock free.
    ran: bool,
}

impl Chunks {
    pub(crate) fn new(first: usize) -> Chunks {
        Chunks {
            size: first.clamp(MIN_ROWS, MAX_ROWS),
            target: TARGET,
            max: MAX_ROWS,
            ran: false,
        }
    }

    /// For an update in place (requeue) on a store with one writer at a
    /// time, paced by `requeue_pace` from the first chunk on.
    pub(crate) fn for_update(runner_live: bool) -> Chunks {
        if runner_live {
            Chunks {
                size: FIRST_LIVE_ROWS,
                target: TARGET,
                max: MAX_ROWS,
                ran: false,
            }
        } else {
            Chunks {
                size: FIRST_IDLE_ROWS,
                target: INSERT_IDLE_TARGET,
                max: MAX_ROWS,
                ran: false,
            }
        }
    }

    /// For `add` (see [`INSERT_TARGET`]).
    pub(crate) fn for_bulk_insert() -> Chunks {
        Chunks {
            // Small: the first chunk reads its index pages from disk.
            size: 500,
            target: INSERT_TARGET,
            max: MAX_INSERT_ROWS,
            ran: false,
        }
    }

    /// Inserts: short chunks while `runner_live`, long ones otherwise. A
    /// switch to short chunks shrinks the next one at once.
    pub(crate) fn insert_pace(&mut self, runner_live: bool) {
        if runner_live {
            self.retarget(INSERT_TARGET, MAX_INSERT_ROWS);
        } else {
            self.retarget(INSERT_IDLE_TARGET, MAX_INSERT_ROWS);
        }
    }

    /// Updates in place (requeue): short chunks while `runner_live`; while
    /// none is, as long as [`INSERT_IDLE_TARGET`] allows up to [`MAX_ROWS`]
    /// (fewer commits rewriting the same index pages, but none so large
    /// that the checkpoint of the last, which nothing overlaps, keeps
    /// the requeue waiting: 100,000 in 0.37 s rather than 0.39 s with
    /// chunks of up to 250,000). A runner starting meanwhile waits for one
    /// chunk at most.
    pub(crate) fn requeue_pace(&mut self, runner_live: bool) {
        if runner_live {
            self.retarget(TARGET, MAX_ROWS);
        } else {
            self.retarget(INSERT_IDLE_TARGET, MAX_ROWS);
        }
    }

    /// A new target and bound; a shorter target shrinks the next chunk at
    /// once, in proportion.
    fn retarget(&mut self, target: Duration, max: usize) {
        if target < self.target {
            let ratio = target.as_secs_f64() / self.target.as_secs_f64();
            self.size = ((self.size as f64 * ratio) as usize).max(MIN_ROWS);
        }
        self.size = self.size.min(max);
        (self.target, self.max) = (target, max);
    }

    #[cfg(test)]
    fn size(&self) -> usize {
        self.size
    }

    /// Runs one chunk: `f` gets the chunk size and returns how many rows it
    /// handled. The next size is scaled towards the target (at most doubled
    /// or halved at a time). Between two chunks the lock is left free for
    /// [`GAP`]; after the last, nothing waits.
    pub(crate) fn run<T>(&mut self, f: impl FnOnce(usize) -> T) -> T {
        if self.ran {
            std::thread::sleep(GAP);
        }
        self.ran = true;
        let started = Instant::now();
        let out = f(self.size);
        let took = started.elapsed().max(Duration::from_micros(100));
        let scaled = self.size as f64 * self.target.as_secs_f64() / took.as_secs_f64();
        self.size = (scaled as usize)
            .clamp(self.size / 2, self.size * 2)
            .clamp(MIN_ROWS, self.max);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_shrink_when_slow_and_grow_when_fast() {
        let mut c = Chunks::new(1_000);
        c.run(|_| std::thread::sleep(Duration::from_millis(80)));
        assert_eq!(c.size(), 500, "at most halved");
        c.run(|_| ());
        assert_eq!(c.size(), 1_000, "at most doubled");
        let mut tiny = Chunks::new(1);
        assert_eq!(tiny.size(), MIN_ROWS);
        tiny.run(|_| std::thread::sleep(Duration::from_millis(200)));
        assert_eq!(tiny.size(), MIN_ROWS);
    }

    #[test]
    fn an_update_starts_small_beside_a_runner_and_large_without() {
        assert_eq!(Chunks::for_update(true).size(), FIRST_LIVE_ROWS);
        let mut idle = Chunks::for_update(false);
        assert_eq!(idle.size(), FIRST_IDLE_ROWS);
        // A runner starting meanwhile shrinks the next chunk at once.
        idle.requeue_pace(true);
        assert!(idle.size() <= MAX_ROWS, "{}", idle.size());
    }
}
