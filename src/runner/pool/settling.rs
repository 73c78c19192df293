//! The settlements a cycle's writer has not reached yet, gathered so
//! that one write in the next group commit takes them all.

use crate::store::AttemptUsage;

/// The settlements a cycle's writer has not reached yet. The first one
/// queues a write; those that arrive before the writer runs it join it,
/// so a group commit settles every call answered since the last one in
/// one write (one pool lock, one savepoint) instead of one each. Order is
/// kept: a settlement is always written before anything queued after it.
#[derive(Default)]
pub struct Settling(std::sync::Arc<std::sync::Mutex<Pending>>);

#[derive(Default)]
struct Pending {
    rows: Vec<AttemptUsage>,
    /// A write that will take `rows` is queued and has not run yet.
    queued: bool,
}

impl Settling {
    /// Adds a settlement; `Some` (the handle the write takes its rows
    /// from) when no queued write will take it and one must be queued.
    pub(super) fn push(&self, row: AttemptUsage) -> Option<Settling> {
        let mut p = self.0.lock().unwrap_or_else(|p| p.into_inner());
        p.rows.push(row);
        if p.queued {
            return None;
        }
        p.queued = true;
        Some(Settling(self.0.clone()))
    }

    /// The settlements so far, for the write running now; the next one
    /// queues a new write.
    pub(super) fn take(&self) -> Vec<AttemptUsage> {
        let mut p = self.0.lock().unwrap_or_else(|p| p.into_inner());
        p.queued = false;
        std::mem::take(&mut p.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str) -> AttemptUsage {
        AttemptUsage {
            batch: "b".into(),
            run_id: 1,
            key: key.into(),
            attempt: 1,
            pool: Some("p".into()),
            place: None,
            with_done: false,
            at: 0,
            estimate: 100,
            input_tokens: None,
            output_tokens: None,
        }
    }

    /// One write per group: the first settlement queues it, those that
    /// arrive before it runs join it, and one after it ran queues the next.
    #[test]
    fn settlements_join_the_write_already_queued() {
        let s = Settling::default();
        let write = s.push(row("k1")).expect("the first queues a write");
        assert!(s.push(row("k2")).is_none());
        assert!(s.push(row("k3")).is_none());
        let keys: Vec<String> = write.take().into_iter().map(|r| r.key).collect();
        assert_eq!(keys, ["k1", "k2", "k3"]);
        let next = s.push(row("k4")).expect("after the write ran, a new one");
        assert_eq!(next.take().len(), 1);
        assert!(next.take().is_empty());
    }
}
