//! Reading an add's input: JSON lines parsed by several threads, every
//! problem collected before anything is decided (a file with a bad line is
//! rejected whole). Either all at once (`parse_lines`), or handed to the
//! store block by block while later blocks are still parsed (`fed`), so
//! the store writes while the input is read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

use crate::key::{self, KeySpec, LineFields};
use crate::model::{Millis, NewItem};
use crate::store::{AddFeed, FeedRefused};
use crate::util::live::Live;
use crate::util::noun;
use crate::util::sanitize;

/// Bad lines listed in full before "and N more".
const SHOWN_ERRORS: usize = 20;
/// Inputs larger than this are parsed by several threads.
pub(super) const PARALLEL_FROM_BYTES: usize = 1024 * 1024;
/// Inputs at least this large go to the store while they are parsed (when
/// it takes them in one transaction): from about 1,000 lines.
pub(super) const FED_FROM_BYTES: usize = 64 * 1024;
/// The size of a block handed to the store while the rest is parsed: small
/// enough that the store starts writing soon after the input is read.
const BLOCK_BYTES: usize = 512 * 1024;
/// ... and a smaller input in eight blocks at least, of this size at the
/// least, so that its parse and its writes overlap too.
const MIN_BLOCK_BYTES: usize = 16 * 1024;

/// Whether `bytes` hold text that is not composed (Unicode NFC), so that
/// a key may have been written otherwise than it is stored
/// (`NewItem::written_key`): such an input is read whole before it is
/// added, not fed to the store as it is parsed. ASCII, and nearly all
/// Japanese text, is composed.
pub(super) fn has_uncomposed_text(bytes: &[u8]) -> bool {
    !bytes.is_ascii()
        && std::str::from_utf8(bytes).is_ok_and(|text| {
            unicode_normalization::is_nfc_quick(text.chars())
                != unicode_normalization::IsNormalized::Yes
        })
}

/// Lines of one part of the input, parsed. Line numbers count from 1 at
/// the part's first line: a part's place in the input is known only once
/// the parts before it are counted, which each part's parse does for
/// itself (counting all the input's lines before splitting it took a
/// pass over it before anything could start).
#[derive(Default)]
struct Parsed {
    items: Vec<NewItem>,
    /// Line number of each item, for naming duplicates.
    lines: Vec<usize>,
    errors: Vec<(usize, String)>,
    /// The part's newlines: the line numbers of the next part start after.
    newlines: usize,
}

