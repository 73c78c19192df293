//! `nightshift requeue` and `nightshift skip`: operator actions, each
//! recorded as events with `user@host`.

use anyhow::Context;
use serde_json::{Value, json};

use super::table::Table;
use super::{Ctx, Exit, class_given, out, out_json, reason_given, user_error};
use crate::cli::{RequeueArgs, SkipArgs};
use crate::store::{Refusal, Selection, StoreError, missing_group};
use crate::util::identity::actor;
use crate::util::noun;
use crate::util::sanitize;
use crate::util::signals::Stop;
use crate::util::time::now_ms;

pub fn requeue(ctx: &Ctx, args: &RequeueArgs) -> anyhow::Result<Exit> {
    class_given(args.class.as_deref())?;
    if args.keys.is_empty()
        && !args.all_failed
        && args.class.is_none()
        && args.tier.is_none()
        && args.outcome.is_none()
        && !args.stale
    {
        return Err(user_error(
            "say which items to requeue: KEY..., --all-failed, --class ERROR_CLASS, --tier retry|manual, \
             --outcome empty|done|skipped (done items, to run them again) or --stale (done under \
             an older version)",
        ));
    }
    let mut sel = Selection {
        keys: Vec::new(),
        class: args.class.clone(),
        tier: args.tier.map(Into::into),
        all_failed: args.all_failed,
        outcome: args.outcome.map(Into::into),
        stale: args
            .stale
            .then(|| super::items::stale_version(ctx, &args.batch))
            .transpose()?,
        not_before: args.not_before.map(|w| w.at(now_ms())),
    };
    // A dry run only reads, so it works on a read-only store too.
    let mut store = if args.dry_run {
        ctx.open_read()?
    } else {
        let mut store = ctx.open_write()?;
        // A signal stops the requeue between chunks; the error says exactly
        // how many items moved.
        store.set_stop(Stop::on_signals().context("installing signal handlers")?);
        store
    };
    // Each key named as the batch holds it (`named::keyed`).
    sel.keys = super::named::keyed_all(&store, &args.batch, &args.keys)?;
    // Only a dry run and `--json` list the items: the rest counts them,
    // which reads no item's key or label. (How many, and those listed.)
    let moved = if args.dry_run || args.json {
        store
            .requeue(
                &args.batch,
                &sel,
                args.reset_attempts,
                args.dry_run,
                &actor(),
                now_ms(),
            )
            .map(|items| (items.len(), items))
    } else {
        store
            .requeue_counted(&args.batch, &sel, args.reset_attempts, &actor(), now_ms())
            .map(|n| (n, Vec::new()))
    };
    // Closed before the output, which opens the store again where it must
    // (`no_such_class`).
    drop(store);
    let moved = match args.keys.first() {
        Some(key) => ctx.no_key_if_unseen(&args.batch, key, moved),
        None => ctx.empty_if_unseen(&args.batch, moved),
    };
    let (count, moved) = moved?;
    if args.json {
        out_json(&json!({
            "batch": args.batch,
            "dry_run": args.dry_run,
            "count": count,
            "items": moved,
            "not_before": sel.not_before.map(crate::util::time::rfc3339),
        }))?;
        return Ok(Exit::Ok);
    }
    let verb = if args.dry_run {
        "would requeue"
    } else {
        "requeued"
    };
    out(format!(
        "{}: {verb} {}{}",
        sanitize::line(&args.batch),
        noun::count(count, "item"),
        sel.not_before.map_or(String::new(), |t| format!(
            ", not before {}",
            crate::util::time::rfc3339(t)
        ))
    ))?;
    if count == 0
        && let Some(class) = &args.class
    {
        out(no_such_class(ctx, &args.batch, class)?)?;
    }
    if args.dry_run && !moved.is_empty() {
        let mut table = Table::new(&["KEY", "LABEL", "FROM", "ERROR CLASS", "ATTEMPTS"]);
        for r in &moved {
            let from = match (r.tier, r.outcome) {
                (Some(t), _) => format!("failed/{t}"),
                (None, Some(o)) => format!("done/{o}"),
                (None, None) => String::new(),
            };
            table.row(vec![
                r.key.clone(),
                crate::key::label_column(&r.key, &r.label).to_string(),
                from,
                r.error_class.clone().unwrap_or_default(),
                r.attempts.to_string(),
            ]);
        }
        out(table.render())?;
    }
    Ok(Exit::Ok)
}

