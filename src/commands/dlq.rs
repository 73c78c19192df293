//! `nightshift dlq`: the morning check (dead letters by error class, last
//! 24 h vs the 24 h before, or two `--since` windows) and the JSON-lines
//! export for `jq`.

use serde_json::json;

use super::table::Table;
use super::{Ctx, Exit, class_given, out, out_json};
use crate::cli::DlqArgs;
use crate::duration::format_duration;
use crate::util::sanitize;
use crate::util::time::{now_ms, rfc3339};

pub fn run(ctx: &Ctx, args: &DlqArgs) -> anyhow::Result<Exit> {
    class_given(args.class.as_deref())?;
    let store = ctx.open_read()?;
    let now = now_ms();
    let since = args.since.map(|d| now - d.as_millis() as i64);
    if args.jsonl {
        let letters = store.dead_letters(&args.batch, since, args.class.as_deref());
        for d in ctx.empty_if_unseen(&args.batch, letters)? {
            // `job_id` as the seeds' jq one-liners read it; `key` and
            // `label` as everything else names an item.
            // Written as it is (fields in the order `json!` gave them),
            // so the payload's numbers and key order are as given.
            #[derive(serde::Serialize)]
            struct Letter<'a> {
                attempt: u32,
                batch: &'a str,
                error_class: &'a str,
                failed_at: String,
                job_id: &'a str,
                key: &'a str,
                label: &'a str,
                message: &'a str,
                payload: &'a crate::util::json_text::JsonText,
                run_id: Option<i64>,
                tier: crate::model::Tier,
            }
            out_json(&Letter {
                attempt: d.attempt,
                batch: &d.batch,
                error_class: &d.error_class,
                failed_at: rfc3339(d.failed_at),
                job_id: &d.key,
                key: &d.key,
                label: &d.label,
                message: &d.message,
                payload: &d.payload,
                run_id: d.run_id,
                tier: d.tier,
            })?;
        }
        return Ok(Exit::Ok);
    }
    let mut groups = ctx.empty_if_unseen(&args.batch, store.dlq_groups(&args.batch, now))?;
    if let Some(class) = &args.class {
        groups.retain(|g| &g.error_class == class);
    }
    // Windows are said in whole seconds (`1500ms` read as `1S`).
    if let Some(since) = args.since.filter(|s| s.subsec_nanos() != 0) {
        return Err(super::user_error(format!(
            "--since {}ms: give the window in whole seconds (30s, 10m, 2h, 7d)",
            since.as_millis()
        )));
    }
    // The two windows compared: 24 h from the rollups, or --since long.
    let window = args
        .since
        .map_or_else(|| "24h".to_string(), format_duration);
    let windowed = match args.since {
        Some(since) => {
            let counts = store.dlq_window_counts(&args.batch, now, since.as_millis() as i64);
            Some(ctx.empty_if_unseen(&args.batch, counts)?)
        }
        None => None,
    };
    let counts = |class: &str, last_24h: i64, prev_24h: i64| match &windowed {
        Some(rows) => rows
            .iter()
            .find(|(c, _, _)| c == class)
            .map_or((0, 0), |(_, last, prev)| (*last, *prev)),
        None => (last_24h, prev_24h),
    };
    if args.json {
        let classes: Vec<_> = groups
            .iter()
            .map(|g| {
                let (last, prev) = counts(&g.error_class, g.last_24h, g.prev_24h);
                let mut v = json!(g);
                v["last"] = json!(last);
                v["prev"] = json!(prev);
                v
            })
            .collect();
        out_json(&json!({ "batch": args.batch, "window": window, "classes": classes }))?;
        return Ok(Exit::Ok);
    }
    if groups.is_empty() {
        let of_class = args
            .class
            .as_deref()
            .map_or_else(String::new, |c| format!(" of class {}", sanitize::line(c)));
        out(format!(
            "{}: no dead letters{of_class}",
            sanitize::line(&args.batch)
        ))?;
        return Ok(Exit::Ok);
    }
    let last_header = format!("LAST {}", window.to_uppercase());
    let prev_header = format!("PREV {}", window.to_uppercase());
    let mut table = Table::new(&[
        "ERROR CLASS",
        &last_header,
        &prev_header,
        "DELTA",
        "ALL TIME",
        "FAILED NOW (retry/manual)",
    ]);
    for g in &groups {
        let (last, prev) = counts(&g.error_class, g.last_24h, g.prev_24h);
        table.row(vec![
            g.error_class.clone(),
            last.to_string(),
            prev.to_string(),
            format!("{:+}", last - prev),
            g.total.to_string(),
            format!(
                "{} ({}/{})",
                g.retry_now + g.manual_now,
                g.retry_now,
                g.manual_now
            ),
        ]);
    }
    out(table.render())?;
    Ok(Exit::Ok)
}
