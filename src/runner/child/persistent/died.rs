//! A worker that broke mid-item: given a grace to exit, its group killed,
//! and its failure worded from the pipe it broke, its end and last words.

use std::time::Duration;

use super::super::kill_group;
use super::{DRAIN_GRACE, Persistent};
use crate::runner::classify::Answer;

/// How long a worker that broke mid-item (closed its stdout, stopped
/// reading) is given to exit on its own before its group is killed: its
/// exit status and last words name the failure.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// How a worker broke the pipes between us.
pub(super) enum Broke {
    /// A request could not be written: nothing reads its stdin now.
    StdinClosed,
    /// Writing a request failed otherwise.
    StdinFailed(std::io::Error),
    /// Its stdout ended (it exited, or closed it).
    StdoutEnded,
}

/// What a broken worker did, in the words of its failure: which pipe it
/// closed, and how it ended (`status`, if it did within the grace).
fn broke_words(how: &Broke, status: Option<std::process::ExitStatus>) -> String {
    let ended = match status {
        Some(s) => match super::super::exit_of(s) {
            super::super::Exit::Signal(sig) => format!("was killed by signal {sig}"),
            super::super::Exit::Code(code) => format!("exited with status {code}"),
            _ => "exited".to_string(),
        },
        None => format!(
            "was still running {}s later: its process group was killed",
            EXIT_GRACE.as_secs()
        ),
    };
    match (how, status) {
        (Broke::StdoutEnded, Some(_)) => format!("the worker {ended}"),
        (Broke::StdoutEnded, None) => {
            format!("the worker closed its stdout without answering and {ended}")
        }
        (Broke::StdinClosed, _) => {
            format!("the worker closed its stdin (it took no more requests) and {ended}")
        }
        (Broke::StdinFailed(e), _) => {
            format!("a request could not be written to the worker's stdin ({e}); it {ended}")
        }
    }
}

impl Persistent {
    /// The worker broke mid-item: a transient failure saying what it did
    /// (closed a pipe, exited with which status) and its last words.
    pub(super) async fn died(&mut self, how: Broke) -> Answer {
        if self.status.is_none()
            && let Ok(Ok(s)) = tokio::time::timeout(EXIT_GRACE, self.child.wait()).await
        {
            self.status = Some(s);
        }
        // With its group gone, stderr ends when the worker's last words are
        // read, however long a loaded machine takes to read them.
        kill_group(self.pgid);
        if let Some(mut task) = self.stderr_task.take()
            && tokio::time::timeout(DRAIN_GRACE, &mut task).await.is_err()
        {
            // A runner stalled past the grace (a loaded machine) wakes to the
            // timer first, before the reader has had its turn at what the
            // pipe already held: it gets that turn before its words are
            // taken. (Left running, it reads on to the end.)
            tokio::task::yield_now().await;
        }
        let last = self
            .stderr_last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let why = broke_words(&how, self.status);
        let mut message = match last {
            Some(l) => format!("{why}: {l}"),
            None => why,
        };
        if let Some(stray) = &self.stray {
            message.push_str(&format!(" (last non-protocol stdout line: {stray})"));
        }
        Answer::worker_exited(&message)
    }
}
