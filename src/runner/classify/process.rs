//! Process mode's verdict: from a worker's exit status, stdout and
//! stderr to an [`Answer`] ([`classify`]), and what a worker stopped
//! before its answer had reported ([`cut_short`]).

use serde_json::Value;

use super::stdout::{
    NAN_HINT, cut_result, nan_in_object, not_quite_json, whole_chars, without_bom,
};
use super::{Answer, ErrorLine, Rules, bound_message};
use crate::runner::child::Exit;
use crate::runner::child::output::Output;
use crate::runner::cost::Cost;
use crate::runner::usage::{Tokens, Usage};
use crate::util::json_text::JsonText;

/// What a worker the runner stopped before its answer (a cancel, a stop,
/// its lease lost) had reported of its call: its cost and its tokens,
/// paid for all the same. A refused report counts nothing.
pub fn cut_short(out: &Output) -> (Option<f64>, Option<Tokens>) {
    let (cost, usage) = reported(out, &out.error_line.clone().unwrap_or_default());
    (cost.valid(), usage.valid())
}

/// What an attempt that gave no answer on stdout reported of its call:
/// the error line's cost and usage, else its `@nightshift` stderr lines'.
fn reported(out: &Output, line: &ErrorLine) -> (Cost, Usage) {
    (
        line.cost.clone().or(out.reported_cost.clone()),
        line.usage.clone().or(out.reported_usage.clone()),
    )
}

pub fn classify(out: &Output, rules: &Rules) -> Answer {
    match &out.exit {
        Exit::Code(0) => {
            let cut = out.stdout_cut.as_ref();
            let text = String::from_utf8_lossy(whole_chars(&out.stdout, cut.is_some()));
            let text = without_bom(&text);
            let trimmed = text.trim();
            if trimmed.is_empty() && cut.is_none() {
                let empty = Answer::Done {
                    empty: true,
                    result: None,
                    cost: None,
                    usage: None,
                };
                let usage = out.reported_usage.clone();
                return usage.apply(out.reported_cost.clone().apply(empty));
            }
            let strict = serde_json::from_str::<Value>(trimmed).map(|mut v| {
                crate::util::json::mark_reported_twice(trimmed, &mut v);
                v
            });
            let is_json = strict.is_ok() && cut.is_none();
            // Stdout meant as JSON that no parser reads would be kept as
            // text, its cost and usage uncounted in silence, past
            // `max_cost` and budgets: refused, saying why.
            if strict.is_err()
                && cut.is_none()
                && let Some(why) = not_quite_json(trimmed)
            {
                return Answer::Failed {
                    transient: false,
                    class: "InvalidJSON".into(),
                    message: why,
                    retry_after: None,
                    cost: None,
                    usage: None,
                };
            }
            // Text is kept as written (a YAML list, an indented code block),
            // but for the line end that closes it.
            let parsed: Value = match cut {
                Some(_) => cut_result(trimmed),
                None => strict.unwrap_or_else(|_| {
                    Value::String(text.trim_end_matches(['\n', '\r']).to_string())
                }),
            };
            // A cut result's cost and usage are what its whole said.
            let said = |field: &str| match cut {
                Some(skim) => skim.fields.get(field),
                None => parsed.get(field),
            };
            let cost = Cost::from_json(said("cost")).or(out.reported_cost.clone());
            let usage = Usage::from_json(said("usage")).or(out.reported_usage.clone());
            // JSON is kept as the worker wrote it: its numbers, its keys' order.
            let result = match is_json.then(|| JsonText::parse(trimmed)).flatten() {
                Some(text) => text.as_str().to_string(),
                None => parsed.to_string(),
            };
            let answer = cost.apply(Answer::Done {
                empty: false,
                result: Some(result),
                cost: None,
                usage: None,
            });
            usage.apply(answer)
        }
        exit => {
            let line = out.error_line.clone().unwrap_or_default();
            let (default_class, default_transient, default_message) = match exit {
                Exit::Code(code) => {
                    let transient = rules.transient_exit_codes.contains(code);
                    let class = if *code == 75 {
                        "TempFail".to_string()
                    } else {
                        format!("Exit{code}")
                    };
                    (class, transient, format!("exited with status {code}"))
                }
                Exit::Signal(sig) => (
                    "Signal".to_string(),
                    true,
                    format!("killed by signal {sig}"),
                ),
                Exit::Timeout(limit) => (
                    "Timeout".to_string(),
                    true,
                    format!(
                        "no answer within {}; its process group was killed",
                        crate::duration::format_duration(*limit)
                    ),
                ),
                Exit::SpawnFailed(err) | Exit::CannotStart(err) => (
                    "SpawnError".to_string(),
                    true,
                    format!("could not start the worker: {err}"),
                ),
            };
            let class = line.error_class.clone().unwrap_or(default_class);
            let transient = rules.transient(line.transient, &class, default_transient);
            let message = line
                .message
                .clone()
                .or_else(|| {
                    out.stderr_last_line
                        .as_deref()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| match nan_in_object(l.trim()) {
                            true => format!("{default_message}: its error line {NAN_HINT}"),
                            false => format!("{default_message}: {}", stderr_said(l)),
                        })
                })
                .or_else(|| stdout_said(&out.stdout).map(|s| format!("{default_message}; {s}")))
                .unwrap_or(default_message);
            let message = line.noted(message);
            let (cost, usage) = reported(out, &line);
            let answer = cost.apply(Answer::Failed {
                transient,
                class: bound_message(&class),
                message: bound_message(&message),
                retry_after: line.retry_after,
                cost: None,
                usage: None,
            });
            usage.apply(answer)
        }
    }
}

