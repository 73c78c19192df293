//! Persistent worker mode: one long-lived worker process per slot, speaking
//! JSON lines, so a worker with a heavy start-up (Python importing an SDK)
//! pays it once instead of once per item.
//!
//! Protocol (answers in request order; the runner may send the next
//! requests before the current answer came, so a worker reading stdin line
//! by line simply finds them waiting):
//! - request, one line on the worker's stdin:
//!   `{"key": "...", "label": "...", "attempt": 1, "op_id": null, "run_id": 7, "payload": {...}}`
//! - while working, the worker may report an operation id:
//!   `{"key": "...", "op_id": "..."}` on stdout (stored at once, as in
//!   process mode);
//! - the answer, one line on stdout: `{"key": "...", "result": <any JSON>}`
//!   (a `null` result is the outcome `empty`), or
//!   `{"key": "...", "error": {"error_class": "...", "transient": true, "message": "...", "retry_after_s": 30}}`;
//!   either may carry `"cost": 0.01` (the rule of `cost`).
//!
//! `"key"` is required on answers and op ids: it is what makes the
//! attribution of an answer provable. An answer must name the oldest
//! unanswered request (`match_answer`), an op id one that is unanswered
//! (`match_op_id`); anything else (no key, another item's key, a second
//! answer, a `{` line that is not JSON) means the worker is out of step:
//! it is restarted. A JSON object with none of `result`, `error`, `op_id`,
//! and any line not starting with `{`, is a stray print: ignored (the
//! caller counts it; the last one is quoted if the worker then dies).
//!
//! Timeouts kill the worker's process group and start a fresh worker; a
//! worker that exits mid-item fails the item (transient) and is restarted.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use super::output::{MAX_STDOUT_SAID, Report, is_line_end};
use super::skim::{Skim, Skimmed};
use super::{KillReason, kill_group};
use crate::runner::classify::{self, Answer, Rules, bound_message};
use crate::util::json_text::JsonText;
use crate::util::sanitize;

/// Most of an answer line kept, as of process mode's stdout: past it the
/// line is skimmed to its end (`skim`) and its result cut.
const MAX_LINE: usize = super::output::MAX_STDOUT;
/// How long a worker that broke mid-item (closed its stdout, stopped
/// reading) is given to exit on its own before its group is killed: its
/// exit status and last words name the failure.
const EXIT_GRACE: Duration = Duration::from_secs(5);
/// How long its stderr may stay open once its group is gone: only a
/// process that left the group (`setsid`) can hold it past that.
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Once the worker has exited, how long its stdout may go quiet before the
/// worker is taken for dead though the pipe is still open (a child it
/// started holds it): what it wrote before exiting is in the pipe already.
const AFTER_EXIT: Duration = Duration::from_millis(500);

/// One request to a persistent worker.
pub struct Request<'a> {
    pub key: &'a str,
    pub label: &'a str,
    pub attempt: u32,
    pub op_id: Option<&'a str>,
    pub run_id: i64,
    /// The stored payload, JSON text (embedded as is).
    pub payload: &'a str,
}

impl Request<'_> {
    fn line(&self) -> String {
        let s = |v: &str| Value::String(v.to_string()).to_string();
        format!(
            "{{\"key\":{},\"label\":{},\"attempt\":{},\"op_id\":{},\"run_id\":{},\"payload\":{}}}\n",
            s(self.key),
            s(self.label),
            self.attempt,
            self.op_id.map_or("null".to_string(), s),
            self.run_id,
            if self.payload.trim().is_empty() {
                "null"
            } else {
                self.payload.trim()
            }
        )
    }
}

/// A running persistent worker.
pub struct Persistent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    pgid: Option<u32>,
    /// The last non-empty stderr line, for messages when the worker dies.
    stderr_last: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    /// Requests not yet written to the worker's stdin, from `sent`.
    out: Vec<u8>,
    sent: usize,
    /// Where `out` starts in the stream of all bytes queued for stdin
    /// (each request's [`Span`] is a place in it).
    base: u64,
    /// How it ended, once known.
    status: Option<std::process::ExitStatus>,
    /// The answer line being read (kept here so reading can be cancelled).
    line: Vec<u8>,
    /// It passed `MAX_LINE`: what it says of itself, read as it goes.
    cut: Option<Skim>,
    /// The last stdout line that was not part of the protocol.
    stray: Option<String>,
    /// The worker process has exited (its stdout may still be held open by
    /// a child of it).
    exited: bool,
}

/// The rule every answer and op-id line must follow (quoted in errors).
pub const KEY_RULE: &str = "persistent answers must carry the request's \"key\"";
/// How much of a worker's line an error or event quotes.
const QUOTE_CELLS: usize = 80;

/// One stdout line from the worker.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// An operation id for the unanswered request named.
    OpId { key: String, op_id: String },
    /// An answer, for the request named.
    Answer {
        key: String,
        obj: serde_json::Map<String, Value>,
        /// Its `result` as written (see `classify::answer`).
        written: Option<JsonText>,
    },
    /// Not part of the protocol (ignored): the line's start, inert.
    Stray(String),
}

