//! The runner's store writer: one thread owns the connection and commits
//! whatever requests arrived together in one transaction (group commit).
//! A request is answered only after its transaction committed, so a slot
//! never acts on a transition that is not durable.

use crate::store::Fault;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::store::{Store, StoreError};

type Finish = Box<dyn FnOnce(Option<&StoreError>) + Send>;
type Job = Box<dyn FnOnce(&mut Store) -> Finish + Send>;

/// Most requests folded into one transaction.
const MAX_GROUP: usize = 512;

pub struct Writer {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<Store>>,
    /// Set once the store's location names another store (or none): no
    /// request reaches the store from then on.
    sealed: Arc<AtomicBool>,
    /// What the refusals name.
    place: PathBuf,
}

impl Writer {
    pub fn start(store: Store) -> Writer {
        let (tx, rx) = mpsc::channel::<Job>();
        let place = store.path().to_path_buf();
        let sealed = Arc::new(AtomicBool::new(false));
        let seal = sealed.clone();
        let thread = std::thread::Builder::new()
            .name("nightshift-db".into())
            .spawn(move || serve(store, rx, &seal))
            .expect("spawning the store thread");
        Writer {
            tx: Some(tx),
            thread: Some(thread),
            sealed,
            place,
        }
    }

    /// Runs `f` on the store; resolves once its write is committed.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.refused()?;
        let (reply, answer) = oneshot::channel();
        self.submit(f, reply)?;
        let out = match answer.await {
            Ok(out) => out,
            Err(_) => self.refused().and(Err(gone())),
        };
        // The store found itself replaced (a PostgreSQL session reopened
        // onto another database): the heartbeat stops the run.
        if let Err(StoreError::Replaced(_)) = &out {
            self.seal();
        }
        out
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::SeqCst)
    }

    /// Refuses every request from now on, also those already waiting: the
    /// store was deleted or replaced, and nothing more may be written to
    /// the file (or database) still open.
    pub fn seal(&self) {
        if self.sealed.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wakes the store thread, which settles the store (and drops this).
        let wake: Job = Box::new(|_| Box::new(|_| {}));
        if let Some(tx) = &self.tx {
            let _ = tx.send(wake);
        }
    }

    fn refused(&self) -> Result<(), StoreError> {
        if self.sealed.load(Ordering::SeqCst) {
            return Err(StoreError::Replaced(self.place.clone()));
        }
        Ok(())
    }

    /// Queues `f` without waiting for it: it commits with the next group,
    /// in order after what was queued before. Its error is only logged.
    pub fn send(&self, f: impl FnOnce(&mut Store) -> Result<(), StoreError> + Send + 'static) {
        let (reply, _) = oneshot::channel();
        let logged = move |s: &mut Store| {
            let out = f(s);
            if let Err(e) = &out {
                tracing::warn!("store write: {e}");
            }
            out
        };
        if self.submit(logged, reply).is_err() {
            tracing::warn!("store write dropped: the store writer stopped");
        }
    }

    fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
        reply: oneshot::Sender<Result<T, StoreError>>,
    ) -> Result<(), StoreError> {
        let job: Job = Box::new(move |store: &mut Store| {
            let out = f(store);
            Box::new(move |commit_error: Option<&StoreError>| {
                let answer = match (out, commit_error) {
                    (Ok(_), Some(e)) => Err(e.duplicate()),
                    (out, _) => out,
                };
                let _ = reply.send(answer);
            })
        });
        self.tx
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn gone() -> StoreError {
    StoreError::Fault(Fault::WriterStopped)
}

fn serve(mut store: Store, rx: mpsc::Receiver<Job>, sealed: &AtomicBool) -> Store {
    let mut settled = false;
    while let Ok(first) = rx.recv() {
        if sealed.load(Ordering::SeqCst) {
            if !settled {
                store.settle_after_loss();
                settled = true;
            }
            // Unanswered: the caller says why (`Writer::call`).
            drop(first);
            continue;
        }
        let mut jobs = vec![first];
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        if jobs.len() == 1 {
            // Alone: its own transaction, no savepoint needed.
            let finish = (jobs.pop().expect("one job"))(&mut store);
            finish(None);
            continue;
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
                    let finish = job(&mut store);
                    finish(None);
                }
            }
        }
    }
    store
}
