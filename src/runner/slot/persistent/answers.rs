//! What the worker says about its items: an answer matched to the oldest
//! request and acted on (a success waits for the commit, a transient
//! failure for its backoff), op ids, stray lines, stderr reports.

use std::time::{Duration, Instant};

use serde_json::json;

use super::super::pipeline::Success;
use super::super::record::{begin_retry, count_cut_short, failed_answer, let_go, store_op_id};
use super::{Slot, Work};
use crate::model::{EventKind, NewEvent, Outcome};
use crate::runner::child::persistent::{match_answer, match_op_id};
use crate::runner::classify::Answer;
use crate::runner::verdict::{Attempt, Failed};
use crate::store::{CancelledWhile, StoreError};
use crate::util::time::now_ms;

impl Slot {
    /// An answer naming `key`: the oldest sent item's if it names it,
    /// else the worker is out of step. True when the slot gave up.
    pub(super) async fn answered(&mut self, key: &str, answer: Answer) -> Result<bool, StoreError> {
        let outstanding = self.sent.iter().map(|w| w.claim.key.as_str());
        if let Err(why) = match_answer(key, outstanding, self.last_answered.as_deref()) {
            return self.broken(Answer::out_of_step(&why)).await;
        }
        let head = self.sent.pop_front().expect("a sent item");
        let elapsed = self.head_since.elapsed();
        self.head_since = Instant::now();
        self.answered = true;
        self.last_answered = Some(head.claim.key.clone());
        self.failed_starts.clear();
        self.per_item = Some(match self.per_item {
            None => elapsed,
            Some(avg) => (avg * 7 + elapsed) / 8,
        });
        self.stderr_report().await;
        if head.cancelled {
            self.discard(head, &answer).await;
        } else {
            self.outcome(head, answer, elapsed).await?;
        }
        Ok(false)
    }

    /// The answer of a request cancelled while its worker held it: not
    /// kept, the item goes where its cancel said; the call was made, so
    /// what it reported it cost and used counts.
    async fn discard(&mut self, mut w: Work, answer: &Answer) {
        let cycle = self.cycle.clone();
        self.untrack(&w.claim);
        cycle.pool_settle(&w.claim, w.attempt, w.ticket.take(), answer.usage(), false);
        let cost = match answer {
            Answer::Done { cost, .. } | Answer::Failed { cost, .. } => *cost,
        };
        count_cut_short(&cycle, &w.claim, cost).await;
        let_go(&cycle, &w.claim, CancelledWhile::Answered).await;
    }

    /// An `@nightshift` line on a worker's stderr (noted by its reader),
    /// said once a run (`runner::unread`).
    pub(super) async fn stderr_report(&mut self) {
        self.cycle.tell(&*self.cycle.notices.stderr).await;
    }

    /// A stdout line that is not part of the protocol: ignored, said once
    /// a run and counted at its end (`runner::unread`).
    pub(super) async fn stray(&mut self, line: String) {
        self.cycle.notice(&self.cycle.notices.strays, line).await;
    }

    /// Acts on an item's answer: a success waits for the batch's commit, a
    /// transient failure is retried after its backoff, any other is
    /// recorded at once.
    pub(super) async fn outcome(
        &mut self,
        mut w: Work,
        answer: Answer,
        elapsed: Duration,
    ) -> Result<(), StoreError> {
        let cycle = self.cycle.clone();
        let done = matches!(answer, Answer::Done { .. });
        let line = cycle.pool_settle(&w.claim, w.attempt, w.ticket.take(), answer.usage(), done);
        match answer {
            Answer::Done {
                empty,
                result,
                cost,
                usage,
            } => {
                self.untrack(&w.claim);
                let event = NewEvent::new(
                    now_ms(),
                    &cycle.batch,
                    if empty {
                        EventKind::Empty
                    } else {
                        EventKind::Done
                    },
                    if empty { "done, empty result" } else { "done" },
                )
                .run(cycle.run_id)
                .key(&w.claim.key)
                .fields(
                    json!({"attempt": w.attempt, "ms": elapsed.as_millis() as u64, "cost": cost, "usage": usage.map(|u| json!({"input_tokens": u.input, "output_tokens": u.output}))}),
                );
                // Heard now, in order with the failures around it; its
                // done mark waits for the batch's commit.
                cycle.answered(None).await;
                self.successes.push(Success {
                    claim: w.claim,
                    outcome: if empty { Outcome::Empty } else { Outcome::Done },
                    result,
                    cost,
                    event,
                    usage: line,
                });
            }
            Answer::Failed {
                transient,
                class,
                message,
                retry_after,
                cost,
                ..
            } => {
                let failed = Failed {
                    transient,
                    class: &class,
                    message: &message,
                    retry_after,
                };
                let a = Attempt {
                    number: w.attempt,
                    retries_done: w.retries_done,
                };
                let over = || super::untrack(&cycle, &w.claim);
                if let Some(wait) = failed_answer(&cycle, &w.claim, a, &failed, cost, over).await? {
                    w.retries_done += 1;
                    self.retries.push((tokio::time::Instant::now() + wait, w));
                }
            }
        }
        Ok(())
    }

    /// Retries whose backoff has passed start their next attempt.
    pub(super) async fn promote_retries(&mut self) -> Result<(), StoreError> {
        if self.retries.is_empty() {
            return Ok(());
        }
        let now = tokio::time::Instant::now();
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|(t, _)| *t <= now);
        self.retries = wait;
        let cycle = self.cycle.clone();
        for (_, mut w) in ready {
            match begin_retry(&cycle, &w.claim).await? {
                Some(next) => {
                    w.attempt = next;
                    self.queue.push_back(w);
                }
                None => {
                    self.untrack(&w.claim);
                    let_go(&cycle, &w.claim, CancelledWhile::WaitingToRetry).await;
                }
            }
        }
        Ok(())
    }

    /// Stores an op id at once (a later attempt gets it back) on the sent
    /// item it names; naming any other puts the worker out of step. True
    /// when the slot gave up.
    pub(super) async fn op_id(&mut self, key: &str, op: String) -> Result<bool, StoreError> {
        let outstanding = self.sent.iter().map(|w| w.claim.key.as_str());
        let pos = match match_op_id(key, outstanding, self.last_answered.as_deref()) {
            Ok(pos) => pos,
            Err(why) => return self.broken(Answer::out_of_step(&why)).await,
        };
        let cycle = self.cycle.clone();
        let w = &mut self.sent[pos];
        if w.op_id.as_deref() == Some(op.as_str())
            || w.op_ids >= crate::runner::child::output::MAX_OP_IDS
        {
            return Ok(false);
        }
        w.op_ids += 1;
        w.op_id = Some(op.clone());
        store_op_id(&cycle, &w.claim, op).await;
        Ok(false)
    }
}