/// What became of one call.
pub enum Call {
    Answer(Answer),
    /// The runner stopped the worker (it must be started again).
    Killed(KillReason),
}

/// The `@nightshift` lines a run's persistent workers wrote on stderr,
/// process mode's channel, which persistent mode does not read: shared by
/// every worker of the run, so that the run says the first once and counts
/// them all, a crashed worker's too.
#[derive(Debug, Default)]
pub struct StderrReports {
    /// The first such line (cut).
    pub first: Option<String>,
    pub count: u64,
    /// The first was said.
    pub said: bool,
}

pub type Reports = std::sync::Arc<std::sync::Mutex<StderrReports>>;

impl Persistent {
    /// Starts the worker. `program` is `argv[0]` found in `PATH` (see
    /// `worker::resolve`); the worker still sees `argv[0]` as written.
    pub fn start(
        argv: &[String],
        program: Option<&Path>,
        dir: Option<&Path>,
        env: &[(&'static str, String)],
    ) -> std::io::Result<Persistent> {
        Persistent::start_reporting(argv, program, dir, env, &Reports::default())
    }

    /// [`Persistent::start`], its `@nightshift` stderr lines (process
    /// mode's channel for cost, usage and op ids, which a persistent
    /// worker's stderr is not: no line says which request it is about)
    /// counted in `reports`, so that a cost reported there is not lost in
    /// silence.
    pub fn start_reporting(
        argv: &[String],
        program: Option<&Path>,
        dir: Option<&Path>,
        env: &[(&'static str, String)],
        reports: &Reports,
    ) -> std::io::Result<Persistent> {
        let mut cmd = super::command(argv, program, dir, env);
        cmd.env("NIGHTSHIFT_MODE", "persistent");
        let mut child = super::spawn(&mut cmd)?;
        let pgid = child.id();
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = BufReader::new(
            child
                .stdout
                .take()
                .ok_or_else(|| std::io::Error::other("no stdout"))?,
        );
        let stderr_last = std::sync::Arc::new(std::sync::Mutex::new(None));
        let stderr_task = child.stderr.take().map(|mut err| {
            let last = stderr_last.clone();
            let reports = reports.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut pending = Vec::new();
                while let Ok(n) = err.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(pos) = pending.iter().position(|b| is_line_end(*b)) {
                        let line: Vec<u8> = pending.drain(..=pos).collect();
                        let text = String::from_utf8_lossy(&line).trim().to_string();
                        if !text.is_empty() {
                            if text.starts_with("@nightshift ") {
                                let mut r = reports.lock().unwrap_or_else(|p| p.into_inner());
                                r.count += 1;
                                r.first.get_or_insert_with(|| bound_message(&text));
                            }
                            *last.lock().unwrap_or_else(|p| p.into_inner()) =
                                Some(bound_message(&text));
                        }
                    }
                    if pending.len() > 64 * 1024 {
                        pending.clear();
                    }
                }
            })
        });
        Ok(Persistent {
            child,
            stdin,
            stdout,
            pgid,
            stderr_last,
            stderr_task,
            out: Vec::with_capacity(16 * 1024),
            sent: 0,
            base: 0,
            status: None,
            line: Vec::new(),
            cut: None,
            stray: None,
            exited: false,
        })
    }

    /// The start of what the worker wrote on stdout with no line end yet,
    /// quoted inert: an answer a newline short waits for it forever.
    pub fn unended(&self) -> Option<String> {
        let text = String::from_utf8_lossy(classify::whole_chars(&self.line, true));
        Some(quote(&text)).filter(|q| !q.is_empty())
    }

    /// The worker's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pgid
    }

    /// Queues a request; it is written while `next` waits for answers.
    /// Where its line lies in the stream written to the worker's stdin.
    pub fn send(&mut self, req: &Request<'_>) -> Span {
        if self.sent == self.out.len() {
            self.base += self.out.len() as u64;
            self.out.clear();
            self.sent = 0;
        }
        let start = self.base + self.out.len() as u64;
        self.out.extend_from_slice(req.line().as_bytes());
        Span {
            start,
            end: self.base + self.out.len() as u64,
        }
    }

    /// Takes back a request none of which was written yet: true when it
    /// was (every later span is then [`Span::after_unsent`] that one).
    pub fn unsend(&mut self, span: Span) -> bool {
        let written = self.base + self.sent as u64;
        if span.start < written {
            return false;
        }
        let at = |p: u64| usize::try_from(p - self.base).unwrap_or(usize::MAX);
        let (start, end) = (at(span.start), at(span.end));
        if end > self.out.len() || start > end {
            return false;
        }
        self.out.drain(start..end);
        true
    }

