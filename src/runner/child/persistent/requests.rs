//! The worker's stdin side: a request's line, where it lies in the stream
//! written ([`Span`]), and what of that stream the worker never took.

use serde_json::Value;
use tokio::process::ChildStdin;

use super::Persistent;

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

impl Persistent {
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

#[cfg(test)]
mod tests {
    use super::*;

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
