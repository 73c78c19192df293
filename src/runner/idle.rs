//! Slots that found nothing to claim. Such a slot used to end at once, so
//! claims taken back from a dead runner sharing the batch (`recover::sweep`)
//! waited for a slot still busy with a long item, however many had ended.
//! Now it waits here while another slot of the cycle is busy: woken when
//! work may have come ([`Idle::work_came`]), it claims again; once every
//! slot waits, they all end, and so does the cycle.

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

pub struct Idle {
    state: Mutex<State>,
    wake: Notify,
}

struct State {
    /// Slots not waiting here (working, or ended without waiting).
    busy: usize,
    /// Every slot waited at once: nothing more comes.
    ended: bool,
    /// Bumped by each `work_came`.
    work: u64,
}

impl Idle {
    /// For `slots` slots, all busy to begin with.
    pub fn new(slots: usize) -> Idle {
        Idle {
            state: Mutex::new(State {
                busy: slots,
                ended: slots == 0,
                work: 0,
            }),
            wake: Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One slot's place; when dropped (the slot ended, however), it is no
    /// longer busy.
    pub fn place(self: &Arc<Self>) -> Place {
        Place {
            idle: self.clone(),
            busy: true,
        }
    }

    /// Work may have come (claims taken back): waiting slots claim again.
    pub fn work_came(&self) {
        self.state().work += 1;
        self.wake.notify_waiters();
    }

    fn leave(&self) {
        let mut s = self.state();
        s.busy = s.busy.saturating_sub(1);
        if s.busy == 0 {
            s.ended = true;
            drop(s);
            self.wake.notify_waiters();
        }
    }
}

/// A slot's place (see [`Idle::place`]).
pub struct Place {
    idle: Arc<Idle>,
    busy: bool,
}

impl Place {
    /// What [`Place::wait`] compares with: read before a claim, so that
    /// work that came while it found nothing is not missed.
    pub fn seen(&self) -> u64 {
        self.idle.state().work
    }

    /// The slot found nothing to claim (`seen` read before it tried):
    /// waits until work may have come (true: claim again) or every slot
    /// waits (false: end).
    pub async fn wait(&mut self, seen: u64) -> bool {
        if self.busy {
            self.busy = false;
            self.idle.leave();
        }
        loop {
            let notified = self.idle.wake.notified();
            tokio::pin!(notified);
            // Registered before the state is read: a wake between the two
            // is not missed.
            notified.as_mut().enable();
            {
                let mut s = self.idle.state();
                if s.ended {
                    return false;
                }
                if s.work != seen {
                    s.busy += 1;
                    self.busy = true;
                    return true;
                }
            }
            notified.await;
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if self.busy {
            self.idle.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two slots: the first finds nothing and waits; work comes and it
    /// claims again; then both wait and both end. Work that came after a
    /// slot read `seen` wakes it at once.
    #[tokio::test]
    async fn a_waiting_slot_claims_again_when_work_comes_and_ends_with_the_last() {
        let idle = Arc::new(Idle::new(2));
        let (mut a, mut b) = (idle.place(), idle.place());
        let seen = a.seen();
        let waiting = tokio::spawn(async move {
            let again = a.wait(seen).await;
            (again, a)
        });
        tokio::task::yield_now().await;
        idle.work_came();
        let (again, mut a) = waiting.await.unwrap();
        assert!(again, "woken to claim again");
        let seen = a.seen();
        let first = tokio::spawn(async move { a.wait(seen).await });
        tokio::task::yield_now().await;
        assert!(!b.wait(b.seen()).await, "the last to wait ends");
        assert!(!first.await.unwrap(), "and every other one with it");

        let idle = Arc::new(Idle::new(2));
        let (mut a, _b) = (idle.place(), idle.place());
        let seen = a.seen();
        idle.work_came();
        assert!(a.wait(seen).await, "the work that came meanwhile");
    }

    /// A slot that ends without waiting (a stop, an error) is not busy:
    /// the other, waiting, ends.
    #[tokio::test]
    async fn a_slot_that_ended_counts_as_waiting() {
        let idle = Arc::new(Idle::new(2));
        let (mut a, b) = (idle.place(), idle.place());
        let seen = a.seen();
        let waiting = tokio::spawn(async move { a.wait(seen).await });
        tokio::task::yield_now().await;
        drop(b);
        assert!(!waiting.await.unwrap());
    }
}
