//! An item in full, as content: state, who holds its claim (`show`'s
//! line), payload (pretty JSON), result, op id, every attempt's error
//! newest first, the end of what its last attempts printed on stderr, and
//! its own events. One page of lines, each a run of texts in their roles,
//! long texts wrapped to the page's width by display width. The state
//! scrolls it by its length; `ui::detail` styles and draws it.

use super::format::{ago, clean, clock, wrap};
use super::theme::{Role, kind_role, state_role};
use crate::model::claim_view;
use crate::model::waiting::Waiting;
use crate::model::{BatchInfo, Millis, state_word};
use crate::store::{AttemptLog, ItemDetail};
use crate::util::json_text::JsonText;
use crate::util::text;
use crate::util::time::rfc3339;

/// Lines one line of the payload or result may take before it is cut.
const MAX_TEXT_LINES: usize = 60;
/// Lines one field (a label, an error, an event's message) may take
/// before it is cut: a worker's message is kept to 500 characters, 15
/// lines of CJK text at 80 columns.
const FIELD_LINES: usize = 24;
/// Last lines of one attempt's stderr shown; `show --attempts` prints all.
const STDERR_LINES: usize = 40;
/// Cells of the field names on the left (`label`, `state`, ...).
const FIELD: usize = 10;

/// Text in one role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub role: Role,
    pub text: String,
}

/// One line of the page, left to right.
pub type PageLine = Vec<Piece>;

fn piece(role: Role, text: impl Into<String>) -> Piece {
    Piece {
        role,
        text: text.into(),
    }
}

/// `text` wrapped (inert) after a first-line `head` of `indent` cells;
/// the lines after it indented as far.
fn hanging(
    head: PageLine,
    indent: usize,
    text: &str,
    width: usize,
    role: Role,
    out: &mut Vec<PageLine>,
) {
    let pad = " ".repeat(indent);
    for (i, l) in wrap(text, width.saturating_sub(indent), FIELD_LINES)
        .into_iter()
        .enumerate()
    {
        let mut line = if i == 0 {
            head.clone()
        } else {
            vec![piece(Role::Normal, pad.clone())]
        };
        line.push(piece(role, l));
        out.push(line);
    }
}

