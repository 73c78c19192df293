//! Chaos soak: SIGKILL the runner, its workers, the scheduler daemon and a
//! dashboard that is writing (requeueing every failed item) at random
//! moments, cancel a running item and stop the run (`nightshift cancel`,
//! `nightshift stop [--now]`) at random moments, re-run at once, and check
//! the store's invariants after every iteration (among them: a cancelled
//! attempt is never recorded done); in the end every item is done or
//! quarantined.
//!
//! `CHAOS_ITERATIONS` (default 50) and `CHAOS_SEED` (default: random,
//! printed) drive it; `CHAOS_REPORT=FILE` writes the tally as JSON.
//! `bench/chaos` runs the same soak for 1,000+ iterations on a release build.
//!
//! Slow but needed: about 25 s with 50 iterations in a debug build.
#![cfg(unix)]

use crate::support as common;
use crate::support::pty;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{Backend, Env, lines, pids_with, signal, tally, wait_for};
use nix::sys::signal::Signal;

const BATCH: &str = "c";
const MAX_ATTEMPTS: i64 = 4;

/// What a soak saw.
#[derive(Debug, Default)]
struct Tally {
    iterations: usize,
    runner_kills: usize,
    worker_kills: usize,
    sigterms: usize,
    daemon_kills: usize,
    /// Dashboards killed while requeueing (with a runner running).
    dashboard_kills: usize,
    /// Items the dashboards requeued before they were killed.
    dashboard_requeued: usize,
    clean_runs: usize,
    /// `cancel` of an item claimed at that moment, and `stop` (graceful or
    /// `--now`) asked of the runner, at random moments.
    cancels: usize,
    stops: usize,
    /// Executions beyond the first, over all keys.
    duplicates: usize,
    /// Items in flight at a kill, summed over the kills.
    in_flight_at_kills: usize,
    items: usize,
    done: usize,
    quarantined: usize,
    violations: Vec<String>,
}

