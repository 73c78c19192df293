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
//!   `{"op_id": "..."}` on stdout (stored at once, as in process mode);
//! - the answer, one line on stdout: `{"result": <any JSON>}` (a `null` or
//!   absent result is the outcome `empty`), or
//!   `{"error": {"error_class": "...", "transient": true, "message": "...", "retry_after_s": 30}}`;
//!   either may carry `"cost": 0.01` and `"key"` (checked when present).
//!   Lines that are not JSON objects are ignored (stray prints; the last one
//!   is quoted if the worker then dies); a JSON object that is none of these
//!   is a protocol error.
//!
//! Timeouts kill the worker's process group and start a fresh worker; a
//! worker that exits mid-item fails the item (transient) and is restarted.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot};

use super::classify::{ErrorLine, Rules, Verdict, bound_message};
use super::worker::{KillReason, Report};

/// Longest answer line accepted (the result is bounded like stdout in
/// process mode).
const MAX_LINE: usize = super::worker::MAX_STDOUT + 64 * 1024;

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
    /// The answer line being read (kept here so reading can be cancelled).
    line: Vec<u8>,
    /// The last stdout line that was not part of the protocol.
    stray: Option<String>,
}

/// One protocol line from the worker.
#[derive(Debug)]
pub enum Line {
    /// An operation id for the item being worked on (or the one named).
    OpId { key: Option<String>, op_id: String },
    /// The answer to the oldest unanswered request.
    Answer {
        key: Option<String>,
        obj: serde_json::Map<String, Value>,
    },
}