    /// From which place in the stream written to its stdin the worker
    /// took nothing: the requests from there on never reached it (still
    /// in the pipe, or never written). A worker that ended itself with
    /// status 0 took none it had not answered: it may end between items
    /// (to be replaced, to free memory), not in the middle of one.
    pub fn untaken_from(&self) -> u64 {
        if self.status.is_some_and(|s| s.success()) {
            return 0;
        }
        let written = self.base + self.sent as u64;
        written.saturating_sub(unread(&self.stdin))
    }

    /// The next stdout line that is not blank, writing queued requests
    /// meanwhile (a worker blocked on a full stdout pipe must never wait
    /// for us to finish writing). Cancel-safe: partial lines and writes are
    /// kept. `Err` when the worker broke: exited, closed its stdout, sent a
    /// line over the limit or one that breaks the protocol (it must then be
    /// killed and started again).
    pub async fn next(&mut self) -> Result<Line, Answer> {
        loop {
            let read = if self.exited {
                // What it wrote before it exited is read; then it is dead,
                // whoever still holds the pipe.
                let fill = fill_line(&mut self.stdout, &mut self.line, &mut self.cut);
                match tokio::time::timeout(AFTER_EXIT, fill).await {
                    Ok(r) => r,
                    Err(_) => Ok(false),
                }
            } else {
                let Persistent {
                    stdin,
                    stdout,
                    out,
                    sent,
                    line,
                    cut,
                    child,
                    exited,
                    status,
                    ..
                } = self;
                let writing = *sent < out.len();
                tokio::select! {
                    biased;
                    r = fill_line(stdout, line, cut) => r,
                    w = stdin.write(&out[*sent..]), if writing => {
                        match w {
                            Ok(n) if n > 0 => *sent += n,
                            Ok(_) => return Err(self.died(Broke::StdinClosed).await),
                            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                                return Err(self.died(Broke::StdinClosed).await);
                            }
                            Err(e) => return Err(self.died(Broke::StdinFailed(e)).await),
                        }
                        continue;
                    }
                    // A crash noticed though a child of the worker holds its
                    // stdout open (no end of stream would ever come).
                    s = child.wait() => {
                        *exited = true;
                        *status = s.ok();
                        continue;
                    }
                }
            };
            let text = match read {
                Ok(true) => {
                    let line = std::mem::take(&mut self.line);
                    // A cut line's head ends on a whole character.
                    String::from_utf8_lossy(classify::whole_chars(&line, self.cut.is_some()))
                        .into_owned()
                }
                Ok(false) => return Err(self.died(Broke::StdoutEnded).await),
                Err(e) => {
                    self.line = Vec::new();
                    self.cut = None;
                    return Err(Answer::out_of_step(&e));
                }
            };
            let parsed = match self.cut.take() {
                Some(skim) => cut_answer(&text, skim.finish()).map(Some),
                None => parse_line(&text),
            };
            match parsed {
                Ok(Some(Line::Stray(quoted))) => {
                    self.stray = Some(quoted.clone());
                    return Ok(Line::Stray(quoted));
                }
                Ok(Some(line)) => return Ok(line),
                Ok(None) => {}
                Err(why) => return Err(Answer::out_of_step(&why)),
            }
        }
    }

    /// Sends one item and waits for its answer, the timeout, or a kill.
    /// `Err`: the worker broke (it must be killed and started again).
    pub async fn call(
        &mut self,
        req: &Request<'_>,
        timeout: Duration,
        rules: &Rules,
        reports: &mpsc::UnboundedSender<Report>,
        kill: oneshot::Receiver<KillReason>,
    ) -> Result<Call, Answer> {
        let killed = async {
            match kill.await {
                Ok(reason) => reason,
                Err(_) => std::future::pending().await,
            }
        };
        self.send(req);
        let exchange = async {
            let mut op_ids = 0;
            loop {
                match self.next().await? {
                    Line::OpId { key, op_id } => {
                        match_op_id(&key, [req.key], None)
                            .map_err(|why| Answer::out_of_step(&why))?;
                        // Each id is a store write: a flood is bounded.
                        if op_ids < super::output::MAX_OP_IDS {
                            op_ids += 1;
                            let _ = reports.send(Report::OpId(op_id));
                        }
                    }
                    Line::Answer { key, obj, written } => {
                        match_answer(&key, [req.key], None)
                            .map_err(|why| Answer::out_of_step(&why))?;
                        return Ok(classify::answer(&obj, written.as_ref(), rules));
                    }
                    Line::Stray(_) => {}
                }
            }
        };
        tokio::select! {
            result = exchange => result.map(Call::Answer),
            () = tokio::time::sleep(timeout) => {
                let unended = self.unended();
                self.kill().await;
                Err(Answer::timed_out(timeout, unended.as_deref()))
            }
            reason = killed => {
                self.kill().await;
                Ok(Call::Killed(reason))
            }
        }
    }

    /// The worker broke mid-item: a transient failure saying what it did
    /// (closed a pipe, exited with which status) and its last words.
    async fn died(&mut self, how: Broke) -> Answer {
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

    /// Stops the worker and everything in its process group.
    pub async fn kill(&mut self) {
        kill_group(self.pgid);
        let _ = self.child.kill().await;
    }

    /// Closes stdin (the worker's cue to exit), then makes sure it is gone.
    pub async fn shutdown(self, grace: Duration) {
        let Persistent {
            mut child,
            stdin,
            pgid,
            ..
        } = self;
        // Dropping closes the pipe (`shutdown()` on a pipe does not).
        drop(stdin);
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            kill_group(pgid);
            let _ = child.kill().await;
        }
        kill_group(pgid);
    }
}

