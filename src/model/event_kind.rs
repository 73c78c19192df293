//! The run log's vocabulary: every kind of event nightshift writes, with
//! what it means. `log --kind` accepts these and no others, its help and
//! man page list them, and the README's table is generated from this list
//! (`tests/it/docs/readme.rs`); `tests/it/event_kinds.rs` checks that every kind the
//! code writes is here.

use std::fmt;
use std::str::FromStr;

macro_rules! event_kinds {
    ($($(#[doc = $doc:literal])+ $variant:ident => $s:literal,)+) => {
        /// What an event in the run log records.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[doc = $doc])+ $variant,)+
        }
        str_enum!(EventKind { $($variant => $s),+ });
        impl EventKind {
            /// One line saying what the event records.
            #[must_use]
            pub fn doc(self) -> &'static str {
                match self {
                    $(EventKind::$variant => concat!($($doc),+).trim_start(),)+
                }
            }
        }
    };
}

event_kinds! {
    // An item's life.
    /// An item was claimed by a run (its attempt begins).
    Claimed => "claimed",
    /// The worker succeeded; its result is stored.
    Done => "done",
    /// The worker succeeded with nothing on stdout (outcome `empty`).
    Empty => "empty",
    /// A transient failure, retried at once after a backoff.
    Retry => "retry",
    /// A transient failure left in the `retry` tier for the next cycle.
    Failed => "failed",
    /// A permanent failure, or attempts exhausted: `manual` tier, for a human.
    Quarantined => "quarantined",
    /// A `retry`-tier item went back to pending: its retry time came.
    Redriven => "redriven",
    /// An in-flight item went back to pending: the run was stopping.
    Released => "released",
    /// Another runner holds the item now: this runner's worker or result was dropped.
    LeaseLost => "lease-lost",
    /// The worker reported an operation id (given to the next attempt).
    OpId => "op-id",
    /// A persistent worker died on item after item without answering: its slot stopped.
    WorkerFailed => "worker-failed",
    /// A persistent worker broke before it took an item's request (closed its stdin, exited): a fresh worker takes it, its attempt not counted.
    WorkerRestarted => "worker-restarted",
    /// A persistent worker's answer could not be matched to its request: the worker was restarted.
    ProtocolError => "protocol-error",
    /// A worker printed lines the runner does not read (stdout lines of a persistent worker that are not answers, or @nightshift lines it cannot use), ignored and counted.
    StrayOutput => "stray-output",
    /// Every call of the batch held back by a `retry_after_s` answer (rate limit): its own, or its limit pool's (`… held until T (retry-after for pool openai), asked by a1 of a`, with `pool`, `until`, `from_batch`, `from_key`).
    Hold => "hold",
    /// Calls wait for the batch's limit pool's room: which pool, which limit, the next slot (a pool's hold is a `hold`).
    RateLimit => "rate-limit",
    /// An item's `estimate_field` holds no token estimate: its call reserved `token_estimate` instead (said for a run's first such item; its end counts them when there are more).
    EstimateIgnored => "estimate-ignored",
    /// A budget was reached: no call of the batch starts until its window ends (in-flight ones finish).
    Budget => "budget",
    // What people and hooks did.
    /// Items were added (`nightshift add`).
    Added => "added",
    /// The `source` command's items were added.
    Source => "source",
    /// The `source` command failed; nothing of it was added.
    SourceFailed => "source-failed",
    /// A failed item was sent back to pending (`requeue`, the dashboard).
    Requeued => "requeued",
    /// An item was marked done without running (`skip`, the dashboard).
    Skipped => "skipped",
    /// The batch was paused; or a run found it paused and did nothing.
    Paused => "paused",
    /// The batch was unpaused.
    Unpaused => "unpaused",
    /// A retry-after hold was lifted by hand (`unpause`, the dashboard).
    HoldLifted => "hold-lifted",
    /// Someone asked the runner holding an item to cancel it (`cancel`, the dashboard).
    CancelAsked => "cancel-asked",
    /// An item was cancelled: its worker stopped if it ran, it went where `--to` said.
    Cancelled => "cancelled",
    /// Someone asked the runners of a batch to stop (`stop`, the dashboard).
    StopAsked => "stop-asked",
    /// Old history was deleted (`prune`).
    Pruned => "pruned",
    /// The keys (tombstones) of pruned done items were forgotten (`prune --forget-keys`).
    KeysForgotten => "keys-forgotten",
    /// The `alert` command ran after a cycle with failures, and how it ended.
    Alert => "alert",
    // Runs and locks.
    /// A run started (its trigger, host and concurrency).
    RunStarted => "run-started",
    /// A run ended: its summary line.
    RunFinished => "run-finished",
    /// A run found every seat of the batch lock held and stepped down.
    LockHeld => "lock-held",
    /// A run was interrupted while waiting for the batch lock.
    Aborted => "aborted",
    /// The run lost its batch lock to another runner and stopped.
    LockLost => "lock-lost",
    /// The store was deleted or replaced under the run, which stopped.
    StoreLost => "store-lost",
    /// A runner took over a lock seat whose holder died or expired.
    LockTakeover => "lock-takeover",
    /// The claims of dead runs were taken back (or quarantined).
    Reclaimed => "reclaimed",
    /// Worker processes left running by dead runs or by workers were stopped.
    OrphansStopped => "orphans-stopped",
    // The scheduler.
    /// A schedule fire and its outcome (ran, skipped, missed, ...).
    Fire => "fire",
    /// The daemon started scheduling the batch, or stopped.
    Daemon => "daemon",
    /// The emergency-stop file `PAUSED` appeared or went away.
    EmergencyStop => "emergency-stop",
}

impl EventKind {
    /// `claimed, done, empty, ...`: for error messages and help.
    #[must_use]
    pub fn names() -> String {
        EventKind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_name_a_doc_and_round_trips() {
        let mut seen = std::collections::HashSet::new();
        for k in EventKind::ALL {
            assert!(seen.insert(k.as_str()), "{k} listed twice");
            assert_eq!(k.as_str().parse::<EventKind>().unwrap(), *k);
            assert!(
                k.doc().ends_with('.') && !k.doc().starts_with(' '),
                "{k}: {:?}",
                k.doc()
            );
        }
        let err = "faild".parse::<EventKind>().unwrap_err();
        assert!(err.contains("failed, quarantined"), "{err}");
    }
}
