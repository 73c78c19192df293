//! What becomes of a failed attempt, as a pure function: no clock, no
//! store, no randomness (the time and the jitter are inputs), tested like
//! `schedule/plan.rs`. Both worker modes ask it (`slot::record::failed_answer`).
//!
//! A transient failure with retries and attempts left runs again in this
//! cycle after a backoff (never shorter than the configured one); one
//! without, while attempts are left, goes to the retry tier, due again
//! after the redrive delay; a permanent failure, or the last attempt's,
//! is quarantined for a human. A worker's `retry_after` also holds the
//! whole batch ([`hold`]): the immediate retry waits for it at the gate.

use std::time::Duration;

use crate::config::BatchConfig;
use crate::duration::format_duration;
use crate::model::{EventKind, Millis, Tier};
use crate::util::time::utc_clock;

/// The batch's retry settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Policy {
    /// Immediate retries per item and cycle.
    pub retries: u32,
    pub max_attempts: u32,
    pub backoff: Duration,
    pub backoff_max: Duration,
    /// The longest `retry_after` applied.
    pub max_hold: Duration,
}

impl Policy {
    pub fn of(cfg: &BatchConfig) -> Policy {
        Policy {
            retries: cfg.retries,
            max_attempts: cfg.max_attempts,
            backoff: cfg.backoff,
            backoff_max: cfg.backoff_max,
            max_hold: cfg.max_hold,
        }
    }
}

/// A failed attempt, as the worker's answer said.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Failed<'a> {
    pub transient: bool,
    pub class: &'a str,
    pub message: &'a str,
    /// As the worker asked (not yet clamped by `max_hold`).
    pub retry_after: Option<Duration>,
}

/// Which attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    pub number: u32,
    /// Immediate retries the item has had in this cycle.
    pub retries_done: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Run it again in this cycle after `wait` (a `retry` event);
    /// `after_hold`: the batch's hold ends later than that, at this time.
    RetryNow {
        wait: Duration,
        after_hold: Option<Millis>,
    },
    /// Record the failure in the retry tier; due again at `at` (a `failed`
    /// event).
    RetryTier { at: Millis },
    /// Record it in the manual tier (a `quarantined` event):
    /// `attempts_used` when it was transient but had its last attempt.
    Quarantine { attempts_used: bool },
}

/// The decision on a failed attempt at `now`. `stopping`: the cycle
/// stops, nothing runs again in it. `held_until`: the batch's hold, if
/// one is on. `jitter`: a random draw in `[0, 1)` for the backoff.
pub fn judge(
    f: &Failed,
    a: Attempt,
    p: &Policy,
    stopping: bool,
    held_until: Option<Millis>,
    now: Millis,
    jitter: f64,
) -> Verdict {
    let may_retry =
        f.transient && a.retries_done < p.retries && a.number < p.max_attempts && !stopping;
    if !may_retry {
        return settle(f, a, p, now);
    }
    let wait = backoff(a.retries_done + 1, p.backoff, p.backoff_max, jitter);
    let ends = now.saturating_add(millis(wait));
    Verdict::RetryNow {
        wait,
        after_hold: held_until.filter(|until| *until > ends),
    }
}

/// The decision on a failed attempt that gets no other attempt in this
/// cycle: the retry tier while attempts are left, else quarantine.
pub fn settle(f: &Failed, a: Attempt, p: &Policy, now: Millis) -> Verdict {
    if f.transient && a.number < p.max_attempts {
        let retry_after = f.retry_after.map(|d| d.min(p.max_hold));
        let delay = redrive_delay(a.number, p.backoff_max, retry_after);
        Verdict::RetryTier {
            at: now.saturating_add(millis(delay)),
        }
    } else {
        Verdict::Quarantine {
            attempts_used: f.transient,
        }
    }
}

/// A `retry_after` holds the whole batch (every other call would get the
/// same answer); the gate clamps it to `max_hold` and says so.
pub fn hold(f: &Failed) -> Option<Duration> {
    f.retry_after
}

impl Verdict {
    /// The tier the failure is recorded in; `None` for an immediate retry.
    pub fn tier(&self) -> Option<Tier> {
        match self {
            Verdict::RetryNow { .. } => None,
            Verdict::RetryTier { .. } => Some(Tier::Retry),
            Verdict::Quarantine { .. } => Some(Tier::Manual),
        }
    }