/// Where one request's line lies in the stream of bytes written to a
/// worker's stdin: what tells a request the worker took from one it never
/// read ([`Persistent::untaken_from`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    pub start: u64,
    pub end: u64,
}

impl Span {
    /// This span once `gone`, queued before it, was taken back.
    #[must_use]
    pub fn after_unsent(self, gone: Span) -> Span {
        if self.start < gone.end {
            return self;
        }
        let len = gone.end - gone.start;
        Span {
            start: self.start - len,
            end: self.end - len,
        }
    }
}

/// How a worker broke the pipes between us.
enum Broke {
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
        Some(s) => match super::exit_of(s) {
            super::Exit::Signal(sig) => format!("was killed by signal {sig}"),
            super::Exit::Code(code) => format!("exited with status {code}"),
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

/// Bytes written to the worker's stdin that it has not read (the pipe
/// keeps them once the worker is gone, while we hold our end).
#[cfg(target_os = "linux")]
fn unread(stdin: &ChildStdin) -> u64 {
    rustix::io::ioctl_fionread(stdin).unwrap_or(0)
}

/// Unknown here: every byte written counts as read.
#[cfg(not(target_os = "linux"))]
fn unread(_stdin: &ChildStdin) -> u64 {
    0
}

/// Reads one stdout line. `Ok(None)`: nothing to act on (a blank line, an
/// op id that cannot be stored). `Err`: the line breaks the protocol.
pub fn parse_line(text: &str) -> Result<Option<Line>, String> {
    let trimmed = classify::without_bom(text.trim_start()).trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    if !trimmed.starts_with('{') {
        return Ok(Some(Line::Stray(quote(trimmed))));
    }
    let obj = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(obj)) => obj,
        Ok(_) => return Ok(Some(Line::Stray(quote(trimmed)))),
        Err(e) => {
            let hint = if trimmed.contains("NaN") || trimmed.contains("Infinity") {
                "; NaN and Infinity are not JSON: Python's json.dumps writes them unless allow_nan=False"
            } else {
                ""
            };
            return Err(format!(
                "a stdout line starting with \"{{\" is not valid JSON ({}{hint}): {}",
                crate::util::json::error_at(trimmed, &e),
                quote(trimmed)
            ));
        }
    };
    let is_answer = obj.contains_key("result") || obj.contains_key("error");
    if !is_answer && !obj.contains_key("op_id") {
        return Ok(Some(Line::Stray(quote(trimmed))));
    }
    let key = match obj.get("key") {
        Some(Value::String(k)) => k.clone(),
        None => {
            return Err(format!(
                "{KEY_RULE}: a line without it cannot be matched to its request: {}",
                quote(trimmed)
            ));
        }
        Some(other) => {
            return Err(format!(
                "{KEY_RULE} as a string, not {}: {}",
                quote(&other.to_string()),
                quote(trimmed)
            ));
        }
    };
    if is_answer {
        return Ok(Some(Line::Answer {
            key,
            written: written_result(trimmed),
            obj,
        }));
    }
    // Ignored as in process mode: it could not be handed back.
    Ok(match obj.get("op_id").and_then(Value::as_str) {
        Some(op) if super::output::valid_op_id(op) => Some(Line::OpId {
            key,
            op_id: op.to_string(),
        }),
        _ => None,
    })
}

/// Whether an answer naming `key` is in step: it must name the oldest of
/// the `outstanding` requests (in order). `last`: the key of the request
/// answered last, to name a second answer as such. `Err` says why not.
pub fn match_answer<'a>(
    key: &str,
    outstanding: impl IntoIterator<Item = &'a str>,
    last: Option<&str>,
) -> Result<(), String> {
    let mut outstanding = outstanding.into_iter();
    let head = outstanding.next();
    if head == Some(key) {
        return Ok(());
    }
    Err(if last == Some(key) {
        format!("a second answer for {key:?}: each request gets one answer, in request order")
    } else if let Some(head) = head
        && outstanding.any(|k| k == key)
    {
        format!(
            "an answer for {key:?} while {head:?} was not answered: answers come in request order"
        )
    } else {
        format!("an answer for {key:?}, which is not a request waiting for its answer")
    })
}