/// A failed worker's last stderr line, with a hint when it is a JSON
/// object the contract reads nothing from (`{"error": "…", "class": "…"}`:
/// the class and the text are `error_class` and `message`), so the class
/// it meant is not silently replaced by `Exit1`.
fn stderr_said(last: &str) -> String {
    let object = serde_json::from_str::<serde_json::Map<String, Value>>(last.trim()).ok();
    match object {
        Some(o) if !o.contains_key("error_class") && !o.contains_key("message") => format!(
            "{last} (an error line names its class in \"error_class\" and its text in \"message\")"
        ),
        _ => last.to_string(),
    }
}

/// What a failed worker's stdout said, when its stderr said nothing: its
/// last line, with a hint when that is an error object (the contract reads
/// one from stderr's last line; a worker printing it on stdout is a first
/// worker's usual slip).
fn stdout_said(stdout: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(stdout);
    // The last thing a terminal would show: a bare `\r` ends a line too.
    let last = text
        .rsplit(['\n', '\r'])
        .map(str::trim)
        .find(|l| !l.is_empty())?;
    let object = serde_json::from_str::<serde_json::Map<String, Value>>(last).ok();
    let hint = if object.is_some_and(|o| o.contains_key("error_class") || o.contains_key("error")) {
        " (an error object is read from stderr's last line, not stdout)"
    } else {
        ""
    };
    Some(format!("stdout: {last}{hint}"))
}

#[cfg(test)]
mod tests {
    use super::super::parse_error_line;
    use super::super::tests::{output, rules};
    use super::*;
    use std::time::Duration;

