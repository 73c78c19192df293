//! The store threads' loops: the writer's own, which commits what
//! arrived together in one transaction (group commit), the deferred writes
//! first; and a lane's, one job per transaction.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use super::later::Deferred;
use super::turn::Turn;
use super::{Finish, Job};
use crate::store::Store;

/// Most requests folded into one transaction.
const MAX_GROUP: usize = 512;

pub(super) fn serve(
    mut store: Store,
    rx: mpsc::Receiver<Job>,
    sealed: &AtomicBool,
    deferred: &Deferred,
    turn: &Turn,
) -> Store {
    let mut settled = false;
    let take_deferred = || std::mem::take(&mut *deferred.lock().unwrap_or_else(|p| p.into_inner()));
    // A commit that checkpointed itself held every slot waiting on it for
    // the checkpoint's syncs (5 ms and more each, every ~100 items in
    // process mode); beside, they overlap the next commits.
    store.begin_checkpoints_beside();
    while let Ok(first) = rx.recv() {
        if sealed.load(Ordering::SeqCst) {
            if !settled {
                // Nothing may checkpoint from another connection while the
                // log is moved into the file still open.
                store.end_checkpoints_beside();
                store.settle_after_loss();
                settled = true;
            }
            // Unanswered: the caller says why (`Writer::call`).
            drop(first);
            drop(take_deferred());
            continue;
        }
        // Where the writer's groups take the seat its lanes hold, its turn
        // (see `turn`); what arrives while the lanes finish joins the group.
        let _turn = store.orders_by_seat().then(|| turn.writer());
        // The deferred writes first: each was queued before what arrives
        // after it.
        let mut jobs = take_deferred();
        jobs.push(first);
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        run_group(&mut store, jobs);
    }
    // The last deferred writes, once nothing more can arrive.
    let rest = take_deferred();
    if !rest.is_empty() && !sealed.load(Ordering::SeqCst) {
        let _turn = store.orders_by_seat().then(|| turn.writer());
        run_group(&mut store, rest);
    }
    store.end_checkpoints_beside();
    store
}

/// A lane's loop: each job alone, in its own transaction. Once the writer
/// is sealed, nothing more is written (the callers are told why by
/// `Writer::call_lane`).
pub(super) fn serve_lane(
    mut store: Store,
    rx: &mpsc::Receiver<Job>,
    sealed: &AtomicBool,
    turn: &Turn,
) -> Store {
    while let Ok(job) = rx.recv() {
        if sealed.load(Ordering::SeqCst) {
            drop(job);
            continue;
        }
        let _turn = turn.lane();
        run_group(&mut store, vec![job]);
    }
    store
}

/// Runs `jobs` in one transaction (a lone one without a savepoint) and
/// answers each once it committed.
fn run_group(store: &mut Store, mut jobs: Vec<Job>) {
    if jobs.len() == 1 {
        // Alone: its own transaction, no savepoint needed.
        alone(store, jobs.pop().expect("one job"));
        return;
    }
    let mut finishers: Vec<Finish> = Vec::with_capacity(jobs.len());
    let mut pending = jobs.into_iter();
    let result = store.group(|s| {
        for job in pending.by_ref() {
            finishers.push(job(s));
        }
    });
    match result {
        Ok(()) => finishers.into_iter().for_each(|f| f(None)),
        Err(e) => {
            finishers.into_iter().for_each(|f| f(Some(&e)));
            // The group never began (e.g. busy): run the rest one by one,
            // so each gets its own answer.
            for job in pending {
                alone(store, job);
            }
        }
    }
}

/// Runs one job in its own transaction: in a group of its own where the
/// store's groups lock the seat first (lanes beside this session, see the
/// lock order in `store::pg::locks`), so that every write of this session
/// takes the seat before any other row; as it is otherwise.
fn alone(store: &mut Store, job: Job) {
    if !store.orders_by_seat() {
        job(store)(None);
        return;
    }
    let (mut job, mut finish) = (Some(job), None);
    let out = store.group(|s| finish = job.take().map(|j| j(s)));
    match (finish, out, job) {
        (Some(f), out, _) => f(out.err().as_ref()),
        // The group never began: the job meets the same store alone.
        (None, _, Some(j)) => j(store)(None),
        (None, _, None) => {}
    }
}

#[cfg(test)]
mod tests {
    use crate::runner::writer::Writer;
    use crate::store::Store;

    fn sqlite(s: &mut Store) -> &mut crate::store::sqlite::SqliteStore {
        match s {
            Store::Sqlite(s) => s,
            Store::Pg(_) => unreachable!("a SQLite store"),
        }
    }

    /// The store thread's commits leave SQLite's checkpoints to a thread
    /// beside them (a commit that checkpointed held every slot waiting on
    /// it for the syncs), and the WAL is still copied into the file while
    /// the runner lives, not only at its end.
    #[tokio::test]
    async fn the_store_threads_commits_are_checkpointed_beside_them() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nightshift.db");
        let (store, _) = Store::create(&db).unwrap();
        let writer = Writer::start(store);
        let auto = writer
            .call(|s| Ok(sqlite(s).autocheckpoint_pages()))
            .await
            .unwrap();
        assert_eq!(auto, 0, "the commits do not checkpoint themselves");
        let before = std::fs::metadata(&db).unwrap().len();
        for _ in 0..3 {
            writer
                .call(|s| sqlite(s).write_blob_rows(1200))
                .await
                .unwrap();
        }
        // The thread beside copies the pages in while the writer lives.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::fs::metadata(&db).unwrap().len() < before + 3 * 1000 * 3000 {
            assert!(std::time::Instant::now() < deadline, "never checkpointed");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        drop(writer);
    }
}
