//! `status --prometheus`: the Prometheus text exposition format, for
//! node_exporter's textfile collector.

use std::fmt::Write;

use crate::model::{BatchInfo, Millis, RunState};
use crate::store::Store;

/// Label values escaped as the exposition format requires, control and
/// bidi characters first made inert (shown as `\x1b`, which the format
/// then reads as the literal text).
fn label(value: &str) -> String {
    crate::util::sanitize::line(value)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Family<'a> {
    name: &'a str,
    help: &'a str,
    samples: Vec<(String, f64)>,
}

pub fn render(store: &Store, infos: &[BatchInfo], now: Millis) -> anyhow::Result<String> {
    let mut items = Family {
        name: "nightshift_items",
        help: "Items by batch, status and tier (failed) or outcome (done).",
        samples: Vec::new(),
    };
    let mut paused = Family {
        name: "nightshift_batch_paused",
        help: "1 if the batch is paused.",
        samples: Vec::new(),
    };
    let mut hold = Family {
        name: "nightshift_batch_hold_seconds",
        help: "Seconds left of a retry-after hold (0 if none): no call starts before.",
        samples: Vec::new(),
    };
    let mut lock = Family {
        name: "nightshift_lock_held",
        help: "1 if a runner holds the batch lock.",
        samples: Vec::new(),
    };
    let mut last_run_time = Family {
        name: "nightshift_last_run_timestamp_seconds",
        help: "Start time of the last run (Unix seconds).",
        samples: Vec::new(),
    };
    let mut last_run_ok = Family {
        name: "nightshift_last_run_success",
        help: "1 if the last run ended ok, 0 otherwise.",
        samples: Vec::new(),
    };
    let mut oldest = Family {
        name: "nightshift_oldest_pending_age_seconds",
        help: "Age of the oldest pending item (0 if none).",
        samples: Vec::new(),
    };
    for info in infos {
        let b = label(&info.name);
        let c = &info.counts;
        for (status, extra, n) in [
            ("pending", "", c.pending),
            ("claimed", "", c.claimed),
            ("done", ",outcome=\"done\"", c.done_ok),
            ("done", ",outcome=\"empty\"", c.empty),
            ("done", ",outcome=\"skipped\"", c.skipped),
            ("failed", ",tier=\"retry\"", c.retry),
            ("failed", ",tier=\"manual\"", c.manual),
        ] {
            items.samples.push((
                format!("batch=\"{b}\",status=\"{status}\"{extra}"),
                n as f64,
            ));
        }
        paused.samples.push((
            format!("batch=\"{b}\""),
            f64::from(u8::from(info.pause.is_some())),
        ));
        hold.samples.push((
            format!("batch=\"{b}\""),
            info.held(now)
                .map_or(0.0, |h| (h.until - now) as f64 / 1000.0),
        ));
        let held = info.locks.iter().any(|l| l.expires_at >= now);
        lock.samples
            .push((format!("batch=\"{b}\""), f64::from(u8::from(held))));
        if let Some(run) = &info.last_run {
            last_run_time
                .samples
                .push((format!("batch=\"{b}\""), run.started_at as f64 / 1000.0));
            if run.state != RunState::Running {
                let ok = matches!(run.state, RunState::Ok);
                last_run_ok.samples.push((
                    format!("batch=\"{b}\",state=\"{}\"", run.state),
                    f64::from(u8::from(ok)),
                ));
            }
        }
        let age = if store.batch_names()?.contains(&info.name) {
            store
                .oldest_pending(&info.name)?
                .map_or(0.0, |t| (now - t).max(0) as f64 / 1000.0)
        } else {
            0.0
        };
        oldest.samples.push((format!("batch=\"{b}\""), age));
    }
    let mut out = String::new();
    for family in [
        items,
        paused,
        hold,
        lock,
        last_run_time,
        last_run_ok,
        oldest,
    ] {
        let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
        let _ = writeln!(out, "# TYPE {} gauge", family.name);
        for (labels, value) in family.samples {
            let _ = writeln!(out, "{}{{{labels}}} {value}", family.name);
        }
    }
    Ok(out.trim_end().to_string())
}
