//! How the views say a limit pool and token usage: `status` (a line per
//! pool, the last run's tokens), `--json` and `show`.

use serde_json::{Value, json};

use crate::config::BatchConfig;
use crate::model::Millis;
use crate::store::{AttemptUsage, PoolView, Store, UsageSum};
use crate::util::time::{rfc3339, utc_clock};
use crate::util::{noun, sanitize};

/// Every pool of the config as the store has it now.
pub fn views(ctx: &super::Ctx, store: &Store, now: Millis) -> anyhow::Result<Vec<PoolView>> {
    ctx.config
        .limits
        .values()
        .map(|p| Ok(store.pool_view(&crate::runner::pool::spec(p), now)?))
        .collect()
}

/// A pool for `--json`; `call`: the tokens the largest call of its
/// batches reserves, whose place each limit's `next_slot` says.
pub fn pool_json(v: &PoolView, call: i64, now: Millis) -> Value {
    json!({
        "name": v.name,
        "call_tokens": call,
        "limits": v.dims.iter().map(|d| json!({
            "dimension": d.dimension,
            "used": d.used,
            "free": d.free(),
            "recent": d.recent,
            "recent_is_mean": d.recent_is_mean(),
            "limit": d.limit,
            "next_slot": d.next_slot(call, now).map(rfc3339),
        })).collect::<Vec<_>>(),
        "in_flight": v.in_flight,
        "gone_places": v.gone.iter().map(|g| json!({
            "runner": g.runner,
            "places": g.places,
            "until": rfc3339(g.until),
        })).collect::<Vec<_>>(),
        "concurrency": v.concurrency,
        "hold_until": v.hold.as_ref().filter(|h| h.until > now).map(|h| rfc3339(h.until)),
        "hold_by": v.hold.as_ref().filter(|h| h.until > now).map(|h| json!({"batch": h.batch, "key": h.key, "label": h.label})),
        "tokens_per_minute": v.tokens_per_minute,
        "today": usage_json(&v.today),
    })
}

pub fn usage_json(u: &UsageSum) -> Value {
    json!({
        "attempts": u.attempts,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "unreported": u.unreported,
        "estimated_tokens": u.estimated_tokens,
    })
}

pub fn attempt_json(u: &AttemptUsage) -> Value {
    json!({
        "run_id": u.run_id,
        "attempt": u.attempt,
        "at": rfc3339(u.at),
        "pool": u.pool,
        "estimate": u.estimate,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
    })
}

/// `pool openai: requests/min 12/3000, tokens/min 4200/250000, 3/16 in
/// flight; held until 02:14:10Z by articles`, for a batch whose calls
/// reserve `call` tokens (a rate without room for them is full).
pub fn pool_line(v: &PoolView, call: i64, now: Millis) -> String {
    let mut parts: Vec<String> = v
        .dims
        .iter()
        .map(|d| {
            let full = match d.next_slot(call, now) {
                Some(t) => format!(
                    " ({}, next slot {})",
                    crate::runner::pool::full_words(d, call, |n| n.to_string()),
                    utc_clock(t, now)
                ),
                _ if d.over_window() => format!(
                    " (over its window: the bucket refills as it goes; {} free now)",
                    d.free()
                ),
                _ => String::new(),
            };
            format!(
                "{} {}/{}{}{full}",
                d.dimension,
                d.recent,
                d.limit,
                d.recent_said()
            )
        })
        .collect();
    if let Some(c) = v.concurrency {
        let mut part = format!("{}/{c} in flight", v.in_flight);
        for g in &v.gone {
            part.push_str(&format!(" — {}", gone_words(g, now)));
        }
        parts.push(part);
    }
    // A pool of a budget alone (said on its own line) has no limit here:
    // `pool shared: ; today 48 calls` said nothing with a stray `;`.
    let limits = if parts.is_empty() {
        "no rate or concurrency limit".to_string()
    } else {
        parts.join(", ")
    };
    let mut line = format!("pool {}: {limits}", v.name);
    if let Some(h) = v.hold.as_ref().filter(|h| h.until > now) {
        // The item that asked, named as a batch's own hold names it.
        let from = match h.source() {
            Some(item) => format!("{item} of {}", h.batch),
            None => h.batch.clone(),
        };
        line.push_str(&format!(
            "; held until {} (a retry-after from {from})",
            utc_clock(h.until, now)
        ));
    }
    let t = &v.today;
    if t.attempts > 0 && !has_tokens(t) {
        // A pool of requests or calls in flight whose workers report no
        // tokens: its calls, not "0 in + 0 out tokens".
        line.push_str(&format!("; today {}", noun::count(t.attempts, "call")));
    } else if t.attempts > 0 {
        line.push_str(&format!(
            "; today {} in + {} out tokens",
            t.input_tokens, t.output_tokens
        ));
        if t.unreported > 0 {
            line.push_str(&format!(
                " (+{} estimated for {} unreported)",
                t.estimated_tokens, t.unreported
            ));
        }
    }
    line
}

/// Places a gone runner left, in words: `2 places of runner host-b:1234,
/// gone: free to the next call (else they lapse at 03:12:40Z)`. Not in
/// flight: no call of it runs (see `GonePlaces`).
pub fn gone_words(g: &crate::store::GonePlaces, now: Millis) -> String {
    format!(
        "{} of runner {}, gone: free to the next call (else they lapse at {})",
        noun::count(g.places, "place"),
        sanitize::line(&g.runner),
        utc_clock(g.until, now)
    )
}

