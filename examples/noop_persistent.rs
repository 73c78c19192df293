//! A compiled no-op persistent worker for `bench/persistent.sh`: answers
//! every request line with `{"key":...,"result":1}`, flushing whenever no
//! further request is already waiting. Measures the runner, not the worker.

use std::io::{BufRead, BufWriter, Write};

/// `{"key":"..."` at the start of a request (the runner writes the key
/// first), echoed as is rather than decoded and encoded again.
fn key_prefix(line: &[u8]) -> Option<&[u8]> {
    const START: &[u8] = b"{\"key\":\"";
    let rest = line.strip_prefix(START)?;
    let mut escaped = false;
    for (i, &b) in rest.iter().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' => escaped = true,
            b'"' => return Some(&line[..START.len() + i + 1]),
            _ => {}
        }
    }
    None
}

fn main() -> std::io::Result<()> {
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return out.flush();
        }
        match key_prefix(&line) {
            Some(prefix) => out.write_all(prefix)?,
            None => {
                let request: serde_json::Value = serde_json::from_slice(&line)?;
                write!(out, "{{\"key\":{}", request["key"])?;
            }
        }
        out.write_all(b",\"result\":1}\n")?;
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
}
