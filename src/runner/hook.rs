//! The batch's hooks, its `source` and `alert` commands, when they fail:
//! which one, how, and the last line of its stderr. Shown on the terminal
//! of `nightshift run` and in the daemon's journal, not only in the log.

use std::fmt;

use serde::Serialize;

use crate::util::sanitize;

/// The most of a hook's stderr line shown (terminal columns).
const MAX_STDERR: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    Source,
    Alert,
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::Source => "source",
            Hook::Alert => "alert",
        })
    }
}

/// A hook that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookFailure {
    pub hook: Hook,
    /// Its program (`argv[0]`), inert.
    pub program: String,
    /// What went wrong: `exit status: 127`, `could not start: ...`,
    /// `timed out after 60s`, ...
    pub problem: String,
    /// The last non-empty line it wrote on stderr: inert, cut with `…`.
    pub stderr: Option<String>,
}

impl HookFailure {
    pub fn new(
        hook: Hook,
        program: &str,
        problem: impl Into<String>,
        stderr: &[u8],
    ) -> HookFailure {
        HookFailure {
            hook,
            program: sanitize::line(program).into_owned(),
            problem: sanitize::line(&problem.into()).into_owned(),
            stderr: last_line(stderr),
        }
    }
}

/// `alert \`notify.sh\` failed: exit status: 127: sh: notify: not found`.
impl fmt::Display for HookFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} `{}` failed: {}",
            self.hook, self.program, self.problem
        )?;
        if let Some(line) = &self.stderr {
            write!(f, ": {line}")?;
        }
        Ok(())
    }
}

/// The last line with anything on it, made inert and cut to fit a terminal.
fn last_line(stderr: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stderr);
    let line = text.lines().rev().find(|l| !l.trim().is_empty())?;
    let inert = sanitize::line(line.trim());
    Some(crate::util::text::cut(&inert, MAX_STDERR).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_hook_how_it_failed_and_its_last_stderr_line() {
        let f = HookFailure::new(
            Hook::Alert,
            "sh",
            "exit status: 127",
            b"first\nsh: 1: notify: not found\n\n",
        );
        assert_eq!(
            f.to_string(),
            "alert `sh` failed: exit status: 127: sh: 1: notify: not found"
        );
        let long = format!("{}\x1b[31m{}\n", "x".repeat(10), "日本".repeat(200));
        let f = HookFailure::new(
            Hook::Source,
            "list\x1b.sh",
            "exit status: 2",
            long.as_bytes(),
        );
        let line = f.stderr.unwrap();
        assert!(
            line.starts_with("xxxxxxxxxx\\x1b[31m日本") && line.ends_with('…'),
            "{line}"
        );
        assert!(crate::util::text::width(&line) <= MAX_STDERR);
        assert_eq!(f.program, "list\\x1b.sh");
        // Halfwidth sound marks take a cell each (300 cells were kept, with
        // no `…`), and an emoji sequence is not split (`👨\u{200d}…`).
        let kana = HookFailure::new(Hook::Source, "s", "x", "ｶﾞ".repeat(150).as_bytes());
        assert_eq!(kana.stderr.unwrap(), format!("{}…", "ｶﾞ".repeat(99)));
        let family = format!("{}👨‍👩‍👧{}", "あ".repeat(99), "い".repeat(10));
        let f = HookFailure::new(Hook::Source, "s", "x", family.as_bytes());
        assert_eq!(f.stderr.unwrap(), format!("{}…", "あ".repeat(99)));
        assert_eq!(HookFailure::new(Hook::Alert, "a", "x", b" \n").stderr, None);
    }
}
