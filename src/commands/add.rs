//! `nightshift add`: JSON lines in, items added idempotently (a key whose
//! item was done and pruned is present too: its tombstone). A file with any
//! bad line is rejected whole, every bad line named, nothing imported.

use std::collections::HashMap;
use std::io::{IsTerminal, Read};
use std::path::Path;

use anyhow::Context;

use super::{Ctx, Exit, out, out_json, user_error};
use crate::batch_name;
use crate::cli::AddArgs;
use crate::key::{self, KeySpec, Priority};
use crate::model::{AddReport, NewItem};
use crate::util::noun;
use crate::util::sanitize;
use crate::util::signals::Stop;
use crate::util::time::{now_ms, rfc3339};

/// Bad lines listed in full before "and N more".
const SHOWN_ERRORS: usize = 20;
/// Inputs with more lines than this show progress on a terminal.
const PROGRESS_FROM: usize = 50_000;
/// Inputs larger than this are parsed by several threads.
const PARALLEL_FROM_BYTES: usize = 1024 * 1024;

pub fn run(ctx: &Ctx, args: &AddArgs) -> anyhow::Result<Exit> {
    let source = if args.file == Path::new("-") {
        "stdin".to_string()
    } else {
        args.file.display().to_string()
    };
    let bytes = read_input(&args.file)?;
    let spec = match &args.key_fields {
        Some(fields) => {
            if fields.iter().any(|f| f.trim().is_empty()) {
                return Err(user_error("--key-fields: field names must not be empty"));
            }
            KeySpec::from_fields(Some(fields))
        }
        None => KeySpec::from_fields(ctx.batch_config(&args.batch).key_fields.as_deref()),
    };
    if args
        .priority_field
        .as_ref()
        .is_some_and(|f| f.trim().is_empty())
    {
        return Err(user_error(
            "--priority-field: the field name must not be empty",
        ));
    }
    let priority = Priority {
        field: args
            .priority_field
            .clone()
            .or_else(|| ctx.batch_config(&args.batch).priority_field),
        default: args.priority.unwrap_or(0),
    };
    let mut items = parse_lines(key::without_bom(&bytes), &spec, &priority, &source)?;
    let not_before = args.not_before.map(|w| w.at(now_ms()));
    if not_before.is_some() {
        for item in &mut items {
            item.not_before = not_before;
        }
    }
    if items.is_empty() {
        // A source with nothing new is a normal night: say so and exit 0,
        // writing nothing (the store is still opened, so a missing or
        // unusable one is an error as always).
        ctx.open_read()?;
        print_report(args, &AddReport::default(), false, not_before)?;
        return Ok(Exit::Ok);
    }
    if args.dry_run {
        let store = ctx.open_read()?;
        let new_batch = !store.batch_names()?.contains(&args.batch);
        let report = store.add_dry_run(&args.batch, &items)?;
        print_report(args, &report, new_batch, not_before)?;
        return Ok(Exit::Ok);
    }

    let mut store = ctx.open_write()?;
    // A signal stops the add between chunks (or rolls back a one-transaction
    // add), and the error says exactly what was added.
    store.set_stop(Stop::on_signals().context("installing signal handlers")?);
    let new_batch = !store.batch_names()?.contains(&args.batch);
    let progress = std::io::stderr().is_terminal() && items.len() > PROGRESS_FROM;
    let total = items.len();
    let result = store.add_items(&args.batch, &items, now_ms(), |n| {
        if progress {
            eprint!("\radding {n}/{total}…");
        }
    });
    if progress {
        eprint!("\r{:40}\r", "");
    }
    let report = result?;
    print_report(args, &report, new_batch, not_before)?;
    if new_batch
        && !args.json
        && !ctx.config.batches.is_empty()
        && ctx.config.batch(&args.batch).is_none()
    {
        // The table header is printed as TOML to paste (`[batch."記事"]`).
        eprintln!(
            "note: batch {} is new and has no {} section in the config",
            batch_name::shown(&args.batch),
            sanitize::line(&batch_name::toml_table(&args.batch))
        );
    }
    Ok(Exit::Ok)
}

fn print_report(
    args: &AddArgs,
    report: &AddReport,
    new_batch: bool,
    not_before: Option<crate::model::Millis>,
) -> anyhow::Result<()> {
    if args.json {
        out_json(&serde_json::json!({
            "batch": args.batch,
            "dry_run": args.dry_run,
            "added": report.added,
            "present": report.present,
            "pruned": report.pruned,
            "pruned_between": report.pruned_span.map(|(first, last)| [rfc3339(first), rfc3339(last)]),
            "new_batch": new_batch,
            "priority": args.priority,
            "priority_field": args.priority_field,
            "not_before": not_before.map(rfc3339),
        }))?;
    } else {
        let summary = if args.dry_run {
            report.summary_as("would add")
        } else {
            report.summary()
        };
        let mut order = Vec::new();
        if let Some(p) = args.priority {
            order.push(format!("priority {p}"));
        }
        if let Some(f) = &args.priority_field {
            order.push(format!("priority from field {:?}", sanitize::line(f)));
        }
        if let Some(t) = not_before {
            order.push(format!("not before {}", rfc3339(t)));
        }
        let order = if order.is_empty() {
            String::new()
        } else {
            format!(" ({})", order.join(", "))
        };
        out(format!("{}: {summary}{order}", sanitize::line(&args.batch)))?;
    }
    Ok(())
}