/// Whether an op id naming `key` is in step: it must name one of the
/// `outstanding` requests (a worker may work on several at once). The
/// request's position, or why not.
pub fn match_op_id<'a>(
    key: &str,
    outstanding: impl IntoIterator<Item = &'a str>,
    last: Option<&str>,
) -> Result<usize, String> {
    outstanding
        .into_iter()
        .position(|k| k == key)
        .ok_or_else(|| {
            let answered = if last == Some(key) {
                " (it was answered already)"
            } else {
                ""
            };
            format!("an op id for {key:?}, which is not a request waiting for its answer{answered}")
        })
}

/// An answer line's `result` as the worker wrote it, if it has one.
fn written_result(line: &str) -> Option<JsonText> {
    #[derive(serde::Deserialize)]
    struct Written<'a> {
        #[serde(borrow)]
        result: Option<&'a serde_json::value::RawValue>,
    }
    let w: Written<'_> = serde_json::from_str(line).ok()?;
    JsonText::parse(w.result?.get())
}

/// The start of a worker's line, inert, for an error or an event.
pub fn quote(text: &str) -> String {
    crate::util::text::cut(&sanitize::line(text.trim()), QUOTE_CELLS).into_owned()
}

/// Reads into `line` up to the next newline or bare CR (not kept; an
/// answer after a progress bar's `\r` is a line of its own, CRLF an extra
/// empty one): `Ok(true)` with a whole line, `Ok(false)` at end of stream.
/// The end of the stream ends a last unterminated line that is a whole
/// JSON value (an answer written with no line end); any other is dropped
/// (the worker died writing it).
/// `line` keeps at most `MAX_LINE`; a longer line is read to its end
/// through `cut`, which skims it, unless it is no JSON object (`Err` then,
/// at once).
async fn fill_line(
    r: &mut BufReader<ChildStdout>,
    line: &mut Vec<u8>,
    cut: &mut Option<Skim>,
) -> Result<bool, String> {
    loop {
        let buf = r
            .fill_buf()
            .await
            .map_err(|e| format!("reading the worker's answer: {e}"))?;
        if buf.is_empty() {
            // See above: a fragment's worker says what it did as it ends.
            let whole = cut.is_none()
                && !line.iter().all(u8::is_ascii_whitespace)
                && serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok();
            if !whole {
                line.clear();
                *cut = None;
            }
            return Ok(whole);
        }
        let (take, complete) = match buf.iter().position(|b| is_line_end(*b)) {
            Some(pos) => (pos + 1, true),
            None => (buf.len(), false),
        };
        let part = &buf[..take - usize::from(complete)];
        let room = MAX_LINE.saturating_sub(line.len());
        Skim::follow(cut, line, part, room);
        line.extend_from_slice(&part[..part.len().min(room)]);
        r.consume(take);
        if cut.as_ref().is_some_and(Skim::no_object) {
            *cut = None;
            return Err(format!(
                "the worker wrote a stdout line longer than {MAX_STDOUT_SAID} that is no answer (not a JSON object)"
            ));
        }
        if complete {
            return Ok(true);
        }
    }
}

/// An answer line longer than `MAX_LINE`, from what the skim read of it:
/// its result cut as in process mode (`head`: the line's start), its
/// error with the fields read, its cost and usage counted. `Err` when it
/// is no answer (no `key`, neither `result` nor `error`).
fn cut_answer(head: &str, skimmed: Skimmed) -> Result<Line, String> {
    let head = classify::without_bom(head.trim());
    let mut fields = skimmed.fields;
    let key = match fields.get("key") {
        Some(Value::String(k)) if skimmed.object => k.clone(),
        _ if !skimmed.object => {
            return Err(format!(
                "the worker wrote a stdout line longer than {MAX_STDOUT_SAID} that is not valid JSON: {}",
                quote(head)
            ));
        }
        _ => {
            return Err(format!(
                "{KEY_RULE}: a line longer than {MAX_STDOUT_SAID} without it cannot be matched to its request: {}",
                quote(head)
            ));
        }
    };
    let mut obj = serde_json::Map::new();
    obj.insert("key".into(), Value::String(key.clone()));
    if let Some(Value::Object(mut error)) = fields.remove("error") {
        error.entry("message").or_insert_with(|| {
            Value::String(format!(
                "(an error answer longer than {MAX_STDOUT_SAID}: its message was not kept)"
            ))
        });
        obj.insert("error".into(), Value::Object(error));
    } else if let Some(Value::Object(result)) = fields.remove("result") {
        obj.insert("result".into(), classify::cut_result(head));
        // The answer's own cost and usage, else its result's.
        for f in ["cost", "usage"] {
            if let Some(v) = result.get(f) {
                fields.entry(f).or_insert_with(|| v.clone());
            }
        }
    } else {
        return Err(format!(
            "the worker wrote a stdout line longer than {MAX_STDOUT_SAID} with neither \"result\" nor \"error\": {}",
            quote(head)
        ));
    }
    for f in ["cost", "usage"] {
        if let Some(v) = fields.remove(f) {
            obj.insert(f.into(), v);
        }
    }
    Ok(Line::Answer {
        key,
        obj,
        written: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, body: &str) -> Vec<String> {
        let path = dir.join("w.sh");
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        vec!["sh".into(), path.display().to_string()]
    }

    fn req<'a>(key: &'a str, payload: &'a str) -> Request<'a> {
        Request {
            key,
            label: key,
            attempt: 1,
            op_id: None,
            run_id: 1,
            payload,
        }
    }

    #[tokio::test]
    async fn answers_op_ids_errors_and_restart_after_death() {
        let dir = tempfile::tempdir().unwrap();
        // Echoes a result per line; key "err" fails, "op" reports an op id
        // first, "die" exits mid-item.
        let argv = script(
            dir.path(),
            r#"echo "starting up (a stray print)"
echo '{"log":"connected"}'
while read line; do
  case "$line" in
    *'"key":"err"'*) echo '{"key":"err","error":{"error_class":"BadRequest","transient":false,"message":"no"}}';;
    *'"key":"op"'*) echo '{"key":"op","op_id":"op-1"}'; echo '{"key":"op","result":{"ok":true},"cost":0.5}';;
    *'"key":"empty"'*) echo '{"key":"empty","result":null}';;
    *'"key":"die"'*) echo "dying" >&2; exit 3;;
    *'"key":"late"'*) exec 1>&-; sleep 1.5; echo "late last words" >&2; exit 4;;
    *'"key":"nokey"'*) echo '{"result":1}';;
    *) echo '{"key":"a","result":"fine"}';;
  esac
