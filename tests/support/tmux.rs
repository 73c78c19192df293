//! The real binary in a tmux pane, on a tmux server of its own (a socket
//! in the test's directory, no user config): what a user of tmux sees,
//! cell by cell as tmux keeps them. For what `vt100` cannot show, such as
//! an emoji ZWJ sequence (one grapheme of two cells in tmux, three emoji
//! in `vt100`). The server is killed when the value is dropped.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::pty::PATIENCE;

pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Starts `nightshift ARGS` on `db` in a `cols`×`rows` pane, as user
    /// `tester` on host `ptyhost`, with its state directory in `dir/state`.
    pub fn open(bin: &Path, dir: &Path, db: &Path, args: &[&str], size: (u16, u16)) -> Tmux {
        let socket = dir.join("tmux.sock");
        let mut command = vec![bin.display().to_string()];
        command.extend(args.iter().map(ToString::to_string));
        let env = [
            format!("NIGHTSHIFT_DB={}", db.display()),
            format!("XDG_STATE_HOME={}", dir.join("state").display()),
            "NIGHTSHIFT_HOST=ptyhost".to_string(),
            "USER=tester".to_string(),
        ];
        let mut tmux = Command::new("tmux");
        tmux.arg("-S")
            .arg(&socket)
            .args(["-f", "/dev/null", "new-session", "-d"])
            .args(["-x", &size.0.to_string(), "-y", &size.1.to_string()])
            .arg("-c")
            .arg(dir);
        for e in &env {
            tmux.args(["-e", e]);
        }
        tmux.env_remove("NO_COLOR")
            .env_remove("NIGHTSHIFT_CONFIG")
            .env_remove("TMUX")
            .args(&command);
        let out = tmux.output().unwrap();
        assert!(out.status.success(), "tmux: {out:?}");
        Tmux { socket }
    }

    /// The pane's rows as tmux holds them (one grapheme a cell, trailing
    /// blanks kept).
    pub fn screen(&self) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(["capture-pane", "-p", "-N", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits until the pane satisfies `pred` and has settled; panics with
    /// the pane.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if pred(&screen) {
                std::thread::sleep(Duration::from_millis(100));
                let again = self.screen();
                if again == screen {
                    return screen;
                }
                continue;
            }
            if start.elapsed() > PATIENCE {
                panic!("waited for {what}; the pane shows:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}