fn chaos(env: &Env) {
    let iterations: usize = std::env::var("CHAOS_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let seed: u64 = std::env::var("CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    let store = match env.backend {
        Backend::Sqlite => "SQLite",
        Backend::Pg => "PostgreSQL",
    };
    println!("chaos: {iterations} iterations on {store}, CHAOS_SEED={seed}");
    let t = soak(env, iterations, seed);
    let summary = format!(
        "chaos: {store}, seed {seed}: {} iterations ({} runner SIGKILLs, {} worker SIGKILLs, {} SIGTERM+SIGKILL, \
         {} daemon SIGKILLs, {} dashboard SIGKILLs ({} items requeued by them), {} cancels, {} stops, {} clean), \
         {} items ({} done, {} quarantined), {} violations, {} duplicate executions vs {} items in flight at kills",
        t.iterations,
        t.runner_kills,
        t.worker_kills,
        t.sigterms,
        t.daemon_kills,
        t.dashboard_kills,
        t.dashboard_requeued,
        t.cancels,
        t.stops,
        t.clean_runs,
        t.items,
        t.done,
        t.quarantined,
        t.violations.len(),
        t.duplicates,
        t.in_flight_at_kills
    );
    println!("{summary}");
    if let Ok(path) = std::env::var("CHAOS_REPORT") {
        let json = serde_json::json!({
            "store": store, "seed": seed, "iterations": t.iterations, "runner_kills": t.runner_kills,
            "worker_kills": t.worker_kills, "sigterm_then_kill": t.sigterms,
            "daemon_kills": t.daemon_kills, "dashboard_kills": t.dashboard_kills,
            "dashboard_requeued": t.dashboard_requeued, "cancels": t.cancels, "stops": t.stops,
            "clean_runs": t.clean_runs,
            "items": t.items, "done": t.done, "quarantined": t.quarantined,
            "violations": t.violations, "duplicates": t.duplicates,
            "in_flight_at_kills": t.in_flight_at_kills, "summary": summary,
        });
        std::fs::write(path, json.to_string()).unwrap();
    }
    assert!(
        t.violations.is_empty(),
        "{summary}\n{}",
        t.violations.join("\n")
    );
}

both_backends! {
    fn sigkill_at_random_moments_keeps_every_invariant(env) {
        chaos(&env);
    }
}

fn soak(env: &Env, iterations: usize, seed: u64) -> Tally {
    let mut rng = fastrand::Rng::with_seed(seed);
    let effects = env.path("effects.log");
    // Permanent failure for perm-*, ~15% transient failures, 0-40 ms of
    // work; the side effect (one line) only on success, just before exit 0.
    let worker = env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\ncase \"$NIGHTSHIFT_KEY\" in perm-*) echo 'bad input' >&2; exit 2 ;; esac\n\
             r=$(od -An -N1 -tu1 /dev/urandom | tr -d ' ')\nsleep 0.0$((r % 5))\n\
             if [ \"$r\" -lt 38 ]; then echo 'upstream 503' >&2; exit 75; fi\n\
             echo \"$NIGHTSHIFT_KEY\" >> {}\necho '\"ok\"'",
            effects.display()
        ),
    );
    let w = worker.display().to_string();
    // The daemon fires every second (and runs the same worker).
    env.config(&format!(
        "[batch.{BATCH}]\nconcurrency = 4\nretries = 1\nbackoff = \"0s\"\nbackoff_max = \"0s\"\n\
         max_attempts = {MAX_ATTEMPTS}\ngrace = \"1s\"\nitem_timeout = \"10s\"\n\
         worker = [\"{w}\"]\nschedule = \"* * * * * *\"\ntimezone = \"UTC\"\n"
    ));
    let mut t = Tally::default();
    let mut in_flight: BTreeMap<String, usize> = BTreeMap::new();
    let mut done_before: BTreeSet<String> = BTreeSet::new();

    for iter in 0..iterations {
        t.iterations += 1;
        add_items(env, iter);
        let tag = format!("run{}", iter % 4);
        let roll = rng.u32(..100);
        let mut killed_runner = false;
        let events_before = env.int("SELECT coalesce(max(id), 0) FROM events");
        if roll < 14 {
            // The daemon, killed while its cycles run.
            let mut daemon = env.spawn(&tag, &["daemon"]);
            sleep_ms(rng.u64(200..1500));
            signal(daemon.id(), Signal::SIGKILL);
            t.daemon_kills += 1;
            let status = daemon.wait().unwrap();
            if status.code().is_some() {
                let (out, err) = env.output_of(&tag);
                t.violations.push(format!(
                    "iteration {iter}: daemon ended by itself: {status:?} {out} {err}"
                ));
            }
            for key in env.strings("SELECT key FROM items WHERE status = 'claimed'") {
                *in_flight.entry(key).or_default() += 1;
                t.in_flight_at_kills += 1;
            }
            for v in check(env, &done_before, false) {
                t.violations.push(format!("iteration {iter}: {v}"));
            }
            done_before = env
                .strings("SELECT key FROM items WHERE status = 'done'")
                .into_iter()
                .collect();
            if t.violations.len() > 20 {
                break;
            }
            continue;
        }
        let mut runner = env.spawn(&tag, &["run", BATCH, "--", &w]);
        if roll < 26 {
            // A dashboard requeueing every failed item while the runner
            // runs, killed somewhere along its keys; the runner maybe too.
            kill_a_writing_dashboard(env, &mut rng);
            t.dashboard_kills += 1;
            if rng.bool() {
                sleep_ms(rng.u64(..200));
                signal(runner.id(), Signal::SIGKILL);
                killed_runner = true;
                t.runner_kills += 1;
            }
        } else if roll < 54 {
            sleep_ms(rng.u64(..400));
            signal(runner.id(), Signal::SIGKILL);
            killed_runner = true;
            t.runner_kills += 1;
        } else if roll < 66 {
            // Steering: cancel an item claimed now, stop the run, maybe
            // SIGKILL it too, each at a random moment.
            sleep_ms(rng.u64(..400));
            for v in steer(env, &mut rng, &mut t, &mut in_flight) {
                t.violations.push(format!("iteration {iter}: {v}"));
            }
            if rng.u32(..4) == 0 {
                sleep_ms(rng.u64(..200));
                signal(runner.id(), Signal::SIGKILL);
                killed_runner = true;
                t.runner_kills += 1;
            }
        } else if roll < 88 {
            sleep_ms(rng.u64(..250));
            for _ in 0..rng.usize(1..=2) {
                if let Some(key) = kill_a_worker(&w, &mut rng) {
                    *in_flight.entry(key).or_default() += 1;
                    t.worker_kills += 1;
                }
                sleep_ms(rng.u64(..100));
            }
            if rng.bool() {
                signal(runner.id(), Signal::SIGKILL);
                killed_runner = true;
                t.runner_kills += 1;
            }
        } else if roll < 94 {
            // SIGTERM (grace, release), then SIGKILL at a random moment of it.
            sleep_ms(rng.u64(..300));
            signal(runner.id(), Signal::SIGTERM);
            sleep_ms(rng.u64(..600));
            signal(runner.id(), Signal::SIGKILL);
            killed_runner = true;
            t.sigterms += 1;
        } else {
            t.clean_runs += 1;
        }
        let status = runner.wait().unwrap();
        // A stop (`stop`, `stop --now`, SIGTERM) gives back the claims
        // whose workers it ended before their answer, maybe after their
        // side effect: in flight at a kill, as the ones a SIGKILL leaves.
        // Counted by the runner's own record, not by a read before the
        // stop (a claim made while the stop was on its way was missed).
        for key in env.strings(&format!(
            "SELECT DISTINCT key FROM events WHERE kind = 'released' AND id > {events_before}"
        )) {
            *in_flight.entry(key).or_default() += 1;
            t.in_flight_at_kills += 1;
        }
        if killed_runner && status.code().is_none() {
            // Everything claimed at the kill was in flight.
            for key in env.strings("SELECT key FROM items WHERE status = 'claimed'") {
                *in_flight.entry(key).or_default() += 1;
                t.in_flight_at_kills += 1;
            }
        } else if status.code() == Some(4) || status.code() == Some(3) {
            let (out, err) = env.output_of(&tag);
            t.violations.push(format!(
                "iteration {iter}: runner failed: {status:?} {out} {err}"
            ));
        }
        let finished = !killed_runner || status.code().is_some();
        for v in check(env, &done_before, finished) {
            t.violations.push(format!("iteration {iter}: {v}"));
        }
        done_before = env
            .strings("SELECT key FROM items WHERE status = 'done'")
            .into_iter()
            .collect();
        if t.violations.len() > 20 {
            break;
        }
    }
    t.in_flight_at_kills += t.worker_kills;

    // Drain: clean runs until nothing is left to do.
    for _ in 0..(MAX_ATTEMPTS as usize + 4) {
        if env.int(
            "SELECT count(*) FROM items WHERE status IN ('pending', 'claimed') OR tier = 'retry'",
        ) == 0
        {
            break;
        }
        let status = env
            .std_cmd()
            .args(["run", BATCH, "--", &w])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.code().is_some_and(|c| c <= 1), "{status:?}");
    }
    for v in check(env, &done_before, true) {
        t.violations.push(format!("final: {v}"));
    }
    let unfinished = env.strings(
        "SELECT key || ' ' || status || coalesce('/' || tier, '') FROM items
          WHERE NOT (status = 'done' OR (status = 'failed' AND tier = 'manual'))",
    );
    if !unfinished.is_empty() {
        t.violations
            .push(format!("final: not done nor quarantined: {unfinished:?}"));
    }
    // A runner killed on its last iteration may have left workers until the
    // drain reaped them; none may be left now.
    wait_for("no worker left", || pids_with(&w).is_empty());

    // Executions per key: at most one more than the times it was in flight
    // at a kill; at least one for every done item.
    let runs = tally(&lines(&effects));
    for (key, n) in &runs {
        let allowed = 1 + in_flight.get(key).copied().unwrap_or(0);
        if *n > allowed {
            // Its story, to tell a lost answer from a claim run twice.
            let story = env.strings(&format!(
                "SELECT e.kind || ' (run ' || coalesce(e.run_id, 0) || ')' FROM events e
                   JOIN items i ON i.id = e.item_id WHERE i.key = '{key}' ORDER BY e.id"
            ));
            t.violations.push(format!(
                "{key} executed {n} times, in flight at {} kills: {}",
                allowed - 1,
                story.join(", ")
            ));
        }
        t.duplicates += n - 1;
    }
    for key in env.strings("SELECT key FROM items WHERE status = 'done'") {
        if !runs.contains_key(&key) {
            t.violations
                .push(format!("{key} is done but never succeeded"));
        }
    }
    t.dashboard_requeued = env.int("SELECT count(*) FROM events WHERE kind = 'requeued'") as usize;
    t.items = env.int("SELECT count(*) FROM items") as usize;
    t.done = env.int("SELECT count(*) FROM items WHERE status = 'done'") as usize;
    t.quarantined = env.int("SELECT count(*) FROM items WHERE tier = 'manual'") as usize;
    t
}

