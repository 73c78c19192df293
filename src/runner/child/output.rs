//! What a worker printed, read bounded: its stdout (the result), and its
//! stderr, line by line (the op-id and cost lines, the last other line).
//!
//! The op-id channel: a worker prints a line `@nightshift op_id=<id>` on
//! stderr as soon as it has started a remote operation; the runner stores
//! it at once, and a later attempt of the item gets it in
//! `NIGHTSHIFT_OP_ID`. `@nightshift cost=<number>` reports the cost of the
//! call the same way (for workers that cannot put it in their result); the
//! lines of one attempt add up, and the total follows the rule of `cost`;
//! `@nightshift usage input_tokens=N output_tokens=M` reports its tokens
//! (the rule of `usage`).
//! An op id is at most 1024 bytes with no control characters (it goes back
//! to the worker in an environment variable); one attempt may report at
//! most [`MAX_OP_IDS`] of them (each is a store write), later ones and
//! repeats of the last one are ignored.

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{mpsc, watch};

use super::Exit;
use super::skim::{Skim, Skimmed};
use super::tail::{Tail, Words};
use crate::runner::classify::ErrorLine;
use crate::runner::cost::Cost;
use crate::runner::usage::Usage;

/// Most of an answer kept (process mode's stdout, a persistent worker's
/// answer line); the rest is read and dropped, its cost still counted.
pub const MAX_STDOUT: usize = 1 << 20;
/// [`MAX_STDOUT`] as the README and every message say it.
pub const MAX_STDOUT_SAID: &str = "1 MiB";
/// Longest stderr line looked at (a longer one is cut).
const MAX_LINE: usize = 64 * 1024;
/// Bytes read from a worker's pipe at a time. The buffer is not zeroed
/// (`read_buf` into spare capacity): zeroing 64 KiB per pipe per worker was
/// a quarter of the runner's CPU with a no-op worker.
pub(super) const READ_CHUNK: usize = 8 * 1024;
/// Prefix of the lines a worker uses to talk to the runner.
pub const MARKER: &str = "@nightshift ";
/// Most op ids one attempt may report.
pub const MAX_OP_IDS: usize = 100;

/// One stderr line, as the runner reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum StderrLine<'a> {
    OpId(&'a str),
    /// A cost report (a refused one fails the attempt).
    Cost(Cost),
    /// A token usage report (likewise).
    Usage(Usage),
    /// A marker line the runner does not understand (or an invalid op
    /// id): ignored, and not taken as the last error line either.
    BadMarker,
    /// Anything else (blank lines included).
    Text,
}

/// Whether `op` can be stored and handed back in `NIGHTSHIFT_OP_ID`.
pub fn valid_op_id(op: &str) -> bool {
    !op.is_empty() && op.len() <= 1024 && !op.chars().any(char::is_control)
}

/// Whether `b` ends a worker's line: a newline, or a bare carriage
/// return (a progress bar's redraw; CRLF then ends one line and an empty
/// one, which counts for nothing).
pub fn is_line_end(b: u8) -> bool {
    b == b'\n' || b == b'\r'
}

/// A worker's stderr cut into lines as a terminal shows them: a newline
/// or a bare CR ends one (a marker after a progress bar's `\r` is read,
/// and the error line is the bar's last state, not every state joined),
/// each kept to [`MAX_LINE`] bytes (the rest of a longer one dropped), and
/// the last words, which need not end in a newline, a line too.
#[derive(Default)]
pub(super) struct StderrLines {
    line: Vec<u8>,
}

impl StderrLines {
    /// Takes the next bytes read, calling `each` with every line they end.
    pub(super) fn push(&mut self, bytes: &[u8], mut each: impl FnMut(&[u8])) {
        for chunk in bytes.split_inclusive(|b| is_line_end(*b)) {
            let complete = chunk.last().is_some_and(|b| is_line_end(*b));
            let body = if complete {
                &chunk[..chunk.len() - 1]
            } else {
                chunk
            };
            let room = MAX_LINE.saturating_sub(self.line.len());
            self.line.extend_from_slice(&body[..body.len().min(room)]);
            if complete {
                each(&self.line);
                self.line.clear();
            }
        }
    }

