//! A claimed item's claim, as `show` and the dashboard's item detail both
//! tell it: in flight in a live run (its lease renewed until when), or
//! waiting there for a place in its limit pool (named, since when), or
//! orphaned by a run whose runner crashed or went silent (taken back by
//! the next run), by the rule `status` counts `orphaned` with.

use serde_json::{Value, json};

use super::waiting::{Holding, WaitReason};
use super::{BatchInfo, Item, Millis, Seat, Status};
use crate::util::sanitize;
use crate::util::time::{relative, rfc3339};

/// How the run holding a claim is, as of the read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Live,
    Crashed,
    Silent {
        since: Millis,
    },
    /// Its run holds no seat of the lock (it lost it, or ended without
    /// releasing the claim): nothing works the item.
    Seatless,
}

/// Who holds a claimed item, and how that run is, as of the read.
pub struct ClaimView {
    run_id: Option<i64>,
    /// `host:pid` of the seat's holder.
    runner: Option<String>,
    state: State,
    /// Until when the claim is leased (its run's heartbeat renews it).
    lease_until: Option<Millis>,
    /// Since when its pool defers its call: it waits for a place, it is
    /// not in flight.
    pool_wait_since: Option<Millis>,
    /// When its failed attempt runs again (in this cycle): until then it
    /// waits, it is not in flight.
    retry_at: Option<Millis>,
    /// The batch's limit pool (`limit = ...` in the config), as the
    /// batch's waiting line names it.
    pool: Option<String>,
    /// The retry-after hold a deferred claim waits for instead of a place:
    /// its end, and the pool it is said of (`waiting::deferred_wait`).
    held: Option<(Millis, Option<String>)>,
    /// Its attempts and the batch's `max_attempts`, when they are used up:
    /// the next run takes it back only to quarantine it.
    used_up: Option<(i64, u32)>,
}

/// What a claim's view needs from the batch's config.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The batch's limit pool, if it has one.
    pub pool: Option<&'a str>,
    pub max_attempts: u32,
    /// What holds the batch, as the waiting line reads it: a pool held by
    /// a retry-after holds its deferred claims too.
    pub holding: Option<&'a Holding>,
}

/// The claim of `item`, if it is claimed, under its batch's `rules`, as
/// of `now`.
pub fn of(info: &BatchInfo, item: &Item, rules: Rules<'_>, now: Millis) -> Option<ClaimView> {
    if item.status != Status::Claimed {
        return None;
    }
    let seat = info.claim_seat(item.lease_run);
    let state = match seat.map(|(_, s)| s) {
        Some(Seat::Live) => State::Live,
        Some(Seat::Crashed) => State::Crashed,
        Some(Seat::Silent { since }) => State::Silent { since },
        None => State::Seatless,
    };
    Some(ClaimView {
        run_id: item.lease_run,
        runner: seat.map(|(l, _)| l.holder.to_string()),
        state,
        lease_until: item.lease_until,
        pool_wait_since: item.pool_wait_since,
        retry_at: item.retry_at,
        pool: rules.pool.map(str::to_string),
        held: rules.holding.and_then(|h| {
            let pool = h.rate_limit.as_ref();
            match super::waiting::deferred_wait(pool, h.hold_until, now) {
                (WaitReason::Hold, Some(until)) => {
                    let named = super::waiting::hold_pool(pool, h.hold_until);
                    Some((until, named.map(|p| p.pool.clone())))
                }
                _ => None,
            }
        }),
        used_up: {
            let used =
                super::attempts_used(item.attempts.into(), item.pool_wait_since, item.retry_at);
            super::attempts_used_up(used, rules.max_attempts).then_some((used, rules.max_attempts))
        },
    })
}