/// Cancels one item claimed at this moment (to a random `--to`), then
/// maybe stops the run (graceful or `--now`). A stopped worker may have
/// done its side effect without its answer being kept, as at a kill: the
/// items the stop released count as in flight at a kill. Returns what
/// went wrong.
fn steer(
    env: &Env,
    rng: &mut fastrand::Rng,
    t: &mut Tally,
    in_flight: &mut BTreeMap<String, usize>,
) -> Vec<String> {
    let mut v = Vec::new();
    let claimed = env.strings("SELECT key FROM items WHERE status = 'claimed'");
    if let Some(key) = claimed.get(rng.usize(..claimed.len().max(1))) {
        *in_flight.entry(key.clone()).or_default() += 1;
        t.in_flight_at_kills += 1;
        let to = if rng.bool() { "pending" } else { "manual" };
        let out = env
            .std_cmd()
            .args(["cancel", BATCH, key, "--to", to])
            .output()
            .unwrap();
        // 2: it was done meanwhile (refused, unchanged).
        if !matches!(out.status.code(), Some(0 | 2)) {
            v.push(format!("cancel {key}: {out:?}"));
        }
        t.cancels += 1;
    }
    sleep_ms(rng.u64(..300));
    let stop: &[&str] = match rng.u32(..3) {
        0 => &["stop", BATCH],
        1 => &["stop", BATCH, "--now"],
        _ => return v,
    };
    // What the stop ends before an answer is counted by its `released`
    // events once the runner is gone (see the loop).
    let out = env.std_cmd().args(stop).output().unwrap();
    if out.status.code() != Some(0) {
        v.push(format!("{stop:?}: {out:?}"));
    }
    t.stops += 1;
    v
}

fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Ten new items per iteration; every fourth iteration one is a permanent failure.
fn add_items(env: &Env, iter: usize) {
    let mut lines: String = (0..10)
        .map(|j| format!("{{\"key\":\"i{iter}-{j}\"}}\n"))
        .collect();
    if iter.is_multiple_of(4) {
        lines.push_str(&format!("{{\"key\":\"perm-{iter}\"}}\n"));
    }
    let file = env.write("new.jsonl", &lines);
    env.cmd().args(["add", BATCH]).arg(file).assert().success();
}

/// Opens the dashboard, asks it to requeue every failed item (items pane,
/// status filter `failed` (`S`), `A`, `y`) and SIGKILLs it after a random number
/// of those keys (all of them: during or after the write).
fn kill_a_writing_dashboard(env: &Env, rng: &mut fastrand::Rng) {
    // No "since you last looked" summary in the way of the keys.
    let _ = std::fs::remove_dir_all(env.path("state"));
    let mut dash = pty::Dash::open(
        &common::bin(),
        env.dir.path(),
        &env.db,
        &["watch", "--interval", "100ms"],
        (100, 30),
    );
    dash.wait_loaded();
    let keys = ["3", "S", "A", "y"];
    // Half the time every key, the kill then lands during or after the write.
    let n = if rng.bool() {
        keys.len()
    } else {
        rng.usize(..keys.len())
    };
    for k in &keys[..n] {
        dash.key(k);
    }
    sleep_ms(rng.u64(..300));
    signal(dash.pid(), Signal::SIGKILL);
    let _ = dash.wait_exit();
}

/// SIGKILLs one running worker (found by its script path); returns its key.
fn kill_a_worker(script: &str, rng: &mut fastrand::Rng) -> Option<String> {
    let pids = pids_with(script);
    let pid = *pids.get(rng.usize(..pids.len().max(1)))?;
    let key = worker_key(pid)?;
    signal(pid, Signal::SIGKILL);
    Some(key)
}

fn worker_key(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0).find_map(|v| {
        std::str::from_utf8(v)
            .ok()?
            .strip_prefix("NIGHTSHIFT_KEY=")
            .map(str::to_string)
    })
}

