//! Persistent worker mode: one long-lived worker process per slot, speaking
//! JSON lines, so a worker with a heavy start-up (Python importing an SDK)
//! pays it once instead of once per item.
//!
//! Protocol (one item at a time per process):
//! - request, one line on the worker's stdin:
//!   `{"key": "...", "label": "...", "attempt": 1, "op_id": null, "run_id": 7, "payload": {...}}`
//! - while working, the worker may report an operation id:
//!   `{"op_id": "..."}` on stdout (stored at once, as in process mode);
//! - the answer, one line on stdout: `{"result": <any JSON>}` (a `null` or
//!   absent result is the outcome `empty`), or
//!   `{"error": {"error_class": "...", "transient": true, "message": "...", "retry_after_s": 30}}`;
//!   either may carry `"cost": 0.01`. Lines that are not JSON objects are ignored
//!   (stray prints), a `key` that is not the current item's is a protocol error.
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
}

/// What became of one call.
pub enum Call {
    Answer(Verdict),
    /// The runner stopped the worker (it must be started again).
    Killed(KillReason),
}

impl Persistent {
    pub fn start(
        argv: &[String],
        dir: Option<&Path>,
        env: &[(&'static str, String)],
    ) -> std::io::Result<Persistent> {
        let mut cmd = Command::new(&argv[0]);
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
        let mut child = cmd.spawn()?;
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
        })
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
        let exchange = async {
            if let Err(e) = self.stdin.write_all(req.line().as_bytes()).await {
                return Err(self.died(&format!("could not send the item: {e}")).await);
            }
            let _ = self.stdin.flush().await;
            let mut op_ids = 0;
            loop {
                let line = match read_line(&mut self.stdout).await {
                    Ok(Some(line)) => line,
                    Ok(None) => return Err(self.died("the worker exited").await),
                    Err(e) => return Err(self.died(&e).await),
                };
                let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(&line) else {
                    continue; // a stray print, not part of the protocol
                };
                if let Some(k) = obj.get("key").and_then(Value::as_str)
                    && k != req.key
                {
                    return Err(protocol_error(&format!(
                        "answer for key {k:?} while {:?} was asked",
                        req.key
                    )));
                }
                if let Some(op) = obj.get("op_id").and_then(Value::as_str)
                    && !obj.contains_key("result")
                    && !obj.contains_key("error")
                {
                    if super::worker::valid_op_id(op) && op_ids < super::worker::MAX_OP_IDS {
                        op_ids += 1;
                        let _ = reports.send(Report::OpId(op.to_string()));
                    }
                    continue;
                }
                return Ok(answer(&obj, rules));
            }
        };
        tokio::select! {
            result = exchange => result.map(Call::Answer),
            () = tokio::time::sleep(timeout) => {
                self.kill().await;
                Err(Verdict::Failed {
                    transient: true,
                    class: "Timeout".into(),
                    message: format!("no answer within {}; the worker was restarted", crate::duration::format_duration(timeout)),
                    retry_after: None,
                    cost: None,
                })
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
        let message = match last {
            Some(l) => format!("{why}{status}: {l}"),
            None => format!("{why}{status}"),
        };
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
    pub async fn shutdown(mut self, grace: Duration) {
        let _ = self.stdin.shutdown().await;
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            self.kill().await;
        }
        signal_group(self.pgid);
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

fn protocol_error(message: &str) -> Verdict {
    Verdict::Failed {
        transient: true,
        class: "ProtocolError".into(),
        message: bound_message(message),
        retry_after: None,
        cost: None,
    }
}

/// Reads one line, bounded. `Ok(None)` at end of stream.
async fn read_line(r: &mut BufReader<ChildStdout>) -> Result<Option<String>, String> {
    let mut line = Vec::new();
    loop {
        let buf = r
            .fill_buf()
            .await
            .map_err(|e| format!("reading the worker's answer: {e}"))?;
        if buf.is_empty() {
            return Ok(if line.is_empty() {
                None
            } else {
                Some(String::from_utf8_lossy(&line).into_owned())
            });
        }
        if let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            line.extend_from_slice(&buf[..pos]);
            r.consume(pos + 1);
            return Ok(Some(String::from_utf8_lossy(&line).into_owned()));
        }
        let n = buf.len();
        line.extend_from_slice(buf);
        r.consume(n);
        if line.len() > MAX_LINE {
            return Err(format!("an answer line longer than {MAX_LINE} bytes"));
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
        None | Some(Value::Null) => Verdict::Done {
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
        let mut w = Persistent::start(&argv, None, &[]).unwrap();
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
        let mut w = Persistent::start(&argv, None, &[]).unwrap();
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
        let mut w = Persistent::start(&argv, None, &[]).unwrap();
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
