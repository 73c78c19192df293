//! `nightshift add`: JSON lines in, items added idempotently (a key whose
//! item was done and pruned is present too: its tombstone). A file with any
//! bad line is rejected whole, every bad line named, nothing imported.

use std::io::{IsTerminal, Read};
use std::path::Path;

use anyhow::Context;

use super::{Ctx, Exit, out, out_json, user_error};
use crate::batch_name;
use crate::cli::AddArgs;
use crate::config::BatchConfig;
use crate::key::{self, KeySpec, LineFields};
use crate::model::AddReport;
use crate::store::StoreError;
use crate::util::live::Live;
use crate::util::sanitize;
use crate::util::signals::Stop;
use crate::util::time::{now_ms, rfc3339};

mod parse;

/// Inputs with more lines than this show progress on a terminal.
const PROGRESS_FROM: usize = 50_000;

pub use parse::Rejected;

/// What a refused add adds to `--json`'s failure answer (see
/// [`failure`](super::failure)), so that a script reading stdout learns
/// what to fix (as `skip` and `requeue` say their refused keys): each bad
/// line with its number, or the one reason the whole input or the command
/// was refused (`line` null). Nothing was added.
pub(super) fn refused_json(args: &AddArgs, e: &anyhow::Error) -> serde_json::Value {
    let refused: Vec<serde_json::Value> = match e.chain().find_map(|c| c.downcast_ref::<Rejected>())
    {
        Some(r) => r
            .lines
            .iter()
            .map(|(line, says)| serde_json::json!({"line": line, "says": says}))
            .collect(),
        None => vec![serde_json::json!({
            "line": null,
            "says": crate::store::without_password_values(&format!("{e:#}")),
        })],
    };
    serde_json::json!({
        "batch": args.batch,
        "dry_run": args.dry_run,
        "source": source_name(args),
        "added": 0,
        "refused": refused,
    })
}

/// The input as every message names it: its path, or `stdin`.
fn source_name(args: &AddArgs) -> String {
    if args.file == Path::new("-") {
        "stdin".to_string()
    } else {
        args.file.display().to_string()
    }
}

pub fn run(ctx: &Ctx, args: &AddArgs) -> anyhow::Result<Exit> {
    let source = source_name(args);
    let bytes = read_input(&args.file)?;
    if let Some(encoding) = utf16(&bytes) {
        return Err(user_error(format!(
            "{}: the input is {encoding} (it starts with that byte-order mark, as Excel's \
             \"Unicode text\" does): JSON lines are UTF-8, so save it as UTF-8 or convert it \
             (iconv -f UTF-16 -t UTF-8); nothing was added",
            sanitize::line(&source)
        )));
    }
    let batch = ctx.batch_config(&args.batch);
    let spec = key_spec(ctx, args.key_fields.as_deref(), &batch)?;
    // Keyed otherwise than the batch's items were: said before the input
    // is read, whose lines may not even have the fields now asked. (A
    // store that does not open is told later, as below.)
    if let Ok(store) = ctx.open_read() {
        store
            .check_keyed(&args.batch, &spec)
            .map_err(|e| keyed_where(ctx, args, e.into()))?;
    }
    if args
        .priority_field
        .as_ref()
        .is_some_and(|f| f.trim().is_empty())
    {
        return Err(user_error(
            "--priority-field: the field name must not be empty",
        ));
    }
    let priority = LineFields {
        field: args.priority_field.clone().or(batch.priority_field),
        default: args.priority.unwrap_or(0),
        estimate_field: batch.estimate_field,
    };
    let not_before = args.not_before.map(|w| w.at(now_ms()));
    let bytes = key::without_bom(&bytes);
    // An input of 64 KiB or more goes to the store while it is parsed,
    // when the store takes it in one transaction (no runner live): a bad
    // line found late rolls it all back. Otherwise all of it is checked
    // first. (A store that does not open is told after the input's
    // problems.)
    if !args.dry_run
        && bytes.len() >= parse::FED_FROM_BYTES
        && !parse::has_uncomposed_text(bytes)
        && let Ok(mut store) = ctx.open_write()
        && store.feeds_adds()
    {
        let how = (&spec, &priority, not_before);
        return add_fed(ctx, args, &mut store, bytes, how, &source);
    }
    let items = parse::parse_lines(bytes, &spec, &priority, not_before, &source)?;
    if items.is_empty() {
        // A source with nothing new is a normal night: say so and exit 0,
        // writing nothing (the store is still opened, so a missing or
        // unusable one is an error as always).
        ctx.open_read()?;
        print_report(
            args,
            &AddReport::default(),
            false,
            priority.field.as_deref(),
        )?;
        return Ok(Exit::Ok);
    }
    if args.dry_run {
        let store = ctx.open_read()?;
        let new_batch = !store.batch_names()?.contains(&args.batch);
        let report = store.add_dry_run(&args.batch, &items)?;
        print_report(args, &report, new_batch, priority.field.as_deref())?;
        return Ok(Exit::Ok);
    }

    let mut store = ctx.open_write()?;
    // A signal stops the add between chunks (or rolls back a one-transaction
    // add), and the error says exactly what was added.
    store.set_stop(Stop::on_signals().context("installing signal handlers")?);
    let new_batch = !store.batch_names()?.contains(&args.batch);
    let live = Live::stderr();
    let progress = live.on() && items.len() > PROGRESS_FROM;
    let total = items.len();
    let result = store.add_keyed((&args.batch, Some(&spec)), &items, now_ms(), |n| {
        if progress {
            live.show(&format!("adding {n}/{total}…"));
        }
    });
    if progress {
        live.clear();
    }
    let report = result.map_err(|e| keyed_where(ctx, args, e.into()))?;
    finish(ctx, args, &report, new_batch, priority.field.as_deref())
}

