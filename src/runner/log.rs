//! Where events go besides the store: the rolling JSON-lines files (via
//! the appender of `init_file_log`, beside `tracing`'s own lines) and, with
//! `--verbose`, stdout.

use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use crate::model::NewEvent;
use crate::util::time::rfc3339;
use crate::util::{files, sanitize};

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
        if EVENTS.get().is_some() {
            let fields = e.fields_text().unwrap_or_default();
            queue(&event_line(e, &timestamp(), &fields));
        }
        if self.verbose {
            let mut line = format!("{} {:<12}", rfc3339(e.at), e.kind);
            if let Some(key) = &e.key {
                line.push(' ');
                line.push_str(key);
            }
            line.push(' ');
            line.push_str(&e.message);
            crate::util::stdio::out_line(&sanitize::line(&line));
        }
    }
}

/// Event lines not yet handed to the appender's thread, and when the
/// first of them came.
static QUEUED: Mutex<(Vec<u8>, Option<std::time::Instant>)> = Mutex::new((Vec::new(), None));

/// How long an event line may wait to be handed over with the lines after
/// it. A line a piece woke the appender's thread for each (two lines per
/// item), which spun (`sched_yield`) before it slept again: per process-
/// mode item, more CPU than the line's own formatting.
const HAND_OVER: std::time::Duration = std::time::Duration::from_millis(20);

/// Queues `line` for the appender: handed over, with whatever else came
/// meanwhile, by a timer the first line starts, or at once by a line that
/// finds the queue older than twice that (should no timer run).
fn queue(line: &[u8]) {
    let now = std::time::Instant::now();
    let (first, stale) = {
        let mut q = QUEUED.lock().unwrap_or_else(|p| p.into_inner());
        q.0.extend_from_slice(line);
        let first = q.1.is_none();
        let since = *q.1.get_or_insert(now);
        (first, now.duration_since(since) > 2 * HAND_OVER)
    };
    if stale {
        hand_over();
    } else if first {
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(async {
                    tokio::time::sleep(HAND_OVER).await;
                    hand_over();
                });
            }
            Err(_) => hand_over(),
        }
    }
}

/// Hands the queued lines to the appender's thread, which writes them
/// whole.
fn hand_over() {
    let lines = {
        let mut q = QUEUED.lock().unwrap_or_else(|p| p.into_inner());
        q.1 = None;
        std::mem::take(&mut q.0)
    };
    if let Some(file) = EVENTS.get()
        && !lines.is_empty()
    {
        let _ = file.clone().write_all(&lines);
    }
}

/// The target that events' lines name (warnings name their module).
const EVENT_TARGET: &str = "nightshift::event";

/// An event's line in the log file, newline included: the keys and their
/// order as `tracing_subscriber`'s JSON format writes the other lines
/// (flattened). Written here rather than through `tracing`: its formatter,
/// field by field through `Debug`/`Display` visitors, was a fifth of the
/// runner's instructions in persistent mode (two lines per item); and by
/// hand rather than by deriving `Serialize`, as most texts need no escape
/// and are copied whole (serde_json's escaper goes byte by byte).
fn event_line(e: &NewEvent, timestamp: &str, fields: &str) -> Vec<u8> {
    let mut b = Vec::with_capacity(256 + e.message.len() + fields.len());
    let text = |b: &mut Vec<u8>, name: &str, value: &str| {
        b.extend_from_slice(name.as_bytes());
        json_str(b, value);
    };
    b.extend_from_slice(b"{\"timestamp\":\"");
    b.extend_from_slice(timestamp.as_bytes());
    b.push(b'"');
    b.extend_from_slice(b",\"level\":\"INFO\"");
    text(&mut b, ",\"message\":", &e.message);
    b.extend_from_slice(b",\"at\":\"");
    utc_text(&mut b, e.at.saturating_mul(1000), false);
    b.push(b'"');
    text(&mut b, ",\"batch\":", e.batch.as_deref().unwrap_or(""));
    let _ = write!(b, ",\"run\":{}", e.run_id.unwrap_or(0));
    text(&mut b, ",\"key\":", e.key.as_deref().unwrap_or(""));
    text(&mut b, ",\"kind\":", &e.kind);
    text(&mut b, ",\"actor\":", e.actor.as_deref().unwrap_or(""));
    text(&mut b, ",\"fields\":", fields);
    text(&mut b, ",\"target\":", EVENT_TARGET);
    b.extend_from_slice(b"}\n");
    b
}

