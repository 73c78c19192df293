//! A store session lost under the writer (a PostgreSQL restart) ridden
//! out: a call run again until it goes through ([`ride_out`]), a write
//! nobody waits for made again in a later group ([`lasting`]), both for up
//! to [`RIDE_OUT`].

use std::sync::Arc;

use super::later::Later;
use super::{Job, outage};
use crate::store::{Store, StoreError};

/// A write nobody waits for (`send`, `defer`), kept to be made again
/// should the store's session be lost under it.
type Lasting = Arc<dyn Fn(&mut Store) -> Result<(), StoreError> + Send + Sync>;

/// `f` as a job nobody waits for: its error is logged, but a lost session
/// (its write gone with it) has it made again in a later group, pausing
/// `pause` and longer, for up to [`RIDE_OUT`] since `since`, as
/// [`ride_out`] does for calls: a budget's spend or a pool's settlement is
/// not lost to a PostgreSQL restart.
pub(super) fn lasting(
    later: Later,
    f: Lasting,
    since: std::time::Instant,
    pause: std::time::Duration,
) -> Job {
    Box::new(move |s: &mut Store| {
        let out = f(s);
        Box::new(move |commit: Option<&StoreError>| {
            let failed = match &out {
                Err(e) => Some(e),
                Ok(()) => commit,
            };
            let Some(e) = failed else { return };
            if e.is_session_lost() && since.elapsed() < RIDE_OUT && outage::may_wait() {
                let next = (pause * 2).min(std::time::Duration::from_secs(2));
                later.push(lasting(later.clone(), f, since, next), pause);
            } else {
                tracing::warn!("store write: {e}");
            }
        })
    })
}

/// How long a call waits for a store whose session was dropped (a
/// PostgreSQL server restarting) to take it again: an answer a worker was
/// paid for is then kept, not lost with the run and paid for again.
pub const RIDE_OUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs `once(f)` and, while it fails because the store's session was
/// dropped (`StoreError::is_session_lost`), again, with pauses growing to
/// 2 s, for up to [`RIDE_OUT`]. The failed attempt kept nothing (its
/// transaction went with the session), so running `f` again is the same
/// write; a write whose commit was sent as the session went may have been
/// kept, and its fenced writes (a done mark, a claim's lease) then find
/// their row taken and say so.
pub(super) async fn ride_out<F, T, Fut>(f: F, once: impl Fn(Arc<F>) -> Fut) -> Result<T, StoreError>
where
    F: Fn(&mut Store) -> Result<T, StoreError> + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let f = Arc::new(f);
    let mut pause = FIRST_PAUSE;
    let mut waited = false;
    loop {
        match once(f.clone()).await {
            Err(e) if e.is_session_lost() && outage::began(&e, std::time::Instant::now()) => {
                waited = true;
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_secs(2));
            }
            out => {
                // Any call that went through ends an outage (one whose
                // calls all gave up too, or the next would not wait).
                if out.is_ok() {
                    outage::over(waited);
                }
                return out;
            }
        }
    }
}

/// The first pause before a write whose session was lost is made again.
pub(super) const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);