/// Parses the lines of `part`. (A part ends with a newline; the empty
/// piece after it is skipped like any blank line.)
fn parse_part(
    part: &[u8],
    spec: &KeySpec,
    priority: &LineFields,
    not_before: Option<Millis>,
) -> Parsed {
    let mut out = Parsed::default();
    for (idx, raw) in part.split(|b| *b == b'\n').enumerate() {
        out.newlines = idx;
        let line_no = 1 + idx;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = match key::line_text(raw) {
            Ok(text) => text,
            Err(e) => {
                out.errors.push((line_no, e.to_string()));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        match key::derive_line_with(text, spec, priority) {
            Ok(mut item) => {
                if not_before.is_some() {
                    item.not_before = not_before;
                }
                out.items.push(item);
                out.lines.push(line_no);
            }
            Err(e) => out.errors.push((line_no, e.to_string())),
        }
    }
    out
}

/// The parts, parsed, as one: their line numbers counted from the first
/// part's first line.
fn joined(parts: Vec<Parsed>) -> Parsed {
    let mut all = Parsed {
        items: Vec::with_capacity(parts.iter().map(|p| p.items.len()).sum()),
        lines: Vec::with_capacity(parts.iter().map(|p| p.lines.len()).sum()),
        ..Parsed::default()
    };
    for p in parts {
        // The lines before this part.
        let before = all.newlines;
        all.items.extend(p.items);
        all.lines.extend(p.lines.iter().map(|l| before + l));
        all.errors
            .extend(p.errors.into_iter().map(|(l, e)| (before + l, e)));
        all.newlines += p.newlines;
    }
    all
}

/// Splits `bytes` after newlines into about `n` parts.
fn split_parts(bytes: &[u8], n: usize) -> Vec<&[u8]> {
    let mut parts = Vec::with_capacity(n);
    let mut start = 0;
    for k in 1..n {
        let Some(end) = line_end(bytes, (bytes.len() * k / n).max(start)) else {
            break;
        };
        parts.push(&bytes[start..end]);
        start = end;
    }
    parts.push(&bytes[start..]);
    parts
}

/// Where a part reaching `at` ends: just after the first newline from
/// `at` on (a part holds whole lines), `None` past the last newline.
fn line_end(bytes: &[u8], at: usize) -> Option<usize> {
    let nl = bytes[at..].iter().position(|b| *b == b'\n')?;
    Some(at + nl + 1)
}

/// `bytes` cut after a newline into parts of `first` bytes or a little
/// more, each twice the last up to `most`: the store waits only for the
/// first part's parse before it writes (a whole block's took a third of
/// a 10,000-line add's time beyond an add of one).
fn growing_parts(bytes: &[u8], first: usize, most: usize) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    let (mut start, mut size) = (0, first.max(1));
    while bytes.len() - start > size {
        let Some(end) = line_end(bytes, start + size) else {
            break;
        };
        parts.push(&bytes[start..end]);
        start = end;
        size = (size * 2).min(most.max(1));
    }
    parts.push(&bytes[start..]);
    parts
}

/// Parses every line, collecting all problems before deciding anything.
/// Large inputs are parsed by several threads, one part each.
pub(super) fn parse_lines(
    bytes: &[u8],
    spec: &KeySpec,
    priority: &LineFields,
    not_before: Option<Millis>,
    source: &str,
) -> anyhow::Result<Vec<NewItem>> {
    let live = Live::stderr();
    let progress = live.on() && bytes.len() > 8 * 1024 * 1024;
    if progress {
        live.show(&format!("checking {source}…"));
    }
    let threads = if bytes.len() < PARALLEL_FROM_BYTES {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    };
    let parsed: Vec<Parsed> = std::thread::scope(|scope| {
        let handles: Vec<_> = split_parts(bytes, threads)
            .into_iter()
            .map(|part| scope.spawn(move || parse_part(part, spec, priority, not_before)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let Parsed {
        items,
        lines,
        mut errors,
        ..
    } = joined(parsed);
    let mut seen = Duplicates::with_capacity(items.len());
    for (item, &line_no) in items.iter().zip(&lines) {
        seen.check(item, line_no, &mut errors);
    }
    drop(seen);
    if progress {
        live.clear();
    }
    if errors.is_empty() {
        return Ok(items);
    }
    Err(rejected(source, errors))
}

/// Keys seen so far, each with the line it was first on.
struct Duplicates<'a>(HashMap<&'a str, usize>);

impl<'a> Duplicates<'a> {
    fn with_capacity(n: usize) -> Self {
        Duplicates(HashMap::with_capacity(n))
    }

    /// Notes `item`'s key, or the error of a key seen before.
    fn check(&mut self, item: &'a NewItem, line_no: usize, errors: &mut Vec<(usize, String)>) {
        if let Some(&first) = self.0.get(item.key.as_str()) {
            errors.push((
                line_no,
                format!("duplicate key {:?} (first on line {first})", item.label),
            ));
        } else {
            self.0.insert(&item.key, line_no);
        }
    }
}

/// An input with bad lines, rejected whole: each line's number and what
/// is wrong with it, in line order.
#[derive(Debug)]
pub struct Rejected {
    pub source: String,
    pub lines: Vec<(usize, String)>,
}

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: rejected, nothing imported: {}",
            self.source,
            noun::count(self.lines.len(), "bad line")
        )?;
        for (line_no, e) in self.lines.iter().take(SHOWN_ERRORS) {
            write!(f, "\n  {}", sanitize::line(&format!("line {line_no}: {e}")))?;
        }
        if self.lines.len() > SHOWN_ERRORS {
            write!(f, "\n  … and {} more", self.lines.len() - SHOWN_ERRORS)?;
        }
        Ok(())
    }
}

impl std::error::Error for Rejected {}

/// The error of an input with bad lines (`errors`, by line number).
pub(super) fn rejected(source: &str, mut errors: Vec<(usize, String)>) -> anyhow::Error {
    errors.sort_by_key(|(line_no, _)| *line_no);
    Rejected {
        source: source.to_string(),
        lines: errors,
    }
    .into()
}

/// The input cut into blocks, parsed by worker threads in any order, each
/// block's result kept in its slot, taken in input order.
struct Blocks<'a> {
    parts: Vec<&'a [u8]>,
    slots: Vec<OnceLock<Parsed>>,
    ready: Mutex<()>,
    parsed: Condvar,
    next: AtomicUsize,
}