    /// When a retry-tier failure is due again.
    pub fn next_attempt_at(&self) -> Option<Millis> {
        match self {
            Verdict::RetryTier { at } => Some(*at),
            _ => None,
        }
    }

    /// The event kind and message the runner logs at `now`.
    pub fn event(&self, f: &Failed, a: Attempt, p: &Policy, now: Millis) -> (EventKind, String) {
        let (class, message, attempt) = (f.class, f.message, a.number);
        match self {
            Verdict::RetryNow { wait, after_hold } => {
                let when = match after_hold {
                    Some(until) => format!(
                        "retrying once the batch's hold is over, at {}",
                        utc_clock(*until, now)
                    ),
                    None => format!("retrying in {}", format_duration(*wait)),
                };
                (
                    EventKind::Retry,
                    format!("{class}: {message} (attempt {attempt}; {when})"),
                )
            }
            Verdict::RetryTier { .. } => (
                EventKind::Failed,
                format!("{class}: {message} (attempt {attempt}; the next cycle retries it)"),
            ),
            // Past the limit, an item requeued after its attempts were
            // used has one attempt a requeue: "attempt 3 of 2" said nothing.
            Verdict::Quarantine {
                attempts_used: true,
            } if attempt > p.max_attempts => (
                EventKind::Quarantined,
                format!(
                    "{class}: {message} (attempt {attempt}, past max_attempts {}: a requeue after its attempts were used gives one; quarantined)",
                    p.max_attempts
                ),
            ),
            Verdict::Quarantine {
                attempts_used: true,
            } => (
                EventKind::Quarantined,
                format!(
                    "{class}: {message} (attempt {attempt} of {}; quarantined)",
                    p.max_attempts
                ),
            ),
            Verdict::Quarantine {
                attempts_used: false,
            } => (
                EventKind::Quarantined,
                format!("{class}: {message} (permanent; quarantined)"),
            ),
        }
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Exponential backoff with jitter, never shorter than `base` nor longer
/// than `max`: retry `n` waits `base * 2^(n-1)` plus a random extra of up
/// to half that again. Where that range passes `max`, the draw is from
/// the top third below it, so retries that hit the cap together still
/// spread. `jitter` is the random draw in `[0, 1)`.
pub fn backoff(retry: u32, base: Duration, max: Duration, jitter: f64) -> Duration {
    let exp = base.saturating_mul(2u32.saturating_pow(retry.saturating_sub(1).min(31)));
    let top = exp.saturating_add(exp / 2).min(max);
    let low = exp.min(max.mul_f64(2.0 / 3.0)).max(base.min(max)).min(top);
    low + (top - low).mul_f64(jitter.clamp(0.0, 1.0))
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 1_700_000_000_000;
    const S: Duration = Duration::from_secs(1);

    fn policy() -> Policy {
        Policy {
            retries: 2,
            max_attempts: 5,
            backoff: S,
            backoff_max: 60 * S,
            max_hold: 600 * S,
        }
    }

    fn transient() -> Failed<'static> {
        Failed {
            transient: true,
            class: "TempFail",
            message: "503 from upstream",
            retry_after: None,
        }
    }

    fn permanent() -> Failed<'static> {
        Failed {
            transient: false,
            class: "BadRequest",
            message: "400: title missing",
            retry_after: None,
        }
    }

    fn attempt(number: u32, retries_done: u32) -> Attempt {
        Attempt {
            number,
            retries_done,
        }
    }

    /// One row: what failed, which attempt, stopping, the hold, the jitter
    /// → the verdict and the event it logs.
    struct Row {
        name: &'static str,
        failed: Failed<'static>,
        attempt: Attempt,
        stopping: bool,
        held_until: Option<Millis>,
        jitter: f64,
        verdict: Verdict,
        event: (EventKind, &'static str),
    }

