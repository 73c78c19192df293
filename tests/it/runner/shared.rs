//! Runners sharing one batch (`runners = N`): each holds a seat of the
//! batch lock and claims from the one queue; no key runs twice; a runner
//! that dies has its claims taken back by one still running. Each test on
//! both backends.
#![cfg(unix)]

use crate::support as common;
use nightshift::util::time::now_ms;

use common::{Env, lines, pids_with, signal, tally, wait_for};
use nix::sys::signal::Signal;

/// A worker that records `HOST KEY` once its side effect is done and
/// answers with its host. `SLOW=N` (set for one runner) makes it hang N
/// seconds first, under a marker so the test can clean up.
fn worker(env: &Env, pause: &str) -> String {
    env.script(
        "w.sh",
        &format!(
            "cat >/dev/null\n\
             if [ -n \"$SLOW\" ]; then sh -c \"sleep $SLOW; :\" {marker} || exit 1; fi\n\
             sleep {pause}\n\
             echo \"$NIGHTSHIFT_HOST $NIGHTSHIFT_KEY\" >> {dir}/side-effects.log\n\
             echo \"\\\"$NIGHTSHIFT_HOST\\\"\"",
            dir = env.dir.path().display(),
            marker = marker(env),
        ),
    )
    .display()
    .to_string()
}

fn marker(env: &Env) -> String {
    format!("{}/shared-marker", env.dir.path().display())
}