    /// The pipe ended: its unended last line, if any, to `each`.
    pub(super) fn finish(self, each: impl FnOnce(&[u8])) {
        if !self.line.is_empty() {
            each(&self.line);
        }
    }
}

/// Reads one stderr line (without its newline).
pub fn parse_stderr_line(text: &str) -> StderrLine<'_> {
    let text = text.trim_end_matches('\r');
    let Some(rest) = text.strip_prefix(MARKER) else {
        return StderrLine::Text;
    };
    // `cost=0.5`, `cost = 0.5` or `cost 0.5`: a report written loosely
    // is still read (a cost dropped in silence would pass budgets).
    let rest = rest.trim();
    let word_end = rest.find(|c: char| c == '=' || c.is_whitespace());
    let (word, value) = match word_end {
        Some(i) => {
            let value = rest[i..].trim_start();
            (&rest[..i], value.strip_prefix('=').unwrap_or(value).trim())
        }
        None => (rest, ""),
    };
    match word {
        "op_id" if valid_op_id(value) => StderrLine::OpId(value),
        "cost" => StderrLine::Cost(Cost::from_text(value)),
        "usage" => StderrLine::Usage(Usage::from_text(value)),
        _ => StderrLine::BadMarker,
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    pub exit: Exit,
    /// At most [`MAX_STDOUT`] of it.
    pub stdout: Vec<u8>,
    /// Stdout passed the limit (the rest was read and dropped): what its
    /// whole said of itself (its cost and usage, `skim`).
    pub stdout_cut: Option<Skimmed>,
    /// The last non-empty stderr line that was not a marker line.
    pub stderr_last_line: Option<String>,
    /// The end of everything it printed on stderr (`tail`).
    pub stderr_tail: Option<Words>,
    pub error_line: Option<ErrorLine>,
    /// What the `@nightshift cost=` lines added up to.
    pub reported_cost: Cost,
    /// What the `@nightshift usage` lines added up to.
    pub reported_usage: Usage,
    pub op_ids: Vec<String>,
    /// The `@nightshift` lines the runner could not read.
    pub unread: Unread,
}

/// The `@nightshift` lines of an attempt the runner could not read (a
/// word before the report, `cost:` for `cost=`): how many, and the first
/// (inert, bounded). Never dropped in silence: a cost there is uncounted,
/// so the run says them (`runner::unread`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unread {
    pub count: u64,
    pub first: Option<String>,
}

/// Messages a running worker sends while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    OpId(String),
}

