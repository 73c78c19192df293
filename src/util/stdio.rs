//! The standard streams: kept open, and written without panicking.
//!
//! `println!` and `eprintln!` panic when a write fails: a reader that went
//! away (`nightshift daemon | head`, EPIPE), a terminal that closed (a
//! tmux window or an SSH link, EIO). A daemon died of that mid-cycle
//! (exit 101), its run left crashed and its claims orphaned. So nothing
//! here panics, and the crate denies the print macros (`lib.rs`): every
//! line goes through one of two ways.
//!
//! - [`write()`]: the error is returned. One-shot commands (`status`, `log`,
//!   `log --follow`, the headless demo) stop on it; `main` takes a reader
//!   gone ([`WriteFailed::reader_gone`]: a closed pipe or a closed
//!   terminal) as a normal end (exit 0).
//! - [`out_line`], [`err_line`], [`err_text`]: best effort, for what a
//!   long-lived process says (the daemon's journal, a run's lines) and for
//!   warnings. A line that cannot be written is lost and the process goes
//!   on: what it did is in the store. [`newly_failing`] tells the daemon
//!   once that its output stopped, so it can say so where it still can.
//!
//! While the dashboard owns the terminal ([`hold`]), best-effort lines are
//! not written: they would draw over its screen (a warning from the store,
//! say, about a password file). The dashboard shows them as they come
//! ([`Held::news`]) and they are written once it has left the terminal
//! (at most 1,000 of them; past that they are counted, and the count said).
//!
//! A process started with a stream closed (`cmd <&-`, some service
//! managers) hands that number to the next file it opens: a store file or
//! a worker's pipe would then take what we print to stderr, or a pipe end
//! meant for a worker would sit on 0–2, where passing it on by `dup2`
//! cannot work (`child::posix` then falls back to `Command`). [`keep_open`]
//! fills such a gap first.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Stdout or stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Out,
    Err,
}

impl Stream {
    pub fn name(self) -> &'static str {
        match self {
            Stream::Out => "stdout",
            Stream::Err => "stderr",
        }
    }

    fn index(self) -> usize {
        match self {
            Stream::Out => 0,
            Stream::Err => 1,
        }
    }
}

/// Whether the last best-effort write to each stream failed.
static FAILING: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// Streams whose best-effort writes started failing, and why, not yet
/// taken by [`newly_failing`].
static NEWLY: Mutex<Vec<(Stream, String)>> = Mutex::new(Vec::new());

/// A write to a standard stream that failed.
#[derive(Debug, thiserror::Error)]
#[error("writing to {}: {source}", stream.name())]
pub struct WriteFailed {
    pub stream: Stream,
    #[source]
    pub source: std::io::Error,
}

impl WriteFailed {
    /// Whether the reader went away: a closed pipe (EPIPE) or a terminal
    /// that closed (EIO: its tmux pane or SSH session). The output is lost
    /// with nobody to read it, which ends a one-shot command normally, not
    /// in an internal error. A full disk or the like is still an error.
    #[must_use]
    pub fn reader_gone(&self) -> bool {
        self.source.kind() == std::io::ErrorKind::BrokenPipe
            || self.source.raw_os_error() == Some(libc::EIO)
    }
}

/// Writes `text` whole to `stream` and flushes it.
///
/// # Errors
///
/// The write failed (a closed pipe, a closed terminal, a full disk).
pub fn write(stream: Stream, text: &str) -> Result<(), WriteFailed> {
    write_raw(stream, text).map_err(|source| WriteFailed { stream, source })
}

fn write_raw(stream: Stream, text: &str) -> std::io::Result<()> {
    match stream {
        Stream::Out => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()
        }
        Stream::Err => {
            let mut err = std::io::stderr().lock();
            err.write_all(text.as_bytes())?;
            err.flush()
        }
    }
}

/// Best-effort lines kept while the terminal is held, and how many of
/// them the holder has been given.
struct Kept {
    lines: Vec<(Stream, String)>,
    given: usize,
    /// Lines past [`MAX_KEPT`], counted, not kept.
    dropped: usize,
    /// How many of those the holder has been told of.
    dropped_told: usize,
}

/// The most lines kept while the terminal is held: a dashboard open all
/// night must not grow with a warning said every poll.
const MAX_KEPT: usize = 1000;

impl Kept {
    fn new() -> Self {
        Kept {
            lines: Vec::new(),
            given: 0,
            dropped: 0,
            dropped_told: 0,
        }
    }

