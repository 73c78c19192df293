//! Workers a runner leaves behind, and holders that only look dead: real
//! runners, real workers that clear their environment or leave their
//! session, real SIGKILLs and pids. On both backends.
//!
//! - A worker started through `env -i` carries no `NIGHTSHIFT_*`, so the
//!   environment scan cannot find it after its runner died; its process
//!   group, recorded with the run, is stopped before its item runs again.
//! - A daemon a worker started with `setsid` and a cleared environment
//!   leaves both the group and the environment scan; `nightshift run`
//!   adopts it (child subreaper) and stops it when the cycle ends.
//! - A recorded group whose pid now belongs to another process (its start
//!   time differs) is left alone.
//! - A holder running on this host is live whatever its lock's expiry says.
#![cfg(target_os = "linux")]

use crate::support as common;
use crate::support::require::Tool;

use common::{
    Env, assert_no_process_left, kill_runner_and_guard, lines, pids_with, ran, signal, stdout,
    wait_for,
};
use nix::sys::signal::Signal;

fn p(path: &std::path::Path) -> String {
    path.display().to_string()
}

/// A marker for this test's processes (in their command lines).
fn marker(env: &Env) -> String {
    format!(
        "nsorphan-{}",
        env.dir.path().file_name().unwrap().to_string_lossy()
    )
}

/// A process's start time (clock ticks since boot, `/proc/PID/stat`).
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

/// A `sleep` leading its own process group, as a worker does.
fn group_leader(marker: &str) -> common::Background {
    use std::os::unix::process::CommandExt;
    common::Background(
        std::process::Command::new("sh")
            .args(["-c", "sleep 300; :", marker])
            .process_group(0)
            .spawn()
            .unwrap(),
    )
}

fn host() -> String {
    nix::unistd::gethostname().unwrap().into_string().unwrap()
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string()
}

