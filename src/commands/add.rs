//! `nightshift add`: JSON lines in, items added idempotently. A file with
//! any bad line is rejected whole, every bad line named, nothing imported.

use std::collections::HashMap;
use std::io::{IsTerminal, Read};
use std::path::Path;

use anyhow::Context;

use super::{Ctx, Exit, out, out_json, user_error};
use crate::cli::AddArgs;
use crate::key::{self, KeySpec};
use crate::model::NewItem;
use crate::util::{sanitize, time::now_ms};

/// Bad lines listed in full before "and N more".
const SHOWN_ERRORS: usize = 20;
/// Inputs with more lines than this show progress on a terminal.
const PROGRESS_FROM: usize = 50_000;

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
    let items = parse_lines(&bytes, &spec, &source)?;
    if items.is_empty() {
        return Err(user_error(format!(
            "{source}: no items (the input is empty)"
        )));
    }

    let mut store = ctx.open_write()?;
    let new_batch = !store.batch_names()?.contains(&args.batch);
    let progress = std::io::stderr().is_terminal() && items.len() > PROGRESS_FROM;
    let total = items.len();
    let report = store.add_items(&args.batch, &items, now_ms(), |n| {
        if progress {
            eprint!("\radding {n}/{total}…");
        }
    })?;
    if progress {
        eprintln!("\r{:40}\r", "");
    }
    if args.json {
        out_json(&serde_json::json!({
            "batch": args.batch,
            "added": report.added,
            "present": report.present,
            "new_batch": new_batch,
        }))?;
    } else {
        out(format!(
            "{}: added {}, already present {}",
            sanitize::line(&args.batch),
            report.added,
            report.present
        ))?;
        if new_batch && !ctx.config.batches.is_empty() && ctx.config.batch(&args.batch).is_none() {
            eprintln!(
                "note: batch {:?} is new and has no [batch.{}] section in the config",
                args.batch, args.batch
            );
        }
    }
    Ok(Exit::Ok)
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

/// Parses every line, collecting all problems before deciding anything.
fn parse_lines(bytes: &[u8], spec: &KeySpec, source: &str) -> anyhow::Result<Vec<NewItem>> {
    let mut items = Vec::new();
    // Line number of each item, for naming duplicates.
    let mut lines: Vec<usize> = Vec::new();
    let mut errors: Vec<(usize, String)> = Vec::new();
    let progress = std::io::stderr().is_terminal() && bytes.len() > 8 * 1024 * 1024;
    for (idx, raw) in bytes.split(|b| *b == b'\n').enumerate() {
        let line_no = idx + 1;
        if progress && line_no % PROGRESS_FROM == 0 {
            eprint!("\rchecking line {line_no}…");
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let Ok(text) = std::str::from_utf8(raw) else {
            errors.push((line_no, "not valid UTF-8".into()));
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        match key::derive_line(text, spec) {
            Ok(item) => {
                items.push(item);
                lines.push(line_no);
            }
            Err(e) => errors.push((line_no, e.to_string())),
        }
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
        "{source}: rejected, nothing imported: {count} bad line{}",
        if count == 1 { "" } else { "s" }
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
