//! Where events go besides the store: the rolling JSON-lines files (via
//! `tracing`, set up by `init_file_log`) and, with `--verbose`, stdout.

use std::path::Path;
use std::sync::Mutex;

use crate::model::NewEvent;
use crate::util::sanitize;
use crate::util::time::rfc3339;

#[derive(Clone)]
pub struct EventLog {
    verbose: bool,
}

impl EventLog {
    pub fn new(verbose: bool) -> EventLog {
        EventLog { verbose }
    }

    /// Records a committed event in the log file (and prints it if verbose).
    pub fn emit(&self, e: &NewEvent) {
        let fields = e.fields.as_ref().map(|f| f.to_string()).unwrap_or_default();
        tracing::info!(
            target: "nightshift::event",
            at = %rfc3339(e.at),
            batch = e.batch.as_deref().unwrap_or(""),
            run = e.run_id.unwrap_or(0),
            key = e.key.as_deref().unwrap_or(""),
            kind = %e.kind,
            actor = e.actor.as_deref().unwrap_or(""),
            fields = %fields,
            "{}",
            e.message
        );
        if self.verbose {
            let mut line = format!("{} {:<12}", rfc3339(e.at), e.kind);
            if let Some(key) = &e.key {
                line.push(' ');
                line.push_str(key);
            }
            line.push(' ');
            line.push_str(&e.message);
            println!("{}", sanitize::line(&line));
        }
    }
}

/// Kept until `close_file_log`: dropping it flushes the writer thread.
static GUARD: Mutex<Option<tracing_appender::non_blocking::WorkerGuard>> = Mutex::new(None);

/// Sends events to daily-rolling JSON-lines files `nightshift.jsonl.YYYY-MM-DD`
/// in `dir` (created private to this user). Once per process.
pub fn init_file_log(dir: &Path) -> std::io::Result<()> {
    use tracing_subscriber::prelude::*;
    let mut guard_slot = GUARD.lock().unwrap_or_else(|p| p.into_inner());
    if guard_slot.is_some() {
        return Ok(());
    }
    create_private_dir(dir)?;
    let appender = tracing_appender::rolling::daily(dir, "nightshift.jsonl");
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_writer(writer)
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("nightshift", tracing::Level::INFO),
        );
    if tracing_subscriber::registry()
        .with(layer)
        .try_init()
        .is_ok()
    {
        *guard_slot = Some(guard);
    }
    Ok(())
}

/// Flushes and closes the log file (call before the process exits).
pub fn close_file_log() {
    let guard = GUARD.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(guard);
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}
