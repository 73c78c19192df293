//! The batch's rate limit: calls spaced evenly, shared by every worker of
//! the batch. (The retry-after hold is the gate's, `gate`.)

use std::time::Duration;

use tokio::time::Instant;

/// Evenly spaced calls: at most `count` per `per`, shared by all workers
/// of a batch (a token bucket of depth one): a call starts at least an
/// interval after the one before, whatever came in between. Only the gate
/// (`runner::gate`) takes its tokens.
pub struct Pacer {
    interval: Duration,
    state: std::sync::Mutex<Tokens>,
}

#[derive(Default)]
struct Tokens {
    /// The first instant not reserved yet.
    next: Option<Instant>,
    /// When the last call started.
    last: Option<Instant>,
}

impl Tokens {
    fn after_last(&self, interval: Duration) -> Option<Instant> {
        self.last.map(|l| l + interval)
    }
}

impl Pacer {
    pub fn new(count: u32, per: Duration) -> Pacer {
        Pacer {
            interval: per / count.max(1),
            state: std::sync::Mutex::new(Tokens::default()),
        }
    }

    fn tokens(&self) -> std::sync::MutexGuard<'_, Tokens> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reserves the next free token: the instant its call may start (now,
    /// or later when it is another's turn), so waiting calls take turns.
    pub fn reserve(&self) -> Instant {
        let mut t = self.tokens();
        let now = Instant::now();
        let slot = [t.next, t.after_last(self.interval)]
            .into_iter()
            .flatten()
            .fold(now, Instant::max);
        t.next = Some(slot + self.interval);
        slot
    }

    /// Starts the call whose token is for `at`, if it may start now: at or
    /// after `at`, and an interval after the last call started (a call
    /// whose start was delayed pushes the next one back). `Err` says when
    /// to try again.
    pub fn start(&self, at: Instant) -> Result<(), Instant> {
        let mut t = self.tokens();
        let now = Instant::now();
        let earliest = t.after_last(self.interval).map_or(at, |l| l.max(at));
        if earliest > now {
            return Err(earliest);
        }
        t.last = Some(now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pacer_spaces_calls_evenly_and_a_late_start_pushes_the_next_back() {
        let pacer = Pacer::new(60, Duration::from_secs(60));
        let start = Instant::now();
        let slots: Vec<Duration> = (0..3).map(|_| pacer.reserve() - start).collect();
        assert_eq!(
            slots,
            [0, 1, 2].map(Duration::from_secs),
            "one a second, the first at once"
        );
        assert_eq!(pacer.start(start), Ok(()));
        // The second token's time has not come.
        assert_eq!(
            pacer.start(start + Duration::from_secs(1)),
            Err(start + Duration::from_secs(1))
        );
        // A call that starts late (its worker was slow to start): the next
        // one waits a whole interval after it, not after its token.
        tokio::time::advance(Duration::from_millis(1500)).await;
        let late = Instant::now();
        assert_eq!(pacer.start(start + Duration::from_secs(1)), Ok(()));
        assert_eq!(
            pacer.start(start + Duration::from_secs(2)),
            Err(late + Duration::from_secs(1))
        );
        // A token not used for a while does not pile up (depth one).
        tokio::time::advance(Duration::from_secs(60)).await;
        let now = Instant::now();
        assert_eq!(pacer.reserve(), now);
        assert_eq!(pacer.start(now), Ok(()));
        assert_eq!(pacer.reserve(), now + Duration::from_secs(1));
    }
}
