//! What an answer too long to keep says of itself, read as it streams
//! past and dropped: a few small fields of a JSON object (its `key`, its
//! `cost` and `usage`, those in its `result` or `error`, and the error's
//! class), so that a call whose answer passed the limit still has its
//! cost counted and its key matched, with bounded memory whatever its
//! length.

use serde_json::{Map, Value};

/// Fields read at the top of the object.
const TOP: &[&str] = &["key", "cost", "usage"];
/// Fields read one level down, under these keys of the top.
const NESTED: &[(&str, &[&str])] = &[
    ("result", &["cost", "usage"]),
    (
        "error",
        &[
            "error_class",
            "transient",
            "message",
            "retry_after_s",
            "reset_at",
            "cost",
            "usage",
        ],
    ),
];
/// Longest value kept of one field (a longer one is left out).
const MAX_VALUE: usize = 64 * 1024;
/// Longest key compared (no field read has a longer name).
const MAX_KEY: usize = 16;

/// One of the two outer levels of the object.
#[derive(Default, Clone)]
struct Level {
    object: bool,
    /// The next string is a key.
    want_key: bool,
    key: Vec<u8>,
}

/// A value being read: where it goes, at which depth it ends.
struct Capture {
    parent: Option<String>,
    name: String,
    depth: u32,
    text: Vec<u8>,
}

/// The reader, fed the answer's bytes in order.
#[derive(Default)]
pub struct Skim {
    started: bool,
    object: bool,
    /// Not JSON as it goes (a control byte in a string, a stray
    /// bracket), or the object closed: nothing more is read.
    broken: bool,
    done: bool,
    depth: u32,
    in_str: bool,
    in_key: bool,
    escaped: bool,
    levels: [Level; 3],
    /// The top-level key whose value is being read.
    top_key: Option<String>,
    capture: Option<Capture>,
    fields: Map<String, Value>,
}

/// What the skim found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Skimmed {
    /// The answer is a JSON object that read as one to its end, so far.
    pub object: bool,
    /// Its top fields read: `key`, `cost`, `usage`, and `result` and
    /// `error` (when present) as objects of their own fields read.
    pub fields: Map<String, Value>,
}

impl Skim {
    /// Whether reading on can tell more: an object not yet closed.
    pub fn wants_more(&self) -> bool {
        !(self.broken || self.done || (self.started && !self.object))
    }

    /// Whether it is, so far, no JSON object at all (not one, or broken).
    pub fn no_object(&self) -> bool {
        self.broken || (self.started && !self.object)
    }

