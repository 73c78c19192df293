//! Multi-host simulation: four runners with distinct host identities
//! (`NIGHTSHIFT_HOST`) share one batch of 20,000 items (`runners = 4`,
//! persistent workers) while runners are SIGKILLed at random moments and
//! restarted. A runner sees the others as remote: a dead one's seat is
//! freed only when its `lock_ttl` runs out, unless it is restarted under
//! its own identity (then at once, like a re-run on the same host).
//!
//! Checked only through the CLI and the workers' side-effect log, so the
//! same checks hold for any store: every item ends done or quarantined; a
//! key ran more than once only if it was in flight at a kill (the store
//! logged taking it back from a dead run); each key has exactly one
//! accepted completion; the counts add up.
//!
//! Run on both backends (10,000 items on PostgreSQL, see `sim`).
//! `MULTIHOST_SEED` repeats a run; `MULTIHOST_ITEMS` changes its size.
#![cfg(unix)]

use crate::support as common;
use crate::support::require::Tool;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{Backend, Background, Env, lines, signal, tally};
use nix::sys::signal::Signal;

const HOSTS: [&str; 4] = ["host-a", "host-b", "host-c", "host-d"];

fn sim(env: &Env) {
    // PostgreSQL takes about twice as long per item here (a round trip per
    // write, where SQLite writes a local file): half the items keep its run
    // as long as SQLite's, and still see all twelve kills.
    let default_items = match env.backend {
        Backend::Sqlite => 20_000,
        Backend::Pg => 10_000,
    };
    let items: usize = std::env::var("MULTIHOST_ITEMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_items);
    let seed: u64 = std::env::var("MULTIHOST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("multihost: {items} items, MULTIHOST_SEED={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);

    env.config(
        "[batch.m]\nrunners = 4\nmode = \"persistent\"\nconcurrency = 2\n\
         lock_ttl = \"1s\"\nmax_attempts = 20\n",
    );
    let effects = env.path("effects.log");
    // Appends the key (one write per line: O_APPEND keeps lines whole
    // across processes) after the "side effect", then answers.
    let worker = env.write(
        "worker.py",
        &format!(
            "import json, sys\n\
             out = open({effects:?}, 'a', buffering=1)\n\
             for line in sys.stdin:\n\
             \x20   req = json.loads(line)\n\
             \x20   out.write(req['key'] + '\\n')\n\
             \x20   print(json.dumps({{'key': req['key'], 'result': 1}}), flush=True)\n",
            effects = effects.display().to_string()
        ),
    );
    let keys: String = (0..items)
        .map(|i| format!("{{\"key\":\"k{i:05}\"}}\n"))
        .collect();
    env.cmd()
        .args(["add", "m", "-"])
        .write_stdin(keys)
        .assert()
        .success();

    let worker = worker.display().to_string();
    let start = |host: &str, n: usize| -> Background {
        env.spawn_with(
            &format!("{host}-{n}"),
            &["run", "m", "--", "python3", &worker],
            &[("NIGHTSHIFT_HOST", host)],
        )
    };
    let mut starts = 0;
    let mut runners: Vec<Background> = HOSTS
        .iter()
        .map(|h| {
            starts += 1;
            start(h, starts)
        })
        .collect();

    // Kill one at random every 50–400 ms; restart it (same identity) at
    // once or after a while; until the queue is empty and all have ended.
    // The limit is on a stall, not on the whole run: on a loaded machine
    // the simulation is slow but keeps finishing items.
    let mut kills = 0;
    let stall = Duration::from_secs(180);
    let (mut last_open, mut progressed) = (i64::MAX, Instant::now());
    loop {
        std::thread::sleep(Duration::from_millis(rng.u64(50..400)));
        let open = remaining(env);
        if open < last_open {
            (last_open, progressed) = (open, Instant::now());
        }
        assert!(
            progressed.elapsed() < stall,
            "the simulation stalled: {open} items open and none finished for {stall:?}"
        );
        if open > 0 && kills < 12 {
            let i = rng.usize(..HOSTS.len());
            if runners[i].try_wait().unwrap().is_none() {
                signal(runners[i].id(), Signal::SIGKILL);
                runners[i].wait().unwrap();
                kills += 1;
            }
        }
        // Restart every runner that ended while work remains (a runner
        // that found nothing to claim, with claims of a dead one pending
        // their TTL, ends: the next cycle picks them up).
        for (i, host) in HOSTS.iter().enumerate() {
            if runners[i].try_wait().unwrap().is_some() && open > 0 && rng.bool() {
                starts += 1;
                runners[i] = start(host, starts);
            }
        }
        if open == 0 && runners.iter_mut().all(|r| r.try_wait().unwrap().is_some()) {
            break;
        }
    }
    println!("multihost: {kills} runners SIGKILLed, {starts} started");

    // Every item is done or quarantined.
    let status = status(env).expect("status --json");
    let count = |k: &str| status[k].as_i64().unwrap();
    assert_eq!(count("total"), items as i64, "{status}");
    assert_eq!(count("done") + count("manual"), items as i64, "{status}");
    assert_eq!(count("pending") + count("claimed") + count("retry"), 0);

    // Each key ran; a key ran twice only if the store took it back from a
    // dead run (it was in flight at a kill).
    let ran = tally(&lines(&effects));
    let taken_back: BTreeSet<String> = events(env, "reclaimed,quarantined")
        .into_iter()
        .filter_map(|e| e["key"].as_str().map(String::from))
        .collect();
    let twice: BTreeMap<&String, &usize> = ran.iter().filter(|(_, n)| **n > 1).collect();
    let unexplained: Vec<_> = twice.keys().filter(|k| !taken_back.contains(**k)).collect();
    // The first one's story, so a failure says how it came to run twice.
    let story = unexplained
        .first()
        .map(|k| key_story(env, k))
        .unwrap_or_default();
    assert!(
        unexplained.is_empty(),
        "keys run twice without a crash: {unexplained:?}\n{story}"
    );
    let done = events(env, "done,empty");
    let completions = tally(
        &done
            .iter()
            .filter_map(|e| e["key"].as_str().map(String::from))
            .collect::<Vec<_>>(),
    );
    assert_eq!(completions.len() as i64, count("done"));
    assert!(
        completions.values().all(|n| *n == 1),
        "a key completed twice"
    );
    for key in completions.keys() {
        assert!(ran.contains_key(key), "{key} done but never ran");
    }
    println!(
        "multihost: {} keys ran more than once ({} executions beyond the first), {} taken back",
        twice.len(),
        twice.values().map(|n| **n - 1).sum::<usize>(),
        taken_back.len()
    );
    assert!(kills > 0, "the simulation killed nothing");

    // The store's own invariants, in SQL both engines accept. (A killed run
    // may stay `running` with its seat: nobody sweeps a seat once every
    // runner has ended. The next run takes it over.)
    for (what, query) in common::STORE_INVARIANTS {
        assert_eq!(env.int(query), 0, "{what}");
    }
    env.assert_counts_consistent();
}

/// The batch's entry of `status --json`.
fn status(env: &Env) -> Option<serde_json::Value> {
    let out = env.cmd().args(["status", "m", "--json"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    Some(v["batches"][0].clone())
}

/// Items not yet done or quarantined.
fn remaining(env: &Env) -> i64 {
    let Some(v) = status(env) else {
        return 1;
    };
    ["pending", "claimed", "retry"]
        .iter()
        .map(|k| v[k].as_i64().unwrap_or(1))
        .sum()
}

/// Every event of one item, one line each.
fn key_story(env: &Env, key: &str) -> String {
    let out = env
        .cmd()
        .args(["log", "m", "-n", "1000", "--no-color", "--key", key])
        .output()
        .unwrap();
    let locks = env
        .cmd()
        .args([
            "log",
            "m",
            "-n",
            "1000",
            "--no-color",
            "--kind",
            "lock-takeover,lock-lost",
        ])
        .output()
        .unwrap();
    format!(
        "{}\nlock events:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&locks.stdout)
    )
}

fn events(env: &Env, kinds: &str) -> Vec<serde_json::Value> {
    let out = env
        .cmd()
        .args(["log", "m", "--json", "-n", "100000000", "--kind", kinds])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

both_backends! {
    fn four_hosts_share_a_queue_through_random_sigkills(env) {
        require!(Tool::Python3);
        sim(&env);
    }
}