/// A persistent worker (concurrency 2) started through `env -i`: it logs
/// `start KEY ATTEMPT` and `end KEY ATTEMPT`, sleeps on a first attempt,
/// and logs `overlap KEY` when another worker holds the key's `flock`.
fn persistent_env_i(env: &Env) {
    let dir = p(env.dir.path());
    env.write(
        "worker.py",
        r#"
import fcntl, json, os, sys, time
d = sys.argv[1]
def log(text):
    with open(os.path.join(d, "log"), "a") as f:
        f.write(text + "\n")
for line in sys.stdin:
    r = json.loads(line)
    k, a = r["key"], r["attempt"]
    lock = open(os.path.join(d, "lock-" + k), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        log("overlap " + k)
    log("start %s %d" % (k, a))
    if a == 1:
        time.sleep(300)
    log("end %s %d" % (k, a))
    print(json.dumps({"key": k, "result": 1}), flush=True)
    lock.close()
"#,
    );
    env.config(&format!(
        "[batch.b]\nmode = \"persistent\"\nconcurrency = 2\n\
         worker = [\"env\", \"-i\", \"python3\", \"{dir}/worker.py\", \"{dir}\", \"{}\"]\n",
        marker(env)
    ));
}

/// [`persistent_env_i`] running on two items: both workers on their first
/// attempt and recorded. The runner, and the log its workers write.
fn persistent_env_i_running(env: &Env) -> (common::Background, std::path::PathBuf) {
    persistent_env_i(env);
    env.add_items("b", 2);
    let a = env.spawn("a", &["run", "b"]);
    let log = env.path("log");
    both_started_and_recorded(env, &log);
    (a, log)
}

/// Waits until the workers of k1 and k2 wrote `start KEY 1` to `log`, and
/// both worker groups are recorded (the write is queued, not awaited).
fn both_started_and_recorded(env: &Env, log: &std::path::Path) {
    wait_for("both workers on their first item", || {
        let l = lines(log);
        l.contains(&"start k1 1".to_string()) && l.contains(&"start k2 1".to_string())
    });
    wait_for("both worker groups recorded", || {
        env.int("SELECT count(*) FROM workers") == 2
    });
}

both_backends! {
    /// A runner killed outright (SIGKILL) has its workers stopped at once
    /// by its guard, before any later run: a worker that cleared its
    /// environment (found by its group) and a process that left the group
    /// but kept it (found by its environment). The guard then goes too, and
    /// the re-run finds nothing left to stop.
    fn a_killed_runner_s_guard_stops_its_workers_at_once(env) {
        env.config("[batch.b]\nconcurrency = 2\n");
        let mark = marker(&env);
        let w = env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\n\
                 if [ \"$DONE\" ]; then echo '\"ok\"'; exit 0; fi\n\
                 if [ \"$NIGHTSHIFT_KEY\" = k1 ]; then exec env -i sh -c 'sleep 300; :' {mark}; fi\n\
                 setsid sh -c 'sleep 300; :' {mark} </dev/null >/dev/null 2>&1 &\n\
                 exec sleep 300\n"
            ),
        );
        env.add_items("b", 2);
        let mut a = env.spawn("a", &["run", "b", "--", &p(&w)]);
        wait_for("both workers' sleeps", || pids_with(&mark).len() == 2);
        wait_for("both worker groups recorded", || {
            env.int("SELECT count(*) FROM workers") == 2
        });
        let runner = a.id();
        signal(runner, Signal::SIGKILL);
        a.wait().unwrap();
        wait_for("the guard to stop the workers", || pids_with(&mark).is_empty());
        wait_for("the guard to end", || {
            pids_with(&format!("--guard-runner\0{runner}-")).is_empty()
        });

        let out = env
            .cmd()
            .env("DONE", "1")
            .args(["run", "b", "--", &p(&w)])
            .output()
            .unwrap();
        ran(out).code(0);
        assert_eq!(env.item("k1").0, "done");
        assert!(
            !env.event_kinds().iter().any(|k| k == "orphans-stopped"),
            "nothing was left for the re-run: {:?}",
            env.event_kinds()
        );
    }

    /// A batch's `source` command goes with a runner killed outright, as
    /// its workers do: it ran on, holding whatever it listed from, since
    /// it did not carry the runner's mark the guard looks for.
    fn a_killed_runner_s_guard_stops_its_source_command(env) {
        let mark = marker(&env);
        env.config(&format!(
            "[batch.b]\nsource = [\"sh\", \"-c\", \"sleep 300; :\", \"{mark}\"]\nworker = [\"cat\"]\n"
        ));
        let mut a = env.spawn("a", &["run", "b"]);
        wait_for("the source's shell", || pids_with(&mark).len() == 1);
        let runner = a.id();
        signal(runner, Signal::SIGKILL);
        a.wait().unwrap();
        wait_for("the guard to stop the source", || pids_with(&mark).is_empty());
    }

    /// The same in persistent mode: the long-lived workers, started
    /// through `env -i`, go with their runner.
    fn a_killed_runner_s_guard_stops_its_persistent_workers_at_once(env) {
        require!(Tool::Python3);
        let (mut a, log) = persistent_env_i_running(&env);
        signal(a.id(), Signal::SIGKILL);
        a.wait().unwrap();
        wait_for("the guard to stop the workers", || {
            pids_with(&marker(&env)).is_empty()
        });

        ran(env.cmd().args(["run", "b"]).output().unwrap()).code(0);
        let l = lines(&log);
        assert!(!l.iter().any(|x| x.starts_with("overlap")), "a key ran twice at once: {l:?}");
        for k in ["k1", "k2"] {
            assert!(l.contains(&format!("end {k} 2")), "{l:?}");
            assert!(!l.contains(&format!("end {k} 1")), "the first worker went on: {l:?}");
        }
    }

    /// A guard killed while its runner lives is started again at the
    /// runner's next worker, and told the groups it must know: the runner
    /// killed after that still has its workers stopped.
    fn a_guard_killed_while_its_runner_lives_is_started_again(env) {
        env.config("[batch.b]\nconcurrency = 1\n");
        let (mark, dir) = (marker(&env), p(env.dir.path()));
        let w = env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\n\
                 touch {dir}/started-$NIGHTSHIFT_KEY\n\
                 if [ \"$NIGHTSHIFT_KEY\" = k1 ]; then\n\
                   while [ ! -e {dir}/go ]; do sleep 0.02; done; echo '\"ok\"'; exit 0\n\
                 fi\n\
                 exec env -i sh -c 'sleep 300; :' {mark}\n"
            ),
        );
        env.add_items("b", 2);
        let mut a = env.spawn("a", &["run", "b", "--", &p(&w)]);
        let runner = a.id();
        let guard = format!("--guard-runner\0{runner}-");
        wait_for("k1 started", || env.path("started-k1").exists());
        let first = pids_with(&guard);
        assert_eq!(first.len(), 1, "one guard");
        signal(first[0], Signal::SIGKILL);
        wait_for("the guard gone", || pids_with(&guard).is_empty());
        env.write("go", "");
        wait_for("k2's worker", || pids_with(&mark).len() == 1);
        let second = pids_with(&guard);
        assert_eq!(second.len(), 1, "a guard again");
        assert_ne!(second, first);

        signal(runner, Signal::SIGKILL);
        a.wait().unwrap();
        wait_for("the new guard to stop k2's worker", || pids_with(&mark).is_empty());
    }

    /// The issue's repro: concurrency 2, `exec env -i ...`, the runner
    /// SIGKILLed while both workers run, then a re-run. The first workers
    /// sleep long; each holds a `flock` on its key while it runs, so a
    /// second worker of the same key that starts while the first still
    /// runs says so.
    fn workers_that_cleared_their_environment_are_stopped_before_their_items_rerun(env) {
        env.config("[batch.b]\nconcurrency = 2\n");
        let dir = p(env.dir.path());
        let w = env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\n\
                 exec env -i KEY=\"$NIGHTSHIFT_KEY\" ATTEMPT=\"$NIGHTSHIFT_ATTEMPT\" DIR={dir} \
                 flock -n {dir}/lock-$NIGHTSHIFT_KEY sh -c '\
                   echo \"start $KEY $ATTEMPT\" >> $DIR/log; \
                   if [ \"$ATTEMPT\" = 1 ]; then sleep 300; fi; \
                   echo \"end $KEY $ATTEMPT\" >> $DIR/log' {marker} \
                 || {{ echo \"overlap $NIGHTSHIFT_KEY\" >> {dir}/log; exit 1; }}\n",
                marker = marker(&env),
            ),
        );
        env.add_items("b", 2);
        let mut a = env.spawn("a", &["run", "b", "--", &p(&w)]);
        let log = env.path("log");
        both_started_and_recorded(&env, &log);
        // The guard as well: what a later run must cover.
        kill_runner_and_guard(a.id());
        a.wait().unwrap();
        assert!(!pids_with(&marker(&env)).is_empty(), "the workers outlived their runner");

        let b = ran(env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap());
        b.code(0);
        let l = lines(&log);
        assert!(!l.iter().any(|x| x.starts_with("overlap")), "a key ran twice at once: {l:?}");
        for k in ["k1", "k2"] {
            assert!(l.contains(&format!("end {k} 2")), "{l:?}");
            assert!(!l.contains(&format!("end {k} 1")), "the first worker went on: {l:?}");
        }
        assert!(
            env.event_kinds().iter().any(|k| k == "orphans-stopped"),
            "{:?}",
            env.event_kinds()
        );
        assert_no_process_left(&marker(&env));
        assert_eq!(env.int("SELECT count(*) FROM workers"), 0, "records of ended runs go");
        env.assert_counts_consistent();
    }

    /// The same in persistent mode: one long-lived worker per slot, also
    /// started through `env -i`.
    fn persistent_workers_that_cleared_their_environment_are_stopped_too(env) {
        require!(Tool::Python3);
        let (mut a, log) = persistent_env_i_running(&env);
        // The guard as well: what a later run must cover.
        kill_runner_and_guard(a.id());
        a.wait().unwrap();

        ran(env.cmd().args(["run", "b"]).output().unwrap()).code(0);
        let l = lines(&log);
        assert!(!l.iter().any(|x| x.starts_with("overlap")), "a key ran twice at once: {l:?}");
        for k in ["k1", "k2"] {
            assert!(l.contains(&format!("end {k} 2")), "{l:?}");
            assert!(!l.contains(&format!("end {k} 1")), "the first worker went on: {l:?}");
        }
        assert_no_process_left(&marker(&env));
    }

    /// `setsid env -i ...` from a worker: a new session, no environment.
    fn a_setsid_daemon_with_a_cleared_environment_does_not_outlive_the_cycle(env) {
        env.config("[batch.b]\nconcurrency = 1\n");
        // The worker ends once its daemon is in its own session (else
        // the worker's group, killed as it ends, takes the daemon along).
        let dir = p(env.dir.path());
        let w = env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\n\
                 setsid env -i sh -c 'echo $$ > {dir}/daemon-$1; sleep 300; :' {marker} \
                   \"$NIGHTSHIFT_KEY\" </dev/null >/dev/null 2>&1 &\n\
                 while [ ! -s {dir}/daemon-$NIGHTSHIFT_KEY ]; do sleep 0.01; done\n\
                 echo '\"ok\"'\n",
                marker = marker(&env),
            ),
        );
        env.add_items("b", 2);
        let out = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
        assert!(out.status.success(), "{}", stdout(&out));
        assert!(stdout(&out).contains("2 done"), "{}", stdout(&out));
        assert_no_process_left(&marker(&env));
        let stopped = env.events("b", "orphans-stopped");
        assert_eq!(stopped.len(), 1, "{stopped:?}");
    }

    /// A dead run's recorded groups: one whose pid a later process holds
    /// (its start time differs) is left alone; one that is still the
    /// recorded group is stopped.
    fn a_recorded_group_whose_pid_was_reused_is_not_killed(env) {
        env.config("[batch.b]\nconcurrency = 1\n");
        env.add_items("b", 1);
        let w = env.script("w.sh", "cat >/dev/null\nexec sleep 300\n");
        let mut a = env.spawn("a", &["run", "b", "--", &p(&w)]);
        wait_for("the worker recorded", || env.int("SELECT count(*) FROM workers") == 1);
        // The guard as well: what a later run must cover.
        kill_runner_and_guard(a.id());
        a.wait().unwrap();
        let run = env.int("SELECT max(id) FROM runs");

        let mark = marker(&env);
        let mut reused = group_leader(&format!("{mark}-reused"));
        let mut recorded = group_leader(&format!("{mark}-recorded"));
        let (host, boot) = (host(), boot_id());
        for (slot, pid, started) in [
            (5, reused.id(), start_time(reused.id()) + 1),
            (6, recorded.id(), start_time(recorded.id())),
        ] {
            env.exec(&format!(
                "INSERT INTO workers (run_id, slot, host, boot, pgid, started)
                 VALUES ({run}, {slot}, '{host}', '{boot}', {pid}, {started})"
            ));
        }
        // Another boot's record of the live group is not this one's.
        env.exec(&format!(
            "INSERT INTO workers (run_id, slot, host, boot, pgid, started)
             VALUES ({run}, 7, '{host}', 'another-boot', {}, {})",
            reused.id(),
            start_time(reused.id())
        ));

        let w2 = env.script("w2.sh", "cat >/dev/null\necho '\"ok\"'\n");
        ran(env.cmd().args(["run", "b", "--", &p(&w2)]).output().unwrap()).code(0);
        use std::os::unix::process::ExitStatusExt;
        let status = recorded.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "the recorded group was stopped");
        assert!(reused.try_wait().unwrap().is_none(), "the reused pid's process lives");
    }

    /// A runner on this host whose seat looks expired (its expiry in the
    /// past, as a runner whose clock is far ahead sees it) while it runs:
    /// a second run steps down instead of taking over and killing its
    /// workers.
    fn a_running_holder_on_this_host_is_not_taken_over_whatever_its_expiry(env) {
        env.config("[batch.b]\nconcurrency = 1\nlock_ttl = \"1h\"\n");
        env.add_items("b", 2);
        let dir = p(env.dir.path());
        let w = env.script(
            "w.sh",
            &format!(
                "cat >/dev/null\necho \"start $NIGHTSHIFT_KEY\" >> {dir}/log\n\
                 while [ ! -e {dir}/go ]; do sleep 0.02; done\necho '\"ok\"'\n"
            ),
        );
        let mut a = env.spawn("a", &["run", "b", "--", &p(&w)]);
        wait_for("A's worker", || lines(&env.path("log")).len() == 1);
        // A renews its seat every 20 s: retry until a second run saw it
        // expired the whole time it looked.
        loop {
            env.exec("UPDATE locks SET expires_at = 1000");
            let b = env.cmd().args(["run", "b", "--", &p(&w)]).output().unwrap();
            assert!(stdout(&b).contains("lock held by"), "{}", stdout(&b));
            if env.int("SELECT max(expires_at) FROM locks") == 1000 {
                break;
            }
        }
        assert!(
            !env.event_kinds().iter().any(|k| k == "lock-takeover" || k == "orphans-stopped"),
            "{:?}",
            env.event_kinds()
        );
        assert_eq!(lines(&env.path("log")), ["start k1"], "A's worker was left alone");
        env.write("go", "");
        assert!(a.wait().unwrap().success(), "{:?}", env.output_of("a"));
        assert!(env.output_of("a").0.contains("2 done"), "{:?}", env.output_of("a"));
    }
}
