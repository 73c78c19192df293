//! The worker's own words: the last [`MAX_TAIL`] bytes of what one attempt
//! printed on stderr, kept while reading (never the whole stream in
//! memory) and cut at the start on a character boundary. The text is kept
//! as the worker wrote it (invalid UTF-8 replaced; the store keeps a NUL
//! as `\x00`, `dialect::sql::kept`); every view makes it inert
//! (`util::sanitize`) before it reaches a terminal.

/// Most stderr bytes kept per attempt.
pub const MAX_TAIL: usize = 16 * 1024;

/// The end of a stream, bounded while it is read.
#[derive(Debug, Default)]
pub struct Tail {
    buf: Vec<u8>,
    /// Bytes dropped from the front.
    dropped: bool,
}

/// What an attempt left on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Words {
    pub text: String,
    /// The start was left out (more than [`MAX_TAIL`] bytes were printed).
    pub cut: bool,
}

impl Tail {
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        // Drop the front in batches, so a stream of small writes does not
        // move the buffer on every one; it never holds more than twice the
        // tail and one read.
        if self.buf.len() > 2 * MAX_TAIL {
            let extra = self.buf.len() - MAX_TAIL;
            self.buf.drain(..extra);
            self.dropped = true;
        }
    }

    /// The tail as text, `None` if nothing but blanks was printed.
    pub fn finish(self) -> Option<Words> {
        let mut start = self.buf.len().saturating_sub(MAX_TAIL);
        let cut = self.dropped || start > 0;
        if cut {
            // A cut may fall inside a character: start at the next one.
            while start < self.buf.len() && (self.buf[start] & 0xC0) == 0x80 {
                start += 1;
            }
        }
        let text = String::from_utf8_lossy(&self.buf[start..]).into_owned();
        (!text.trim().is_empty()).then_some(Words { text, cut })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_everything_below_the_limit() {
        let mut t = Tail::default();
        t.push(b"one\n");
        t.push("二\n".as_bytes());
        assert_eq!(
            t.finish(),
            Some(Words {
                text: "one\n二\n".into(),
                cut: false
            })
        );
    }

    #[test]
    fn blank_output_is_nothing() {
        let mut t = Tail::default();
        t.push(b" \n\n");
        assert_eq!(t.finish(), None);
        assert_eq!(Tail::default().finish(), None);
    }

    #[test]
    fn keeps_the_last_bytes_bounded_and_cut_on_a_character() {
        let mut t = Tail::default();
        // 3-byte characters, pushed in odd-sized pieces: the kept start
        // falls inside one at some point.
        let line = "夜間バッチの記録\n".repeat(50);
        for _ in 0..100 {
            for piece in line.as_bytes().chunks(7) {
                t.push(piece);
                assert!(t.buf.len() <= 2 * MAX_TAIL + 7);
            }
        }
        t.push("最後の行\n".as_bytes());
        let w = t.finish().unwrap();
        assert!(w.cut);
        assert!(w.text.len() <= MAX_TAIL && w.text.len() > MAX_TAIL - 4);
        assert!(!w.text.contains('\u{FFFD}'), "a character was split");
        assert!(w.text.ends_with("記録\n最後の行\n"));
    }
}