/// Reads everything, keeping the first `limit` bytes; past them, what
/// the whole says of itself is skimmed as it goes (`Some`: it passed).
/// Stops early (keeping what it has) when told to give up.
pub(super) async fn read_bounded(
    mut r: impl AsyncRead + Unpin,
    limit: usize,
    mut give_up: watch::Receiver<bool>,
) -> (Vec<u8>, Option<Skimmed>) {
    let mut kept = Vec::new();
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let mut cut: Option<Skim> = None;
    loop {
        buf.clear();
        let read = tokio::select! {
            read = r.read_buf(&mut buf) => read,
            _ = give_up.wait_for(|g| *g) => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                Skim::follow(&mut cut, &kept, &buf[..n], room);
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, cut.map(Skim::finish))
}

#[derive(Debug, Default)]
pub(super) struct StderrSummary {
    pub last_line: Option<String>,
    pub tail: Option<Words>,
    pub cost: Cost,
    pub usage: Usage,
    pub op_ids: Vec<String>,
    pub unread: Unread,
}

/// Reads stderr line by line (each line bounded), acting on marker lines
/// as they arrive and keeping the last other line, and the tail of it all.
pub(super) async fn read_stderr(
    mut r: impl AsyncRead + Unpin,
    reports: mpsc::UnboundedSender<Report>,
    mut give_up: watch::Receiver<bool>,
) -> StderrSummary {
    let mut summary = StderrSummary::default();
    let mut lines = StderrLines::default();
    let mut tail = Tail::default();
    let mut buf = Vec::with_capacity(READ_CHUNK);
    let handle = |line: &[u8], summary: &mut StderrSummary| {
        let text = String::from_utf8_lossy(line);
        match parse_stderr_line(&text) {
            StderrLine::OpId(op) => {
                if summary.op_ids.len() < MAX_OP_IDS
                    && summary.op_ids.last().is_none_or(|last| last != op)
                {
                    summary.op_ids.push(op.to_string());
                    let _ = reports.send(Report::OpId(op.to_string()));
                }
            }
            StderrLine::Cost(c) => summary.cost = std::mem::take(&mut summary.cost).plus(c),
            StderrLine::Usage(u) => summary.usage = std::mem::take(&mut summary.usage).plus(u),
            StderrLine::BadMarker => {
                let unread = &mut summary.unread;
                unread.count += 1;
                unread
                    .first
                    .get_or_insert_with(|| crate::runner::classify::bound_message(&text));
            }
            StderrLine::Text => {
                if !text.trim().is_empty() {
                    summary.last_line = Some(text.to_string());
                }
            }
        }
    };
    loop {
        buf.clear();
        let read = tokio::select! {
            read = r.read_buf(&mut buf) => read,
            _ = give_up.wait_for(|g| *g) => break,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                tail.push(&buf[..n]);
                lines.push(&buf[..n], |line| handle(line, &mut summary));
            }
        }
    }
    lines.finish(|line| handle(line, &mut summary));
    summary.tail = tail.finish();
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A progress bar redrawn with bare CRs is lines as a terminal shows
    /// them: the report after it is read (its cost would pass budgets
    /// uncounted), and the error line is the last thing said, alone.
    #[tokio::test]
    async fn a_bare_cr_ends_a_stderr_line() {
        let stderr: &[u8] =
            "取得中 10%\r取得中 100%\r@nightshift cost=0.5\nAPI が応答しません\r\n".as_bytes();
        let (tx, _rx) = mpsc::unbounded_channel();
        let (_give_up_tx, give_up) = watch::channel(false);
        let summary = read_stderr(stderr, tx, give_up).await;
        assert_eq!(summary.cost, Cost::from_text("0.5"));
        assert_eq!(summary.last_line.as_deref(), Some("API が応答しません"));
    }

    /// A cost, usage or op id report is read with or without spaces
    /// around its `=` (a cost dropped in silence would pass budgets);
    /// what is not a report is said to be none.
    #[test]
    fn reports_are_read_however_they_are_spaced() {
        let half = Cost::from_text("0.5");
        for line in [
            "@nightshift cost=0.5",
            "@nightshift cost = 0.5",
            "@nightshift cost 0.5",
            "@nightshift  cost= 0.5\r",
        ] {
            assert_eq!(
                parse_stderr_line(line),
                StderrLine::Cost(half.clone()),
                "{line}"
            );
        }
        assert_eq!(
            parse_stderr_line("@nightshift op_id = 操作-1"),
            StderrLine::OpId("操作-1")
        );
        assert_eq!(
            parse_stderr_line("@nightshift usage input_tokens=3 output_tokens=4"),
            StderrLine::Usage(Usage::from_text("input_tokens=3 output_tokens=4"))
        );
        // A report that cannot be read is a refused one (it fails the
        // attempt), not nothing.
        assert_eq!(
            parse_stderr_line("@nightshift cost = lots"),
            StderrLine::Cost(Cost::from_text("lots"))
        );
        assert_eq!(
            parse_stderr_line("@nightshift hello"),
            StderrLine::BadMarker
        );
        assert_eq!(
            parse_stderr_line("@nightshift op_id="),
            StderrLine::BadMarker
        );
        assert_eq!(parse_stderr_line("cost=0.5"), StderrLine::Text);
    }
}