fn read_input(file: &Path) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if file == Path::new("-") {
        if std::io::stdin().is_terminal() {
            return Err(user_error(
                "no FILE given and stdin is a terminal: pipe JSON lines in, or name a file",
            ));
        }
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading stdin")?;
    } else {
        bytes = std::fs::read(file)
            .map_err(|e| user_error(format!("cannot read {}: {e}", file.display())))?;
    }
    Ok(bytes)
}

/// Lines of one part of the input, parsed.
#[derive(Default)]
struct Parsed {
    items: Vec<NewItem>,
    /// Line number of each item, for naming duplicates.
    lines: Vec<usize>,
    errors: Vec<(usize, String)>,
}

/// Parses the lines of `part`, the first of which is line `first_line`. (A
/// part ends with a newline; the empty piece after it is skipped like any
/// blank line.)
fn parse_part(part: &[u8], first_line: usize, spec: &KeySpec, priority: &Priority) -> Parsed {
    let mut out = Parsed::default();
    for (idx, raw) in part.split(|b| *b == b'\n').enumerate() {
        let line_no = first_line + idx;
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(text) = std::str::from_utf8(raw) else {
            out.errors.push((line_no, "not valid UTF-8".into()));
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match key::derive_line_with(text, spec, priority) {
            Ok(item) => {
                out.items.push(item);
                out.lines.push(line_no);
            }
            Err(e) => out.errors.push((line_no, e.to_string())),
        }
    }
    out
}

/// Splits `bytes` after newlines into about `n` parts, each with the
/// number of its first line.
fn split_parts(bytes: &[u8], n: usize) -> Vec<(usize, &[u8])> {
    let mut parts = Vec::with_capacity(n);
    let (mut start, mut line) = (0, 1);
    for k in 1..n {
        let target = (bytes.len() * k / n).max(start);
        let Some(nl) = bytes[target..].iter().position(|b| *b == b'\n') else {
            break;
        };
        let end = target + nl + 1;
        parts.push((line, &bytes[start..end]));
        line += bytes[start..end].iter().filter(|b| **b == b'\n').count();
        start = end;
    }
    parts.push((line, &bytes[start..]));
    parts
}

/// Parses every line, collecting all problems before deciding anything.
/// Large inputs are parsed by several threads, one part each.
fn parse_lines(
    bytes: &[u8],
    spec: &KeySpec,
    priority: &Priority,
    source: &str,
) -> anyhow::Result<Vec<NewItem>> {
    let progress = std::io::stderr().is_terminal() && bytes.len() > 8 * 1024 * 1024;
    if progress {
        eprint!("\rchecking {source}…");
    }
    let threads = if bytes.len() < PARALLEL_FROM_BYTES {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    };
    let parsed: Vec<Parsed> = std::thread::scope(|scope| {
        let handles: Vec<_> = split_parts(bytes, threads)
            .into_iter()
            .map(|(first, part)| scope.spawn(move || parse_part(part, first, spec, priority)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    let mut items = Vec::with_capacity(parsed.iter().map(|p| p.items.len()).sum());
    let mut lines = Vec::with_capacity(items.capacity());
    let mut errors = Vec::new();
    for p in parsed {
        items.extend(p.items);
        lines.extend(p.lines);
        errors.extend(p.errors);
    }
    let mut first_line_of: HashMap<&str, usize> = HashMap::with_capacity(items.len());
    for (item, &line_no) in items.iter().zip(&lines) {
        if let Some(&first) = first_line_of.get(item.key.as_str()) {
            errors.push((
                line_no,
                format!("duplicate key {:?} (first on line {first})", item.label),
            ));
        } else {
            first_line_of.insert(&item.key, line_no);
        }
    }
    drop(first_line_of);
    errors.sort_by_key(|(line_no, _)| *line_no);
    let errors: Vec<String> = errors
        .into_iter()
        .map(|(line_no, e)| format!("line {line_no}: {e}"))
        .collect();
    if progress {
        eprint!("\r{:40}\r", "");
    }
    if errors.is_empty() {
        return Ok(items);
    }
    let count = errors.len();
    let mut msg = format!(
        "{source}: rejected, nothing imported: {}",
        noun::count(count, "bad line")
    );
    for e in errors.iter().take(SHOWN_ERRORS) {
        msg.push_str("\n  ");
        msg.push_str(&sanitize::line(e));
    }
    if count > SHOWN_ERRORS {
        msg.push_str(&format!("\n  … and {} more", count - SHOWN_ERRORS));
    }
    Err(user_error(msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(bytes: &[u8], n: usize) -> (Vec<String>, Vec<usize>, Vec<(usize, String)>) {
        let mut all = Parsed::default();
        for (first, part) in split_parts(bytes, n) {
            let p = parse_part(part, first, &KeySpec::Explicit, &Priority::default());
            all.items.extend(p.items);
            all.lines.extend(p.lines);
            all.errors.extend(p.errors);
        }
        let keys = all.items.into_iter().map(|i| i.key).collect();
        (keys, all.lines, all.errors)
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
