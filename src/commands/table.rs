//! Plain text tables for the terminal: columns padded by display width,
//! every cell made inert first (cells may hold worker text). On a
//! terminal the last column (an error, a message) is cut to its width,
//! so a row is one line; piped, nothing is cut but to `max_width`.

use std::io::IsTerminal;

use crate::util::{sanitize, text};

/// The least room a last column is cut to: with less, the line is left
/// whole for the terminal to wrap (a cut would leave next to nothing).
const LEAST_LAST: usize = 8;

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Widest a column may get, in cells; longer cells are cut with `…`.
    max_width: usize,
    /// The terminal's width, when stdout is one: no line is longer.
    fit: Option<usize>,
    /// Columns never cut to `max_width` (facts a cut would hide, as the
    /// last of an item's waiting reasons and until when).
    whole: Vec<usize>,
}

/// Stdout's width in cells, when it is a terminal.
fn terminal_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    crossterm::terminal::size()
        .ok()
        .map(|(cols, _)| usize::from(cols))
        .filter(|w| *w > 0)
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            max_width: 60,
            fit: terminal_width(),
            whole: Vec::new(),
        }
    }

    /// Leaves column `i` whole, however wide.
    #[must_use]
    pub fn whole(mut self, i: usize) -> Table {
        self.whole.push(i);
        self
    }

    /// The table for a terminal `width` cells wide (`None`: not one).
    #[cfg(test)]
    #[must_use]
    pub fn fit(mut self, width: Option<usize>) -> Table {
        self.fit = width;
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let c = sanitize::line(&c);
                let most = if self.whole.contains(&i) {
                    usize::MAX
                } else {
                    self.max_width
                };
                text::cut(&c, most).into_owned()
            })
            .collect();
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| text::width(h)).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(text::width(cell));
                }
            }
        }
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let last = row.len().saturating_sub(1);
            let before: usize = widths.iter().take(last).map(|w| w + 2).sum();
            // What the terminal leaves the last cell, if it cuts it at all.
            let room = self
                .fit
                .map(|w| w.saturating_sub(before))
                .filter(|room| *room >= LEAST_LAST);
            for (i, cell) in row.iter().enumerate() {
                if i < last {
                    out.push_str(&text::pad(cell, widths[i] + 2));
                } else {
                    out.push_str(&text::cut(cell, room.unwrap_or(usize::MAX)));
                }
            }
            out.push('\n');
        }
        out.pop();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Table;
    use crate::util::text;

    fn errors() -> Table {
        let mut t = Table::new(&["KEY", "STATE", "LAST ERROR"]);
        t.row(vec![
            "記事-1".into(),
            "failed".into(),
            "Exit1: 上流が応答しません、もう一度".into(),
        ]);
        t.row(vec!["k2".into(), "done".into(), String::new()]);
        t
    }

    /// On a terminal a row is one line: its last cell cut, with `…`, by
    /// display width; piped, it is whole.
    #[test]
    fn on_a_terminal_the_last_column_is_cut_to_its_width() {
        let out = errors().fit(Some(40)).render();
        for line in out.lines() {
            assert!(text::width(line) <= 40, "{line:?}");
        }
        assert!(out.lines().nth(1).unwrap().ends_with('…'), "{out}");
        let whole = errors().fit(None).render();
        assert!(whole.contains("もう一度"), "{whole}");
        // A terminal too narrow for the other columns: the line is left
        // whole, for the terminal to wrap.
        let narrow = errors().fit(Some(20)).render();
        assert!(narrow.contains("もう一度"), "{narrow}");
    }
}
