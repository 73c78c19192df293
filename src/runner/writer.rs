//! The runner's store writer: one thread owns the connection and commits
//! whatever requests arrived together in one transaction (group commit).
//! A request is answered only after its transaction committed, so a slot
//! never acts on a transition that is not durable. A deferred write
//! (`defer`: bookkeeping nobody waits for, such as a pool settlement) is
//! no transaction of its own: it rides in the next group, whatever brings
//! it, at most [`MAX_DEFER`] later.
//!
//! On PostgreSQL a writer may also have lanes: more sessions, each its own
//! thread, for requests that need no order with the rest (a persistent
//! slot's chained commit, see `slot::pipeline`). One session is one
//! server process, so the server's work of several slots runs side by side
//! instead of one after another.
//!
//! Here the [`Writer`] its callers hold; the store threads' loops in
//! `serve`, deferred writes and their timer in `later`, a lost session
//! ridden out in `lost_session` (its shared state in [`outage`]).

mod later;
mod lost_session;
pub mod outage;
mod serve;
mod turn;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

use crate::store::{Fault, Store, StoreError};

pub use later::MAX_DEFER;
use later::{Deferred, Later};
pub use lost_session::RIDE_OUT;
use lost_session::{FIRST_PAUSE, lasting, ride_out};
use serve::{serve, serve_lane};
use turn::Turn;

type Finish = Box<dyn FnOnce(Option<&StoreError>) + Send>;
type Job = Box<dyn FnOnce(&mut Store) -> Finish + Send>;

pub struct Writer {
    tx: Option<mpsc::Sender<Job>>,
    later: Later,
    thread: Option<JoinHandle<Store>>,
    /// Set once the store's location names another store (or none): no
    /// request reaches the store from then on.
    sealed: Arc<AtomicBool>,
    /// What the refusals name.
    place: PathBuf,
    /// More sessions, one thread each (see [`Writer::add_lanes`]).
    lanes: Vec<Lane>,
    /// Whose turn it is, the writer's session or the lanes'.
    turn: Arc<Turn>,
}

/// A session of its own and the thread that owns it.
struct Lane {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<Store>>,
}

impl Writer {
    pub fn start(store: Store) -> Writer {
        let (tx, rx) = mpsc::channel::<Job>();
        let place = store.path().to_path_buf();
        let sealed = Arc::new(AtomicBool::new(false));
        let seal = sealed.clone();
        let deferred = Deferred::default();
        let waiting = deferred.clone();
        let turn = Arc::new(Turn::default());
        let writers_turn = turn.clone();
        let thread = std::thread::Builder::new()
            .name("nightshift-db".into())
            .spawn(move || serve(store, rx, &seal, &waiting, &writers_turn))
            .expect("spawning the store thread");
        Writer {
            later: Later {
                deferred,
                waker: Arc::new(std::sync::Mutex::new(Some(tx.clone()))),
                rt: tokio::runtime::Handle::try_current().ok(),
            },
            tx: Some(tx),
            thread: Some(thread),
            sealed,
            place,
            lanes: Vec::new(),
            turn,
        }
    }

    /// Gives the writer more sessions (`Store::another_session`), each
    /// served by a thread of its own; [`Writer::call_lane`] reaches them.
    pub fn add_lanes(&mut self, stores: Vec<Store>) {
        for (i, store) in stores.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel::<Job>();
            let (seal, turn) = (self.sealed.clone(), self.turn.clone());
            let thread = std::thread::Builder::new()
                .name(format!("nightshift-db{}", i + 1))
                .spawn(move || serve_lane(store, &rx, &seal, &turn))
                .expect("spawning a store lane thread");
            self.lanes.push(Lane {
                tx: Some(tx),
                thread: Some(thread),
            });
        }
    }

    /// Whether the writer has lanes (see [`Writer::add_lanes`]).
    pub fn has_lanes(&self) -> bool {
        !self.lanes.is_empty()
    }

    /// [`Writer::call`] on lane `lane` (modulo their number), alone in its
    /// transaction and ordered only with what else goes to that lane; on
    /// the writer's own session where it has no lanes.
    pub async fn call_lane<T: Send + 'static>(
        &self,
        lane: usize,
        f: impl Fn(&mut Store) -> Result<T, StoreError> + Send + Sync + 'static,
    ) -> Result<T, StoreError> {
        if self.lanes.is_empty() {
            return self.call(f).await;
        }
        let lane = lane % self.lanes.len();
        ride_out(f, |f| async move {
            self.refused()?;
            let (reply, answer) = oneshot::channel();
            let tx = self.lanes[lane].tx.as_ref().ok_or_else(gone)?;
            tx.send(job_of(move |s| f(s), reply)).map_err(|_| gone())?;
            self.answer(answer).await
        })
        .await
    }

    /// Runs `f` on the store; resolves once its write is committed. A
    /// session the server dropped (a PostgreSQL restart) is waited out, up
    /// to [`RIDE_OUT`], and `f` run again (see [`ride_out`]).
    pub async fn call<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Store) -> Result<T, StoreError> + Send + Sync + 'static,
    ) -> Result<T, StoreError> {
        ride_out(f, |f| async move {
            self.refused()?;
            let (reply, answer) = oneshot::channel();
            self.submit(move |s| f(s), reply)?;
            self.answer(answer).await
        })
        .await
    }

    /// The answer to a call, once its write is committed.
    async fn answer<T>(
        &self,
        answer: oneshot::Receiver<Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
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
    /// in order after what was queued before. Its error is only logged; a
    /// lost session has it made again (see [`lasting`]).
    pub fn send(&self, f: impl Fn(&mut Store) -> Result<(), StoreError> + Send + Sync + 'static) {
        let job = self.lasting(f);
        let sent = match self.tx.as_ref() {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        };
        if !sent {
            tracing::warn!("store write dropped: the store writer stopped");
        }
    }

    /// Queues `f` to run first in the next group, whatever brings it (a
    /// slot's claim or completion, most often), so that it costs no
    /// transaction of its own; a group is brought within [`MAX_DEFER`]
    /// should none come. Its error is only logged; a lost session has it
    /// made again (see [`lasting`]). Written before anything queued after
    /// it; it may go before writes queued before it that have not run yet,
    /// so it must not depend on them.
    pub fn defer(&self, f: impl Fn(&mut Store) -> Result<(), StoreError> + Send + Sync + 'static) {
        let job = self.lasting(f);
        self.later.push(job, MAX_DEFER);
    }

    /// `f` as a write nobody waits for, made again should its session be
    /// lost (see [`lasting`]).
    fn lasting(
        &self,
        f: impl Fn(&mut Store) -> Result<(), StoreError> + Send + Sync + 'static,
    ) -> Job {
        lasting(
            self.later.clone(),
            Arc::new(f),
            std::time::Instant::now(),
            FIRST_PAUSE,
        )
    }

    fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
        reply: oneshot::Sender<Result<T, StoreError>>,
    ) -> Result<(), StoreError> {
        self.tx
            .as_ref()
            .ok_or_else(gone)?
            .send(job_of(f, reply))
            .map_err(|_| gone())
    }
}