/// `s` as a JSON string, as serde_json writes it.
fn json_str(b: &mut Vec<u8>, s: &str) {
    // Every byte checked, no early exit: the compiler checks many at once.
    let plain = !s.bytes().fold(false, |bad, c| {
        bad | (c < 0x20) | (c == b'"') | (c == b'\\')
    });
    if plain {
        b.push(b'"');
        b.extend_from_slice(s.as_bytes());
        b.push(b'"');
    } else {
        // Writing into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut *b, s);
    }
}

/// Now, to the microsecond, as the other lines have it. A clock before
/// 1970 is written as such (`Utc::now` would panic).
fn timestamp() -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let micros = match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_micros()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_micros()).unwrap_or(i64::MAX),
    };
    let mut b = Vec::with_capacity(32);
    utc_text(&mut b, micros, true);
    String::from_utf8(b).unwrap_or_default()
}

/// `micros` since 1970 as RFC 3339 in UTC with a `Z`, to the second or
/// (`fraction`) the microsecond, as chrono writes it: by hand for the
/// years 0 to 9999 (chrono's formatter was a tenth of the event log's
/// instructions, two times a line), by chrono outside them.
fn utc_text(b: &mut Vec<u8>, micros: i64, fraction: bool) {
    let (secs, sub) = (micros.div_euclid(1_000_000), micros.rem_euclid(1_000_000));
    let (days, day_secs) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        let format = if fraction {
            chrono::SecondsFormat::Micros
        } else {
            chrono::SecondsFormat::Secs
        };
        let t = chrono::DateTime::from_timestamp_micros(micros).unwrap_or_default();
        b.extend_from_slice(t.to_rfc3339_opts(format, true).as_bytes());
        return;
    }
    let digits = |b: &mut Vec<u8>, n: i64, width: u32| {
        for i in (0..width).rev() {
            b.push(b'0' + (n / 10i64.pow(i) % 10) as u8);
        }
    };
    digits(b, year, 4);
    b.push(b'-');
    digits(b, month, 2);
    b.push(b'-');
    digits(b, day, 2);
    b.push(b'T');
    digits(b, day_secs / 3600, 2);
    b.push(b':');
    digits(b, day_secs / 60 % 60, 2);
    b.push(b':');
    digits(b, day_secs % 60, 2);
    if fraction {
        b.push(b'.');
        digits(b, sub, 6);
    }
    b.push(b'Z');
}

/// The log file's writer for event lines, once the file log is started.
static EVENTS: std::sync::OnceLock<tracing_appender::non_blocking::NonBlocking> =
    std::sync::OnceLock::new();

/// Kept until `close_file_log`: dropping it flushes the writer thread.
static GUARD: Mutex<Option<tracing_appender::non_blocking::WorkerGuard>> = Mutex::new(None);

/// Starts the event log files in `dir` (`init_file_log`) once per
/// process; when they cannot be written, says why on stderr, once (the
/// events are still kept in the store).
pub fn start_file_log(dir: &Path) {
    static TRIED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if TRIED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    if let Err(e) = init_file_log(dir) {
        crate::util::stdio::err_line(&format!(
            "nightshift: warning: cannot write logs to {}: {}",
            sanitize::line(&dir.display().to_string()),
            sanitize::line(&e.to_string())
        ));
    }
}

/// Sends events to daily-rolling JSON-lines files `nightshift.jsonl.YYYY-MM-DD`
/// (UTC dates) in `dir`; the directory (when we create it) and the files are
/// private to this user whatever the umask. Once per process. A directory
/// another user could write into is refused (see `util::files`): events
/// quote workers' text, and a link planted there would send them into any
/// file this user may write.
fn init_file_log(dir: &Path) -> std::io::Result<()> {
    use tracing_subscriber::prelude::*;
    let mut guard_slot = GUARD.lock().unwrap_or_else(|p| p.into_inner());
    if guard_slot.is_some() {
        return Ok(());
    }
    files::private_dir(dir)?;
    let mut appender = PrivateDaily {
        dir: dir.to_path_buf(),
        current: None,
    };
    // Opened now, so that a file that cannot be written (a link planted
    // under its name) is said at the start rather than lost unseen.
    appender.file()?;
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let layer = tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_writer(writer.clone())
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
        let _ = EVENTS.set(writer);
    }
    Ok(())
}