fn kill_leftovers(env: &Env) {
    for pid in pids_with(&marker(env)) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

fn add(env: &Env, n: usize) {
    let items: String = (0..n)
        .map(|i| format!("{{\"key\":\"k{i:02}\"}}\n"))
        .collect();
    let file = env.write("items.jsonl", &items);
    env.cmd().args(["add", "b"]).arg(file).assert().success();
}

both_backends! {
    fn runners_sharing_a_batch_split_its_items_and_a_fourth_steps_down(env) {
        env.config("[batch.b]\nrunners = 3\nconcurrency = 2\n");
        add(&env, 30);
        // Workers wait for the `go` file: the three runners hold their seats
        // (and two claims each) while the fourth tries.
        let w = worker(
            &env,
            &format!(
                "0.05; while [ ! -e {} ]; do sleep 0.05; done",
                env.path("go").display()
            ),
        );
        let mut procs: Vec<_> = ["host-a", "host-b", "host-c"]
            .iter()
            .map(|h| env.spawn_with(h, &["run", "b", "--", &w], &[("NIGHTSHIFT_HOST", h)]))
            .collect();
        wait_for("three runners holding two claims each", || {
            env.int("SELECT count(*) FROM items WHERE status = 'claimed'") == 6
        });
        let fourth = env
            .cmd()
            .env("NIGHTSHIFT_HOST", "host-d")
            .args(["run", "b", "--", &w])
            .output()
            .unwrap();
        assert!(fourth.status.success());
        assert!(
            common::stdout(&fourth).contains("lock held by"),
            "{}",
            common::stdout(&fourth)
        );
        env.write("go", "");
        for p in &mut procs {
            assert!(p.wait().unwrap().success());
        }

        let mut states = env.run_states();
        states.sort();
        assert_eq!(states, ["lock-held", "ok", "ok", "ok"]);
        // Every key ran exactly once, and the work was shared.
        let effects = lines(&env.path("side-effects.log"));
        let keys = tally(
            &effects
                .iter()
                .map(|l| l[7..].to_string())
                .collect::<Vec<_>>(),
        );
        assert_eq!(keys.len(), 30);
        assert!(keys.values().all(|n| *n == 1), "a key ran twice: {keys:?}");
        let per_host = env.strings(
            "SELECT host || ':' || done FROM runs WHERE state = 'ok' AND done >= 2 ORDER BY host",
        );
        assert_eq!(per_host.len(), 3, "each runner did some: {per_host:?}");
        assert_eq!(env.int("SELECT sum(done) FROM runs"), 30);
        assert_eq!(env.int("SELECT count(*) FROM locks"), 0, "seats released");
        env.assert_counts_consistent();
    }

    /// A runner on another host is SIGKILLed while two of its items are in
    /// flight: once its seat expires, the runner still going takes its claims
    /// back and finishes them; nothing runs twice. (A 3 s TTL: with 1 s, a
    /// busy machine can delay a live runner's heartbeat past its TTL, and
    /// the other then rightly takes its seat.)
    fn a_killed_runner_s_claims_are_taken_back_by_the_one_still_running(env) {
        env.config("[batch.b]\nrunners = 2\nlock_ttl = \"3s\"\n");
        add(&env, 40);
        let w = worker(&env, "0.1");
        let mut b = env.spawn_with(
            "b",
            &["run", "b", "-j", "2", "--", &w],
            &[("NIGHTSHIFT_HOST", "host-b"), ("SLOW", "1000")],
        );
        wait_for("host-b to hold two claims", || {
            env.int(
                "SELECT count(*) FROM items i JOIN runs r ON r.id = i.lease_run
                  WHERE i.status = 'claimed' AND r.host = 'host-b'",
            ) == 2
        });
        let mut a = env.spawn_with(
            "a",
            &["run", "b", "-j", "1", "--", &w],
            &[("NIGHTSHIFT_HOST", "host-a")],
        );
        wait_for("host-a to start", || {
            env.int("SELECT count(*) FROM runs WHERE host = 'host-a'") == 1
        });
        signal(b.id(), Signal::SIGKILL);
        b.wait().unwrap();

        assert!(a.wait().unwrap().success(), "{:?}", env.output_of("a"));
        kill_leftovers(&env);
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            40,
            "{:?}",
            env.output_of("a")
        );
        let mut states = env.run_states();
        states.sort();
        assert_eq!(states, ["crashed", "ok"]);
        let effects = lines(&env.path("side-effects.log"));
        assert_eq!(effects.len(), 40, "each side effect once");
        assert!(effects.iter().all(|l| l.starts_with("host-a ")));
        assert_eq!(
            env.int("SELECT count(*) FROM events WHERE kind = 'reclaimed' AND key IS NOT NULL"),
            2
        );
        assert_eq!(env.int("SELECT count(*) FROM locks"), 0);
        env.assert_counts_consistent();
    }

    /// The same with the killed runner's workers still able to finish: a
    /// runner on host-b is SIGKILLed while its workers hold their keys (a
    /// `flock`) and sleep; the runner on host-a takes the claims back once
    /// host-b's seat expired and runs them. The killed runner's guard
    /// stopped its workers at once, so no key runs on both hosts at once,
    /// and each side effect happens once.
    fn a_runner_killed_on_another_host_leaves_no_worker_beside_the_takeover(env) {
        env.config("[batch.b]\nlock_ttl = \"3s\"\n");
        add(&env, 10);
        let dir = env.dir.path().display().to_string();
        let w = env.script(
            "flock.sh",
            &format!(
                "cat >/dev/null\n\
                 flock -n -E 75 {dir}/lock-$NIGHTSHIFT_KEY sh -c '\
                   touch {dir}/started-$NIGHTSHIFT_HOST-$NIGHTSHIFT_KEY; \
                   if [ -n \"$SLOW\" ]; then sleep $SLOW; fi; \
                   echo \"$NIGHTSHIFT_HOST $NIGHTSHIFT_KEY\" >> {dir}/side-effects.log; \
                   echo \"\\\"$NIGHTSHIFT_HOST\\\"\"' {marker}\n\
                 rc=$?\n\
                 if [ $rc = 75 ]; then echo \"overlap $NIGHTSHIFT_KEY\" >> {dir}/overlaps; fi\n\
                 exit $rc\n",
                marker = marker(&env),
            ),
        );
        let w = w.display().to_string();
        let mut b = env.spawn_with(
            "b",
            &["run", "b", "-j", "2", "--", &w],
            &[("NIGHTSHIFT_HOST", "host-b"), ("SLOW", "20")],
        );
        wait_for("host-b's two workers", || {
            std::fs::read_dir(env.dir.path())
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("started-host-b-"))
                .count()
                == 2
        });
        signal(b.id(), Signal::SIGKILL);
        b.wait().unwrap();
        // As a runner on host-a sees it: host-b's seat stands until it
        // lapses, a lock_ttl after host-b's last renewal.
        wait_for("host-b's seat to lapse", || {
            env.int("SELECT coalesce(max(expires_at), 0) FROM locks") < now_ms() - 50
        });
        let mut a = env.spawn_with(
            "a",
            &["run", "b", "-j", "1", "--", &w],
            &[("NIGHTSHIFT_HOST", "host-a")],
        );
        assert!(a.wait().unwrap().success(), "{:?}", env.output_of("a"));
        assert!(!env.path("overlaps").exists(), "{:?}", lines(&env.path("overlaps")));
        assert_eq!(env.int("SELECT count(*) FROM items WHERE status = 'done'"), 10);
        // host-b's sleeps were 20 s: had they gone on, their side effects
        // would come now.
        wait_for("host-b's workers to be gone", || pids_with(&marker(&env)).is_empty());
        let effects = lines(&env.path("side-effects.log"));
        assert_eq!(effects.len(), 10, "each side effect once: {effects:?}");
        assert_eq!(tally(&effects).len(), 10, "{effects:?}");
        assert!(effects.iter().all(|l| l.starts_with("host-a ")), "{effects:?}");
        env.assert_counts_consistent();
    }

    /// On its own host a dead runner's seat is freed at the next heartbeat,
    /// without waiting for the TTL, and its orphaned workers are stopped.
    /// A seat left by a runner that died on another host stays until a
    /// runner takes it over; once it expired the batch shows its holder
    /// silent, and not running.
    fn a_batch_whose_runner_died_elsewhere_shows_idle_once_its_seat_expired(env) {
        add(&env, 1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let hour = 3_600_000;
        env.exec(&format!(
            "INSERT INTO locks (batch_id, token, host, pid, run_id, acquired_at, expires_at)
             SELECT id, 'gone', 'host-x', 1, NULL, {}, {} FROM batches WHERE name = 'b'",
            now - 2 * hour,
            now - hour
        ));
        let short = |env: &Env| common::stdout(&env.cmd().args(["status", "--short"]).output().unwrap());
        assert!(!short(&env).contains('▶'), "{}", short(&env));
        assert!(short(&env).contains("silent"), "{}", short(&env));
        let text = common::stdout(&env.cmd().args(["status", "b"]).output().unwrap());
        assert!(text.contains("lock expired, holder silent since"), "{text}");
        assert!(text.contains("host-x:1"), "{text}");
        env.exec(&format!("UPDATE locks SET expires_at = {}", now + hour));
        assert!(short(&env).contains('▶'), "{}", short(&env));
    }

    /// A slot that found nothing to claim waits while its run's other slot
    /// works: the claims taken back from a runner that died are run by it
    /// at once, not after the busy slot's long item (that slot used to have
    /// ended).
    fn claims_taken_back_run_at_once_on_a_slot_that_found_nothing(env) {
        env.config("[batch.b]\nrunners = 2\n");
        let dir = env.dir.path().display().to_string();
        let w = env.script(
            "gated.sh",
            &format!(
                "cat >/dev/null\n\
                 touch {dir}/started-$NIGHTSHIFT_KEY-$$\n\
                 if [ \"$NIGHTSHIFT_KEY\" = long ]; then\n\
                   while [ ! -e {dir}/go ]; do sleep 0.05; done\n\
                 elif [ -n \"$SLOW\" ]; then sh -c 'sleep 300; :' {marker}; fi\n\
                 echo '\"ok\"'\n",
                marker = marker(&env),
            ),
        );
        let w = w.display().to_string();
        let started = |key: &str| {
            std::fs::read_dir(env.dir.path())
                .unwrap()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(&format!("started-{key}-")))
        };
        add(&env, 1);
        let mut b = env.spawn_with("b", &["run", "b", "-j", "1", "--", &w], &[("SLOW", "1")]);
        wait_for("b's worker on k00", || started("k00"));
        common::add_keys(&env, "b", &["long"]);
        // Two slots: one takes `long`, the other finds nothing.
        let mut a = env.spawn("a", &["run", "b", "-j", "2", "--", &w]);
        wait_for("a's worker on long", || started("long"));
        signal(b.id(), Signal::SIGKILL);
        b.wait().unwrap();
        wait_for("k00 taken back and done while long still runs", || {
            env.item("k00").0 == "done"
        });
        assert_eq!(env.item("long").0, "claimed");
        std::fs::write(env.path("go"), "").unwrap();
        assert!(a.wait().unwrap().success(), "{:?}", env.output_of("a"));
        assert_eq!(env.item("long").0, "done");
        assert_eq!(env.item("k00"), ("done".into(), None, 2));
        env.assert_counts_consistent();
    }

    fn a_dead_runner_on_this_host_is_replaced_without_waiting_for_its_ttl(env) {
        env.config("[batch.b]\nrunners = 2\nlock_ttl = \"1h\"\n");
        add(&env, 30);
        let w = worker(&env, "0.1");
        let mut b = env.spawn_with("b", &["run", "b", "-j", "1", "--", &w], &[("SLOW", "1000")]);
        wait_for("one claim of the slow runner", || {
            env.int("SELECT count(*) FROM items WHERE status = 'claimed'") == 1
        });
        // Runs alongside, on the same host; its heartbeat ticks every second.
        let mut a = env.spawn("a", &["run", "b", "-j", "1", "--", &w]);
        wait_for("a second run", || env.int("SELECT count(*) FROM runs") == 2);
        // The guard as well, or it stops the worker itself.
        common::kill_runner_and_guard(b.id());
        b.wait().unwrap();
        assert!(a.wait().unwrap().success(), "{:?}", env.output_of("a"));
        assert_eq!(
            env.int("SELECT count(*) FROM items WHERE status = 'done'"),
            30,
            "{:?}",
            env.output_of("a")
        );
        assert!(pids_with(&marker(&env)).is_empty(), "orphans stopped");
        assert!(env.event_kinds().contains(&"orphans-stopped".to_string()));
        kill_leftovers(&env);
    }
}
