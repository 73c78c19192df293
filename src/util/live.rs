//! A line redrawn in place on stderr while work goes on (`run`'s progress,
//! `add`'s count): written only to a terminal, and cut to its width, read
//! again at each redraw (the window may change). A line wider than the
//! terminal wraps onto a second row, and `\r\x1b[2K` clears only the row
//! the cursor is on: each redraw left a copy of the first row behind.

use std::io::{IsTerminal, Write};

use super::{sanitize, text};

/// The line on stderr, when stderr is a terminal (else nothing is written).
pub struct Live {
    on: bool,
}

impl Live {
    pub fn stderr() -> Live {
        Live {
            on: std::io::stderr().is_terminal(),
        }
    }

    /// Whether the line is shown (stderr is a terminal).
    #[must_use]
    pub fn on(&self) -> bool {
        self.on
    }

    /// The cells a line may take now: the terminal's width but its last
    /// column (a terminal that wraps as soon as the last column is written
    /// would put the cursor on the next row). `None`: not a terminal, or
    /// one that gives no width.
    #[must_use]
    pub fn room(&self) -> Option<usize> {
        if !self.on {
            return None;
        }
        let cols = crossterm::terminal::window_size().ok()?.columns;
        (cols > 1).then(|| usize::from(cols) - 1)
    }

    /// Replaces the line with `line`, made inert and cut (with `…`) to
    /// [`Live::room`].
    pub fn show(&self, line: &str) {
        if !self.on {
            return;
        }
        let line = sanitize::line(line);
        let line = match self.room() {
            Some(room) => text::cut(&line, room),
            None => line,
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{line}");
        let _ = err.flush();
    }

    /// Takes the line away (before what is printed after it).
    pub fn clear(&self) {
        if !self.on {
            return;
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K");
        let _ = err.flush();
    }
}