/// What a refusal of keys named adds to `--json`'s failure answer (see
/// [`failure`](super::failure)): the keys by reason, as the error line on
/// stderr groups them, so that a script reads which keys to fix. The only
/// key refused, none of whose item is there, has the store's own error (a
/// pruned key says when), and its group too.
pub(super) fn refused_json(batch: &str, dry_run: bool, err: &anyhow::Error) -> Option<Value> {
    let groups = err
        .chain()
        .find_map(|c| c.downcast_ref::<StoreError>())
        .and_then(|e| match e {
            StoreError::Refused(Refusal::Keys(refused)) => Some(refused.groups.clone()),
            e => missing_group(e).map(|g| vec![g]),
        })?;
    Some(json!({
        "batch": batch,
        "dry_run": dry_run,
        "refused": groups,
    }))
}

/// Why a requeue by class moved nothing, with the classes that are failed
/// now: a mistyped class read "requeued 0 items" like a batch with nothing
/// to send back.
fn no_such_class(ctx: &Ctx, batch: &str, class: &str) -> anyhow::Result<String> {
    let failed: Vec<(String, i64)> = ctx
        .open_read()?
        .dlq_groups(batch, now_ms())
        .unwrap_or_default()
        .into_iter()
        .map(|g| (g.error_class, g.retry_now + g.manual_now))
        .filter(|(_, n)| *n > 0)
        .collect();
    let shown = sanitize::line(class);
    Ok(if failed.is_empty() {
        format!("  no item is failed now, of class {shown} or any other")
    } else if failed.iter().any(|(c, _)| c == class) {
        format!("  no failed item of class {shown} matches the other filters")
    } else {
        let now: Vec<String> = failed
            .iter()
            .map(|(c, n)| format!("{} ({n})", sanitize::line(c)))
            .collect();
        format!(
            "  no failed item has the class {shown}; failed now: {}",
            now.join(", ")
        )
    })
}

pub fn skip(ctx: &Ctx, args: &SkipArgs) -> anyhow::Result<Exit> {
    reason_given(&args.reason, "why the items are skipped")?;
    let by = actor();
    // A dry run only reads (the same refusals), so it works on a read-only
    // store too.
    // Each key named as the batch holds it (`named::keyed`).
    let report = if args.dry_run {
        let store = ctx.open_read()?;
        let keys = super::named::keyed_all(&store, &args.batch, &args.keys)?;
        store.skip_dry_run(&args.batch, &keys, now_ms())
    } else {
        let mut store = ctx.open_write()?;
        let keys = super::named::keyed_all(&store, &args.batch, &args.keys)?;
        store.skip(&args.batch, &keys, &args.reason, &by, now_ms())
    };
    let report = ctx.no_key_if_unseen(&args.batch, &args.keys[0], report);
    let report = report?;
    if args.json {
        out_json(&json!({
            "batch": args.batch,
            "dry_run": args.dry_run,
            "skipped": report.skipped,
            "already_done": report.already_done,
            "reason": args.reason,
            "by": by,
        }))?;
        return Ok(Exit::Ok);
    }
    let verb = if args.dry_run {
        "would skip"
    } else {
        "skipped"
    };
    let mut msg = format!(
        "{}: {verb} {}",
        sanitize::line(&args.batch),
        crate::util::noun::count(report.skipped.len() as u64, "item")
    );
    if !report.already_done.is_empty() {
        msg.push_str(&format!(", {} done already", report.already_done.len()));
    }
    out(msg)?;
    if args.dry_run {
        let mut table = Table::new(&["KEY", "WOULD"]);
        for key in &report.skipped {
            table.row(vec![key.clone(), "be skipped".into()]);
        }
        for key in &report.already_done {
            table.row(vec![key.clone(), "stay as it is (done already)".into()]);
        }
        out(table.render())?;
    }
    Ok(Exit::Ok)
}