    fn keep(&mut self, stream: Stream, text: &str) {
        if self.lines.len() < MAX_KEPT {
            self.lines.push((stream, text.to_string()));
        } else {
            self.dropped += 1;
        }
    }

    /// The lines kept since the last call, as text to show (one line each),
    /// and once full, how many more were not kept.
    fn news(&mut self) -> Vec<String> {
        let untold = (self.dropped > self.dropped_told)
            .then(|| self.dropped_line())
            .flatten();
        self.dropped_told = self.dropped;
        let news = self.lines[self.given..]
            .iter()
            .map(|(_, text)| text.as_str())
            .chain(untold.as_deref())
            .map(|text| text.trim_matches(['\r', '\n']).to_string())
            .filter(|text| !text.is_empty())
            .collect();
        self.given = self.lines.len();
        news
    }

    /// What says how many lines were not kept, once there were any.
    fn dropped_line(&self) -> Option<String> {
        (self.dropped > 0).then(|| {
            format!(
                "nightshift: {} more lines were not kept while the dashboard was open\n",
                self.dropped
            )
        })
    }
}

/// `None`: the terminal is not held.
static HELD: Mutex<Option<Kept>> = Mutex::new(None);

/// The terminal held: best-effort lines are kept, not written, until this
/// is dropped, which writes them.
#[must_use = "the terminal is held only while this lives"]
pub struct Held(());

/// Holds the terminal for a full-screen program (see the module's doc).
pub fn hold() -> Held {
    *HELD.lock().unwrap_or_else(|p| p.into_inner()) = Some(Kept::new());
    Held(())
}

impl Held {
    /// The lines kept since the last call, as text to show (one line each).
    #[must_use]
    pub fn news(&self) -> Vec<String> {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        held.as_mut().map(Kept::news).unwrap_or_default()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(kept) = HELD.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let dropped = kept.dropped_line();
        for (stream, text) in kept.lines {
            put(stream, &text);
        }
        if let Some(line) = dropped {
            put(Stream::Err, &line);
        }
    }
}

/// Writes `text` to `stream` if it can; a failure is noted, not raised.
/// While the terminal is held, it is kept instead.
pub fn put(stream: Stream, text: &str) {
    if let Some(kept) = HELD.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        kept.keep(stream, text);
        return;
    }
    let failing = &FAILING[stream.index()];
    match write(stream, text) {
        Ok(()) => failing.store(false, Ordering::Relaxed),
        Err(e) => {
            if !failing.swap(true, Ordering::Relaxed) {
                NEWLY
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((stream, e.to_string()));
            }
        }
    }
}

/// A line to stdout, best effort (see the module's doc).
pub fn out_line(line: &str) {
    put(Stream::Out, &format!("{line}\n"));
}

/// A line to stderr, best effort.
pub fn err_line(line: &str) {
    put(Stream::Err, &format!("{line}\n"));
}

/// Text to stderr as it is (a progress line's `\r`), best effort.
pub fn err_text(text: &str) {
    put(Stream::Err, text);
}

/// The streams whose best-effort writes started failing since the last
/// call, each with why; a stream that works again and fails again is
/// said again.
pub fn newly_failing() -> Vec<(Stream, String)> {
    std::mem::take(&mut *NEWLY.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Opens `/dev/null` on each of 0, 1 and 2 that is closed. Call first.
#[cfg(unix)]
pub fn keep_open() {
    use std::os::fd::{AsRawFd, IntoRawFd};
    // `open` takes the lowest free number: below 3 it fills a gap.
    while let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        if null.as_raw_fd() > 2 {
            return;
        }
        // Kept open for the life of the process, as that stream.
        let _ = null.into_raw_fd();
    }
}

#[cfg(not(unix))]
pub fn keep_open() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_terminal_keeps_a_bounded_number_of_lines_and_counts_the_rest() {
        let mut kept = Kept::new();
        for i in 0..MAX_KEPT + 5 {
            kept.keep(Stream::Err, &format!("warning {i}\n"));
        }
        let news = kept.news();
        assert_eq!(news.len(), MAX_KEPT + 1, "{:?}", news.last());
        assert_eq!(news[0], "warning 0");
        assert_eq!(
            news[MAX_KEPT],
            "nightshift: 5 more lines were not kept while the dashboard was open"
        );
        assert!(kept.news().is_empty(), "said once");
        kept.keep(Stream::Err, "one more\n");
        assert_eq!(
            kept.news(),
            ["nightshift: 6 more lines were not kept while the dashboard was open"]
        );
        assert_eq!(kept.lines.len(), MAX_KEPT);
    }
}
