//! Before a claim and at it, both modes: a spent cost budget stops
//! claiming, and a slot may claim its next item with its last success
//! (`may_chain`); every claim is logged.

use crate::model::{Claim, EventKind, NewEvent};
use crate::runner::cycle::{Cycle, Signal, StopReason};
use crate::store::StoreError;
use crate::util::time::now_ms;

pub(in crate::runner) fn budget_spent(cycle: &Cycle) -> bool {
    let Some(max) = cycle.cfg.max_cost else {
        return false;
    };
    if cycle.tally.counts(0).cost >= max {
        cycle.request_stop(Signal::Graceful, StopReason::MaxCost);
        return true;
    }
    false
}

/// May this slot claim its next item in the transaction that records its
/// success? Saves a transaction and a store round trip per item. Only when
/// nothing has to be waited for or weighed in between: no rate limit, no
/// hold, no cost budget, no single `--key`, not stopping. Takes one claim
/// from `--limit` when it says yes.
pub(super) fn may_chain(cycle: &Cycle) -> bool {
    if !cycle.chain || cycle.stopping().is_some() || cycle.gate.held_until().is_some() {
        return false;
    }
    cycle.take_claims(1) == 1
}

pub(in crate::runner) fn log_claimed(cycle: &Cycle, claim: &Claim) {
    cycle.log.emit(
        &NewEvent::new(
            now_ms(),
            &cycle.batch,
            EventKind::Claimed,
            format!("claimed (attempt {})", claim.attempt),
        )
        .run(cycle.run_id)
        .key(&claim.key),
    );
}

/// `run --key`: claims the one named item.
pub(super) async fn claim_key(cycle: &Cycle, key: String) -> Result<Claim, StoreError> {
    let (batch, run) = (cycle.batch.clone(), cycle.run_id);
    let until = cycle.lease_until(now_ms());
    cycle
        .writer
        .call(move |s| s.claim_key(&batch, &key, run, until, now_ms()))
        .await
}
