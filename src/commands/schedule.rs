//! `nightshift schedule BATCH`: the next fire times, in the batch's time
//! zone and in UTC.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::json;

use super::table::Table;
use super::{Ctx, Exit, out, out_json, user_error};
use crate::cli::ScheduleArgs;
use crate::config::{BatchConfig, Schedule};
use crate::duration::format_duration;
use crate::util::sanitize;
use crate::util::time::{relative, rfc3339};

pub fn run(ctx: &Ctx, args: &ScheduleArgs) -> anyhow::Result<Exit> {
    let (cfg, schedule) = scheduled_batch(ctx, &args.batch)?;
    let now = crate::util::time::now();
    let fires = schedule.upcoming(now, cfg.timezone, usize::from(args.next));
    if args.json {
        out_json(&json!({
            "batch": cfg.name,
            "schedule": schedule.expr,
            "timezone": cfg.timezone.name(),
            "catch_up": cfg.catch_up.map(format_duration),
            "overlap": cfg.overlap.as_str(),
            "next_fires": fires.iter().map(|f| json!({
                "utc": rfc3339(f.timestamp_millis()),
                "local": f.with_timezone(&cfg.timezone).to_rfc3339_opts(SecondsFormat::Secs, true),
            })).collect::<Vec<_>>(),
        }))?;
        return Ok(Exit::Ok);
    }
    out(format!(
        "{}: `{}` in {}; catch_up {}; overlap {}",
        sanitize::line(&cfg.name),
        schedule.expr,
        cfg.timezone.name(),
        cfg.catch_up.map_or("off".to_string(), format_duration),
        cfg.overlap
    ))?;
    let zone = format!("LOCAL ({})", cfg.timezone.name());
    let mut table = Table::new(&[zone.as_str(), "UTC", "IN"]);
    for f in &fires {
        table.row(vec![
            local(f, cfg),
            f.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            relative(f.timestamp_millis(), now.timestamp_millis()),
        ]);
    }
    out(table.render())?;
    if fires.len() < usize::from(args.next) {
        out("(the schedule fires no more after these)")?;
    }
    Ok(Exit::Ok)
}

/// `2026-03-08 03:00:00 EDT`.
pub fn local(at: &DateTime<Utc>, cfg: &BatchConfig) -> String {
    at.with_timezone(&cfg.timezone)
        .format("%Y-%m-%d %H:%M:%S %Z")
        .to_string()
}

/// The config of a batch that has a schedule, and the schedule; or an error
/// that says where to put one.
pub fn scheduled_batch<'c>(
    ctx: &'c Ctx,
    name: &str,
) -> anyhow::Result<(&'c BatchConfig, &'c Schedule)> {
    let file = ctx.config.file.as_ref().map_or_else(
        || {
            format!(
                "nightshift.toml (none found beside {})",
                crate::store::place(&ctx.db)
            )
        },
        |f| f.display().to_string(),
    );
    match ctx.config.batch(name) {
        Some(cfg) => match &cfg.schedule {
            Some(schedule) => Ok((cfg, schedule)),
            None => Err(user_error(format!(
                "batch {} has no schedule: set `schedule = \"0 2 * * *\"` and `timezone` in {} of {file}",
                crate::batch_name::shown(name),
                crate::batch_name::toml_table(name)
            ))),
        },
        None => {
            let scheduled = scheduled_names(ctx);
            Err(user_error(format!(
                "no batch {name:?} in {file}{}",
                if scheduled.is_empty() {
                    String::new()
                } else {
                    format!(" (scheduled batches: {})", scheduled.join(", "))
                }
            )))
        }
    }
}

/// Names of the configured batches that have a schedule, sorted.
pub fn scheduled_names(ctx: &Ctx) -> Vec<String> {
    ctx.config
        .batches
        .values()
        .filter(|b| b.schedule.is_some())
        .map(|b| b.name.clone())
        .collect()
}
