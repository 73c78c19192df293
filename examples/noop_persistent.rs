//! A compiled no-op persistent worker for `bench/persistent.sh`: answers
//! every request line with `{"result":1}`, flushing whenever no further
//! request is already waiting. Measures the runner, not the worker.

use std::io::{BufRead, BufWriter, Write};

fn main() -> std::io::Result<()> {
    let mut input = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin().lock());
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return out.flush();
        }
        out.write_all(b"{\"result\":1}\n")?;
        if input.buffer().is_empty() {
            out.flush()?;
        }
    }
}
