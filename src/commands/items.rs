//! `nightshift items` and `nightshift show`.

use serde_json::json;

use super::table::Table;
use super::{Ctx, Exit, class_given, named, out, out_json, out_json_pretty, user_error};
use crate::cli::{ItemsArgs, ShowArgs};
use crate::model::{Item, Outcome, Status, Tombstone};
use crate::store::{EventFilter, ItemFilter, Store, StoreError};
use crate::util::time::{now_ms, relative, rfc3339};
use crate::util::{noun, sanitize};

/// The short state word shown for an item: status, with tier or outcome.
pub fn state_word(item: &Item) -> String {
    crate::model::state_word(item.status, item.tier, item.outcome)
}

pub fn list(ctx: &Ctx, args: &ItemsArgs) -> anyhow::Result<Exit> {
    class_given(args.class.as_deref())?;
    let outcome: Option<Outcome> = args.outcome.map(Into::into);
    if let (Some(o), Some(s)) = (outcome, args.status.map(Status::from))
        && s != Status::Done
    {
        return Err(user_error(format!(
            "--outcome {o} lists done items: it cannot be combined with --status {s}"
        )));
    }
    // An error class and a tier are a failed item's: a requeued or done
    // item keeps its last error's class, but is not failed of it.
    let failed_by = match (&args.class, args.tier) {
        (Some(_), _) => Some("--class"),
        (None, Some(_)) => Some("--tier"),
        (None, None) => None,
    };
    let status = match (failed_by, args.status.map(Status::from)) {
        (Some(flag), Some(s)) if s != Status::Failed => {
            return Err(user_error(format!(
                "{flag} lists failed items: it cannot be combined with --status {s}"
            )));
        }
        (Some(_), _) => Some(Status::Failed),
        (None, s) => s,
    };
    let stale = args
        .stale
        .then(|| stale_version(ctx, &args.batch))
        .transpose()?;
    let store = ctx.open_read()?;
    let filter = ItemFilter {
        status,
        tier: args.tier.map(Into::into),
        outcome,
        error_class: args.class.clone(),
        search: args.search.clone(),
        stale: stale.clone(),
        // One more than asked: whether the list is cut, said under it.
        limit: args.limit.map(|n| n.saturating_add(1)),
        ..ItemFilter::default()
    };
    let mut items = ctx.empty_if_unseen(&args.batch, store.items(&args.batch, &filter))?;
    let cut = args.limit.filter(|n| items.len() > *n);
    if let Some(n) = cut {
        items.truncate(n);
    }
    let now = now_ms();
    let waits = Reasons::read(ctx, &store, &args.batch, now)?;
    if args.json {
        #[derive(serde::Serialize)]
        struct Listed<'a> {
            #[serde(flatten)]
            item: &'a Item,
            waiting: serde_json::Value,
            waiting_all: serde_json::Value,
        }
        for item in &items {
            let (waiting, waiting_all) = waits_json(&waits.of(item));
            out_json(&Listed {
                item,
                waiting,
                waiting_all,
            })?;
        }
        return Ok(Exit::Ok);
    }
    // The last failure's words stay with an item sent back or done
    // since: "LAST", as the dashboard says, so a pending item is not read
    // as in error.
    let last = if stale.is_some() {
        "DONE UNDER"
    } else {
        "LAST ERROR"
    };
    let waiting: Vec<String> = items
        .iter()
        .map(|item| {
            waits
                .of(item)
                .iter()
                .map(|w| wait_word(w, now))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .collect();
    // The column where something listed waits (a list of done items has none).
    let any_waits = waiting.iter().any(|w| !w.is_empty());
    // Every reason an item waits, whole: a cut hid the last ones.
    let mut table = if any_waits {
        Table::new(&["KEY", "LABEL", "STATE", "ATTEMPTS", "WAITING", last]).whole(4)
    } else {
        Table::new(&["KEY", "LABEL", "STATE", "ATTEMPTS", last])
    };
    for (item, waiting) in items.iter().zip(waiting) {
        let error = match (&item.error_class, &item.error_message) {
            _ if stale.is_some() => item
                .done_version
                .clone()
                .unwrap_or_else(|| NO_VERSION.into()),
            (Some(class), Some(msg)) => format!("{class}: {msg}"),
            (Some(class), None) => class.clone(),
            _ => String::new(),
        };
        let mut row = vec![
            item.key.clone(),
            crate::key::label_column(&item.key, &item.label).to_string(),
            state_word(item),
            item.attempts.to_string(),
        ];
        if any_waits {
            row.push(waiting);
        }
        row.push(error);
        table.row(row);
    }
    if table.is_empty() {
        out("no items match")?;
    } else {
        out(table.render())?;
    }
    if let Some(n) = cut {
        out(format!(
            "… more items match: the first {n} shown (--limit {n}; raise it or leave it out for all)"
        ))?;
    }
    Ok(Exit::Ok)
}

/// What a batch's items wait for, read once for every item listed.
struct Reasons {
    batch: Option<(crate::model::BatchInfo, crate::model::waiting::Holding)>,
    now: crate::model::Millis,
}

impl Reasons {
    fn read(
        ctx: &Ctx,
        store: &Store,
        batch: &str,
        now: crate::model::Millis,
    ) -> anyhow::Result<Reasons> {
        let info = match store.batch_infos(Some(batch)) {
            Ok(infos) => infos.into_iter().next(),
            Err(StoreError::UnknownBatch { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        let batch = match info {
            Some(info) => {
                let scene = super::scene::Scene::read(ctx, store, now)?;
                scene.holding(ctx, store, &info)?.map(|h| (info, h))
            }
            None => None,
        };
        Ok(Reasons { batch, now })
    }

    /// Every reason `item` waits, each a list entry of one item (empty:
    /// it is finished or being worked).
    fn of(&self, item: &Item) -> Vec<crate::model::waiting::Waiting> {
        use crate::model::waiting::{Waits, item_waits};
        match self.batch.as_ref() {
            Some((info, h)) => item_waits(h, Waits::of(item, info), self.now),
            None => Vec::new(),
        }
    }
}

/// An item's waits in `--json` (`items` and `show` alike): `waiting`, the
/// one it is counted under (or null), as it always was, so scripts reading
/// `.waiting.reason` go on working; and `waiting_all`, every reason that
/// applies, that one first.
fn waits_json(list: &[crate::model::waiting::Waiting]) -> (serde_json::Value, serde_json::Value) {
    let all: Vec<serde_json::Value> = list
        .iter()
        .map(|w| {
            json!({
                "reason": w.reason,
                "until": w.until.map(rfc3339),
                "pool": w.pool.as_ref().map(|p| &p.pool),
                "dimension": w.pool.as_ref().map(|p| &p.dimension),
            })
        })
        .collect();
    (
        all.first().cloned().unwrap_or(serde_json::Value::Null),
        serde_json::Value::Array(all),
    )
}

/// An item's wait in the `items` table: its reason, and until when
/// (`budget until 00:00:00Z`), to the second.
fn wait_word(w: &crate::model::waiting::Waiting, now: crate::model::Millis) -> String {
    match w.until {
        Some(t) => format!(
            "{} until {}",
            w.reason,
            crate::util::time::utc_clock(t, now)
        ),
        None => w.reason.to_string(),
    }
}

/// What a done item without a version was done under, in every view.
pub(super) const NO_VERSION: &str = "(no version)";

/// The batch's `version`, which `--stale` compares against: without one
/// nothing is stale, and asking is an error rather than an empty list.
pub(super) fn stale_version(ctx: &Ctx, batch: &str) -> anyhow::Result<String> {
    ctx.batch_config(batch).version.ok_or_else(|| {
        user_error(format!(
            "--stale: batch {batch} sets no `version` in the config, so no item is stale; \
             set `version = \"...\"` under {table} first",
            batch = sanitize::line(batch),
            table = sanitize::line(&crate::batch_name::toml_table(batch)),
        ))
    })
}

pub fn show(ctx: &Ctx, args: &ShowArgs) -> anyhow::Result<Exit> {
    let store = ctx.open_read()?;
    let item = match named::find(ctx, &store, &args.batch, &args.key, named::SHOW) {
        Err(e) => match e.downcast::<StoreError>() {
            Ok(StoreError::Pruned { tombstone, .. }) => return show_pruned(args, &tombstone),
            Ok(other) => return Err(other.into()),
            Err(e) => return Err(e),
        },
        Ok(item) => item,
    };
    let failures = store.item_failures(item.id)?;
    let events = store.events(&EventFilter {
        batch: Some(args.batch.clone()),
        key: Some(item.key.clone()),
        limit: 1000,
        ..EventFilter::default()
    })?;
    let logs = store.attempt_logs(item.id)?;
    let now = now_ms();
    let reasons = Reasons::read(ctx, &store, &item.batch, now)?;
    let waits = reasons.of(&item);
    let info = reasons.batch.as_ref().map(|(info, _)| info);
    let cfg = ctx.batch_config(&item.batch);
    let rules = crate::model::claim_view::Rules {
        pool: cfg.pool.as_ref().map(|p| p.name.as_str()),
        max_attempts: cfg.max_attempts,
        holding: reasons.batch.as_ref().map(|(_, h)| h),
    };
    let claim = info
        .as_ref()
        .and_then(|i| crate::model::claim_view::of(i, &item, rules, now));
    let usage = store.item_usage(&args.batch, &item.key)?;
    if args.json {
        // A struct, not `json!`: that reads the payload and the result
        // back through `Value`, their numbers through floats.
        #[derive(serde::Serialize)]
        struct Shown<'a, F: serde::Serialize, E: serde::Serialize, L: serde::Serialize> {
            #[serde(skip_serializing_if = "Option::is_none")]
            attempts: Option<&'a L>,
            claim: Option<serde_json::Value>,
            events: &'a E,
            failures: &'a F,
            item: &'a Item,
            usage: Vec<serde_json::Value>,
            waiting: serde_json::Value,
            waiting_all: serde_json::Value,
        }
        let (waiting, waiting_all) = waits_json(&waits);
        out_json_pretty(&Shown {
            attempts: args.attempts.then_some(&logs),
            claim: claim
                .as_ref()
                .map(crate::model::claim_view::ClaimView::json),
            events: &events,
            failures: &failures,
            item: &item,
            usage: usage.iter().map(super::pools::attempt_json).collect(),
            waiting,
            waiting_all,
        })?;
        return Ok(Exit::Ok);
    }
    let s = |t: &str| sanitize::line(t).into_owned();
    out(format!("key:       {}", s(&item.key)))?;
    out(format!("label:     {}", s(&item.label)))?;
    out(format!("batch:     {}", s(&item.batch)))?;
    out(format!("state:     {}", state_word(&item)))?;
    out(format!("attempts:  {}", crate::model::attempts_said(&item)))?;
    if let Some(claim) = &claim {
        out(format!("claim:     {}", claim.line(now)))?;
    }
    // The default priority (0) is not said.
    if item.priority != 0 {
        out(format!("priority:  {}", item.priority))?;
    }
    if let Some(op) = &item.op_id {
        out(format!("op id:     {}", s(op)))?;
    }
    if let Some(at) = item.next_attempt_at {
        let what = if item.status == Status::Pending {
            "runs from:"
        } else {
            "next try: "
        };
        out(format!("{what} {} ({})", rfc3339(at), relative(at, now)))?;
    }
    if let Some(cost) = item.cost {
        out(format!("cost:      {}", crate::util::money::money(cost)))?;
    }
    if let Some(v) = item
        .done_version
        .as_deref()
        .filter(|_| item.status == Status::Done)
    {
        out(format!("version:   done under {}", s(v)))?;
    }
    // Every reason, one a line.
    for (i, one) in waits.into_iter().enumerate() {
        out(format!(
            "{}{}",
            if i == 0 { "waiting:   " } else { "           " },
            crate::model::waiting::describe(&[one], now)
        ))?;
    }
    out(format!(
        "created:   {}   updated: {} ({})",
        rfc3339(item.created_at),
        rfc3339(item.updated_at),
        relative(item.updated_at, now)
    ))?;
    if let (Some(class), Some(msg)) = (&item.error_class, &item.error_message) {
        // A requeued or done item keeps its last failure's words; it is
        // not failed of it now (`items` heads that column LAST).
        let then = if item.status == Status::Failed {
            String::new()
        } else {
            format!(" (its last failure; it is {} now)", state_word(&item))
        };
        out(format!("error:     {}: {}{then}", s(class), s(msg)))?;
    }
    out("payload:")?;
    let pretty = item.payload.pretty();
    for line in pretty.lines() {
        out(format!("  {}", s(line)))?;
    }
    if let Some(result) = &item.result {
        out("result:")?;
        let pretty = result.pretty();
        for line in pretty.lines() {
            out(format!("  {}", s(line)))?;
        }
    }
    if !usage.is_empty() {
        out(format!("tokens ({}):", noun::count(usage.len(), "attempt")))?;
        for u in &usage {
            let n = |t: Option<i64>| t.map_or("?".into(), |t| t.to_string());
            let reported = if u.input_tokens.is_none() && u.output_tokens.is_none() {
                format!("nothing reported, {} estimated", u.estimate)
            } else {
                format!("{} in + {} out", n(u.input_tokens), n(u.output_tokens))
            };
            out(format!(
                "  {}  attempt {}  {reported}",
                rfc3339(u.at),
                u.attempt
            ))?;
        }
    }
    if !failures.is_empty() {
        out(format!("failures ({}), newest first:", failures.len()))?;
        for f in &failures {
            out(format!(
                "  {}  attempt {}  {}  {}: {}",
                rfc3339(f.failed_at),
                f.attempt,
                f.then(),
                s(&f.error_class),
                s(&f.message)
            ))?;
        }
    }
    if args.attempts {
        out(format!(
            "stderr of the attempts ({} kept), newest first:",
            logs.len()
        ))?;
        for log in &logs {
            let run = log.run_id.map(|r| format!("  run {r}")).unwrap_or_default();
            out(format!(
                "  attempt {}  {}{run}",
                log.attempt,
                rfc3339(log.at)
            ))?;
            if log.cut {
                out("    … earlier output cut (the last 16 KiB of each attempt are kept)")?;
            }
            for line in sanitize::text(&log.stderr).lines() {
                out(format!("    {line}"))?;
            }
        }
    } else if !logs.is_empty() {
        out(format!(
            "stderr:    kept for {}: nightshift show {} {} --attempts",
            noun::count(logs.len(), "attempt"),
            sanitize::shell_word(&args.batch),
            sanitize::shell_word(&item.key)
        ))?;
    }
    out(format!("events ({}):", events.len()))?;
    for e in &events {
        let who = e
            .named_actor()
            .map(|a| format!(" [{}]", s(a)))
            .unwrap_or_default();
        out(format!(
            "  {}  {} {}{who}",
            rfc3339(e.at),
            crate::util::text::pad(&s(&e.kind), 12),
            s(&e.message)
        ))?;
    }
    Ok(Exit::Ok)
}

/// `show` of a key whose item was done and pruned: what its tombstone keeps.
fn show_pruned(args: &ShowArgs, t: &Tombstone) -> anyhow::Result<Exit> {
    if args.json {
        out_json_pretty(&json!({
            "item": null,
            "pruned": {
                "key": t.key,
                "outcome": t.outcome,
                "done_at": rfc3339(t.done_at),
                "pruned_at": rfc3339(t.pruned_at),
            },
        }))?;
        return Ok(Exit::Ok);
    }
    let now = now_ms();
    out(format!("key:       {}", sanitize::line(&t.key)))?;
    out(format!("batch:     {}", sanitize::line(&args.batch)))?;
    out(format!(
        "state:     pruned on {} ({}), outcome {}",
        rfc3339(t.pruned_at),
        relative(t.pruned_at, now),
        t.outcome
    ))?;
    out(format!("done:      {}", rfc3339(t.done_at)))?;
    out(
        "only the key is kept: adding the item again does not run it again \
         (`nightshift prune --forget-keys` forgets it)",
    )?;
    Ok(Exit::Ok)
}