impl ClaimView {
    fn state_word(&self) -> &'static str {
        match self.state {
            State::Live => "live",
            State::Crashed => "crashed",
            State::Silent { .. } => "silent",
            State::Seatless => "no-seat",
        }
    }

    /// Whether nothing works the item: its run's runner is gone or silent,
    /// or its run holds no seat.
    #[must_use]
    pub fn orphaned(&self) -> bool {
        self.state != State::Live
    }

    /// The claim in one line: `show`'s `claim:` and the item detail's.
    #[must_use]
    pub fn line(&self, now: Millis) -> String {
        let run = match (self.run_id, &self.runner) {
            (Some(id), Some(r)) => format!("run #{id} ({})", sanitize::line(r)),
            (Some(id), None) => format!("run #{id}"),
            (None, _) => "a run".to_string(),
        };
        let back = match self.used_up {
            Some((n, max)) => format!(
                "the next run takes this item back and quarantines it: \
                 its attempts are used (attempt {n}, max_attempts {max})"
            ),
            None => "the next run takes this item back".to_string(),
        };
        let lease = self
            .lease_until
            .map(|t| format!(", leased until {} ({})", rfc3339(t), relative(t, now)))
            .unwrap_or_default();
        let wait = super::waiting::claim_wait(self.retry_at, self.pool_wait_since.is_some(), now);
        match self.state {
            State::Live => match (wait, self.retry_at, self.pool_wait_since) {
                (Some(WaitReason::Backoff), Some(at), _) => format!(
                    "claimed by {run}, waiting to retry at {} ({}) after a failed attempt{lease}",
                    rfc3339(at),
                    relative(at, now)
                ),
                (Some(WaitReason::PoolPlace), _, Some(_))
                    if let Some((until, pool)) = &self.held =>
                {
                    let held = super::waiting::held_words(
                        Some(*until),
                        pool.as_deref().map(|p| sanitize::line(p)).as_deref(),
                        now,
                    );
                    format!("claimed by {run}, {held}{lease}")
                }
                (Some(WaitReason::PoolPlace), _, Some(since)) => {
                    // A config that no longer names the pool still says a pool waits.
                    let pool = self.pool.as_deref().map_or_else(
                        || "its pool".to_string(),
                        |p| format!("pool {}", sanitize::line(p)),
                    );
                    format!(
                        "claimed by {run}, waiting for a place in {pool} since {} ({}){lease}",
                        rfc3339(since),
                        relative(since, now)
                    )
                }
                _ => format!("in flight in {run}{lease}"),
            },
            State::Crashed => format!("{run} crashed: its runner is gone; {back}"),
            State::Silent { since } => format!(
                "{run} silent since {} ({}): its lock expired; {back}",
                rfc3339(since),
                relative(since, now)
            ),
            State::Seatless => format!("{run} holds no seat of the lock; {back}"),
        }
    }

    /// `show --json`'s `claim`.
    #[must_use]
    pub fn json(&self) -> Value {
        json!({
            "run_id": self.run_id,
            "runner": self.runner,
            "state": self.state_word(),
            "orphaned": self.orphaned(),
            // An orphan the next run quarantines rather than runs again.
            "next_run_quarantines": self.orphaned() && self.used_up.is_some(),
            "lease_until": self.lease_until.map(rfc3339),
            "pool_wait_since": self.pool_wait_since.map(rfc3339),
            // A deferred claim's pool held by a retry-after: until when.
            "held_until": self.held.as_ref().filter(|_| self.pool_wait_since.is_some()).map(|(t, _)| rfc3339(*t)),
            "retry_at": self.retry_at.map(rfc3339),
            "silent_since": match self.state {
                State::Silent { since } => Some(rfc3339(since)),
                _ => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Millis = 1_767_250_000_000; // 2026-01-01T06:46:40Z

    fn live_batch() -> BatchInfo {
        BatchInfo::live_for_test("記事", 3, NOW)
    }

    fn rules(pool: Option<&str>) -> Rules<'_> {
        Rules {
            pool,
            max_attempts: 5,
            holding: None,
        }
    }

    fn deferred() -> Item {
        Item {
            status: Status::Claimed,
            lease_run: Some(3),
            lease_token: 1,
            created_at: 0,
            updated_at: 0,
            pool_wait_since: Some(NOW - 30_000),
            ..Item::for_test("記事", "k", NOW)
        }
    }

    /// A deferred claim names the pool it waits for, as the batch's
    /// waiting line does, where it said "its pool".
    #[test]
    fn a_claim_waiting_for_a_place_names_the_pool() {
        let claim = of(
            &live_batch(),
            &deferred(),
            rules(Some("本番アカウント")),
            NOW,
        )
        .unwrap();
        assert_eq!(
            claim.line(NOW),
            "claimed by run #3 (h:7), waiting for a place in pool 本番アカウント \
             since 2026-01-01T06:46:10Z (30s ago)"
        );
        // A config that no longer names a pool for the batch.
        let unnamed = of(&live_batch(), &deferred(), rules(None), NOW).unwrap();
        assert!(
            unnamed
                .line(NOW)
                .contains("waiting for a place in its pool since"),
            "{}",
            unnamed.line(NOW)
        );
    }

    /// A deferred claim whose pool a retry-after holds waits for the hold,
    /// not for a place (it said "waiting for a place"), in the words of
    /// the batch's waiting line.
    #[test]
    fn a_claim_deferred_by_a_held_pool_says_the_hold() {
        let holding = Holding {
            rate_limit: Some(super::super::waiting::RateLimited {
                pool: "本番アカウント".into(),
                dimension: super::super::waiting::POOL_HOLD.into(),
                next_slot: Some(NOW + 600_000),
            }),
            ..Holding::default()
        };
        let held = Rules {
            holding: Some(&holding),
            ..rules(Some("本番アカウント"))
        };
        let claim = of(&live_batch(), &deferred(), held, NOW).unwrap();
        assert_eq!(
            claim.line(NOW),
            "claimed by run #3 (h:7), held until 06:56:40Z (retry-after for pool 本番アカウント)"
        );
        assert_eq!(claim.json()["held_until"], "2026-01-01T06:56:40Z");
        // A pool short of room, not held: a place.
        let full = Holding {
            rate_limit: Some(super::super::waiting::RateLimited {
                dimension: "requests/min".into(),
                ..holding.rate_limit.clone().unwrap()
            }),
            ..Holding::default()
        };
        let short = Rules {
            holding: Some(&full),
            ..rules(Some("本番アカウント"))
        };
        let claim = of(&live_batch(), &deferred(), short, NOW).unwrap();
        assert!(
            claim
                .line(NOW)
                .contains("waiting for a place in pool 本番アカウント"),
            "{}",
            claim.line(NOW)
        );
        assert_eq!(claim.json()["held_until"], Value::Null);
    }

    /// A claim whose attempt failed and runs again later waits to retry,
    /// until then; its runner dead, it is an orphan like any other.
    #[test]
    fn a_claim_waiting_to_retry_says_until_when() {
        let mut item = deferred();
        item.pool_wait_since = None;
        item.retry_at = Some(NOW + 90_000);
        let claim = of(&live_batch(), &item, rules(None), NOW).unwrap();
        assert_eq!(
            claim.line(NOW),
            "claimed by run #3 (h:7), waiting to retry at 2026-01-01T06:48:10Z (in 1m30s) \
             after a failed attempt"
        );
        assert_eq!(claim.json()["retry_at"], "2026-01-01T06:48:10Z");
        // Its time came: it is at the gate, worked again.
        assert!(claim.line(NOW + 90_000).starts_with("in flight in run #3"));
        let mut crashed = live_batch();
        crashed.runners.seats[0] = Seat::Crashed;
        let orphan = of(&crashed, &item, rules(None), NOW).unwrap();
        assert!(orphan.line(NOW).contains("crashed"), "{}", orphan.line(NOW));
    }

    /// A dead runner's claim on its last attempt is not run again: the
    /// next run takes it back to quarantine it, and the line says so
    /// where it said only "takes this item back".
    #[test]
    fn an_orphan_whose_attempts_are_used_is_said_to_be_quarantined_next() {
        let mut crashed = live_batch();
        crashed.runners.seats[0] = Seat::Crashed;
        let mut item = deferred();
        item.pool_wait_since = None;
        item.attempts = 2;
        let last = Rules {
            pool: None,
            max_attempts: 2,
            holding: None,
        };
        let claim = of(&crashed, &item, last, NOW).unwrap();
        assert_eq!(
            claim.line(NOW),
            "run #3 (h:7) crashed: its runner is gone; the next run takes this item back \
             and quarantines it: its attempts are used (attempt 2, max_attempts 2)"
        );
        assert_eq!(claim.json()["next_run_quarantines"], true);
        let again = of(&crashed, &item, rules(None), NOW).unwrap();
        assert_eq!(
            again.line(NOW),
            "run #3 (h:7) crashed: its runner is gone; the next run takes this item back"
        );
        assert_eq!(again.json()["next_run_quarantines"], false);
        // A live claim on its last attempt is in flight, not quarantined.
        let live = of(&live_batch(), &item, last, NOW).unwrap();
        assert_eq!(live.json()["next_run_quarantines"], false);
        assert!(
            live.line(NOW).starts_with("in flight in run #3"),
            "{}",
            live.line(NOW)
        );
    }

    /// A dead runner's claim whose call waited for its pool has not used
    /// the attempt its claim counted: the next run takes it back to run
    /// it, as the take-back does (`attempts_used`).
    #[test]
    fn an_orphan_that_waited_for_its_pool_is_not_said_to_be_quarantined() {
        let mut crashed = live_batch();
        crashed.runners.seats[0] = Seat::Crashed;
        let mut item = deferred();
        item.attempts = 2;
        let last = Rules {
            pool: None,
            max_attempts: 2,
            holding: None,
        };
        let claim = of(&crashed, &item, last, NOW).unwrap();
        assert_eq!(claim.json()["next_run_quarantines"], false);
        // A retry waiting for its pool has not counted its attempt yet.
        item.retry_at = Some(NOW - 1);
        let claim = of(&crashed, &item, last, NOW).unwrap();
        assert_eq!(claim.json()["next_run_quarantines"], true);
    }

    /// `show` and the item detail say the attempts used: a first attempt
    /// whose call waits for its pool is not, and they say so, where they
    /// said "attempts: 1" of an item never called.
    #[test]
    fn an_attempt_waiting_for_its_pool_is_not_said_used() {
        let mut item = deferred();
        item.attempts = 1;
        assert_eq!(
            crate::model::attempts_said(&item),
            "0 (attempt 1 has not started: its call waits for its pool)"
        );
        // A retry waiting for its pool counts its attempt once admitted:
        // the stored count is what it used.
        item.attempts = 2;
        item.retry_at = Some(NOW - 1);
        assert_eq!(crate::model::attempts_said(&item), "2");
        item.retry_at = None;
        item.pool_wait_since = None;
        assert_eq!(crate::model::attempts_said(&item), "2");
    }
}