/// What became of one call.
pub enum Call {
    Answer(Verdict),
    /// The runner stopped the worker (it must be started again).
    Killed(KillReason),
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
        let mut cmd = match program {
            Some(path) => Command::new(path),
            None => Command::new(&argv[0]),
        };
        #[cfg(unix)]
        if program.is_some() {
            cmd.arg0(&argv[0]);
        }
        cmd.args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("NIGHTSHIFT_MODE", "persistent")
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        if let Some(dir) = dir {
            cmd.current_dir(dir);
        }
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = super::children::spawn(&mut cmd)?;
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
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                let mut pending = Vec::new();
                while let Ok(n) = err.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(pos) = pending.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = pending.drain(..=pos).collect();
                        let text = String::from_utf8_lossy(&line).trim().to_string();
                        if !text.is_empty() {
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
            line: Vec::new(),
            stray: None,
        })
    }

    /// The worker's process id.
    pub fn pid(&self) -> Option<u32> {
        self.pgid
    }

    /// Queues a request; it is written while `next` waits for answers.
    pub fn send(&mut self, req: &Request<'_>) {
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        self.out.extend_from_slice(req.line().as_bytes());
    }

    /// The next protocol line, writing queued requests meanwhile (a worker
    /// blocked on a full stdout pipe must never wait for us to finish
    /// writing). Cancel-safe: partial lines and writes are kept. `Err` when
    /// the worker broke: exited, closed its stdout, or sent a line over
    /// the limit (it must then be killed and started again).
    pub async fn next(&mut self) -> Result<Line, Verdict> {
        loop {
            let read = if self.sent < self.out.len() {
                let Persistent {
                    stdin,
                    stdout,
                    out,
                    sent,
                    line,
                    ..
                } = self;
                tokio::select! {
                    biased;
                    r = fill_line(stdout, line) => r,
                    w = stdin.write(&out[*sent..]) => {
                        match w {
                            Ok(n) if n > 0 => *sent += n,
                            Ok(_) => return Err(self.died("could not send the item: stdin closed").await),
                            Err(e) => return Err(self.died(&format!("could not send the item: {e}")).await),
                        }
                        continue;
                    }
                }
            } else {
                fill_line(&mut self.stdout, &mut self.line).await
            };
            let text = match read {
                Ok(true) => String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned(),
                Ok(false) => return Err(self.died("the worker exited").await),
                Err(e) => {
                    self.line = Vec::new();
                    return Err(protocol_error(&e));
                }
            };
            let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(&text) else {
                if !text.trim().is_empty() {
                    self.stray = Some(bound_message(text.trim()));
                }
                continue; // a stray print, not part of the protocol
            };
            let key = obj.get("key").and_then(Value::as_str).map(str::to_string);
            if !obj.contains_key("result") && !obj.contains_key("error") {
                return match obj.get("op_id").and_then(Value::as_str) {
                    Some(op) if super::worker::valid_op_id(op) => Ok(Line::OpId {
                        key,
                        op_id: op.to_string(),
                    }),
                    Some(_) => continue,
                    None => Ok(Line::Answer { key, obj }),
                };
            }
            return Ok(Line::Answer { key, obj });
        }
    }

    /// Sends one item and waits for its answer, the timeout, or a kill.
    pub async fn call(
        &mut self,
        req: &Request<'_>,
        timeout: Duration,
        rules: &Rules,
        reports: &mpsc::UnboundedSender<Report>,
        kill: oneshot::Receiver<KillReason>,
    ) -> Result<Call, Verdict> {
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
                    // Each id is a store write: a flood is bounded.
                    Line::OpId { op_id, .. } if op_ids < super::worker::MAX_OP_IDS => {
                        op_ids += 1;
                        let _ = reports.send(Report::OpId(op_id));
                    }
                    Line::OpId { .. } => {}
                    Line::Answer { key, obj } => {
                        if let Some(k) = key
                            && k != req.key
                        {
                            return Err(protocol_error(&format!(
                                "answer for key {k:?} while {:?} was asked",
                                req.key
                            )));
                        }
                        return Ok(answer(&obj, rules));
                    }
                }
            }
        };
        tokio::select! {
            result = exchange => result.map(Call::Answer),
            () = tokio::time::sleep(timeout) => {
                self.kill().await;
                Err(timed_out(timeout))
            }
            reason = killed => {
                self.kill().await;
                Ok(Call::Killed(reason))
            }
        }
    }

    /// The worker broke mid-item: a transient failure naming why.
    async fn died(&mut self, why: &str) -> Verdict {
        let status = tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await;
        let status = match status {
            Ok(Ok(s)) => format!(" ({s})"),
            _ => String::new(),
        };
        // Let the stderr reader take in the worker's last words.
        if let Some(task) = self.stderr_task.take() {
            let _ = tokio::time::timeout(Duration::from_millis(500), task).await;
        }
        let last = self
            .stderr_last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut message = match last {
            Some(l) => format!("{why}{status}: {l}"),
            None => format!("{why}{status}"),
        };
        if let Some(stray) = &self.stray {
            message.push_str(&format!(" (last non-protocol stdout line: {stray})"));
        }
        Verdict::Failed {
            transient: true,
            class: "WorkerExited".into(),
            message: bound_message(&message),
            retry_after: None,
            cost: None,
        }
    }

    /// Stops the worker and everything in its process group.
    pub async fn kill(&mut self) {
        signal_group(self.pgid);
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
            signal_group(pgid);
            let _ = child.kill().await;
        }
        signal_group(pgid);
    }
}

#[cfg(unix)]
fn signal_group(pgid: Option<u32>) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    if let Some(pgid) = pgid.and_then(|p| i32::try_from(p).ok()).filter(|p| *p > 1) {
        let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
    }
}

#[cfg(not(unix))]
fn signal_group(_pgid: Option<u32>) {}

pub(super) fn protocol_error(message: &str) -> Verdict {
    Verdict::Failed {
        transient: true,
        class: "ProtocolError".into(),
        message: bound_message(message),
        retry_after: None,
        cost: None,
    }
}

/// The verdict for an item whose worker gave no answer within `timeout`.
pub fn timed_out(timeout: Duration) -> Verdict {
    Verdict::Failed {
        transient: true,
        class: "Timeout".into(),
        message: format!(
            "no answer within {}; the worker was restarted",
            crate::duration::format_duration(timeout)
        ),
        retry_after: None,
        cost: None,
    }
}

/// Reads into `line` up to the next newline (not kept): `Ok(true)` with a
/// whole line, `Ok(false)` at end of stream (a last unterminated line is
/// dropped: the worker died writing it). Bounded by `MAX_LINE`.
async fn fill_line(r: &mut BufReader<ChildStdout>, line: &mut Vec<u8>) -> Result<bool, String> {
    loop {
        let buf = r
            .fill_buf()
            .await
            .map_err(|e| format!("reading the worker's answer: {e}"))?;
        if buf.is_empty() {
            return Ok(false);
        }
        let (take, complete) = match buf.iter().position(|b| *b == b'\n') {
            Some(pos) => (pos + 1, true),
            None => (buf.len(), false),
        };
        let room = MAX_LINE.saturating_sub(line.len());
        if take.saturating_sub(usize::from(complete)) > room {
            r.consume(take);
            return Err(format!(
                "the worker wrote a stdout line longer than {} KiB; it was restarted",
                MAX_LINE / 1024
            ));
        }
        line.extend_from_slice(&buf[..take - usize::from(complete)]);
        r.consume(take);
        if complete {
            return Ok(true);
        }
    }
}

