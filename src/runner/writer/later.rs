//! Deferred writes: bookkeeping nobody waits for, queued to ride first
//! in the next group, and the timer that brings a group itself should
//! none come within [`MAX_DEFER`].

use std::sync::Arc;
use std::sync::mpsc;

use super::Job;

/// The longest a deferred write waits for a group to ride in before it
/// brings one itself.
pub const MAX_DEFER: std::time::Duration = std::time::Duration::from_millis(50);

/// Deferred writes, oldest first.
pub(super) type Deferred = Arc<std::sync::Mutex<Vec<Job>>>;

/// Where deferred writes wait, and how their timer wakes the thread.
#[derive(Clone)]
pub(super) struct Later {
    pub(super) deferred: Deferred,
    /// What the timer wakes the thread with: shared, not cloned, so that
    /// dropping the writer closes the channel at once even while a timer
    /// is pending.
    pub(super) waker: Arc<std::sync::Mutex<Option<mpsc::Sender<Job>>>>,
    /// The runtime of the writer's callers, for timers set from the store
    /// thread (a write made again after its session was lost).
    pub(super) rt: Option<tokio::runtime::Handle>,
}

impl Later {
    /// Queues `job` to run first in the next group, bringing one itself
    /// after `wait` should none come.
    pub(super) fn push(&self, job: Job, wait: std::time::Duration) {
        let first = {
            let mut d = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
            d.push(job);
            d.len() == 1
        };
        if !first {
            return;
        }
        let waker = self.waker.clone();
        let wake = move || {
            let nothing: Job = Box::new(|_| Box::new(|_| {}));
            if let Some(tx) = waker.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                let _ = tx.send(nothing);
            }
        };
        match tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| self.rt.clone())
        {
            Some(rt) => {
                rt.spawn(async move {
                    tokio::time::sleep(wait).await;
                    wake();
                });
            }
            None => wake(),
        }
    }
}