    fn table() -> Vec<Row> {
        let row = |name, failed, attempt, verdict, event| Row {
            name,
            failed,
            attempt,
            stopping: false,
            held_until: None,
            jitter: 0.0,
            verdict,
            event,
        };
        let asked = Failed {
            retry_after: Some(120 * S),
            ..transient()
        };
        vec![
            row(
                "first failure, retries left: backoff at its floor",
                transient(),
                attempt(1, 0),
                Verdict::RetryNow {
                    wait: S,
                    after_hold: None,
                },
                (
                    EventKind::Retry,
                    "TempFail: 503 from upstream (attempt 1; retrying in 1s)",
                ),
            ),
            Row {
                jitter: 0.999,
                ..row(
                    "second retry, the top jitter: at most half as long again",
                    transient(),
                    attempt(2, 1),
                    Verdict::RetryNow {
                        wait: 2 * S + (2 * S).mul_f64(0.999 / 2.0),
                        after_hold: None,
                    },
                    (
                        EventKind::Retry,
                        "TempFail: 503 from upstream (attempt 2; retrying in 2s)",
                    ),
                )
            },
            Row {
                held_until: Some(NOW + 120_000),
                ..row(
                    "a hold longer than the backoff: the retry waits for it",
                    asked,
                    attempt(1, 0),
                    Verdict::RetryNow {
                        wait: S,
                        after_hold: Some(NOW + 120_000),
                    },
                    (
                        EventKind::Retry,
                        "TempFail: 503 from upstream (attempt 1; retrying once the batch's hold is over, at 22:15:20Z)",
                    ),
                )
            },
            Row {
                held_until: Some(NOW + 500),
                ..row(
                    "a hold shorter than the backoff: the backoff says when",
                    transient(),
                    attempt(1, 0),
                    Verdict::RetryNow {
                        wait: S,
                        after_hold: None,
                    },
                    (
                        EventKind::Retry,
                        "TempFail: 503 from upstream (attempt 1; retrying in 1s)",
                    ),
                )
            },
            row(
                "retries used up, attempts left: the retry tier",
                transient(),
                attempt(3, 2),
                Verdict::RetryTier {
                    at: NOW + 4 * 60_000,
                },
                (
                    EventKind::Failed,
                    "TempFail: 503 from upstream (attempt 3; the next cycle retries it)",
                ),
            ),
            row(
                "the retry tier never comes back before retry_after",
                Failed {
                    retry_after: Some(3000 * S),
                    ..transient()
                },
                attempt(1, 2),
                // Clamped to max_hold (600 s), longer than 60 s.
                Verdict::RetryTier { at: NOW + 600_000 },
                (
                    EventKind::Failed,
                    "TempFail: 503 from upstream (attempt 1; the next cycle retries it)",
                ),
            ),
            row(
                "the redrive delay doubles per attempt",
                transient(),
                attempt(4, 2),
                Verdict::RetryTier { at: NOW + 480_000 },
                (
                    EventKind::Failed,
                    "TempFail: 503 from upstream (attempt 4; the next cycle retries it)",
                ),
            ),
            Row {
                stopping: true,
                ..row(
                    "stopping: never an immediate retry",
                    transient(),
                    attempt(1, 0),
                    Verdict::RetryTier { at: NOW + 60_000 },
                    (
                        EventKind::Failed,
                        "TempFail: 503 from upstream (attempt 1; the next cycle retries it)",
                    ),
                )
            },
            row(
                "the last attempt: quarantined, attempts used",
                transient(),
                attempt(5, 0),
                Verdict::Quarantine {
                    attempts_used: true,
                },
                (
                    EventKind::Quarantined,
                    "TempFail: 503 from upstream (attempt 5 of 5; quarantined)",
                ),
            ),
            row(
                "requeued after its attempts were used: its one attempt, said so",
                transient(),
                attempt(6, 0),
                Verdict::Quarantine {
                    attempts_used: true,
                },
                (
                    EventKind::Quarantined,
                    "TempFail: 503 from upstream (attempt 6, past max_attempts 5: a requeue after its attempts were used gives one; quarantined)",
                ),
            ),
            row(
                "permanent: quarantined at once",
                permanent(),
                attempt(1, 0),
                Verdict::Quarantine {
                    attempts_used: false,
                },
                (
                    EventKind::Quarantined,
                    "BadRequest: 400: title missing (permanent; quarantined)",
                ),
            ),
        ]
    }

