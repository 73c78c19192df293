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
//! - `pipes and group`: the worker started as the runner starts it (its
//!   own process group, the signal mask and SIGPIPE reset, three pipes,
//!   the runner's environment prepared once plus the item's six
//!   variables), its payload written, its stdout and its stderr read to
//!   their end (one after the other: the worker is meant to print
//!   nothing), its exit waited for, its group killed; `PROGRAM` given as
//!   a path, found once;
//! - `store calls, one transaction an item`: the same, and each item's store calls of a
//!   process slot, in one transaction under a lock the slots share: its
//!   done mark with its done event, the worker's group recorded, the next
//!   item claimed (`Store::complete`, `record_worker`, `claim`, as the
//!   runner's store thread makes them), on a fresh store of N items made
//!   by the store itself;
//! - `store calls, group-committed`: the same, but whichever slot takes
//!   the store commits every success waiting, its own or another's, in one
//!   transaction, as the runner's store thread groups what arrived
//!   together; the others wait for their answer.
//!
//! Prints one line per variant: `floor VARIANT: N items, S s wall`.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Instant;

use nightshift::model::{Claim, EventKind, Holder, NewEvent, NewItem, Outcome, Trigger};
use nightshift::runner::child::groups;
use nightshift::store::{Completion, Store};
use nightshift::util::time::now_ms;
use nix::fcntl::OFlag;
use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::sys::wait::waitpid;
use nix::unistd::{Pid, pipe2};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const VARIANTS: [&str; 3] = [
    "pipes and group",
    "store calls, one transaction an item",
    "store calls, group-committed",
];

/// What every slot shares: the worker, the environment, the store.
struct Shared {
    program: CString,
    argv: Vec<CString>,
    base: Vec<CString>,
    store: Option<Mutex<Store>>,
    run: i64,
    /// Successes commit in groups (`pending`), not one by one.
    grouped: bool,
    pending: Mutex<Vec<Done>>,
}

