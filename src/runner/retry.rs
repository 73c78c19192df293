//! Pace: backoff between immediate retries, and the batch's rate limit.

use std::time::Duration;

use tokio::sync::Mutex;
use tokio::time::Instant;

/// Exponential backoff with full jitter: a random wait in
/// `[0, min(max, base * 2^(retry-1))]`, and never less than a
/// `retry_after` the worker asked for.
pub fn backoff(
    retry: u32,
    base: Duration,
    max: Duration,
    retry_after: Option<Duration>,
) -> Duration {
    let exp = base.saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)));
    let ceiling = exp.min(max);
    let jitter = ceiling.mul_f64(fastrand::f64());
    jitter.max(retry_after.unwrap_or_default())
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
/// of a batch (a token bucket of depth one).
pub struct Pacer {
    interval: Duration,
    next: Mutex<Option<Instant>>,
}

impl Pacer {
    pub fn new(count: u32, per: Duration) -> Pacer {
        Pacer {
            interval: per / count.max(1),
            next: Mutex::new(None),
        }
    }

    /// Waits for this call's turn.
    pub async fn acquire(&self) {
        let slot = {
            let mut next = self.next.lock().await;
            let now = Instant::now();
            let slot = next.map_or(now, |n| n.max(now));
            *next = Some(slot + self.interval);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_honours_retry_after() {
        for retry in 1..10 {
            let d = backoff(
                retry,
                Duration::from_millis(100),
                Duration::from_secs(2),
                None,
            );
            assert!(d <= Duration::from_secs(2));
            assert!(d <= Duration::from_millis(100) * 2u32.pow(retry - 1));
        }
        let d = backoff(
            1,
            Duration::from_millis(100),
            Duration::from_secs(2),
            Some(Duration::from_secs(5)),
        );
        assert_eq!(d, Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn pacer_spaces_calls_evenly() {
        let pacer = Pacer::new(60, Duration::from_secs(60));
        let start = tokio::time::Instant::now();
        for _ in 0..5 {
            pacer.acquire().await;
        }
        let elapsed = start.elapsed();
        assert!(
            elapsed >= Duration::from_secs(4) && elapsed < Duration::from_millis(4100),
            "{elapsed:?}"
        );
    }
}
