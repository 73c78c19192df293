//! `nightshift dlq`: the morning check (dead letters by error class, last
//! 24 h vs the 24 h before) and the JSON-lines export for `jq`.

use serde_json::json;

use super::table::Table;
use super::{Ctx, Exit, out, out_json};
use crate::cli::DlqArgs;
use crate::util::sanitize;
use crate::util::time::{now_ms, rfc3339};

pub fn run(ctx: &Ctx, args: &DlqArgs) -> anyhow::Result<Exit> {
    let store = ctx.open_read()?;
    let now = now_ms();
    let since = args.since.map(|d| now - d.as_millis() as i64);
    if args.jsonl {
        for d in store.dead_letters(&args.batch, since, args.class.as_deref())? {
            out_json(&json!({
                "job_id": d.key,
                "payload": d.payload,
                "error_class": d.error_class,
                "message": d.message,
                "attempt": d.attempt,
                "failed_at": rfc3339(d.failed_at),
                "tier": d.tier,
                "label": d.label,
                "batch": d.batch,
                "run_id": d.run_id,
            }))?;
        }
        return Ok(Exit::Ok);
    }
    let mut groups = store.dlq_groups(&args.batch, now)?;
    if let Some(class) = &args.class {
        groups.retain(|g| &g.error_class == class);
    }
    if args.json {
        out_json(&json!({ "batch": args.batch, "classes": groups }))?;
        return Ok(Exit::Ok);
    }
    if groups.is_empty() {
        out(format!("{}: no dead letters", sanitize::line(&args.batch)))?;
        return Ok(Exit::Ok);
    }
    let mut table = Table::new(&[
        "ERROR CLASS",
        "LAST 24H",
        "PREV 24H",
        "DELTA",
        "ALL TIME",
        "FAILED NOW (retry/manual)",
    ]);
    for g in &groups {
        let delta = g.last_24h - g.prev_24h;
        table.row(vec![
            g.error_class.clone(),
            g.last_24h.to_string(),
            g.prev_24h.to_string(),
            format!("{delta:+}"),
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
