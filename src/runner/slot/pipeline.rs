//! Persistent mode's claim-ahead: a slot claims items in batches (up to
//! `MAX_BATCH`, fewer for slow workers), and records successes in the
//! transaction that also claims the next batch, started once half a batch
//! is answered, so the store works while the worker answers the rest. The
//! claim comes only after the successes are committed.

use std::time::Duration;

use super::claim::{budget_spent, log_claimed};
use super::persistent::Slot;
use super::record::count_success;
use crate::model::{Claim, NewEvent, Outcome};
use crate::runner::gate::Pass;
use crate::runner::pool::{Asked, Ticket};
use crate::store::{Completion, Refusal, Store, StoreError};
use crate::util::time::now_ms;

/// Most items claimed (and sent ahead) at once by one slot.
const MAX_BATCH: usize = 1024;

/// A batch should take about this long, so slow workers claim few items
/// at a time and the slots share the work fairly.
pub(super) const BATCH_TIME: Duration = Duration::from_millis(200);

/// What a commit hands back: the successes (for the log), which of them
/// were accepted, the next claims (`None`: the lock is lost), how many
/// were asked for, and the pool's answer for their calls (asked in the
/// same transaction).
pub(super) type Committed = (
    std::sync::Arc<Vec<Success>>,
    Vec<bool>,
    Option<Vec<Claim>>,
    usize,
    Option<Asked>,
);

/// Claims for the queue, and the places in the pool the first of them
/// were given with their claim.
pub(super) type Next = (Vec<Claim>, Vec<Ticket>);

pub(super) type CommitFuture =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Committed, StoreError>> + Send>>;

/// A success waiting for the batch's commit.
pub(super) struct Success {
    pub(super) claim: Claim,
    pub(super) outcome: Outcome,
    pub(super) result: Option<String>,
    pub(super) cost: Option<f64>,
    pub(super) event: NewEvent,
    /// The attempt's usage line for the item (`Completion::usage`).
    pub(super) usage: Option<String>,
}

/// What a chained commit gives back: which successes were accepted, the
/// next claims and the pool's answer for them.
type Chained = (Vec<bool>, Option<Vec<Claim>>, Option<Asked>);