/// The store's invariants; returns what is violated. Events are looked up
/// by item id (indexed), not by key: a scan per item made each check
/// quadratic and the soak slower with every iteration.
fn check(env: &Env, done_before: &BTreeSet<String>, finished: bool) -> Vec<String> {
    let mut v = Vec::new();
    let mut zero = |what: &str, query: &str| {
        let n = env.int(query);
        if n != 0 {
            v.push(format!("{what}: {n}"));
        }
    };
    for (what, query) in common::STORE_INVARIANTS {
        zero(what, query);
    }
    // A requeue keeps the attempt count (unless asked to reset it) and so
    // grants one attempt past max_attempts: never more than that. So does
    // a cancel to pending, which sends the item back as a requeue does
    // (an attempt that ran to its end, as one waiting to retry had, stays
    // counted: README, `cancel --to pending`).
    let past = format!(
        "FROM items i WHERE attempts > {MAX_ATTEMPTS} + (
           SELECT count(*) FROM events e WHERE e.item_id = i.id
              AND (e.kind = 'requeued'
                   OR (e.kind = 'cancelled' AND e.fields LIKE '%\"to\":\"pending\"%')))"
    );
    zero(
        "items past max_attempts (plus one per requeue or cancel to pending)",
        &format!("SELECT count(*) {past}"),
    );
    // Each such item's story, to find how it got there.
    let mut stories = Vec::new();
    for key in env.strings(&format!("SELECT key {past}")) {
        let story = env.strings(&format!(
            "SELECT kind || ' run ' || coalesce(run_id, 0) || ': ' || message
               FROM events WHERE key = '{key}' ORDER BY id"
        ));
        stories.push(format!("{key}: {}", story.join(" | ")));
    }
    zero(
        "keys with more than one accepted completion",
        "SELECT count(*) FROM (SELECT key FROM events WHERE kind IN ('done', 'empty')
                                GROUP BY key HAVING count(*) > 1) twice",
    );
    zero(
        "done items without exactly one accepted completion",
        "SELECT count(*) FROM items i WHERE status = 'done' AND
            (SELECT count(*) FROM events e WHERE e.item_id = i.id
                AND e.kind IN ('done', 'empty')) <> 1",
    );
    zero(
        "counters that differ from the items",
        // Summed per bucket: PostgreSQL's counters are sharded by session.
        "SELECT count(*) FROM (SELECT batch_id, bucket, sum(n) AS n FROM counts GROUP BY 1, 2) c
          WHERE c.n <> (SELECT count(*) FROM items i
            WHERE i.batch_id = c.batch_id AND
              (CASE i.status WHEN 'failed' THEN i.tier WHEN 'done' THEN i.outcome ELSE i.status END) = c.bucket)",
    );
    zero(
        "failed-class rollups that differ from the items",
        "SELECT count(*) FROM (
            SELECT batch_id, error_class, tier, count(*) AS n FROM items WHERE status = 'failed'
             GROUP BY 1, 2, 3) x
          FULL JOIN (SELECT batch_id, error_class, tier, sum(n) AS n FROM failed_classes
                      GROUP BY 1, 2, 3 HAVING sum(n) <> 0) f USING (batch_id, error_class, tier)
          WHERE x.n IS DISTINCT FROM f.n",
    );
    // A cancel asked of a claim ends it: no done mark until the item was
    // claimed anew (after its cancel was settled, or the claim taken back
    // from a dead runner).
    zero(
        "done marks written from a cancelled attempt",
        "SELECT count(*) FROM events a JOIN events d ON d.item_id = a.item_id AND d.id > a.id
          WHERE a.kind = 'cancel-asked' AND d.kind IN ('done', 'empty')
            AND NOT EXISTS (SELECT 1 FROM events c WHERE c.item_id = a.item_id
                              AND c.id > a.id AND c.id < d.id AND c.kind = 'claimed')",
    );
    let to = match env.backend {
        Backend::Sqlite => "json_extract(c.fields, '$.to')",
        Backend::Pg => "(c.fields::jsonb ->> 'to')",
    };
    zero(
        "cancelled items not where --to said",
        &format!(
            "SELECT count(*) FROM events c JOIN items i ON i.id = c.item_id
              WHERE c.kind = 'cancelled' AND c.id = (SELECT max(id) FROM events x
                      WHERE x.item_id = c.item_id AND x.kind IN ('cancelled', 'claimed', 'requeued', 'redriven'))
                AND NOT ({to} = 'pending' AND i.status = 'pending'
                         OR {to} = 'manual' AND i.tier = 'manual')"
        ),
    );
    zero(
        "runs that stepped down for a lock (a dead holder must not block)",
        "SELECT count(*) FROM runs WHERE state = 'lock-held'",
    );
    if finished {
        zero(
            "claimed items after a run that finished",
            "SELECT count(*) FROM items WHERE status = 'claimed'",
        );
    }
    // PostgreSQL has no counterpart that needs no extension (amcheck).
    if env.backend == Backend::Sqlite {
        let integrity = env
            .sql()
            .query_row("PRAGMA integrity_check", [], |r| r.get::<_, String>(0))
            .unwrap();
        if integrity != "ok" {
            v.push(format!("integrity_check: {integrity}"));
        }
    }
    let done_now: BTreeSet<String> = env
        .strings("SELECT key FROM items WHERE status = 'done'")
        .into_iter()
        .collect();
    let lost: Vec<_> = done_before.difference(&done_now).collect();
    if !lost.is_empty() {
        v.push(format!("done items lost: {lost:?}"));
    }
    v.extend(stories);
    v
}
