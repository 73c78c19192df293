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

/// The longest a deferred write waits for a group to ride in before it
/// brings one itself.
pub const MAX_DEFER: std::time::Duration = std::time::Duration::from_millis(50);

/// Deferred writes, oldest first.
type Deferred = Arc<std::sync::Mutex<Vec<Job>>>;

/// A write nobody waits for (`send`, `defer`), kept to be made again
/// should the store's session be lost under it.
type Lasting = Arc<dyn Fn(&mut Store) -> Result<(), StoreError> + Send + Sync>;

/// Where deferred writes wait, and how their timer wakes the thread.
#[derive(Clone)]
struct Later {
    deferred: Deferred,
    /// What the timer wakes the thread with: shared, not cloned, so that
    /// dropping the writer closes the channel at once even while a timer
    /// is pending.
    waker: Arc<std::sync::Mutex<Option<mpsc::Sender<Job>>>>,
    /// The runtime of the writer's callers, for timers set from the store
    /// thread (a write made again after its session was lost).
    rt: Option<tokio::runtime::Handle>,
}

impl Later {
    /// Queues `job` to run first in the next group, bringing one itself
    /// after `wait` should none come.
    fn push(&self, job: Job, wait: std::time::Duration) {
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

/// `f` as a job nobody waits for: its error is logged, but a lost session
/// (its write gone with it) has it made again in a later group, pausing
/// `pause` and longer, for up to [`RIDE_OUT`] since `since`, as
/// [`ride_out`] does for calls: a budget's spend or a pool's settlement is
/// not lost to a PostgreSQL restart.
fn lasting(later: Later, f: Lasting, since: std::time::Instant, pause: std::time::Duration) -> Job {
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
        let thread = std::thread::Builder::new()
            .name("nightshift-db".into())
            .spawn(move || serve(store, rx, &seal, &waiting))
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
        }
    }

    /// Gives the writer more sessions (`Store::another_session`), each
    /// served by a thread of its own; [`Writer::call_lane`] reaches them.
    pub fn add_lanes(&mut self, stores: Vec<Store>) {
        for (i, store) in stores.into_iter().enumerate() {
            let (tx, rx) = mpsc::channel::<Job>();
            let seal = self.sealed.clone();
            let thread = std::thread::Builder::new()
                .name(format!("nightshift-db{}", i + 1))
                .spawn(move || serve_lane(store, &rx, &seal))
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
async fn ride_out<F, T, Fut>(f: F, once: impl Fn(Arc<F>) -> Fut) -> Result<T, StoreError>
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

/// The store's session lost, once for every call that meets it: all of
/// them wait for it up to [`RIDE_OUT`] from when the first met it, not
/// each its own (one after another they held a run three minutes past
/// the outage's 60 s), and none once a second signal asked the run to
/// stop now.
pub mod outage {
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
        let waits =
            !GIVEN_UP.load(Ordering::SeqCst) && now.saturating_duration_since(at) < RIDE_OUT;
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
}

/// The first pause before a write whose session was lost is made again.
const FIRST_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

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

fn serve(
    mut store: Store,
    rx: mpsc::Receiver<Job>,
    sealed: &AtomicBool,
    deferred: &Deferred,
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
        run_group(&mut store, rest);
    }
    store.end_checkpoints_beside();
    store
}

/// A lane's loop: each job alone, in its own transaction. Once the writer
/// is sealed, nothing more is written (the callers are told why by
/// `Writer::call_lane`).
fn serve_lane(mut store: Store, rx: &mpsc::Receiver<Job>, sealed: &AtomicBool) -> Store {
    while let Ok(job) = rx.recv() {
        if sealed.load(Ordering::SeqCst) {
            drop(job);
            continue;
        }
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
