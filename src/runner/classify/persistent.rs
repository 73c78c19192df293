//! Persistent mode's answers: the [`Answer`] an answer line carries
//! ([`answer`]), and the answers of a worker that broke (timed out, out of
//! step, exited, never started).

use std::time::Duration;

use serde_json::Value;

use super::{Answer, ErrorLine, Rules, bound_message};
use crate::runner::cost::Cost;
use crate::runner::usage::Usage;
use crate::util::json_text::JsonText;

/// The answer a persistent worker's answer object carries; `written`:
/// its `result` as the worker wrote it (kept rather than the value's
/// float-read numbers and sorted keys).
pub fn answer(
    obj: &serde_json::Map<String, Value>,
    written: Option<&JsonText>,
    rules: &Rules,
) -> Answer {
    let cost = Cost::from_json(obj.get("cost"));
    let usage = Usage::from_json(obj.get("usage"));
    if let Some(err) = obj.get("error") {
        let line = ErrorLine::from_answer(err);
        let message = line.noted(
            line.message
                .clone()
                .unwrap_or_else(|| "the worker reported an error".into()),
        );
        let class = line.error_class.unwrap_or_else(|| "WorkerError".into());
        let transient = rules.transient(line.transient, &class, false);
        let usage = usage.or(line.usage);
        return usage.apply(cost.or(line.cost).apply(Answer::Failed {
            transient,
            class: bound_message(&class),
            message: bound_message(&message),
            retry_after: line.retry_after,
            cost: None,
            usage: None,
        }));
    }
    let Some(result) = obj.get("result") else {
        return Answer::protocol_error("an answer line with neither \"result\" nor \"error\"");
    };
    let cost = cost.or(Cost::from_json(result.get("cost")));
    let usage = usage.or(Usage::from_json(result.get("usage")));
    let empty = result.is_null() || result.as_str() == Some("");
    usage.apply(
        cost.apply(Answer::Done {
            empty,
            result: (!empty)
                .then(|| written.map_or_else(|| result.to_string(), |w| w.as_str().to_string())),
            cost: None,
            usage: None,
        }),
    )
}

/// How a persistent worker broke, as the answer of the request it broke
/// on: always transient (the item is retried; a fresh worker is started).
impl Answer {
    fn broke(class: &str, message: &str) -> Answer {
        Answer::Failed {
            transient: true,
            class: class.into(),
            message: bound_message(message),
            retry_after: None,
            cost: None,
            usage: None,
        }
    }

    /// The worker broke the protocol.
    pub fn protocol_error(message: &str) -> Answer {
        Answer::broke("ProtocolError", message)
    }

    /// The worker was out of step (and restarted): `why`.
    pub fn out_of_step(why: &str) -> Answer {
        Answer::protocol_error(&format!("{why}; the worker was restarted"))
    }

    /// No answer within `timeout`; `unended`: the start of what the worker
    /// wrote with no line end (an answer a newline short), quoted.
    pub fn timed_out(timeout: Duration, unended: Option<&str>) -> Answer {
        let mut message = format!(
            "no answer within {}; the worker was restarted",
            crate::duration::format_duration(timeout)
        );
        if let Some(text) = unended {
            message.push_str(&format!(
                "; its stdout held a line with no line end: {text} (end each answer with a newline, and flush)"
            ));
        }
        Answer::broke("Timeout", &message)
    }

    /// The worker `program` could not be started.
    pub fn spawn_failed(program: &str, err: &std::io::Error) -> Answer {
        Answer::broke(
            "SpawnError",
            &format!("could not start the worker {program}: {err}"),
        )
    }

    /// The worker exited (or closed its pipes) mid-item.
    pub fn worker_exited(message: &str) -> Answer {
        Answer::broke("WorkerExited", message)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::obj;
    use super::*;

    #[test]
    fn answers_carry_their_costs_by_one_rule() {
        let rules = Rules::default();
        let v = answer(
            &obj(r#"{"key":"a","result":{"n":1,"cost":0.5}}"#),
            None,
            &rules,
        );
        assert!(
            matches!(v, Answer::Done { cost: Some(c), .. } if c == 0.5),
            "{v:?}"
        );
        let v = answer(
            &obj(r#"{"key":"a","error":{"message":"m","cost":0.25}}"#),
            None,
            &rules,
        );
        assert!(
            matches!(v, Answer::Failed { cost: Some(c), .. } if c == 0.25),
            "{v:?}"
        );
        for bad in [
            r#"{"key":"a","result":1,"cost":1e308}"#,
            r#"{"key":"a","result":{"cost":-1}}"#,
            r#"{"key":"a","error":{"cost":"NaN"}}"#,
            r#"{"key":"a","result":null,"cost":0.5,"x":{"cost":1},"error":{"cost":2e9}}"#,
        ] {
            let v = answer(&obj(bad), None, &rules);
            assert!(
                matches!(&v, Answer::Failed { transient: false, class, .. } if class == "InvalidCost"),
                "{bad}: {v:?}"
            );
        }
    }
}