/// One worker run as the runner runs it. `env`: the item's variables.
fn run_worker(sh: &Shared, env: &[CString], payload: &[u8]) -> Res<i32> {
    let (in_r, in_w) = pipe2(OFlag::O_CLOEXEC)?;
    let (out_r, out_w) = pipe2(OFlag::O_CLOEXEC)?;
    let (err_r, err_w) = pipe2(OFlag::O_CLOEXEC)?;
    let mut actions = PosixSpawnFileActions::init()?;
    for (target, fd) in [&in_r, &out_w, &err_w].into_iter().enumerate() {
        actions.add_dup2(fd.as_raw_fd(), target as i32)?;
    }
    let mut attr = PosixSpawnAttr::init()?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETPGROUP
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF,
    )?;
    attr.set_pgroup(Pid::from_raw(0))?;
    attr.set_sigmask(&SigSet::empty())?;
    let mut default = SigSet::empty();
    default.add(Signal::SIGPIPE);
    attr.set_sigdefault(&default)?;
    let envp: Vec<&CStr> = sh.base.iter().chain(env).map(CString::as_c_str).collect();
    let pid = posix_spawn(sh.program.as_c_str(), &actions, &attr, &sh.argv, &envp)?;
    drop((in_r, out_w, err_w));
    // A worker that does not read its stdin: the write fails, as the
    // runner's does, harmlessly.
    let _ = File::from(in_w).write_all(payload);
    drain(out_r)?;
    drain(err_r)?;
    let status = waitpid(pid, None)?;
    let _ = killpg(pid, Signal::SIGKILL);
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
fn item_env(claim: &Claim, run: i64) -> Res<Vec<CString>> {
    [
        ("NIGHTSHIFT_BATCH", "b".to_string()),
        ("NIGHTSHIFT_KEY", claim.key.clone()),
        ("NIGHTSHIFT_LABEL", claim.label.clone()),
        ("NIGHTSHIFT_ATTEMPT", claim.attempt.to_string()),
        ("NIGHTSHIFT_RUN_ID", run.to_string()),
        ("NIGHTSHIFT_RUNNER", "floor".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| Ok(CString::new(format!("{k}={v}"))?))
    .collect()
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
        let env = item_env(&claim, sh.run)?;
        let mine = n / j + usize::from(index < n % j);
        for _ in 0..mine {
            run_worker(sh, &env, br#"{"key":"k"}"#)?;
        }
        return Ok(mine);
    };
    let mut next = store
        .lock()
        .expect("store lock")
        .group(|s| claim_one(s, sh.run))??;
    let mut done = 0;
    while let Some(claim) = next.take() {
        let started = Instant::now();
        let mut payload = claim.payload.as_bytes().to_vec();
        payload.push(b'\n');
        let code = run_worker(sh, &item_env(&claim, sh.run)?, &payload)?;
        if code != 0 {
            return Err(format!("the worker exited {code}").into());
        }
        let (reply, answer) = mpsc::channel();
        let req = Done {
            claim,
            ms: started.elapsed().as_millis() as u64,
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
    let now = now_ms();
    let event = NewEvent::new(now, "b", EventKind::Done, "done")
        .run(run)
        .key(&d.claim.key)
        .fields(serde_json::json!({"attempt": d.claim.attempt, "ms": d.ms, "cost": null, "usage": null}));
    let mark = Completion {
        item_id: d.claim.item_id,
        token: d.claim.token,
        run_id: run,
        outcome: Outcome::Done,
        result: None,
        cost: None,
        version: None,
        usage: None,
        now,
    };
    if let Some(g) = groups::of(run, d.slot, std::process::id(), None) {
        s.record_worker(&g)?;
    }
    let accepted = s.complete(&mark, &event)?;
    Ok((accepted, claim_one(s, run)?))
}

/// A fresh store of `n` pending items in batch `b`, and the run holding
/// its lock.
fn prepare(db: &Path, n: usize) -> Res<(Store, i64)> {
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let now = now_ms();
    let mut s = Store::create(db)?.0;
    let items: Vec<NewItem> = (1..=n)
        .map(|i| NewItem {
            key: format!("k{i}"),
            label: String::new(),
            payload: format!(r#"{{"key":"k{i}"}}"#),
            priority: 0,
            not_before: None,
        })
        .collect();
    s.add_items("b", &items, now, |_| {})?;
    let holder = Holder {
        host: "floor".into(),
        pid: std::process::id(),
        pid_start: None,
    };
    let run = s.start_run("b", Trigger::Manual, None, &holder, now, None)?;
    s.acquire_lock("b", "t", &holder, Some(run), now + 3_600_000, now, &[], 1)?;
    Ok((s, run))
}

fn chosen(variant: &str) -> bool {
    match std::env::var("FLOOR_VARIANTS") {
        Ok(only) => only.split('|').any(|w| variant.contains(w.trim())),
        Err(_) => true,
    }
}

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, n, j, program, rest @ ..] = args.as_slice() else {
        return Err("usage: spawn_floor DIR N J PROGRAM [ARG...]".into());
    };
    let (n, j): (usize, usize) = (n.parse()?, j.parse()?);
    let path = which(program).ok_or_else(|| format!("{program}: not found in PATH"))?;
    let argv = std::iter::once(program)
        .chain(rest)
        .map(|a| CString::new(a.as_str()))
        .collect::<Result<_, _>>()?;
    let base = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).ok()
        })
        .collect();
    let mut shared = Shared {
        program: CString::new(path.as_os_str().as_bytes())?,
        argv,
        base,
        store: None,
        run: 0,
        grouped: false,
        pending: Mutex::new(Vec::new()),
    };
    for variant in VARIANTS.iter().filter(|v| chosen(v)) {
        if variant.contains("store") {
            let (store, run) = prepare(&Path::new(dir).join("floor.db"), n)?;
            shared.store = Some(Mutex::new(store));
            shared.run = run;
            shared.grouped = variant.contains("group");
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

/// `program` found in `PATH` (or as given, with a slash).
fn which(program: &str) -> Option<std::path::PathBuf> {
    if program.contains('/') {
        return Some(program.into());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}
