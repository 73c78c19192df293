//! The store's session lost, once for every call that meets it: all of
//! them wait for it up to [`RIDE_OUT`] from when the first met it, not
//! each its own (one after another they held a run three minutes past
//! the outage's 60 s), and none once a second signal asked the run to
//! stop now.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::RIDE_OUT;
use crate::model::Millis;
use crate::store::StoreError;

/// When the store's session went, while it is gone (and by the wall
/// clock, for what a run says of it).
static SINCE: Mutex<Option<(Instant, Millis)>> = Mutex::new(None);
/// When the outage a call gave up on began: the run it ends says so.
static GAVE_UP_ON: Mutex<Option<Millis>> = Mutex::new(None);
/// `SINCE` is set: read without its lock on every call that went
/// through.
static LOST: AtomicBool = AtomicBool::new(false);
/// A second signal came: nothing waits for the store any more.
static GIVEN_UP: AtomicBool = AtomicBool::new(false);

/// A call met the lost session `e` at `now`: whether it may wait on
/// (the outage began under [`RIDE_OUT`] before). Said once per outage.
pub(super) fn began(e: &StoreError, now: Instant) -> bool {
    let mut since = SINCE.lock().unwrap_or_else(|p| p.into_inner());
    let first = since.is_none();
    let (at, at_ms) = *since.get_or_insert((now, crate::util::time::now_ms()));
    LOST.store(true, Ordering::SeqCst);
    if first {
        let e = crate::util::sanitize::line(&e.to_string()).into_owned();
        crate::util::stdio::err_line(&format!(
            "nightshift: lost the store's session ({e}); waiting up to {}s for it to write what is pending",
            RIDE_OUT.as_secs()
        ));
        tracing::warn!("store session lost: {e}");
    }
    let waits = !GIVEN_UP.load(Ordering::SeqCst) && now.saturating_duration_since(at) < RIDE_OUT;
    let mut gave_up = GAVE_UP_ON.lock().unwrap_or_else(|p| p.into_inner());
    if first {
        *gave_up = None;
    }
    if !waits {
        gave_up.get_or_insert(at_ms);
    }
    waits
}

/// When the latest outage a call gave up on began (kept until the
/// next outage; taken by the run that ends for it).
pub fn gave_up_on() -> Option<Millis> {
    GAVE_UP_ON.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// The run an outage that began at `since` ended says so, and waits
/// for the store anew, up to [`RIDE_OUT`], to record how it ended
/// (else it is left open, read as crashed, with no word of why).
pub fn run_ends(since: Millis) {
    crate::util::stdio::err_line(&format!(
        "nightshift: the store could not be reached for {}s (since {}): the run ends; \
         waiting up to {}s more to record it",
        RIDE_OUT.as_secs(),
        crate::util::time::utc_clock(since, crate::util::time::now_ms()),
        RIDE_OUT.as_secs()
    ));
    let mut lost = SINCE.lock().unwrap_or_else(|p| p.into_inner());
    *lost = None;
    LOST.store(false, Ordering::SeqCst);
}

/// Whether a write nobody waits for may be made again later.
pub(super) fn may_wait() -> bool {
    let since = SINCE.lock().unwrap_or_else(|p| p.into_inner());
    !GIVEN_UP.load(Ordering::SeqCst) && since.is_none_or(|(at, _)| at.elapsed() < RIDE_OUT)
}

/// A call went through (`waited`: after waiting for it): the outage,
/// if there was one, is over.
pub(super) fn over(waited: bool) {
    if !LOST.load(Ordering::SeqCst) {
        return;
    }
    let mut since = SINCE.lock().unwrap_or_else(|p| p.into_inner());
    LOST.store(false, Ordering::SeqCst);
    if since.take().is_some() && waited {
        crate::util::stdio::err_line("nightshift: the store answers again");
        tracing::info!("store session back");
    }
}

/// A second signal: the run stops now, without the store if it is
/// gone.
pub fn give_up() {
    GIVEN_UP.store(true, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every call waits up to 60 s from the outage's start, not its
    /// own (three calls one after another held a run three minutes);
    /// a call that goes through ends the outage, and the next one
    /// waits its 60 s again.
    #[test]
    fn an_outage_is_waited_out_once_for_every_call() {
        let lost = StoreError::Postgres {
            target: None,
            code: "57P01".into(),
            message: "terminating connection".into(),
        };
        let t0 = Instant::now();
        assert!(began(&lost, t0));
        assert!(began(&lost, t0 + Duration::from_secs(59)));
        assert!(
            !began(&lost, t0 + Duration::from_secs(61)),
            "a later call waits no longer"
        );
        assert!(gave_up_on().is_some(), "the outage given up on is said");
        assert_eq!(gave_up_on(), None, "once");
        over(false);
        let t1 = t0 + Duration::from_secs(120);
        assert!(began(&lost, t1), "the next outage is waited for");
        over(true);
    }
}