/// How the add keys its lines: by `--key-fields` (`flag`), else by the
/// batch's `key_fields`. A flag naming other fields than the config's is
/// refused: it would key every item anew, so the items added before (done
/// ones too) would be added, and run, again; and the next `source` or
/// `add` without the flag would key them the config's way once more.
fn key_spec(ctx: &Ctx, flag: Option<&[String]>, batch: &BatchConfig) -> anyhow::Result<KeySpec> {
    let Some(fields) = flag else {
        return Ok(KeySpec::from_fields(batch.key_fields.as_deref()));
    };
    if let Some(problem) = KeySpec::fields_problem(fields) {
        return Err(user_error(format!("--key-fields: {problem}")));
    }
    if batch.key_fields.as_deref().is_some_and(|set| set != fields) {
        let problem = format!(
            "is {}, and --key-fields {} names other fields: every item would get another key, \
             so the items already added would be added and run again; leave --key-fields out \
             (the config's are used); nothing was added",
            batch.shown("key_fields").unwrap_or_default(),
            fields.join(","),
        );
        let named = ctx
            .config
            .invalid(&batch.name, "key_fields", problem.clone())
            .map_or_else(|| format!("key_fields {problem}"), |e| e.to_string());
        return Err(user_error(sanitize::line(&named)));
    }
    Ok(KeySpec::from_fields(Some(fields)))
}

/// An add refused for keying the batch's items otherwise than they were
/// (`Refusal::KeyedOtherwise`), said with where the keys now asked come
/// from: `--key-fields`, or the config's file and line. Any other error
/// as it is.
fn keyed_where(ctx: &Ctx, args: &AddArgs, e: anyhow::Error) -> anyhow::Error {
    let Some(refused @ StoreError::Refused(r)) = e.downcast_ref::<StoreError>() else {
        return e;
    };
    if !r.is_keyed_otherwise() {
        return e;
    }
    let at = match &args.key_fields {
        Some(fields) => Some(format!("--key-fields {}", fields.join(","))),
        None => ctx.config.key_fields_at(&args.batch),
    };
    let said = match at {
        Some(at) => format!("{at}: {refused}"),
        None => refused.to_string(),
    };
    user_error(sanitize::line(&said))
}

/// `add` of a large input fed to `store` as it is parsed (`parse::fed`).
fn add_fed(
    ctx: &Ctx,
    args: &AddArgs,
    store: &mut crate::store::Store,
    bytes: &[u8],
    (spec, priority, not_before): (&KeySpec, &LineFields, Option<crate::model::Millis>),
    source: &str,
) -> anyhow::Result<Exit> {
    store.set_stop(Stop::on_signals().context("installing signal handlers")?);
    let new_batch = !store.batch_names()?.contains(&args.batch);
    // Lines, not items yet (blank lines count): for the progress only.
    let live = Live::stderr();
    let total = if live.on() {
        bytes.iter().filter(|&&b| b == b'\n').count() + usize::from(!bytes.ends_with(b"\n"))
    } else {
        0
    };
    let progress = total > PROGRESS_FROM;
    let now = now_ms();
    let result = parse::fed(bytes, spec, priority, not_before, source, |feed| {
        let to = (args.batch.as_str(), Some(spec));
        store.add_fed_keyed(to, feed, bytes.len(), now, |n| {
            if progress && n > 0 {
                live.show(&format!("adding {n}/{total}…"));
            }
        })
    });
    if progress {
        live.clear();
    }
    let report = result?
        .map_err(|e| keyed_where(ctx, args, e.into()))?
        .unwrap_or_default();
    // Nothing written for an input without items: no batch made.
    let new_batch = new_batch && report.added + report.present > 0;
    finish(ctx, args, &report, new_batch, priority.field.as_deref())
}