done"#,
        );
        let rules = Rules::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let never = || oneshot::channel::<KillReason>().1;
        let t = Duration::from_secs(5);
        let ok = w
            .call(&req("a", "{\"x\":1}"), t, &rules, &tx, never())
            .await;
        assert!(
            matches!(ok, Ok(Call::Answer(Answer::Done { empty: false, result: Some(r), .. })) if r == "\"fine\"")
        );
        let op = w.call(&req("op", "{}"), t, &rules, &tx, never()).await;
        assert!(matches!(op, Ok(Call::Answer(Answer::Done { cost: Some(c), .. })) if c == 0.5));
        assert_eq!(rx.try_recv().unwrap(), Report::OpId("op-1".into()));
        let err = w.call(&req("err", "{}"), t, &rules, &tx, never()).await;
        assert!(
            matches!(err, Ok(Call::Answer(Answer::Failed { transient: false, class, .. })) if class == "BadRequest")
        );
        let empty = w.call(&req("empty", "{}"), t, &rules, &tx, never()).await;
        assert!(matches!(
            empty,
            Ok(Call::Answer(Answer::Done { empty: true, .. }))
        ));
        let nokey = w.call(&req("nokey", "{}"), t, &rules, &tx, never()).await;
        assert!(
            matches!(&nokey, Err(Answer::Failed { transient: true, class, message, .. })
            if class == "ProtocolError" && message.contains(KEY_RULE) && message.ends_with("the worker was restarted")),
            "{:?}",
            nokey.as_ref().err()
        );
        let died = w.call(&req("die", "{}"), t, &rules, &tx, never()).await;
        assert!(
            matches!(&died, Err(Answer::Failed { transient: true, class, message, .. })
            if class == "WorkerExited" && message.contains("dying")),
            "{:?}",
            died.as_ref().err()
        );
        // Last words that come a while after stdout closed still name the
        // failure, with the exit status.
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let late = w.call(&req("late", "{}"), t, &rules, &tx, never()).await;
        assert!(
            matches!(&late, Err(Answer::Failed { transient: true, class, message, .. })
            if class == "WorkerExited" && message.contains("the worker exited with status 4") && message.contains("late last words")),
            "{:?}",
            late.as_ref().err()
        );
    }

    /// A worker that closed its stdout and lives on is said to have done
    /// so, not to have exited; what it never read of its stdin is known
    /// (the pipe still holds it), so the slot can tell a request it took
    /// from one that never reached it.
    #[tokio::test]
    async fn a_closed_pipe_is_said_and_what_the_worker_never_read_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let argv = script(
            dir.path(),
            "read line\necho '{\"key\":\"a\",\"result\":1}'\nexec 1>&-\nsleep 30",
        );
        let rules = Rules::default();
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let never = || oneshot::channel::<KillReason>().1;
        let t = Duration::from_secs(30);
        let ok = w.call(&req("a", "{}"), t, &rules, &tx, never()).await;
        assert!(matches!(ok, Ok(Call::Answer(Answer::Done { .. }))));
        let b = w.send(&req("b", "{}"));
        let broke = w.call(&req("c", "{}"), t, &rules, &tx, never()).await;
        assert!(
            matches!(&broke, Err(Answer::Failed { class, message, .. }) if class == "WorkerExited"
                && message == "the worker closed its stdout without answering and was still running 5s later: its process group was killed"),
            "{:?}",
            broke.as_ref().err()
        );
        // `sh` reads its stdin a byte at a time: b and c are still there.
        assert_eq!(w.untaken_from(), b.start);
        assert!(b.start > 0);
    }

    /// A request not yet written to the worker's stdin is taken back
    /// whole: the worker never sees it, and the spans after it follow. One
    /// written already is the worker's.
    #[tokio::test]
    async fn a_request_not_yet_written_is_taken_back() {
        let dir = tempfile::tempdir().unwrap();
        let argv = script(
            dir.path(),
            r#"while read -r line; do
  key=$(printf '%s' "$line" | sed 's/.*"key":"\([^"]*\)".*/\1/')
  printf '{"key":"%s","result":1}\n' "$key"
done"#,
        );
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let a = w.send(&req("a", "{}"));
        let b = w.send(&req("b", "{}"));
        let c = w.send(&req("c", "{}"));
        // Written only while `next` waits: none yet.
        assert!(w.unsend(b));
        let c = c.after_unsent(b);
        assert_eq!((c.start, a.after_unsent(b)), (a.end, a));
        for want in ["a", "c"] {
            match w.next().await {
                Ok(Line::Answer { key, .. }) => assert_eq!(key, want),
                Ok(other) => panic!("{other:?}"),
                Err(e) => panic!("{e:?}"),
            }
        }
        assert!(!w.unsend(a) && !w.unsend(c));
        w.kill().await;
    }

    /// An answer after a progress bar redrawn with bare CRs, and answers
    /// ended CRLF, are answers: the worker was not left to its timeout.
    #[tokio::test]
    async fn a_bare_cr_ends_an_answer_line() {
        let dir = tempfile::tempdir().unwrap();
        let argv = script(
            dir.path(),
            r#"while read line; do
  printf '読込 50%%\r読込 100%%\r{"key":"a","result":"済"}\r\n'
done"#,
        );
        let rules = Rules::default();
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let never = || oneshot::channel::<KillReason>().1;
        for _ in 0..2 {
            let ok = w
                .call(
                    &req("a", "{}"),
                    Duration::from_secs(5),
                    &rules,
                    &tx,
                    never(),
                )
                .await;
            assert!(
                matches!(&ok, Ok(Call::Answer(Answer::Done { result: Some(r), .. })) if r == "\"済\""),
                "{:?}",
                ok.as_ref().err()
            );
        }
    }

    fn obj(text: &str) -> serde_json::Map<String, Value> {
        match serde_json::from_str(text).unwrap() {
            Value::Object(o) => o,
            _ => unreachable!(),
        }
    }

    #[test]
    fn lines_are_answers_op_ids_strays_or_protocol_errors() {
        let answer = r#"{"key":"a","result":1}"#;
        assert_eq!(
            parse_line(answer),
            Ok(Some(Line::Answer {
                key: "a".into(),
                obj: obj(answer),
                written: JsonText::parse("1"),
            }))
        );
        assert_eq!(
            parse_line(r#" {"key":"a","op_id":"op-1"} "#),
            Ok(Some(Line::OpId {
                key: "a".into(),
                op_id: "op-1".into()
            }))
        );
        // A byte-order mark before the first answer (`utf-8-sig`) is not
        // part of it.
        assert_eq!(
            parse_line(&format!("\u{feff}{answer}")),
            Ok(Some(Line::Answer {
                key: "a".into(),
                obj: obj(answer),
                written: JsonText::parse("1"),
            }))
        );
        // The result as written: numbers past a float's digits, key order.
        let big = r#"{"key":"a","result":{"z":123456789012345678901234567890,"a":"\u65e5"}}"#;
        match parse_line(big) {
            Ok(Some(Line::Answer { written, .. })) => assert_eq!(
                written.unwrap().as_str(),
                r#"{"z":123456789012345678901234567890,"a":"日"}"#
            ),
            other => panic!("{other:?}"),
        }
        // Ignored: blank lines, op ids that could not be handed back.
        assert_eq!(parse_line("  \r"), Ok(None));
        assert_eq!(parse_line(r#"{"key":"a","op_id":"x\u001b[2J"}"#), Ok(None));
        // Strays: objects with none of result/error/op_id, other text.
        for stray in [
            r#"{"log":"connected"}"#,
            r#"{"key":"a","progress":0.5}"#,
            "[1,2]",
            "42",
            "loading...",
        ] {
            assert_eq!(
                parse_line(stray),
                Ok(Some(Line::Stray(stray.into()))),
                "{stray}"
            );
        }
        assert_eq!(
            parse_line("\x1b[2Jboom"),
            Ok(Some(Line::Stray("\\x1b[2Jboom".into())))
        );
        // Out of step: no key, a key that is not a string, not JSON.
        let no_key = parse_line(r#"{"result":{"echo":"k1"}}"#).unwrap_err();
        assert!(
            no_key.starts_with(KEY_RULE) && no_key.ends_with(r#"{"result":{"echo":"k1"}}"#),
            "{no_key}"
        );
        assert!(
            parse_line(r#"{"op_id":"op-1"}"#)
                .unwrap_err()
                .starts_with(KEY_RULE)
        );
        let number = parse_line(r#"{"key":5,"error":"x"}"#).unwrap_err();
        assert!(number.contains("as a string, not 5"), "{number}");
        let nan = parse_line(r#"{"key":"a","result":NaN}"#).unwrap_err();
        assert!(
            nan.contains(
                "not valid JSON (expected value at column 21; NaN and Infinity are not JSON"
            ),
            "{nan}"
        );
        let long = format!("{{\"key\":\"\x1b[2J{}", "x".repeat(200));
        let cut = parse_line(&long).unwrap_err();
        assert!(
            cut.contains(r#": {"key":"\x1b[2Jxxx"#) && cut.ends_with("x…") && cut.len() < 300,
            "{cut}"
        );
    }

    #[test]
    fn only_the_head_may_be_answered_and_only_outstanding_items_get_op_ids() {
        let sent = ["k2", "k3"];
        assert_eq!(match_answer("k2", sent, Some("k1")), Ok(()));
        let dup = match_answer("k1", sent, Some("k1")).unwrap_err();
        assert!(dup.starts_with(r#"a second answer for "k1""#), "{dup}");
        let ahead = match_answer("k3", sent, Some("k1")).unwrap_err();
        assert!(
            ahead.starts_with(r#"an answer for "k3" while "k2" was not answered"#),
            "{ahead}"
        );
        let other = match_answer("zz", sent, None).unwrap_err();
        assert!(other.contains("not a request waiting"), "{other}");
        assert!(
            match_answer("k1", [], Some("k1"))
                .unwrap_err()
                .contains("second answer")
        );
        assert_eq!(match_op_id("k3", sent, None), Ok(1));
        let late = match_op_id("k1", sent, Some("k1")).unwrap_err();
        assert!(late.contains("answered already"), "{late}");
    }

    /// A worker that crashes while a child it started holds its stdout
    /// (a Python `subprocess.Popen` inherits it) is noticed when it exits,
    /// with its last words, not at the item's timeout; what it answered
    /// before it exited is still read.
    #[tokio::test]
    async fn a_crash_is_noticed_though_a_child_holds_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let argv = script(
            dir.path(),
            r#"read line
echo '{"key":"a","result":1}'
read line
sleep 600 &
echo "Traceback: boom" >&2
exit 1"#,
        );
        let rules = Rules::default();
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let never = || oneshot::channel::<KillReason>().1;
        let long = Duration::from_secs(600);
        let ok = w.call(&req("a", "{}"), long, &rules, &tx, never()).await;
        assert!(matches!(ok, Ok(Call::Answer(Answer::Done { .. }))));
        let started = std::time::Instant::now();
        let died = w.call(&req("b", "{}"), long, &rules, &tx, never()).await;
        assert!(
            matches!(&died, Err(Answer::Failed { transient: true, class, message, .. })
            if class == "WorkerExited" && message.contains("the worker exited with status 1") && message.contains("boom")),
            "{:?}",
            died.as_ref().err()
        );
        // Well before any timeout: the exit, then half a second of quiet.
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn timeout_restarts_and_kill_stops() {
        let dir = tempfile::tempdir().unwrap();
        let argv = script(dir.path(), "while read line; do sleep 30; done");
        let (tx, _rx) = mpsc::unbounded_channel();
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let (_keep, never) = oneshot::channel::<KillReason>();
        let r = w
            .call(
                &req("a", "{}"),
                Duration::from_millis(300),
                &Rules::default(),
                &tx,
                never,
            )
            .await;
        assert!(matches!(r, Err(Answer::Failed { class, .. }) if class == "Timeout"));
        let mut w = Persistent::start(&argv, None, None, &[]).unwrap();
        let (kill_tx, kill_rx) = oneshot::channel();
        let (request, rules) = (req("b", "{}"), Rules::default());
        let call = w.call(&request, Duration::from_secs(30), &rules, &tx, kill_rx);
        let (r, _) = tokio::join!(call, async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _ = kill_tx.send(KillReason::Shutdown);
        });
        assert!(matches!(r, Ok(Call::Killed(KillReason::Shutdown))));
    }

    #[test]
    fn request_lines_embed_the_payload_verbatim() {
        let r = Request {
            key: "k\"1",
            label: "l",
            attempt: 2,
            op_id: Some("op"),
            run_id: 3,
            payload: "{\"a\": [1, 2]}",
        };
        let v: Value = serde_json::from_str(r.line().trim()).unwrap();
        assert_eq!(v["key"], "k\"1");
        assert_eq!(v["payload"]["a"][1], 2);
        assert_eq!(v["op_id"], "op");
    }
}