    pub fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if !self.wants_more() {
                return;
            }
            self.byte(b);
        }
    }

    /// Feeds `part` of an answer to `cut`, the skim of it that starts, with
    /// `kept` (what was kept of it so far), once `part` passes the `room`
    /// left: an answer is skimmed from the read that outgrows its limit.
    pub fn follow(cut: &mut Option<Skim>, kept: &[u8], part: &[u8], room: usize) {
        if cut.is_none() && part.len() > room {
            let mut skim = Skim::default();
            skim.feed(kept);
            *cut = Some(skim);
        }
        if let Some(skim) = cut.as_mut() {
            skim.feed(part);
        }
    }

    pub fn finish(self) -> Skimmed {
        Skimmed {
            object: self.object && !self.broken,
            fields: self.fields,
        }
    }

    fn byte(&mut self, b: u8) {
        if !self.started {
            // Blank space, and a byte-order mark, before the value.
            if b.is_ascii_whitespace() || matches!(b, 0xEF | 0xBB | 0xBF) {
                return;
            }
            self.started = true;
            self.object = b == b'{';
            if self.object {
                self.depth = 1;
                self.levels[1] = Level {
                    object: true,
                    want_key: true,
                    key: Vec::new(),
                };
            }
            return;
        }
        if self.in_str {
            if b < 0x20 {
                self.broken = true;
                return;
            }
            let closing = !self.escaped && b == b'"';
            self.escaped = !self.escaped && b == b'\\';
            if self.in_key && !closing {
                let key = &mut self.levels[self.depth as usize].key;
                if key.len() <= MAX_KEY {
                    key.push(b);
                }
            }
            self.keep(b);
            if closing {
                self.in_str = false;
                self.in_key = false;
            }
            return;
        }
        match b {
            b'"' => {
                self.in_str = true;
                let d = self.depth as usize;
                if d <= 2 && self.levels[d].object && self.levels[d].want_key {
                    self.in_key = true;
                    self.levels[d].key.clear();
                }
                self.keep(b);
            }
            b'{' | b'[' => {
                self.keep(b);
                self.depth += 1;
                if self.depth <= 2 {
                    self.levels[self.depth as usize] = Level {
                        object: b == b'{',
                        want_key: b == b'{',
                        key: Vec::new(),
                    };
                }
            }
            b'}' | b']' => {
                if self.capture.as_ref().is_some_and(|c| c.depth == self.depth) {
                    self.end_capture();
                } else {
                    self.keep(b);
                }
                let d = self.depth as usize;
                if d <= 2 && self.levels[d].object != (b == b'}') {
                    self.broken = true;
                    return;
                }
                self.depth -= 1;
                if self.depth == 0 {
                    self.done = true;
                }
            }
            b',' => {
                if self.capture.as_ref().is_some_and(|c| c.depth == self.depth) {
                    self.end_capture();
                } else {
                    self.keep(b);
                }
                let d = self.depth as usize;
                if d <= 2 && self.levels[d].object {
                    self.levels[d].want_key = true;
                }
            }
            b':' => {
                self.keep(b);
                let d = self.depth as usize;
                if d <= 2 && self.levels[d].object && self.levels[d].want_key {
                    self.levels[d].want_key = false;
                    self.key_read(d);
                }
            }
            _ => self.keep(b),
        }
    }

    /// A key at depth `d` was read (its value comes next): starts reading
    /// the value if it is one of the fields.
    fn key_read(&mut self, d: usize) {
        if self.capture.is_some() {
            return;
        }
        let key = String::from_utf8_lossy(&self.levels[d].key).into_owned();
        let (parent, wanted) = if d == 1 {
            self.top_key = Some(key.clone());
            if NESTED.iter().any(|(p, _)| *p == key) {
                // Present, whatever its value: its fields, if any, go in.
                self.fields
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
            }
            (None, TOP.contains(&key.as_str()))
        } else {
            let parent = self.top_key.clone();
            let wanted = NESTED
                .iter()
                .any(|(p, names)| Some(*p) == parent.as_deref() && names.contains(&key.as_str()));
            (parent, wanted)
        };
        if wanted {
            self.capture = Some(Capture {
                parent,
                name: key,
                depth: self.depth,
                text: Vec::new(),
            });
        }
    }

    fn keep(&mut self, b: u8) {
        if let Some(c) = &mut self.capture
            && c.text.len() <= MAX_VALUE
        {
            c.text.push(b);
        }
    }

    fn end_capture(&mut self) {
        let Some(c) = self.capture.take() else {
            return;
        };
        if c.text.len() > MAX_VALUE {
            return;
        }
        let Ok(value) = serde_json::from_slice::<Value>(&c.text) else {
            return;
        };
        match c.parent {
            None => {
                self.fields.insert(c.name, value);
            }
            Some(parent) => {
                if let Some(Value::Object(m)) = self.fields.get_mut(&parent) {
                    m.insert(c.name, value);
                }
            }
        }
    }
}

/// Skims `text` whole (tests, and an answer already in memory).
#[cfg(test)]
fn skim(text: &str) -> Skimmed {
    let mut s = Skim::default();
    s.feed(text.as_bytes());
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_small_fields_of_a_long_answer_are_read() {
        let big = "x".repeat(200_000);
        let s = skim(&format!(
            r#"{{"key":"k\"1","result":{{"text":"{big}","n":[1,{{"cost":9}}],"cost":0.5,"usage":{{"input_tokens":3}}}},"cost":0.25}}"#
        ));
        assert!(s.object);
        assert_eq!(
            Value::Object(s.fields),
            json!({"key": "k\"1", "cost": 0.25, "result": {"cost": 0.5, "usage": {"input_tokens": 3}}})
        );
        let e = skim(&format!(
            "\u{feff} {{\"key\":\"k\",\"error\":{{\"message\":\"{big}\",\"error_class\":\"Busy\",\"transient\":true,\"retry_after_s\":\"30\"}}}}"
        ));
        assert_eq!(
            Value::Object(e.fields),
            json!({"key": "k", "error": {"error_class": "Busy", "transient": true, "retry_after_s": "30"}})
        );
        // Read as it streams, a byte at a time as well as whole.
        let text = format!(r#"{{"a":"{big}","key":"k","cost":1e-3}}"#);
        let mut s = Skim::default();
        for b in text.as_bytes() {
            s.feed(std::slice::from_ref(b));
        }
        assert_eq!(
            Value::Object(s.finish().fields),
            json!({"key": "k", "cost": 0.001})
        );
    }

    #[test]
    fn what_is_no_object_is_said_at_once() {
        for text in ["xxxx", "[1,2]", "\"s\""] {
            let mut s = Skim::default();
            s.feed(text.as_bytes());
            assert!(s.no_object() && !s.wants_more(), "{text}");
        }
        // A control byte in a string, or a bracket that closes nothing
        // open, is not JSON: reading stops.
        let mut s = Skim::default();
        s.feed(b"{\"result\":\"\0\0\0");
        assert!(s.no_object() && !s.wants_more());
        assert!(!skim(r#"{"a":[1}"#).object);
        let mut open = Skim::default();
        open.feed(br#"{"key":"k","result":"#);
        assert!(open.wants_more() && !open.no_object());
    }
}