    /// A JSON result is kept as the worker wrote it: a number past a
    /// float's digits, the order of its keys; `\u` escapes readable.
    #[test]
    fn a_json_result_is_kept_as_written() {
        let out = output(
            Exit::Code(0),
            "{\"z\": 123456789012345678901234567890, \"cost\": 0.25,\n \"題\": \"\\u65e5\"}\n",
            None,
        );
        match classify(&out, &Rules::default()) {
            Answer::Done {
                result: Some(r),
                cost: Some(c),
                ..
            } => {
                assert_eq!(
                    r,
                    "{\"z\":123456789012345678901234567890,\"cost\":0.25,\"題\":\"日\"}"
                );
                assert_eq!(c, 0.25);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn success_empty_and_result() {
        assert_eq!(
            classify(&output(Exit::Code(0), "  \n", None), &rules()),
            Answer::Done {
                empty: true,
                result: None,
                cost: None,
                usage: None,
            }
        );
        assert_eq!(
            classify(
                &output(Exit::Code(0), "{\"ok\":1,\"cost\":0.5}\n", None),
                &rules()
            ),
            Answer::Done {
                empty: false,
                result: Some("{\"ok\":1,\"cost\":0.5}".into()),
                cost: Some(0.5),
                usage: None,
            }
        );
        assert_eq!(
            classify(&output(Exit::Code(0), "plain text", None), &rules()),
            Answer::Done {
                empty: false,
                result: Some("\"plain text\"".into()),
                cost: None,
                usage: None,
            }
        );
    }

    #[test]
    fn exit_codes_and_signals() {
        let v = classify(
            &output(Exit::Code(75), "", Some("503 from upstream")),
            &rules(),
        );
        assert!(
            matches!(&v, Answer::Failed { transient: true, class, message, .. }
            if class == "TempFail" && message == "exited with status 75: 503 from upstream")
        );
        let v = classify(&output(Exit::Code(2), "", None), &rules());
        assert!(matches!(&v, Answer::Failed { transient: false, class, .. } if class == "Exit2"));
        // Nothing on stderr: stdout's last line is the message, with a hint
        // when it is an error object meant for stderr.
        let v = classify(
            &output(
                Exit::Code(1),
                "{\"error_class\":\"投稿エラー\",\"message\":\"失敗\"}\n",
                None,
            ),
            &rules(),
        );
        assert!(
            matches!(&v, Answer::Failed { class, message, .. } if class == "Exit1"
                && message == "exited with status 1; stdout: {\"error_class\":\"投稿エラー\",\"message\":\"失敗\"} \
                               (an error object is read from stderr's last line, not stdout)"),
            "{v:?}"
        );
        let v = classify(
            &output(Exit::Code(1), "partial\nno such page\n\n", None),
            &rules(),
        );
        assert!(
            matches!(&v, Answer::Failed { message, .. } if message == "exited with status 1; stdout: no such page"),
            "{v:?}"
        );
        // A JSON error line in a shape of its own: quoted, with the keys
        // the contract reads, rather than its class silently lost.
        let line = r#"{"error":"上流が応答しません","class":"上流タイムアウト"}"#;
        let v = classify(&output(Exit::Code(2), "", Some(line)), &rules());
        assert!(
            matches!(&v, Answer::Failed { class, message, .. } if class == "Exit2"
                && *message == format!("exited with status 2: {line} (an error line names its class \
                                        in \"error_class\" and its text in \"message\")")),
            "{v:?}"
        );
        let v = classify(&output(Exit::Signal(9), "", None), &rules());
        assert!(matches!(&v, Answer::Failed { transient: true, class, .. } if class == "Signal"));
    }

    #[test]
    fn error_line_overrides_and_config_classes() {
        let line =
            r#"{"error_class":"BadRequest","transient":false,"message":"400: title missing"}"#;
        let v = classify(&output(Exit::Code(75), "", Some(line)), &rules());
        assert!(
            matches!(&v, Answer::Failed { transient: false, class, message, .. }
            if class == "BadRequest" && message == "400: title missing")
        );
        let line = r#"{"error_class":"RateLimitError","retry_after_s":30}"#;
        let v = classify(&output(Exit::Code(1), "", Some(line)), &rules());
        assert!(
            matches!(&v, Answer::Failed { transient: true, retry_after: Some(d), .. } if *d == Duration::from_secs(30))
        );
        assert_eq!(parse_error_line("{\"unrelated\": 1}"), None);
        assert_eq!(parse_error_line("[1,2]"), None);
        assert_eq!(
            parse_error_line("{\"retry_after_s\": -5, \"message\": \"m\"}")
                .unwrap()
                .retry_after,
            None
        );
    }
}