/// Says what the add did.
fn finish(
    ctx: &Ctx,
    args: &AddArgs,
    report: &AddReport,
    new_batch: bool,
    field: Option<&str>,
) -> anyhow::Result<Exit> {
    print_report(args, report, new_batch, field)?;
    if new_batch
        && !args.json
        && !ctx.config.batches.is_empty()
        && ctx.config.batch(&args.batch).is_none()
    {
        // The table header is printed as TOML to paste (`[batch."記事"]`).
        crate::util::stdio::err_line(&format!(
            "note: batch {} is new and has no {} section in the config",
            batch_name::shown(&args.batch),
            sanitize::line(&batch_name::toml_table(&args.batch))
        ));
    }
    Ok(Exit::Ok)
}

/// Says what the add did: the priorities and not-before times it gave, as
/// its `added` event records them, and the priority field it read (the
/// flag's, else the config's).
fn print_report(
    args: &AddArgs,
    report: &AddReport,
    new_batch: bool,
    field: Option<&str>,
) -> anyhow::Result<()> {
    if args.json {
        out_json(&serde_json::json!({
            "batch": args.batch,
            "dry_run": args.dry_run,
            "added": report.added,
            "present": report.present,
            "pruned": report.pruned,
            "pruned_between": crate::util::time::span_rfc3339(report.pruned_span),
            "new_batch": new_batch,
            "priority": report.order.priority_json(),
            "priority_field": field,
            "not_before": report.order.not_before_json(),
        }))?;
    } else {
        let summary = if args.dry_run {
            report.summary_as("would add")
        } else {
            report.summary()
        };
        let mut order: Vec<String> = report.order.priority_words().into_iter().collect();
        if let Some(f) = field {
            order.push(format!("priority field {:?}", sanitize::line(f)));
        }
        // One time for all of an add's items: `--not-before`'s.
        if let Some((at, _)) = report.order.not_before {
            order.push(format!("not before {}", rfc3339(at)));
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

/// The longest line a stream (stdin, a pipe, a device) may send before the
/// add gives up on it: `/dev/zero`, or a binary file piped in, grew the
/// add's memory until the kernel killed it.
const MAX_STREAM_LINE: usize = 64 << 20;

/// The UTF-16 a byte-order mark says the input is in: every line of it
/// would be refused as "not valid UTF-8", saying nothing of why.
fn utf16(bytes: &[u8]) -> Option<&'static str> {
    match bytes {
        [0xFF, 0xFE, ..] => Some("UTF-16 (little-endian)"),
        [0xFE, 0xFF, ..] => Some("UTF-16 (big-endian)"),
        _ => None,
    }
}

fn read_input(file: &Path) -> anyhow::Result<Vec<u8>> {
    if file == Path::new("-") {
        if std::io::stdin().is_terminal() {
            return Err(user_error(
                "no FILE given and stdin is a terminal: pipe JSON lines in, or name a file",
            ));
        }
        return read_stream(std::io::stdin().lock(), "stdin");
    }
    let cannot = |e: std::io::Error| user_error(format!("cannot read {}: {e}", file.display()));
    // A regular file is as long as it is; anything else may never end.
    let meta = std::fs::metadata(file).map_err(cannot)?;
    if meta.is_dir() {
        return Err(user_error(format!(
            "{} is a directory: give a file of JSON lines, or - for stdin; nothing was added",
            sanitize::line(&file.display().to_string())
        )));
    }
    if meta.is_file() {
        return std::fs::read(file).map_err(cannot);
    }
    let f = std::fs::File::open(file).map_err(cannot)?;
    read_stream(f, &file.display().to_string())
}

/// Reads `r` to its end, refusing a line longer than [`MAX_STREAM_LINE`].
fn read_stream(mut r: impl Read, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    let (mut line_start, mut line_no) = (0, 1);
    loop {
        let n = match r.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // What was given cannot be read (stdin from a directory): bad
            // input, and nothing was added.
            Err(e) => {
                return Err(user_error(format!(
                    "cannot read {}: {e}; nothing was added",
                    sanitize::line(what)
                )));
            }
        };
        let from = bytes.len();
        bytes.extend_from_slice(&chunk[..n]);
        let new = &bytes[from..];
        if let Some(last) = new.iter().rposition(|b| *b == b'\n') {
            line_no += new.iter().filter(|b| **b == b'\n').count();
            line_start = from + last + 1;
        }
        if bytes.len() - line_start > MAX_STREAM_LINE {
            return Err(user_error(format!(
                "{}: line {line_no} is longer than {} MiB, so this is no JSON lines input: \
                 nothing was added",
                sanitize::line(what),
                MAX_STREAM_LINE >> 20
            )));
        }
    }
    Ok(bytes)
}
