//! The runner's store writer: one thread owns the connection and commits
//! whatever requests arrived together in one transaction (group commit).
//! A request is answered only after its transaction committed, so a slot
//! never acts on a transition that is not durable.

use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::store::{Store, StoreError};

type Finish = Box<dyn FnOnce(Option<&StoreError>) + Send>;
type Job = Box<dyn FnOnce(&mut Store) -> Finish + Send>;

/// Most requests folded into one transaction.
const MAX_GROUP: usize = 512;

pub struct Db {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<Store>>,
}

impl Db {
    pub fn start(store: Store) -> Db {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("nightshift-db".into())
            .spawn(move || serve(store, rx))
            .expect("spawning the store thread");
        Db {
            tx: Some(tx),
            thread: Some(thread),
        }
    }

    /// Runs `f` on the store; resolves once its write is committed.
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.submit(f, reply)?;
        answer.await.unwrap_or_else(|_| Err(gone()))
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

impl Drop for Db {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn gone() -> StoreError {
    StoreError::Invalid("the store writer stopped".into())
}

fn serve(mut store: Store, rx: mpsc::Receiver<Job>) -> Store {
    while let Ok(first) = rx.recv() {
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