/// The page of item `key`, before scrolling, from what the poll read
/// (`shown`: the detail asked for, or why it could not be read; `info`:
/// its batch, whose seats say who holds a claim, as `show` says it, with
/// the config's rules for its claims: the pool a deferred claim waits
/// for, its `max_attempts`; `waits`: every reason it waits, as `show`
/// names them). Long
/// texts are wrapped to `width` cells; a line may still be wider (a JSON
/// key, a row of fields) and is cut where it is drawn.
pub fn page(
    key: &str,
    shown: Option<&Result<ItemDetail, String>>,
    info: Option<(&BatchInfo, claim_view::Rules<'_>)>,
    waits: &[Waiting],
    now: Millis,
    width: usize,
) -> Vec<PageLine> {
    let field = |s: &str| piece(Role::Dim, text::pad(s, FIELD));
    let heading = |s: &str| vec![piece(Role::Title, s)];
    let indent = |s: &str| vec![piece(Role::Normal, format!("  {s}"))];
    let d = match shown {
        Some(Ok(d)) if d.item.key == key => d,
        Some(Err(e)) => {
            let mut out = Vec::new();
            hanging(Vec::new(), 0, e, width, Role::Fail, &mut out);
            return out;
        }
        _ => return vec![vec![piece(Role::Dim, "loading…")]],
    };
    let item = &d.item;
    let plain = Role::Normal;
    let mut out = Vec::new();
    hanging(vec![field("key")], FIELD, &item.key, width, plain, &mut out);
    hanging(
        vec![field("label")],
        FIELD,
        &item.label,
        width,
        plain,
        &mut out,
    );
    out.push(vec![
        field("state"),
        piece(
            state_role(item.status, item.outcome),
            state_word(item.status, item.tier, item.outcome),
        ),
        piece(
            plain,
            format!("   attempts {}", crate::model::attempts_said(item)),
        ),
        // The default priority (0) is not said.
        piece(
            plain,
            if item.priority == 0 {
                String::new()
            } else {
                format!("   priority {}", item.priority)
            },
        ),
        piece(
            plain,
            match &item.op_id {
                Some(op) => format!("   op id {}", clean(op, 120)),
                None => "   op id —".into(),
            },
        ),
    ]);
    if let Some(claim) = info.and_then(|(i, rules)| claim_view::of(i, item, rules, now)) {
        let role = if claim.orphaned() { Role::Warn } else { plain };
        let line = claim.line(now);
        hanging(vec![field("claim")], FIELD, &line, width, role, &mut out);
    }
    // Every reason it waits, one a line, as `show` says them.
    for (i, w) in waits.iter().enumerate() {
        let text = crate::model::waiting::describe_grouped(std::slice::from_ref(w), now);
        let head = field(if i == 0 { "waiting" } else { "" });
        hanging(vec![head], FIELD, &text, width, Role::Warn, &mut out);
    }
    let mut when = format!(
        "updated {} ({})",
        rfc3339(item.updated_at),
        ago(item.updated_at, now),
    );
    if let Some(at) = item.next_attempt_at {
        let what = if item.status == crate::model::Status::Pending {
            "not before"
        } else {
            "next try"
        };
        when.push_str(&format!("   {what} {}", ago(at, now)));
    }
    if let Some(cost) = item.cost {
        when.push_str(&format!("   cost {}", crate::util::money::money(cost)));
    }
    hanging(vec![field("time")], FIELD, &when, width, plain, &mut out);
    out.push(vec![
        field(""),
        piece(plain, format!("created {}", rfc3339(item.created_at))),
    ]);
    if let Some(class) = &item.error_class {
        let message = item.error_message.as_deref().unwrap_or("");
        let text = format!("{class}: {message}");
        hanging(
            vec![field("error")],
            FIELD,
            &text,
            width,
            Role::Fail,
            &mut out,
        );
    }
    out.push(Vec::new());
    out.push(heading("payload"));
    json_lines(&item.payload, width, &mut out);
    out.push(Vec::new());
    out.push(heading("result"));
    match &item.result {
        Some(r) => json_lines(r, width, &mut out),
        None => out.push(indent("—")),
    }
    out.push(Vec::new());
    out.push(heading(&format!(
        "attempts that failed ({}), newest first",
        d.failures.len()
    )));
    if d.failures.is_empty() {
        out.push(indent("none"));
    }
    for fl in &d.failures {
        out.push(vec![
            piece(
                plain,
                format!("  {}  attempt {}  ", rfc3339(fl.failed_at), fl.attempt),
            ),
            piece(Role::Warn, format!("{}  ", fl.then())),
            piece(Role::Fail, clean(&fl.error_class, 80)),
        ]);
        hanging(
            vec![piece(plain, "    ")],
            4,
            &fl.message,
            width,
            plain,
            &mut out,
        );
    }
    out.push(Vec::new());
    stderr_lines(&d.attempt_logs, width, &mut out);
    out.push(Vec::new());
    out.push(heading(&format!("events ({})", d.events.len())));
    for e in &d.events {
        let who = e
            .named_actor()
            .map(|a| format!(" [{a}]"))
            .unwrap_or_default();
        let when = format!("  {}  ", clock(e.at, now));
        let kind = format!("{} ", text::pad(&clean(&e.kind, 20), 12));
        let indent = text::width(&when) + text::width(&kind);
        hanging(
            vec![piece(plain, when), piece(kind_role(&e.kind), kind)],
            indent,
            &format!("{}{who}", e.message),
            width,
            plain,
            &mut out,
        );
    }
    out
}

/// What the newest attempts printed on stderr, newest first: each one's
/// last lines, made inert and wrapped; a mark where anything was left out.
fn stderr_lines(logs: &[AttemptLog], width: usize, out: &mut Vec<PageLine>) {
    out.push(vec![piece(
        Role::Title,
        format!("stderr of the last attempts ({}), newest first", logs.len()),
    )]);
    if logs.is_empty() {
        out.push(vec![piece(Role::Normal, "  nothing kept")]);
    }
    for log in logs {
        let run = log.run_id.map(|r| format!("  run {r}")).unwrap_or_default();
        out.push(vec![piece(
            Role::Normal,
            format!("  attempt {}  {}{run}", log.attempt, rfc3339(log.at)),
        )]);
        let lines: Vec<&str> = log.stderr.lines().collect();
        let hidden = lines.len().saturating_sub(STDERR_LINES);
        if log.cut || hidden > 0 {
            let what = match (log.cut, hidden) {
                (true, 0) => "… earlier output cut (16 KiB kept per attempt)".to_string(),
                (true, n) => format!("… earlier output cut, {n} more lines kept: show --attempts"),
                (false, n) => format!("… {n} earlier lines: show --attempts"),
            };
            out.push(vec![piece(Role::Dim, format!("    {what}"))]);
        }
        for line in &lines[hidden..] {
            for l in wrap(line, width.saturating_sub(4), FIELD_LINES) {
                out.push(vec![piece(Role::Normal, format!("    {l}"))]);
            }
        }
    }
}

/// Pretty JSON, each line made inert and wrapped by width; a wrapped
/// line goes on under its own indentation.
fn json_lines(value: &JsonText, width: usize, out: &mut Vec<PageLine>) {
    let pretty = value.pretty();
    let mut budget = MAX_TEXT_LINES * 8;
    for line in pretty.lines() {
        let body = line.trim_start_matches(' ');
        let indent = 2 + line.len() - body.len();
        let pad = " ".repeat(indent);
        let more = " ".repeat(indent + 2);
        for (i, l) in wrap(body, width.saturating_sub(indent + 2), MAX_TEXT_LINES)
            .into_iter()
            .enumerate()
        {
            if budget == 0 {
                out.push(vec![piece(Role::Normal, "  … (cut)")]);
                return;
            }
            budget -= 1;
            let lead = if i == 0 { &pad } else { &more };
            out.push(vec![piece(Role::Normal, format!("{lead}{l}"))]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Item, Status};

    fn text_of(page: &[PageLine]) -> Vec<String> {
        page.iter()
            .map(|l| l.iter().map(|p| p.text.as_str()).collect())
            .collect()
    }

    fn detail(logs: Vec<AttemptLog>) -> ItemDetail {
        ItemDetail {
            item: Item {
                attempts: 2,
                created_at: 0,
                updated_at: 0,
                ..Item::for_test("b", "k", 0)
            },
            failures: Vec::new(),
            attempt_logs: logs,
            events: Vec::new(),
        }
    }

    /// The newest attempt first, its last lines inert; a mark where the
    /// start was cut and where lines were left out of the page.
    #[test]
    fn stderr_shows_the_last_lines_of_each_attempt_inert_and_marked() {
        let long: String = (1..=50).map(|i| format!("行 {i}\n")).collect();
        let logs = vec![
            AttemptLog {
                attempt: 2,
                run_id: Some(9),
                at: 0,
                stderr: "\u{1b}[2J画面を消す\n".into(),
                cut: false,
            },
            AttemptLog {
                attempt: 1,
                run_id: Some(9),
                at: 0,
                stderr: long,
                cut: true,
            },
        ];
        let shown = Ok(detail(logs));
        let lines = text_of(&page("k", Some(&shown), None, &[], 0, 80));
        let at = |s: &str| {
            lines
                .iter()
                .position(|l| l == s)
                .unwrap_or_else(|| panic!("no {s:?} in {lines:#?}"))
        };
        let head = at("stderr of the last attempts (2), newest first");
        assert_eq!(lines[head + 1], "  attempt 2  1970-01-01T00:00:00Z  run 9");
        assert_eq!(lines[head + 2], "    \\x1b[2J画面を消す");
        assert_eq!(lines[head + 3], "  attempt 1  1970-01-01T00:00:00Z  run 9");
        assert_eq!(
            lines[head + 4],
            "    … earlier output cut, 10 more lines kept: show --attempts"
        );
        assert_eq!(lines[head + 5], "    行 11");
        assert_eq!(lines[head + 44], "    行 50");
        assert!(lines.iter().all(|l| !l.contains('\u{1b}')));
    }

    /// The item detail says the claim's line by `show`'s rule: a claim
    /// its pool defers names the pool.
    #[test]
    fn a_deferred_claim_names_its_pool() {
        let mut d = detail(Vec::new());
        d.item.status = Status::Claimed;
        d.item.lease_run = Some(3);
        d.item.pool_wait_since = Some(0);
        let info = BatchInfo::live_for_test("b", 3, 0);
        let shown = Ok(d);
        let rules = claim_view::Rules {
            pool: Some("本番"),
            max_attempts: 5,
            holding: None,
        };
        let lines = text_of(&page("k", Some(&shown), Some((&info, rules)), &[], 0, 120));
        assert!(
            lines
                .iter()
                .any(|l| l
                    .contains("claimed by run #3 (h:7), waiting for a place in pool 本番 since")),
            "{lines:#?}"
        );
    }

    #[test]
    fn no_stderr_says_so() {
        let shown = Ok(detail(Vec::new()));
        let lines = text_of(&page("k", Some(&shown), None, &[], 0, 80));
        let head = lines
            .iter()
            .position(|l| l == "stderr of the last attempts (0), newest first")
            .unwrap();
        assert_eq!(lines[head + 1], "  nothing kept");
    }
}
