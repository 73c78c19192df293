//! A stdout or stderr that is gone (`nightshift … | head`, a closed
//! terminal): `println!` panicked on it (exit 101). One-shot commands end
//! as they would have (a closed pipe is a normal end); a run goes on and
//! exits with its own code. The daemon's case is in `daemon`.
#![cfg(unix)]

use crate::support as common;

use std::process::Stdio;

use common::Env;

/// A pipe whose reader is already gone: every write gets EPIPE.
fn closed() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer.into()
}

/// `nightshift ARGS` with stdout and stderr closed: its exit code.
fn code_closed(env: &Env, args: &[&str]) -> i32 {
    let status = env
        .std_cmd()
        .args(args)
        .stdout(closed())
        .stderr(closed())
        .status()
        .unwrap();
    status
        .code()
        .unwrap_or_else(|| panic!("{args:?}: {status:?}"))
}

/// What prints on stdout, an error on stderr (the store's, a usage
/// error's, clap's), and the demo's worker: each ends with its code.
#[test]
fn no_command_panics_on_a_closed_stdout_or_stderr() {
    let env = Env::new();
    env.add_items("b", 3);
    for (args, code) in [
        (&["status"][..], 0),
        (&["status", "--json"], 0),
        (&["items", "b"], 0),
        (&["log"], 0),
        (&["log", "--json"], 0),
        (&["show", "b", "nope"], 2),
        (&["status", "--no-such-flag"], 2),
        (&["--db", "missing.db", "status"], 3),
    ] {
        assert_eq!(code_closed(&env, args), code, "{args:?}");
    }
    for key in ["k1", "k2", "k3", "k4", "k5"] {
        let status = env
            .std_cmd()
            .arg("agent")
            .env("NIGHTSHIFT_KEY", key)
            .stdout(closed())
            .stderr(closed())
            .status()
            .unwrap();
        assert!(
            matches!(status.code(), Some(0 | 1 | 75)),
            "agent on {key}: {status:?}"
        );
    }
}

/// `run --verbose | head -1`: the run panicked at its next line, its items
/// left claimed. It finishes its items, and its exit code is the run's (1:
/// an item failed), not the closed pipe's.
#[test]
fn a_run_whose_output_is_closed_finishes_with_its_own_code() {
    let env = Env::new();
    env.script(
        "w.sh",
        "cat >/dev/null; [ \"$NIGHTSHIFT_KEY\" = k2 ] && { echo bad >&2; exit 1; }; echo '{\"ok\":true}'",
    );
    env.config("[batch.b]\nworker = [\"./w.sh\"]\nretries = 0\n");
    env.add_items("b", 4);
    assert_eq!(code_closed(&env, &["run", "b", "--verbose"]), 1);
    let b = env.batch_status("b");
    assert_eq!(
        (b["done"].as_i64(), b["claimed"].as_i64()),
        (Some(3), Some(0)),
        "{b}"
    );
    env.add_items("b", 6);
    assert_eq!(code_closed(&env, &["run", "b", "--json"]), 0);
    assert_eq!(env.batch_status("b")["done"], 5);
}

/// A terminal that closed (its tmux pane or SSH session gone) fails every
/// write with EIO: one-shot commands exited 4, "unexpected internal
/// error", where a closed pipe ends them with 0. Output lost so is lost
/// alike; an error of their own keeps its code.
#[test]
fn a_closed_terminal_ends_a_one_shot_command_as_a_closed_pipe_does() {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let env = Env::new();
    env.add_items("b", 3);
    let held = env.path("held");
    for (args, code) in [
        (&["status"][..], 0),
        (&["status", "--json"], 0),
        (&["items", "b"], 0),
        (&["man"], 0),
        (&["completions", "bash"], 0),
        (&["show", "b", "nope"], 2),
        (&["--db", "missing.db", "status"], 3),
    ] {
        std::fs::write(&held, "").unwrap();
        let pair = native_pty_system().openpty(PtySize::default()).unwrap();
        // The command starts once the terminal is gone (the test takes
        // `held` away after closing it), deaf to the hangup that brings.
        let mut cmd = CommandBuilder::new("sh");
        cmd.args([
            "-c",
            "trap '' HUP; : >deaf; while [ -e held ]; do sleep 0.01; done; exec \"$@\"",
            "sh",
        ]);
        cmd.arg(common::bin());
        cmd.args(args);
        cmd.cwd(env.dir.path());
        cmd.env("NIGHTSHIFT_DB", &env.db);
        cmd.env("NO_COLOR", "1");
        cmd.env_remove("NIGHTSHIFT_CONFIG");
        let mut child = pair.slave.spawn_command(cmd).unwrap();
        let deaf = env.path("deaf");
        common::wait_for("the shell to ignore SIGHUP", || deaf.exists());
        std::fs::remove_file(&deaf).unwrap();
        drop(pair.slave);
        drop(pair.master);
        std::fs::remove_file(&held).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.exit_code(), code, "{args:?}: {status:?}");
    }
}
