//! What per-process mode must do for each item, without the runner's
//! runtime: the floor under `run` in process mode for a design that keeps
//! what it keeps (`bench/spawn`, bench/README.md).
//!
//! ```text
//! spawn_floor DIR N J PROGRAM [ARG...]
//! FLOOR_VARIANTS="pipes|group" spawn_floor ...   # only the variants naming one of these words
//! ```
//!
//! `J` threads, one per slot, each a blocking loop with nothing between
//! its steps (no runtime, no reactor, no thread handing work to another):
//!
//! - `pipes and group`: the worker started by the runner's own start
//!   (`runner::child::posix::launch`: its own process group, the signal
//!   mask and SIGPIPE reset, three pipes, the runner's environment
//!   prepared once plus the item's six variables, `PROGRAM` found in
//!   `PATH` once), its payload written, its stdout and its stderr read to
//!   their end (one after the other: the worker is meant to print
//!   nothing), its exit waited for, its group killed;
//! - `store calls, one transaction an item`: the same, and each item's store calls of a
//!   process slot, in one transaction under a lock the slots share: its
//!   done mark with its done event, the worker's group recorded, the next
//!   item claimed (`Store::complete`, `record_worker`, `claim`, as the
//!   runner's store thread makes them), on a fresh store of N items made
//!   by the store itself;
//! - `store calls, group-committed`: the same, but whichever slot takes
//!   the store commits every success waiting, its own or another's, in one
//!   transaction, as the runner's store thread groups what arrived
//!   together; the others wait for their answer;
//! - `store calls, claimed ahead`: the store calls of another design, one
//!   the runner does not have: each slot claims several items in one
//!   transaction (one, then doubling, up to `AHEAD`, as a persistent slot
//!   does) and runs them one after another; their done marks, with each
//!   worker's group, commit in the transaction of the slot's next claim.
//!   Its successes are durable before the slot claims more, as in
//!   persistent mode, not before its next worker starts;
//! - `store calls, ahead, each start committed`: the same, and a
//!   one-row write (the worker's group) committed before each worker
//!   starts: what a durable "started" mark per item would cost, so that a
//!   claim that never started could be told from one that did;
//! - `store calls, ahead, each done with the next start`: claimed ahead,
//!   and each success's done mark committed with the next item's start
//!   mark, before its worker starts (a success is durable before the
//!   slot's next worker starts, as in the runner's design).
//!
//! Prints one line per variant: `floor VARIANT: N items, S s wall`.

#[path = "support/floor.rs"]
mod floor;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

use floor::{chosen, plain_done, remove_db, seat};
use nightshift::model::{Claim, NewItem};
use nightshift::runner::child::orphans::RUNNER_VAR;
use nightshift::runner::child::posix::{Prepared, launch};
use nightshift::runner::child::{groups, resolve};
use nightshift::store::Store;
use nightshift::util::time::now_ms;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::waitpid;

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const VARIANTS: [&str; 6] = [
    "pipes and group",
    "store calls, one transaction an item",
    "store calls, group-committed",
    "store calls, claimed ahead",
    "store calls, ahead, each start committed",
    "store calls, ahead, each done with the next start",
];

/// Most items a slot claims at once in the claimed-ahead variant: about
/// the persistent slot's 200 ms of work at -j4's pace (1.3 ms an item).
const AHEAD: usize = 128;

/// What every slot shares: the worker, the environment, the store.
struct Shared {
    argv: Vec<String>,
    /// `argv[0]` found in `PATH` once (`None`: a path, or not found).
    program: Option<PathBuf>,
    prepared: Prepared,
    store: Option<Mutex<Store>>,
    run: i64,
    /// Successes commit in groups (`pending`), not one by one.
    grouped: bool,
    /// Each slot claims several items at once, and records its successes
    /// with its next claim.
    ahead: bool,
    /// ... and commits a one-row write before each worker starts (what a
    /// durable "started" mark would cost).
    start_marks: bool,
    /// ... and commits each success's done mark with the next start mark.
    done_at_start: bool,
    pending: Mutex<Vec<Done>>,
}