impl<'a> Blocks<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        let block = (bytes.len() / 8).clamp(MIN_BLOCK_BYTES, BLOCK_BYTES);
        let parts = growing_parts(bytes, MIN_BLOCK_BYTES, block);
        let slots = parts.iter().map(|_| OnceLock::new()).collect();
        Blocks {
            parts,
            slots,
            ready: Mutex::new(()),
            parsed: Condvar::new(),
            next: AtomicUsize::new(0),
        }
    }

    /// A worker: parses the next block not taken, until none is left.
    fn work(&self, spec: &KeySpec, priority: &LineFields, not_before: Option<Millis>) {
        loop {
            let k = self.next.fetch_add(1, Ordering::Relaxed);
            if k >= self.parts.len() {
                return;
            }
            let part = self.parts[k];
            let _ = self.slots[k].set(parse_part(part, spec, priority, not_before));
            let _guard = self.ready.lock().unwrap_or_else(|e| e.into_inner());
            self.parsed.notify_all();
        }
    }

    /// Block `k`, once parsed.
    fn get(&self, k: usize) -> &Parsed {
        let mut guard = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(p) = self.slots[k].get() {
                return p;
            }
            guard = self.parsed.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Every item by key and then place (among all items), once all are
    /// parsed, and every bad line and key given twice. Beside the store's
    /// writes: the store takes the keys in this order (`AddFeed::by_key`).
    fn check(&self) -> Checked<'_> {
        let mut errors = Vec::new();
        let mut by_key = Vec::new();
        // Each block's first place, to find an item by its place, and the
        // lines before it.
        let mut starts = Vec::with_capacity(self.parts.len());
        let mut befores = Vec::with_capacity(self.parts.len());
        let mut before = 0;
        for k in 0..self.parts.len() {
            let p = self.get(k);
            errors.extend(p.errors.iter().map(|(l, e)| (before + l, e.clone())));
            befores.push(before);
            before += p.newlines;
            let start = by_key.len();
            starts.push(start);
            let keys = p.items.iter().enumerate();
            by_key.extend(keys.map(|(i, item)| (item.key.as_str(), start + i)));
        }
        by_key.sort_unstable();
        let at = |place: usize| {
            let k = starts.partition_point(|&s| s <= place) - 1;
            let p = self.get(k);
            (
                &p.items[place - starts[k]],
                befores[k] + p.lines[place - starts[k]],
            )
        };
        // A run of equal keys: its first (lowest place) was first given.
        let mut run = 0;
        for i in 1..by_key.len() {
            if by_key[i].0 != by_key[run].0 {
                run = i;
                continue;
            }
            let (item, line_no) = at(by_key[i].1);
            let first = at(by_key[run].1).1;
            errors.push((
                line_no,
                format!("duplicate key {:?} (first on line {first})", item.label),
            ));
        }
        Checked { by_key, errors }
    }
}

/// What `Blocks::check` found.
struct Checked<'a> {
    by_key: Vec<(&'a str, usize)>,
    errors: Vec<(usize, String)>,
}

/// The store's side of `fed`: the blocks in input order, then whether the
/// whole input stands (no bad line, no key given twice).
struct Feed<'s, 'a> {
    blocks: &'a Blocks<'a>,
    k: usize,
    checker: Option<std::thread::ScopedJoinHandle<'s, Checked<'a>>>,
    found: Option<Checked<'a>>,
}

impl<'a> Feed<'_, 'a> {
    fn checked(&mut self) -> &mut Checked<'a> {
        if let Some(checker) = self.checker.take() {
            let found = checker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            self.found = Some(found);
        }
        self.found.get_or_insert_with(|| Checked {
            by_key: Vec::new(),
            errors: Vec::new(),
        })
    }
}

impl<'a> AddFeed<'a> for Feed<'_, 'a> {
    fn next_part(&mut self) -> Option<Result<&'a [NewItem], FeedRefused>> {
        let blocks = self.blocks;
        if self.k < blocks.parts.len() {
            let p = blocks.get(self.k);
            self.k += 1;
            return Some(if p.errors.is_empty() {
                Ok(&p.items)
            } else {
                Err(FeedRefused)
            });
        }
        if self.k == blocks.parts.len() {
            self.k += 1;
            if !self.checked().errors.is_empty() {
                return Some(Err(FeedRefused));
            }
        }
        None
    }

    fn by_key(&mut self) -> Vec<(&'a str, usize)> {
        std::mem::take(&mut self.checked().by_key)
    }
}