    #[test]
    fn verdict_table() {
        let p = policy();
        for r in table() {
            let v = judge(
                &r.failed,
                r.attempt,
                &p,
                r.stopping,
                r.held_until,
                NOW,
                r.jitter,
            );
            assert_eq!(v, r.verdict, "{}", r.name);
            let (kind, text) = v.event(&r.failed, r.attempt, &p, NOW);
            assert_eq!((kind, text.as_str()), r.event, "{}", r.name);
        }
    }

    #[test]
    fn tiers_and_due_times_follow_the_verdict() {
        let retry = Verdict::RetryNow {
            wait: S,
            after_hold: None,
        };
        assert_eq!((retry.tier(), retry.next_attempt_at()), (None, None));
        let later = Verdict::RetryTier { at: NOW };
        assert_eq!(later.tier(), Some(Tier::Retry));
        assert_eq!(later.next_attempt_at(), Some(NOW));
        let q = Verdict::Quarantine {
            attempts_used: true,
        };
        assert_eq!((q.tier(), q.next_attempt_at()), (Some(Tier::Manual), None));
    }

    #[test]
    fn a_retry_after_holds_the_batch_whatever_the_verdict() {
        let asked = Failed {
            retry_after: Some(120 * S),
            ..permanent()
        };
        assert_eq!(hold(&asked), Some(120 * S));
        assert_eq!(hold(&transient()), None);
    }

    #[test]
    fn settle_is_judge_without_an_immediate_retry() {
        let p = policy();
        for r in table() {
            let settled = settle(&r.failed, r.attempt, &p, NOW);
            let stopped = judge(&r.failed, r.attempt, &p, true, None, NOW, r.jitter);
            assert_eq!(settled, stopped, "{}", r.name);
            assert!(settled.tier().is_some(), "{}", r.name);
        }
    }

    #[test]
    fn the_redrive_delay_stops_at_an_hour_unless_retry_after_is_longer() {
        let max = 60 * S;
        assert_eq!(redrive_delay(1, max, None), max);
        assert_eq!(redrive_delay(7, max, None), 3600 * S);
        assert_eq!(redrive_delay(u32::MAX, max, None), 3600 * S);
        assert_eq!(redrive_delay(7, max, Some(7200 * S)), 7200 * S);
    }

    #[test]
    fn backoff_waits_from_the_backoff_up_to_half_as_long_again_and_never_past_its_max() {
        let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
        for retry in 1..12 {
            let exp = base * 2u32.pow(retry - 1);
            let (low, high) = if exp.mul_f64(1.5) <= max {
                (exp, exp.mul_f64(1.5))
            } else {
                (exp.min(Duration::from_secs(40)), max)
            };
            assert_eq!(backoff(retry, base, max, 0.0), low, "{retry}");
            for _ in 0..200 {
                let d = backoff(retry, base, max, fastrand::f64());
                assert!(d >= low && d < high, "{retry}: {d:?}");
            }
        }
        // "1s": 1-1.5 s, 2-3 s, 4-6 s.
        assert_eq!(
            backoff(3, base, max, 1.0),
            Duration::from_secs(6),
            "at most half as long again"
        );
        assert_eq!(
            backoff(1, Duration::ZERO, Duration::ZERO, fastrand::f64()),
            Duration::ZERO
        );
        // A `backoff_max` of 10m is a maximum: far retries wait 6m40s-10m,
        // and never overflow.
        let ten = Duration::from_secs(600);
        assert_eq!(backoff(1000, base, ten, 0.999_999).as_secs(), 599);
        assert_eq!(backoff(1000, base, ten, 1.0), ten);
        assert_eq!(backoff(1000, base, ten, 0.0), Duration::from_secs(400));
        // A cap equal to the backoff: exactly the backoff, every time.
        assert_eq!(backoff(4, ten, ten, fastrand::f64()), ten);
    }

    #[test]
    fn backoff_draws_spread_over_the_whole_range() {
        let (base, max) = (Duration::from_millis(100), Duration::from_secs(60));
        let draws: Vec<Duration> = (0..2000)
            .map(|_| backoff(1, base, max, fastrand::f64()))
            .collect();
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
}