/// Whether the sum has any token to say: reported, or estimated for
/// calls that reported none.
fn has_tokens(u: &UsageSum) -> bool {
    u.attempts > u.unreported || u.estimated_tokens > 0
}

/// `tokens: 1200 in + 800 out over 10 attempts` for a run (none when its
/// calls neither reported nor reserved a token).
pub fn usage_line(u: &UsageSum) -> Option<String> {
    (u.attempts > 0 && has_tokens(u)).then(|| {
        let mut line = format!(
            "tokens: {} in + {} out over {}",
            u.input_tokens,
            u.output_tokens,
            noun::count(u.attempts, "attempt")
        );
        if u.unreported > 0 {
            line.push_str(&format!(
                " ({} reported nothing: {} estimated)",
                u.unreported, u.estimated_tokens
            ));
        }
        line
    })
}

/// A run's calls reporting more tokens, on average, than they reserved
/// before they started. The pool then lets calls start on too little and
/// settles the rest after them, so its window passes its limit until that
/// debt is paid: the usual reason a pool reads `tokens/min 513300/400000`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverEstimate {
    /// Tokens a reporting call reported, on average.
    pub mean: i64,
    /// Tokens a reporting call reserved, on average.
    pub reserved: i64,
    /// Where the reservations came from: `Some(field)` for each item's
    /// `estimate_field`, `None` for the batch's one `token_estimate`.
    pub field: Option<String>,
}

/// The run's [`OverEstimate`], if its calls went over what they reserved.
/// `None` without a pool (nothing is reserved), a report, or when within.
/// Runs recorded before their reservations were (schema 24) are compared
/// with `token_estimate`, which they all reserved.
pub fn over_estimate(u: &UsageSum, cfg: Option<&BatchConfig>) -> Option<OverEstimate> {
    let cfg = cfg.filter(|c| c.pool.is_some())?;
    let reported = u.attempts - u.unreported;
    if reported <= 0 {
        return None;
    }
    let reserved = match (u.reported_estimate, &cfg.estimate_field) {
        (0, None) => i64::try_from(cfg.token_estimate?)
            .ok()?
            .saturating_mul(reported),
        (0, Some(_)) => return None,
        (sum, _) => sum,
    };
    let mean_of = |sum: i64| (sum + reported / 2) / reported;
    let tokens = u.input_tokens.saturating_add(u.output_tokens);
    let (mean, reserved) = (mean_of(tokens), mean_of(reserved));
    (mean > reserved).then(|| OverEstimate {
        mean,
        reserved,
        field: cfg.estimate_field.clone(),
    })
}

/// `over_estimate` in words, under the run's tokens line.
pub fn over_estimate_line(o: &OverEstimate) -> String {
    let (mean, reserved) = (o.mean, o.reserved);
    match &o.field {
        None => format!(
            "reported {mean} tokens a call on average, over the {reserved} each reserved \
             (token_estimate): calls start on too little and the pool's window passes its \
             limit; raise token_estimate"
        ),
        Some(field) => format!(
            "reported {mean} tokens a call on average, over the {reserved} they reserved on \
             average (estimate_field {}): calls start on too little and the pool's window \
             passes its limit; the items' estimates are low",
            sanitize::line(&format!("{field:?}"))
        ),
    }
}

/// `over_estimate` for `--json`: `{"mean": 2676, "reserved": 1200,
/// "token_estimate": 1200}`, or with `"estimate_field": "words"` in place
/// of `token_estimate` when each item reserved its own.
pub fn over_estimate_json(over: Option<&OverEstimate>) -> Value {
    over.map_or(Value::Null, |o| match &o.field {
        None => json!({"mean": o.mean, "reserved": o.reserved, "token_estimate": o.reserved}),
        Some(field) => json!({"mean": o.mean, "reserved": o.reserved, "estimate_field": field}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::limits::Measure;
    use crate::store::{PoolDim, PoolDimView};

    const NOW: Millis = 1_764_640_800_000;

    fn dim(name: &str, count: i64, per_us: i64, recent: i64) -> PoolDimView {
        let rate = PoolDim {
            name: name.into(),
            measure: Measure::Requests,
            count,
            per_us,
        };
        PoolDimView::read(&rate, NOW * 1000, recent, NOW)
    }

    /// A window under a minute shows the last minute's mean (the store
    /// sums per minute), and says so; a minute's or longer counts itself.
    #[test]
    fn a_rate_under_a_minute_says_its_count_is_a_mean() {
        let v = PoolView {
            name: "本番".into(),
            dims: vec![
                dim("requests/s", 10, 1_000_000, 2),
                dim("requests/min", 600, 60_000_000, 120),
            ],
            in_flight: 0,
            gone: Vec::new(),
            concurrency: None,
            hold: None,
            tokens_per_minute: Vec::new(),
            today: UsageSum::default(),
        };
        let line = pool_line(&v, 0, NOW);
        assert!(
            line.ends_with("requests/s 2/10 (the last minute's mean), requests/min 120/600"),
            "{line}"
        );
        let json = pool_json(&v, 0, NOW);
        assert_eq!(json["limits"][0]["recent_is_mean"], true);
        assert_eq!(json["limits"][1]["recent_is_mean"], false);
    }
}