/// Flushes and closes the log file (call before the process exits).
pub fn close_file_log() {
    hand_over();
    let guard = GUARD.lock().unwrap_or_else(|p| p.into_inner()).take();
    drop(guard);
}

/// A daily-rolling append-only file, created `0600`: error messages in the
/// log may quote private data (`tracing_appender`'s roller creates its
/// files with the umask's mode), and never opened through a symbolic link.
/// Lines are buffered and written when the appender's thread has drained
/// what was queued (it flushes then): a write per line was most of that
/// thread's time in persistent mode (two lines per item).
struct PrivateDaily {
    dir: std::path::PathBuf,
    /// The UTC day (days since 1970) of the open file, and the file.
    current: Option<(i64, std::io::BufWriter<std::fs::File>)>,
}

impl PrivateDaily {
    fn file(&mut self) -> std::io::Result<&mut std::io::BufWriter<std::fs::File>> {
        // The day as a number: formatting a date for every line cost more
        // than writing it.
        let day = crate::util::time::now_ms().div_euclid(86_400_000);
        if self.current.as_ref().is_none_or(|(d, _)| *d != day) {
            if let Some((_, mut old)) = self.current.take() {
                old.flush()?;
            }
            let name = crate::util::time::to_datetime(day * 86_400_000).format("%Y-%m-%d");
            let path = self.dir.join(format!("nightshift.jsonl.{name}"));
            let file = files::open_append_private(&path)?;
            self.current = Some((day, std::io::BufWriter::with_capacity(64 * 1024, file)));
        }
        Ok(&mut self.current.as_mut().expect("just opened").1)
    }
}

impl std::io::Write for PrivateDaily {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file()?.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.current {
            Some((_, f)) => f.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line as serde_json wrote it before (`EventLine` derived
    /// `Serialize`), keys in this order.
    #[derive(serde::Serialize)]
    struct EventLine<'a> {
        timestamp: &'a str,
        level: &'static str,
        message: &'a str,
        at: String,
        batch: &'a str,
        run: i64,
        key: &'a str,
        kind: &'a str,
        actor: &'a str,
        fields: &'a str,
        target: &'static str,
    }

    #[test]
    fn times_are_written_as_chrono_writes_them() {
        let day = 86_400_000_000i64;
        let mut cases = vec![
            0,
            -1,
            1,
            999_999,
            1_000_000,
            -day,
            day * 59,
            day * 60,
            i64::MAX,
            i64::MIN,
        ];
        cases.extend([
            -62_167_219_200_000_000 - 1,
            -62_167_219_200_000_000,
            253_402_300_799_999_999,
            253_402_300_800_000_000,
        ]);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push((x % 40_000_000_000_000_000) as i64 - 5_000_000_000_000_000);
        }
        for micros in cases {
            for (fraction, format) in [
                (true, chrono::SecondsFormat::Micros),
                (false, chrono::SecondsFormat::Secs),
            ] {
                let mut b = Vec::new();
                utc_text(&mut b, micros, fraction);
                let want = chrono::DateTime::from_timestamp_micros(micros)
                    .unwrap_or_default()
                    .to_rfc3339_opts(format, true);
                assert_eq!(String::from_utf8(b).unwrap(), want, "{micros}");
            }
        }
    }

    #[test]
    fn an_event_line_is_what_serde_json_writes() {
        let hostile = "quote \" backslash \\ newline \n tab \t bell \u{7} del \u{7f} é \u{2028}";
        for (message, key, fields) in [
            ("done, empty result", "k1", "{\"attempt\":1}"),
            (hostile, hostile, hostile),
            ("", "", ""),
        ] {
            let mut e = NewEvent::new(
                1_764_633_600_123,
                "b",
                crate::model::EventKind::Done,
                message,
            )
            .key(key);
            e.run_id = Some(-7);
            e.actor = Some(hostile.to_string());
            let ts = "2026-12-02T01:02:25.454440Z";
            let mut want = serde_json::to_vec(&EventLine {
                timestamp: ts,
                level: "INFO",
                message,
                at: rfc3339(e.at),
                batch: "b",
                run: -7,
                key,
                kind: "done",
                actor: hostile,
                fields,
                target: EVENT_TARGET,
            })
            .unwrap();
            want.push(b'\n');
            assert_eq!(
                String::from_utf8(event_line(&e, ts, fields)).unwrap(),
                String::from_utf8(want).unwrap()
            );
        }
    }
}
