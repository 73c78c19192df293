//! Pace: backoff between immediate retries, and the batch's rate limit.

use std::time::Duration;

use tokio::time::Instant;

/// Exponential backoff with jitter that never waits less than the backoff:
/// retry `n` waits `base * 2^(n-1)` (at most `max`) plus a random extra of
/// up to half that again. `jitter` is the random draw in `[0, 1)`.
pub fn backoff_with(retry: u32, base: Duration, max: Duration, jitter: f64) -> Duration {
    let exp = base.saturating_mul(2u32.saturating_pow(retry.saturating_sub(1).min(31)));
    let floor = exp.min(max);
    floor + floor.mul_f64(jitter.clamp(0.0, 1.0) / 2.0)
}

/// [`backoff_with`] with a fresh random draw.
pub fn backoff(retry: u32, base: Duration, max: Duration) -> Duration {
    backoff_with(retry, base, max, fastrand::f64())
}

/// When a retry-tier item becomes due again: the backoff ceiling doubled
/// per attempt so far (capped at 1 h), or the worker's `retry_after` if
/// longer.
pub fn redrive_delay(attempts: u32, max: Duration, retry_after: Option<Duration>) -> Duration {
    let grown = max
        .saturating_mul(2u32.saturating_pow(attempts.saturating_sub(1).min(20)))
        .min(Duration::from_secs(3600));
    grown.max(retry_after.unwrap_or_default())
}

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

    #[test]
    fn backoff_never_waits_less_than_the_backoff_nor_half_as_long_again() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        for retry in 1..12 {
            let floor = (base * 2u32.pow(retry - 1)).min(max);
            assert_eq!(backoff_with(retry, base, max, 0.0), floor);
            let top = backoff_with(retry, base, max, 0.999_999);
            assert!(top >= floor && top < floor.mul_f64(1.5), "{retry}: {top:?}");
            for _ in 0..200 {
                let d = backoff(retry, base, max);
                assert!(d >= floor && d < floor.mul_f64(1.5), "{retry}: {d:?}");
            }
        }
        // "1s": 1-1.5 s, 2-3 s, 4-6 s.
        assert_eq!(
            backoff_with(3, base, max, 1.0),
            Duration::from_secs(6),
            "at most half as long again"
        );
        assert_eq!(backoff(1, Duration::ZERO, Duration::ZERO), Duration::ZERO);
        // Far retries neither overflow nor pass the cap's 1.5x.
        assert_eq!(backoff_with(1000, base, max, 0.0), max);
    }

    #[test]
    fn backoff_draws_spread_over_the_whole_range() {
        let (base, max) = (Duration::from_millis(100), Duration::from_secs(60));
        let draws: Vec<Duration> = (0..2000).map(|_| backoff(1, base, max)).collect();
        let low = draws
            .iter()
            .filter(|d| **d < Duration::from_millis(110))
            .count();
        let high = draws
            .iter()
            .filter(|d| **d > Duration::from_millis(140))
            .count();
        // Uniform over [100, 150) ms: a fifth in each end (failing needs
        // a draw off by far more than chance allows).
        assert!((200..700).contains(&low), "{low}");
        assert!((200..700).contains(&high), "{high}");
    }

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
