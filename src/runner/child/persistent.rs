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

mod died;
mod lines;
mod requests;

pub use lines::{KEY_RULE, Line, match_answer, match_op_id, parse_line, quote};
pub use requests::{Request, Span};

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{mpsc, oneshot};

use super::output::{MARKER, Report, StderrLines};
use super::skim::Skim;
use super::{KillReason, kill_group};
use crate::runner::classify::{self, Answer, Rules, bound_message};
use died::Broke;
use lines::{cut_answer, fill_line};

/// Once the worker has exited, how long its stdout may go quiet before the
/// worker is taken for dead though the pipe is still open (a child it
/// started holds it): what it wrote before exiting is in the pipe already.
const AFTER_EXIT: Duration = Duration::from_millis(500);

/// How long a worker's stderr may stay open once its group is gone, for
/// its last words to be read: only a process that left the group
/// (`setsid`) can hold it past that.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

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

/// What became of one call.
pub enum Call {
    Answer(Answer),
    /// The runner stopped the worker (it must be started again).
    Killed(KillReason),
}

/// Where a worker's `@nightshift` stderr lines go (cut, inert) as they
/// come: process mode's channel, which persistent mode does not read. The
/// run notes them in one notice shared by its workers, a crashed one's
/// too (`runner::unread`).
pub type Reports = std::sync::Arc<dyn Fn(String) + Send + Sync>;

fn ignore_reports() -> Reports {
    std::sync::Arc::new(|_| {})
}

impl Persistent {
    /// Starts the worker. `program` is `argv[0]` found in `PATH` (see
    /// `worker::resolve`); the worker still sees `argv[0]` as written.
    pub fn start(
        argv: &[String],
        program: Option<&Path>,
        dir: Option<&Path>,
        env: &[(&'static str, String)],
    ) -> std::io::Result<Persistent> {
        Persistent::start_reporting(argv, program, dir, env, &ignore_reports())
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
                // A marker line is noted (not read: see `Reports`), never
                // taken for the worker's last words, as in process mode.
                let on_line = |line: &[u8]| {
                    let text = String::from_utf8_lossy(line);
                    let text = text.trim();
                    if text.starts_with(MARKER) {
                        reports(bound_message(text));
                    } else if !text.is_empty() {
                        *last.lock().unwrap_or_else(|p| p.into_inner()) = Some(bound_message(text));
                    }
                };
                let mut buf = vec![0u8; 16 * 1024];
                let mut lines = StderrLines::default();
                while let Ok(n) = err.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    lines.push(&buf[..n], on_line);
                }
                lines.finish(on_line);
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
            stderr_task,
            ..
        } = self;
        // Dropping closes the pipe (`shutdown()` on a pipe does not).
        drop(stdin);
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            kill_group(pgid);
            let _ = child.kill().await;
        }
        kill_group(pgid);
        // What it wrote on stderr as it exited is noted before the run ends
        // and counts its notices (`Reports`).
        if let Some(task) = stderr_task {
            let _ = tokio::time::timeout(DRAIN_GRACE, task).await;
        }
    }
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
}
