//! Plain text tables for the terminal: columns padded by display width,
//! every cell made inert first (cells may hold worker text).

use crate::util::{sanitize, text};

pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Widest a column may get, in cells; longer cells are cut with `…`.
    max_width: usize,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            max_width: 60,
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .into_iter()
            .map(|c| text::cut(&sanitize::line(&c), self.max_width).into_owned())
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
            for (i, cell) in row.iter().enumerate() {
                if i < last {
                    out.push_str(&text::pad(cell, widths[i] + 2));
                } else {
                    out.push_str(cell);
                }
            }
            out.push('\n');
        }
        out.pop();
        out
    }
}
