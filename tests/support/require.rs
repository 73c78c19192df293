//! The one rule for a test whose tool is missing: on a developer's machine
//! it says so on stderr and passes without running; under CI (`CI` set) or
//! with `NIGHTSHIFT_REQUIRE_TOOLS=1` it fails, naming the tool and how to
//! install it, so a CI run never reports a test that did not run as passed.
//! `NIGHTSHIFT_REQUIRE_PG=1` requires PostgreSQL alone.
//! `NIGHTSHIFT_ALLOW_MISSING=python3,root` lets such a run skip the named
//! tools on purpose (still saying so per test).
//!
//! In a test: `require!(Tool::Python3);` returns from it when the tool is
//! missing and not required.

use std::io::Write;
use std::path::Path;
use std::process::Command;

/// What a test may need besides the Rust toolchain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `python3` with its standard library (the example and persistent workers).
    Python3,
    /// Running as root (to mount a tmpfs, to chown a file to `nobody`).
    Root,
    /// Root with `setpriv` (util-linux), to run a command as `nobody`.
    RootWithSetpriv,
    /// libfaketime, to run the real binary with another clock.
    Faketime,
    /// The PostgreSQL server binaries (`initdb`, `postgres`), for the
    /// private server of `pg.rs`.
    Postgres,
    /// tmux, a terminal that draws an emoji ZWJ sequence as one grapheme
    /// (`vt100` draws each emoji of it apart), for `tmux.rs`.
    Tmux,
}

impl Tool {
    /// Its name in `NIGHTSHIFT_ALLOW_MISSING` and in messages.
    fn name(self) -> &'static str {
        match self {
            Tool::Python3 => "python3",
            Tool::Root => "root",
            Tool::RootWithSetpriv => "root with setpriv",
            Tool::Faketime => "faketime",
            Tool::Postgres => "postgres",
            Tool::Tmux => "tmux",
        }
    }

    /// How to get it.
    fn how(self) -> &'static str {
        match self {
            Tool::Python3 => "Debian: apt-get install python3",
            Tool::Root => "run the tests as root, as CI does",
            Tool::RootWithSetpriv => {
                "run the tests as root, as CI does, with setpriv (Debian: apt-get install util-linux)"
            }
            Tool::Faketime => "Debian: apt-get install faketime",
            Tool::Postgres => {
                "Debian: apt-get install postgresql; or point NIGHTSHIFT_PG_BIN at the directory \
                 holding initdb and postgres"
            }
            Tool::Tmux => "Debian: apt-get install tmux",
        }
    }

    fn present(self) -> bool {
        let root = || nix::unistd::geteuid().is_root();
        match self {
            Tool::Python3 => Command::new("python3")
                .args(["-c", "import json, urllib.request"])
                .output()
                .is_ok_and(|o| o.status.success()),
            Tool::Root => root(),
            Tool::RootWithSetpriv => {
                root()
                    && Command::new("setpriv")
                        .arg("--version")
                        .output()
                        .is_ok_and(|o| o.status.success())
            }
            Tool::Faketime => faketime_lib().is_some(),
            Tool::Postgres => super::pg::bin_dir().is_ok(),
            Tool::Tmux => Command::new("tmux")
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success()),
        }
    }
}

/// Why a missing `tool` fails the test rather than skipping it, if it does.
fn required_by(tool: Tool) -> Option<&'static str> {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| v == "1");
    let allowed = std::env::var("NIGHTSHIFT_ALLOW_MISSING")
        .is_ok_and(|list| list.split(',').any(|t| t.trim() == tool.name()));
    if allowed {
        None
    } else if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        Some("CI is set")
    } else if set("NIGHTSHIFT_REQUIRE_TOOLS") {
        Some("NIGHTSHIFT_REQUIRE_TOOLS=1 is set")
    } else if tool == Tool::Postgres && set("NIGHTSHIFT_REQUIRE_PG") {
        Some("NIGHTSHIFT_REQUIRE_PG=1 is set")
    } else {
        None
    }
}

/// True if `tool` is here. If it is not: when it is required (`CI`,
/// `NIGHTSHIFT_REQUIRE_TOOLS=1`), panics naming it and how to install it;
/// otherwise prints `SKIPPED <test>: <tool> not found (<how>)` to stderr
/// and returns false.
pub fn have(tool: Tool) -> bool {
    if tool.present() {
        return true;
    }
    // libtest names each test's thread after the test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    if let Some(why) = required_by(tool) {
        panic!(
            "{test} needs {}, which is not found: {} (required because {why}; \
             NIGHTSHIFT_ALLOW_MISSING={} skips it)",
            tool.name(),
            tool.how(),
            tool.name(),
        );
    }
    // Past libtest's capture (which takes only `eprintln!`), so that the
    // skip shows in a plain `cargo test`.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {} not found ({})",
        tool.name(),
        tool.how()
    );
    false
}

/// Where libfaketime is installed, if it is.
pub fn faketime_lib() -> Option<&'static str> {
    [
        "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
        "/usr/lib/faketime/libfaketime.so.1",
        "/usr/local/lib/faketime/libfaketime.so.1",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists())
}

/// Returns from the test when `tool` is missing and not required (see
/// [`have`]).
#[allow(unused_macros)]
macro_rules! require {
    ($tool:expr) => {
        if !crate::support::require::have($tool) {
            return;
        }
    };
}