/// `f` as a job whose answer goes to `reply` once its group committed.
fn job_of<T: Send + 'static>(
    f: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    reply: oneshot::Sender<Result<T, StoreError>>,
) -> Job {
    Box::new(move |store: &mut Store| {
        let out = f(store);
        Box::new(move |commit_error: Option<&StoreError>| {
            let answer = match (out, commit_error) {
                (Ok(_), Some(e)) => Err(e.duplicate()),
                (out, _) => out,
            };
            let _ = reply.send(answer);
        })
    })
}

impl Drop for Writer {
    fn drop(&mut self) {
        for lane in &mut self.lanes {
            drop(lane.tx.take());
            if let Some(t) = lane.thread.take() {
                let _ = t.join();
            }
        }
        drop(self.tx.take());
        drop(
            self.later
                .waker
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn gone() -> StoreError {
    StoreError::Fault(Fault::WriterStopped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Access, PoolHold};

    fn held(s: &Store) -> Option<i64> {
        s.pool_hold("p", 0).unwrap().map(|h| h.until)
    }

    fn hold(until: i64) -> PoolHold {
        PoolHold {
            until,
            batch: "b".into(),
            key: None,
            label: None,
        }
    }

    /// A lane's request is answered while the writer's own session is
    /// busy with another: it does not wait behind it.
    #[tokio::test]
    async fn a_lane_answers_while_the_writer_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nightshift.db");
        let (store, _) = Store::create(&db).unwrap();
        let second = Store::open(&db, Access::ReadWrite).unwrap();
        let mut writer = Writer::start(store);
        writer.add_lanes(vec![second]);
        assert!(writer.has_lanes());
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let wait = std::sync::Mutex::new(wait);
        let busy = writer.call(move |_| {
            Ok(wait
                .lock()
                .unwrap()
                .recv_timeout(std::time::Duration::from_secs(60))
                .is_ok())
        });
        let lane = async {
            let out = writer.call_lane(0, |_| Ok(())).await;
            go.send(()).unwrap();
            out
        };
        let (busy, lane) = tokio::join!(busy, lane);
        lane.unwrap();
        assert!(busy.unwrap(), "the lane answered while the writer waited");
    }

    /// A deferred write is there for what is queued after it, is brought
    /// by its own timer when nothing else comes, and is not lost when the
    /// writer stops.
    #[tokio::test]
    async fn a_deferred_write_rides_in_the_next_group_or_comes_by_itself() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nightshift.db");
        let (store, _) = Store::create(&db).unwrap();
        let writer = Writer::start(store);
        writer.defer(|s| s.set_pool_hold("p", &hold(10)));
        let seen = writer.call(|s| Ok(held(s))).await.unwrap();
        assert_eq!(seen, Some(10), "written before what was queued after it");

        writer.defer(|s| s.set_pool_hold("p", &hold(20)));
        let reader = Store::open(&db, Access::ReadOnly).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while held(&reader) != Some(20) {
            assert!(std::time::Instant::now() < deadline, "never written");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }

        writer.defer(|s| s.set_pool_hold("p", &hold(30)));
        drop(writer);
        assert_eq!(held(&reader), Some(30), "written when the writer stopped");
    }
}
