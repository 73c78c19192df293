//! `nightshift schedule BATCH`: the next fire times, in the batch's time
//! zone and in UTC; while a live daemon fires another schedule than the
//! file's (edited, not reloaded), the daemon's, saying so.

use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use serde_json::json;

use super::table::Table;
use super::{Ctx, Exit, out, out_json, user_error};
use crate::cli::ScheduleArgs;
use crate::config::{BatchConfig, Schedule};
use crate::duration::format_duration;
use crate::model::{BatchInfo, DaemonInfo, Millis};
use crate::schedule::seen::{Configured, seen};
use crate::store::StoreError;
use crate::util::sanitize;
use crate::util::time::{relative, rfc3339};

pub fn run(ctx: &Ctx, args: &ScheduleArgs) -> anyhow::Result<Exit> {
    let (cfg, _) = scheduled_batch(ctx, &args.batch)?;
    let now = crate::util::time::now();
    let (info, daemons) = known(ctx, &cfg.name, now.timestamp_millis())?;
    let config = Configured::of(cfg);
    // The fires a live daemon plans, by the rule it read: the file may
    // have been edited since.
    let Some(seen) = seen(&info, config, &daemons, now.timestamp_millis()) else {
        return Ok(Exit::Ok);
    };
    let (expr, tz) = (&seen.rule.schedule.expr, seen.rule.tz);
    let fires = seen.upcoming(usize::from(args.next));
    let note = seen.config_note(config);
    // As every view: with no live daemon, these times fire nothing.
    let no_daemon = seen.no_daemon(now.timestamp_millis());
    if args.json {
        out_json(&json!({
            "batch": cfg.name,
            "schedule": expr,
            "timezone": tz.name(),
            "catch_up": cfg.catch_up.map(format_duration),
            "overlap": cfg.overlap.as_str(),
            "fires": no_daemon.is_none(),
            "why": no_daemon,
            "config_differs": seen.config_differs,
            "config": super::status::file_schedule_json(&seen, config),
            "missed": super::status::missed_json(&seen),
            "late": super::status::late_json(&seen),
            "next_fires": fires.iter().map(|f| json!({
                "utc": rfc3339(f.timestamp_millis()),
                "local": f.with_timezone(&tz).to_rfc3339_opts(SecondsFormat::Secs, true),
            })).collect::<Vec<_>>(),
        }))?;
        return Ok(Exit::Ok);
    }
    out(format!(
        "{}: `{expr}` in {}{}; catch_up {}; overlap {}",
        sanitize::line(&cfg.name),
        tz.name(),
        if seen.config_differs {
            " (the live daemon's)"
        } else {
            ""
        },
        cfg.catch_up.map_or("off".to_string(), format_duration),
        cfg.overlap
    ))?;
    if let Some(why) = &no_daemon {
        out(format!("{why}, so nothing fires; its fire times:"))?;
    }
    if let Some(note) = note {
        out(note)?;
    }
    // Not fired, as `status` says them: missed, or late and still to run.
    for line in seen.unfired_text(|t| local(&t, tz)) {
        out(line)?;
    }
    let zone = format!("LOCAL ({})", tz.name());
    let mut table = Table::new(&[zone.as_str(), "UTC", "IN"]);
    for f in &fires {
        table.row(vec![
            local(f, tz),
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

/// What the store knows of `batch`'s fires and of the daemons: nothing
/// when there is no store yet (no daemon fires anything then).
fn known(ctx: &Ctx, batch: &str, now: Millis) -> anyhow::Result<(BatchInfo, Vec<DaemonInfo>)> {
    let store = match ctx.open_read() {
        Ok(store) => store,
        Err(e) if matches!(e.downcast_ref(), Some(StoreError::NotFound(_))) => {
            return Ok((BatchInfo::empty(batch), Vec::new()));
        }
        Err(e) => return Err(e),
    };
    let read = store.snapshot(|store| -> anyhow::Result<_> {
        let infos = ctx.empty_if_unseen(batch, store.batch_infos(Some(batch)))?;
        let info = infos
            .into_iter()
            .next()
            .unwrap_or_else(|| BatchInfo::empty(batch));
        Ok((info, store.daemons(now)?))
    })??;
    Ok(read)
}

/// `2026-03-08 03:00:00 EDT`.
pub fn local(at: &DateTime<Utc>, tz: Tz) -> String {
    at.with_timezone(&tz)
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