/// One worker run as the runner runs it (`posix::launch`, the runner's
/// own start). `env`: the item's variables.
fn run_worker(sh: &Shared, env: &[(&'static str, String)], payload: &[u8]) -> Res<i32> {
    let w = launch(&sh.argv, sh.program.as_deref(), &sh.prepared, env)?
        .ok_or("a pipe landed on a standard stream: the runner would use `Command`")?;
    // A worker that does not read its stdin: the write fails, as the
    // runner's does, harmlessly.
    let _ = File::from(w.stdin).write_all(payload);
    drain(w.stdout)?;
    drain(w.stderr)?;
    let status = waitpid(w.pid, None)?;
    let _ = killpg(w.pid, Signal::SIGKILL);
    Ok(match status {
        nix::sys::wait::WaitStatus::Exited(_, code) => code,
        _ => -1,
    })
}

fn drain(fd: OwnedFd) -> Res<()> {
    let mut sink = Vec::new();
    File::from(fd).read_to_end(&mut sink)?;
    Ok(())
}

/// The variables the runner gives a worker for `claim`.
fn item_env(claim: &Claim, run: i64) -> Vec<(&'static str, String)> {
    vec![
        ("NIGHTSHIFT_BATCH", "b".to_string()),
        ("NIGHTSHIFT_KEY", claim.key.clone()),
        ("NIGHTSHIFT_LABEL", claim.label.clone()),
        ("NIGHTSHIFT_ATTEMPT", claim.attempt.to_string()),
        ("NIGHTSHIFT_RUN_ID", run.to_string()),
        (RUNNER_VAR, "floor".to_string()),
    ]
}

/// A slot: claims, runs and records items until none is left (with the
/// store), or runs its share of `n` (without). Returns the items done.
fn slot(sh: &Shared, index: usize, n: usize, j: usize) -> Res<usize> {
    let Some(store) = &sh.store else {
        let claim = Claim {
            item_id: 0,
            key: format!("k{index}"),
            label: String::new(),
            payload: String::new(),
            attempt: 1,
            op_id: None,
            token: 0,
        };
        let env = item_env(&claim, sh.run);
        let mine = n / j + usize::from(index < n % j);
        for _ in 0..mine {
            run_worker(sh, &env, br#"{"key":"k"}"#)?;
        }
        return Ok(mine);
    };
    if sh.ahead {
        return slot_ahead(sh, store, index);
    }
    let mut next = store
        .lock()
        .expect("store lock")
        .group(|s| claim_one(s, sh.run))??;
    let mut done = 0;
    while let Some(claim) = next.take() {
        let ms = run_claim(sh, &claim)?;
        let (reply, answer) = mpsc::channel();
        let req = Done {
            claim,
            ms,
            slot: index as u32,
            reply,
        };
        let accepted;
        (accepted, next) = if sh.grouped {
            // Whoever takes the store commits every success waiting, its
            // own or not, in one transaction (a group commit).
            sh.pending.lock().expect("queue lock").push(req);
            let mut s = store.lock().expect("store lock");
            let waiting = std::mem::take(&mut *sh.pending.lock().expect("queue lock"));
            if !waiting.is_empty() {
                let outs = s.group(|s| {
                    waiting
                        .iter()
                        .map(|d| record(s, sh.run, d))
                        .collect::<Vec<_>>()
                })?;
                for (d, out) in waiting.into_iter().zip(outs) {
                    let _ = d.reply.send(out);
                }
            }
            drop(s);
            answer.recv()??
        } else {
            let mut s = store.lock().expect("store lock");
            s.group(|s| record(s, sh.run, &req))??
        };
        done += usize::from(accepted);
    }
    Ok(done)
}

/// A slot that claims several items at once (one, then doubling, up to
/// `AHEAD`), runs them one after another, and records their successes,
/// with each worker's group, in the transaction of its next claim.
fn slot_ahead(sh: &Shared, store: &Mutex<Store>, index: usize) -> Res<usize> {
    let mut want = 1;
    let mut queue = std::collections::VecDeque::new();
    let mut successes: Vec<(Claim, u64)> = Vec::new();
    let mut done = 0;
    loop {
        if queue.is_empty() {
            let now = now_ms();
            let (accepted, next) = store.lock().expect("store lock").group(|s| {
                let mut accepted = 0;
                for (c, ms) in &successes {
                    if let Some(g) = groups::of(sh.run, index as u32, std::process::id(), None) {
                        s.record_worker(&g)?;
                    }
                    let (mark, event) = plain_done(c, sh.run, *ms, now);
                    accepted += usize::from(s.complete(&mark, &event)?);
                }
                let next = s
                    .claim("b", sh.run, want, now + 600_000, now)?
                    .ok_or("lock lost")?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>((accepted, next))
            })??;
            done += accepted;
            successes.clear();
            if next.is_empty() {
                return Ok(done);
            }
            want = (want * 2).min(AHEAD);
            queue.extend(next);
        }
        let claim = queue.pop_front().expect("a claim");
        if sh.start_marks
            && let Some(g) = groups::of(sh.run, index as u32, std::process::id(), None)
        {
            // A one-row write in a transaction of its own, standing in for
            // the item's "started" mark; with `done_at_start`, the last
            // success's done mark with it.
            let last = if sh.done_at_start {
                successes.pop()
            } else {
                None
            };
            let now = now_ms();
            let accepted = store.lock().expect("store lock").group(|s| {
                s.record_worker(&g)?;
                match &last {
                    Some((c, ms)) => {
                        let (mark, event) = plain_done(c, sh.run, *ms, now);
                        s.complete(&mark, &event)
                    }
                    None => Ok(false),
                }
            })??;
            done += usize::from(accepted);
        }
        let ms = run_claim(sh, &claim)?;
        successes.push((claim, ms));
    }
}

/// Runs `claim`'s worker with its payload; the milliseconds it took.
fn run_claim(sh: &Shared, claim: &Claim) -> Res<u64> {
    let started = Instant::now();
    let mut payload = claim.payload.as_bytes().to_vec();
    payload.push(b'\n');
    let code = run_worker(sh, &item_env(claim, sh.run), &payload)?;
    if code != 0 {
        return Err(format!("the worker exited {code}").into());
    }
    Ok(started.elapsed().as_millis() as u64)
}

/// A success waiting for its transaction, and where its answer goes:
/// whether it was accepted, and the slot's next claim.
struct Done {
    claim: Claim,
    ms: u64,
    slot: u32,
    reply: mpsc::Sender<Res<(bool, Option<Claim>)>>,
}

fn claim_one(s: &mut Store, run: i64) -> Res<Option<Claim>> {
    let now = now_ms();
    let claims = s
        .claim("b", run, 1, now + 600_000, now)?
        .ok_or("lock lost")?;
    Ok(claims.into_iter().next())
}

/// A process slot's store calls for one success: the worker's group
/// recorded, the done mark with its event, the next claim.
fn record(s: &mut Store, run: i64, d: &Done) -> Res<(bool, Option<Claim>)> {
    let (mark, event) = plain_done(&d.claim, run, d.ms, now_ms());
    if let Some(g) = groups::of(run, d.slot, std::process::id(), None) {
        s.record_worker(&g)?;
    }
    let accepted = s.complete(&mark, &event)?;
    Ok((accepted, claim_one(s, run)?))
}

/// A fresh store of `n` pending items in batch `b`, and the run holding
/// its lock.
fn prepare(db: &Path, n: usize) -> Res<(Store, i64)> {
    remove_db(db);
    let mut s = Store::create(db)?.0;
    let items: Vec<NewItem> = (1..=n)
        .map(|i| NewItem {
            key: format!("k{i}"),
            label: String::new(),
            payload: format!(r#"{{"key":"k{i}"}}"#),
            priority: 0,
            not_before: None,
            written_key: None,
        })
        .collect();
    let run = seat(&mut s, &items)?;
    Ok((s, run))
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, n, j, program, rest @ ..] = args.as_slice() else {
        return Err("usage: spawn_floor DIR N J PROGRAM [ARG...]".into());
    };
    let (n, j): (usize, usize) = (n.parse()?, j.parse()?);
    let argv: Vec<String> = std::iter::once(program).chain(rest).cloned().collect();
    let mut shared = Shared {
        program: resolve(program),
        argv,
        prepared: Prepared::new(),
        store: None,
        run: 0,
        grouped: false,
        ahead: false,
        start_marks: false,
        done_at_start: false,
        pending: Mutex::new(Vec::new()),
    };
    for variant in VARIANTS.iter().filter(|v| chosen(v)) {
        if variant.contains("store") {
            let (store, run) = prepare(&Path::new(dir).join("floor.db"), n)?;
            shared.store = Some(Mutex::new(store));
            shared.run = run;
            shared.grouped = variant.contains("group");
            shared.ahead = variant.contains("ahead");
            shared.start_marks = variant.contains("start");
            shared.done_at_start = variant.contains("done with");
        } else {
            shared.store = None;
        }
        let sh = Arc::new(shared);
        let t = Instant::now();
        let slots: Vec<_> = (0..j)
            .map(|i| {
                let sh = sh.clone();
                std::thread::spawn(move || slot(&sh, i, n, j))
            })
            .collect();
        let mut done = 0;
        for s in slots {
            done += s.join().map_err(|_| "a slot panicked")??;
        }
        let wall = t.elapsed().as_secs_f64();
        if done != n {
            return Err(format!("{variant}: {done} of {n} items done").into());
        }
        println!("floor {variant}: {done} items, {wall:.3} s wall");
        shared = Arc::into_inner(sh).ok_or("a slot still holds the store")?;
    }
    Ok(())
}