/// Parses `bytes` while `write` takes the items block by block (in input
/// order, as an [`AddFeed`]), with every bad line and duplicate key
/// checked beside it: `write`'s result, or the input's rejection (which
/// `write` was told by its feed, and wrote nothing) whatever `write`
/// returned. One worker thread fewer than the cores, as `write` keeps one
/// busy.
pub(super) fn fed<T>(
    bytes: &[u8],
    spec: &KeySpec,
    priority: &LineFields,
    not_before: Option<Millis>,
    source: &str,
    write: impl FnOnce(&mut dyn AddFeed<'_>) -> T,
) -> anyhow::Result<T> {
    let blocks = Blocks::new(bytes);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().clamp(2, 8) - 1);
    let (out, problems) = std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| blocks.work(spec, priority, not_before));
        }
        let checker = scope.spawn(|| blocks.check());
        let mut feed = Feed {
            blocks: &blocks,
            k: 0,
            checker: Some(checker),
            found: None,
        };
        let out = write(&mut feed);
        // All of it, even after a store error: a bad input is told first,
        // as when it is read before the store.
        let problems = std::mem::take(&mut feed.checked().errors);
        (out, problems)
    });
    // `add` ends the process next: the items are left to it, not freed
    // one by one (a million items, three strings each: a tenth of a second).
    std::mem::forget(blocks);
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(rejected(source, problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(bytes: &[u8], n: usize) -> (Vec<String>, Vec<usize>, Vec<(usize, String)>) {
        let all = joined(
            split_parts(bytes, n)
                .into_iter()
                .map(|part| parse_part(part, &KeySpec::Explicit, &LineFields::default(), None))
                .collect(),
        );
        let keys = all.items.into_iter().map(|i| i.key).collect();
        (keys, all.lines, all.errors)
    }

    /// Growing parts end after a newline (the last with the input), hold
    /// the input whole and in order, and grow from the first to the most.
    #[test]
    fn growing_parts_cover_the_input_in_lines() {
        let text: String = (0..2_000)
            .map(|i| format!("{{\"key\":\"k{i}\"}}\n"))
            .collect();
        for input in [
            text.as_str(),
            text.trim_end(),
            "",
            "\n",
            "no newline at all",
        ] {
            let parts = growing_parts(input.as_bytes(), 64, 1024);
            assert_eq!(parts.concat(), input.as_bytes(), "{input:.20}");
            for p in &parts[..parts.len() - 1] {
                assert_eq!(p.last(), Some(&b'\n'));
            }
        }
        let sizes: Vec<usize> = growing_parts(text.as_bytes(), 64, 1024)
            .iter()
            .map(|p| p.len())
            .collect();
        // Each a whole line past its size: 64, 128, ... then 1024 each.
        assert!((64..64 + 15).contains(&sizes[0]), "{sizes:?}");
        assert!((1024..1024 + 15).contains(&sizes[5]), "{sizes:?}");
        assert!(sizes[1] > sizes[0] && sizes[4] > sizes[3], "{sizes:?}");
    }

    /// Split into any number of parts, the lines, their numbers and the
    /// errors are those of a single pass.
    #[test]
    fn parts_parse_like_one_pass() {
        let mut text = String::new();
        for i in 1..=40 {
            match i % 9 {
                0 => text.push_str("not json\n"),
                4 => text.push('\n'),
                5 => text.push_str("{\"key\":\"x\"}\r\n"),
                _ => text.push_str(&format!("{{\"key\":\"k{i}\"}}\n")),
            }
        }
        for input in [
            text.clone(),
            text.trim_end().to_string(),
            String::new(),
            "\n\n".into(),
        ] {
            let one = parse_in(input.as_bytes(), 1);
            for n in [2, 3, 7, 64] {
                assert_eq!(parse_in(input.as_bytes(), n), one, "{n} parts of {input:?}");
            }
        }
        let (keys, lines, errors) = parse_in(text.as_bytes(), 5);
        assert_eq!(keys.len(), 31, "40 lines, 5 blank, 4 bad");
        assert_eq!(lines[..3], [1, 2, 3]);
        assert_eq!(
            errors.iter().map(|e| e.0).collect::<Vec<_>>(),
            [9, 18, 27, 36]
        );
    }
}
