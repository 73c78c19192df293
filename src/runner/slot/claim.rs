//! Before a claim and at it, both modes: a spent cost budget stops
//! claiming, and a slot may claim its next item with its last success
//! (`may_chain`); every claim is logged.

use std::sync::atomic::Ordering;

use crate::model::{Claim, NewEvent};
use crate::runner::cycle::{Cycle, Signal, StopReason};
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
    match &cycle.claims_left {
        Some(left) => left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok(),
        None => true,
    }
}

/// Gives back the `--limit` claim `may_chain` took, when no item came of it.
pub(super) fn unchain(cycle: &Cycle) {
    if let Some(left) = &cycle.claims_left {
        left.fetch_add(1, Ordering::SeqCst);
    }
}

pub(in crate::runner) fn log_claimed(cycle: &Cycle, claim: &Claim) {
    cycle.log.emit(
        &NewEvent::new(
            now_ms(),
            &cycle.batch,
            "claimed",
            format!("claimed (attempt {})", claim.attempt),
        )
        .run(cycle.run_id)
        .key(&claim.key),
    );
}