/// The verdict an answer object carries.
pub fn answer(obj: &serde_json::Map<String, Value>, rules: &Rules) -> Verdict {
    let cost = obj
        .get("cost")
        .and_then(Value::as_f64)
        .filter(|c| c.is_finite());
    if let Some(err) = obj.get("error") {
        let line = match err {
            Value::Object(e) => ErrorLine {
                error_class: e
                    .get("error_class")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                transient: e.get("transient").and_then(Value::as_bool),
                message: e.get("message").and_then(Value::as_str).map(str::to_string),
                retry_after: e
                    .get("retry_after_s")
                    .and_then(Value::as_f64)
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(|s| Duration::from_secs_f64(s.min(86_400.0))),
                cost: None,
            },
            Value::String(m) => ErrorLine {
                message: Some(m.clone()),
                ..ErrorLine::default()
            },
            _ => ErrorLine::default(),
        };
        let class = line.error_class.unwrap_or_else(|| "WorkerError".into());
        let transient = line
            .transient
            .unwrap_or_else(|| rules.transient_error_classes.iter().any(|c| c == &class));
        return Verdict::Failed {
            transient,
            class: bound_message(&class),
            message: bound_message(
                line.message
                    .as_deref()
                    .unwrap_or("the worker reported an error"),
            ),
            retry_after: line.retry_after,
            cost,
        };
    }
    match obj.get("result") {
        None => protocol_error("an answer line with neither \"result\" nor \"error\""),
        Some(Value::Null) => Verdict::Done {
            empty: true,
            result: None,
            cost,
        },
        Some(Value::String(s)) if s.is_empty() => Verdict::Done {
            empty: true,
            result: None,
            cost,
        },
        Some(result) => {
            let cost = cost.or_else(|| {
                result
                    .get("cost")
                    .and_then(Value::as_f64)
                    .filter(|c| c.is_finite())
            });
            Verdict::Done {
                empty: false,
                result: Some(result.to_string()),
                cost,
            }
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
while read line; do
  case "$line" in
    *'"key":"err"'*) echo '{"error":{"error_class":"BadRequest","transient":false,"message":"no"}}';;
    *'"key":"op"'*) echo '{"op_id":"op-1"}'; echo '{"result":{"ok":true},"cost":0.5}';;
    *'"key":"empty"'*) echo '{"result":null}';;
    *'"key":"die"'*) echo "dying" >&2; exit 3;;
    *) echo '{"result":"fine"}';;
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
            matches!(ok, Ok(Call::Answer(Verdict::Done { empty: false, result: Some(r), .. })) if r == "\"fine\"")
        );
        let op = w.call(&req("op", "{}"), t, &rules, &tx, never()).await;
        assert!(matches!(op, Ok(Call::Answer(Verdict::Done { cost: Some(c), .. })) if c == 0.5));
        assert_eq!(rx.try_recv().unwrap(), Report::OpId("op-1".into()));
        let err = w.call(&req("err", "{}"), t, &rules, &tx, never()).await;
        assert!(
            matches!(err, Ok(Call::Answer(Verdict::Failed { transient: false, class, .. })) if class == "BadRequest")
        );
        let empty = w.call(&req("empty", "{}"), t, &rules, &tx, never()).await;
        assert!(matches!(
            empty,
            Ok(Call::Answer(Verdict::Done { empty: true, .. }))
        ));
        let died = w.call(&req("die", "{}"), t, &rules, &tx, never()).await;
        assert!(
            matches!(&died, Err(Verdict::Failed { transient: true, class, message, .. })
            if class == "WorkerExited" && message.contains("dying")),
            "{:?}",
            died.as_ref().err()
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
        assert!(matches!(r, Err(Verdict::Failed { class, .. }) if class == "Timeout"));
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