/// A chained commit on a lane (alone in its transaction there), whole or
/// not at all, in the runner's one lock order (`store::pg::locks`): the
/// run's seat first, shared (the claim's own lock check, or `hold_seat`
/// when it claims nothing), then its items, the counters and the run's
/// row. `None`, and nothing kept, when the run no longer holds its seat:
/// with nothing to order by, the commit goes to the writer's session.
fn chained_on_lane(
    s: &mut Store,
    (batch, run): (&str, i64),
    done: &[(Completion<'_>, &NewEvent)],
    n: usize,
    claim: impl Fn(&mut Store) -> Result<(Option<Vec<Claim>>, Option<Asked>), StoreError>,
) -> Result<Option<Chained>, StoreError> {
    let lost = || {
        StoreError::Refused(Refusal::SeatLost {
            run,
            batch: batch.to_string(),
        })
    };
    let out = s.group_whole(|s| {
        let (next, asked) = if n == 0 {
            if !s.hold_seat(batch, run)? {
                return Err(lost());
            }
            (Some(Vec::new()), None)
        } else {
            claim(s)?
        };
        if next.is_none() {
            return Err(lost());
        }
        let accepted = s.complete_all(done)?;
        Ok((accepted, next, asked))
    });
    match out {
        Err(StoreError::Refused(Refusal::SeatLost { .. })) => Ok(None),
        out => out.map(Some),
    }
}

impl Slot {
    /// How many items to claim now: about `BATCH_TIME` of work, growing
    /// from one; one at a time when every claim must be weighed (rate
    /// limit, cost budget), or when an answer may stop the calls after it
    /// (a circuit breaker; a limit pool, whose 429 holds every batch of
    /// it): requests sent ahead are in the worker's hands, and ran after
    /// the trip or during the hold, every one a paid call. Takes them from
    /// `--limit`.
    pub(super) fn take_batch(&mut self) -> usize {
        let cfg = &self.cycle.cfg;
        let ahead = self.cycle.chain && cfg.halt.is_none() && cfg.pool.is_none();
        let want = if ahead {
            let fit = self.per_item.map_or(MAX_BATCH, |t| {
                (BATCH_TIME.as_secs_f64() / t.as_secs_f64().max(1e-7)) as usize
            });
            // One item first (the worker's speed is unknown), then doubling.
            let cap = if self.per_item.is_none() {
                1
            } else {
                self.batch.saturating_mul(2)
            };
            self.batch = fit.clamp(1, MAX_BATCH).min(cap).max(1);
            self.batch
        } else {
            1
        };
        self.cycle.take_claims(want)
    }

    /// A fresh claim (not chained to a commit), through the gate as in
    /// process mode: the first request's pass comes with it.
    pub(super) async fn claim(&mut self) -> Result<(Vec<Claim>, Pass), StoreError> {
        let cycle = self.cycle.clone();
        let nothing = Ok((Vec::new(), Pass::None));
        if cycle.stopping().is_some() || budget_spent(&cycle) {
            return nothing;
        }
        let n = self.take_batch();
        if n == 0 {
            return nothing;
        }
        let Some((claims, pass)) = cycle.claim_through_gate(n).await? else {
            cycle.give_back(n);
            cycle.lock_lost().await;
            return nothing;
        };
        cycle.give_back(n - claims.len());
        for c in &claims {
            log_claimed(&cycle, c);
        }
        Ok((claims, pass))
    }

    /// Records the batch's successes and, with `chain`, claims the next
    /// batch in the same transaction. The claim comes only after the
    /// successes are committed: nothing acknowledged can be lost by a crash.
    pub(super) async fn commit(&mut self, chain: bool) -> Result<Next, StoreError> {
        self.settle().await?;
        match self.begin_commit(chain).await {
            Some(f) => {
                let out = f.await?;
                self.end_commit(out).await
            }
            None => Ok((Vec::new(), Vec::new())),
        }
    }

    /// Starts a commit of the successes so far (and, with `chain`, the
    /// claim of the next batch). `None` when there is nothing to do.
    pub(super) async fn begin_commit(&mut self, chain: bool) -> Option<CommitFuture> {
        let successes = std::mem::take(&mut self.successes);
        let cycle = self.cycle.clone();
        let may_chain = chain
            && cycle.chain
            && cycle.stopping().is_none()
            && cycle.gate.held_until().is_none()
            && !budget_spent(&cycle);
        let n = if may_chain { self.take_batch() } else { 0 };
        if successes.is_empty() && n == 0 {
            return None;
        }
        let (batch, run) = (cycle.batch.clone(), cycle.run_id);
        let version = cycle.cfg.version.clone();
        let until = cycle.lease_until(now_ms());
        let pool = cycle.pool.clone();
        // Each slot on a session of its own where the writer has lanes.
        let (lane, laned) = (self.index as usize, cycle.writer.has_lanes());
        let commit = move |s: &mut Store, successes: &[Success], on_lane: bool| {
            let now = now_ms();
            let done: Vec<_> = successes
                .iter()
                .map(|s| {
                    let c = Completion {
                        item_id: s.claim.item_id,
                        token: s.claim.token,
                        run_id: run,
                        outcome: s.outcome,
                        result: s.result.as_deref(),
                        cost: s.cost,
                        version: version.as_deref(),
                        usage: s.usage.as_deref(),
                        now,
                    };
                    (c, &s.event)
                })
                .collect();
            let claim = |s: &mut Store| {
                let next = s.claim(&batch, run, n, until, now)?;
                let asked = pool
                    .as_ref()
                    .zip(next.as_deref())
                    .and_then(|(p, claims)| p.admit_claimed(s, claims));
                Ok::<_, StoreError>((next, asked))
            };
            if on_lane {
                return chained_on_lane(s, (&batch, run), &done, n, claim);
            }
            Ok(Some(if n == 0 {
                (s.complete_all(&done)?, Some(Vec::new()), None)
            } else {
                // One transaction: the successes, the next claim
                // and its calls' places in the pool.
                s.group(|s| {
                    let accepted = s.complete_all(&done)?;
                    let (next, asked) = claim(s)?;
                    Ok::<_, StoreError>((accepted, next, asked))
                })??
            }))
        };
        let on_writer = commit.clone();
        // Shared with the store thread, which may run the commit again
        // (`Writer::call`), and kept for the log.
        let successes = std::sync::Arc::new(successes);
        Some(Box::pin(async move {
            let mine = successes.clone();
            let out = cycle
                .writer
                .call_lane(lane, move |s| commit(s, &mine, laned))
                .await?;
            let (accepted, next, asked) = match out {
                Some(out) => out,
                // The seat is gone: on the writer's session, as without
                // lanes (its successes kept, its claim refused).
                None => {
                    let mine = successes.clone();
                    cycle
                        .writer
                        .call(move |s| {
                            let out = on_writer(s, &mine, false)?;
                            Ok(out.expect("always an answer off a lane"))
                        })
                        .await?
                }
            };
            Ok((successes, accepted, next, n, asked))
        }))
    }

    /// Acts on a finished commit: counts, log lines, the next claims.
    pub(super) async fn end_commit(&mut self, out: Committed) -> Result<Next, StoreError> {
        let (successes, accepted, next, n, asked) = out;
        let cycle = self.cycle.clone();
        for (s, ok) in successes.iter().zip(accepted) {
            count_success(&cycle, &s.claim, ok, s.outcome, s.cost, &s.event).await;
        }
        let Some(next) = next else {
            cycle.give_back(n);
            cycle.lock_lost().await;
            return Ok((Vec::new(), Vec::new()));
        };
        cycle.give_back(n - next.len());
        for c in &next {
            log_claimed(&cycle, c);
        }
        let tickets = match asked {
            Some(a) => cycle.admitted(a).await.0,
            None => Vec::new(),
        };
        Ok((next, tickets))
    }

    /// Waits for a commit under way; its claims join the queue.
    pub(super) async fn settle(&mut self) -> Result<(), StoreError> {
        if let Some(f) = self.committing.take() {
            let out = f.await?;
            let (next, tickets) = self.end_commit(out).await?;
            self.enqueue(next, tickets, Pass::None);
        }
        Ok(())
    }
}
