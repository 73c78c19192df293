//! Every setting of `nightshift.toml`, one row each: its key, what it does,
//! its default (or what leaving it out means), how its value is read and how
//! it is written back. The allowed keys, the typo suggestions, the parsing
//! (`walk.rs`), the example `nightshift init` writes
//! ([`super::example`]) and nightshift.toml(5) all come from these rows, as
//! ripgrep's flags come from one definition each. A new setting is one row
//! here, its field in [`BatchConfig`] and its default in
//! [`BatchConfig::defaults`].

use std::path::Path;

use toml::Spanned;
use toml::de::DeValue;

use super::convert::{
    Conv, argv, choice, duration, exit_codes, int_in, key_fields, max_cost, parsed, path_value,
    positive_duration, string_list, timezone, toml_duration, toml_string, toml_strings, version,
};
use super::{
    BatchConfig, Config, DEFAULT_DB_FILE, MAX_CONCURRENCY, MAX_RETRIES, MAX_RUNNERS, Overlap,
    WorkerMode, resolve,
};

/// A key of a `[batch.NAME]` table.
pub struct Field {
    pub key: &'static str,
    /// What it does, one line each, as the comment above it in the example.
    /// Empty: it shares the comment of the row before (retries, backoff,
    /// backoff_max), and is written right below that row.
    pub doc: &'static [&'static str],
    /// What a batch has when its table leaves the key out.
    pub unset: Unset,
    /// Reads the value into the batch; on an error the batch is left as it was.
    pub(super) set: fn(&Spanned<DeValue<'_>>, &mut BatchConfig) -> Conv<()>,
    /// The batch's value as TOML, `None` while the setting is off. Applied
    /// to [`BatchConfig::defaults`] it gives the default every view shows, so
    /// no default is written twice.
    pub show: fn(&BatchConfig) -> Option<String>,
}

/// A key left out of a batch's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unset {
    /// The batch has the default, which `show` writes.
    Default,
    /// The setting is off: `means` says what happens then, and `example` is
    /// a value to turn it on with (the example file shows it commented out).
    Off {
        means: &'static str,
        example: &'static str,
    },
    /// Off as well, but a batch needs it to run, so the example batch sets it
    /// to `example`.
    Needed {
        means: &'static str,
        example: &'static str,
    },
}

impl Field {
    /// The default as TOML; `None` for a setting that is off until set.
    #[must_use]
    pub fn default_value(&self) -> Option<String> {
        (self.show)(&BatchConfig::defaults(""))
    }

    /// The value the example shows: the default, or the row's example.
    #[must_use]
    pub fn example_value(&self) -> String {
        match self.unset {
            Unset::Default => self.default_value().unwrap_or_default(),
            Unset::Off { example, .. } | Unset::Needed { example, .. } => example.to_string(),
        }
    }

    /// The default as the docs state it: the value, or `none (what that means)`.
    #[must_use]
    pub fn default_text(&self) -> String {
        match self.unset {
            Unset::Default => self.default_value().unwrap_or_default(),
            Unset::Off { means, .. } | Unset::Needed { means, .. } => format!("none ({means})"),
        }
    }
}

/// Every key of a `[batch.NAME]` table, in the order the docs list them.
pub const BATCH: &[Field] = &[
    Field {
        key: "worker",
        doc: &[
            "Program run once per item, as an argv list (no shell), in this file's",
            "directory. It gets the item's payload JSON on stdin; exit 0 = done (stdout is",
            "the result), 75 = transient failure, other = permanent. `cat` stands in for",
            "yours (e.g. [\"python3\", \"worker.py\"]): it answers each item with its payload.",
        ],
        unset: Unset::Needed {
            means: "give one here, or after -- on the command line",
            example: r#"["cat"]"#,
        },
        set: |v, b| argv(v).map(|x| b.worker = Some(x)),
        show: |b| b.worker.as_deref().map(toml_strings),
    },
    Field {
        key: "source",
        doc: &["Program printing JSON lines of items to add at the start of each cycle."],
        unset: Unset::Off {
            means: "items come from `nightshift add` only",
            example: r#"["python3", "list_items.py"]"#,
        },
        set: |v, b| argv(v).map(|x| b.source = Some(x)),
        show: |b| b.source.as_deref().map(toml_strings),
    },
    Field {
        key: "key_fields",
        doc: &[
            "Item fields whose values make the idempotency key (here site:category:slug,",
            "which is also the item's label).",
        ],
        unset: Unset::Off {
            means: "each item's own \"key\" field is its key, \"label\" its label",
            example: r#"["site", "category", "slug"]"#,
        },
        set: |v, b| key_fields(v).map(|x| b.key_fields = Some(x)),
        show: |b| b.key_fields.as_deref().map(toml_strings),
    },
    Field {
        key: "concurrency",
        doc: &["Items processed at once (1 to 1024)."],
        unset: Unset::Default,
        set: |v, b| {
            int_in(v, 1, i64::try_from(MAX_CONCURRENCY).unwrap_or(i64::MAX))
                .map(|x| b.concurrency = x)
        },
        show: |b| Some(b.concurrency.to_string()),
    },
    Field {
        key: "item_timeout",
        doc: &["An item whose worker runs longer is killed and counted as a transient failure."],
        unset: Unset::Default,
        set: |v, b| positive_duration(v).map(|x| b.item_timeout = x),
        show: |b| Some(toml_duration(b.item_timeout)),
    },
    Field {
        key: "max_duration",
        doc: &["Stop claiming new items after this long; the rest wait for the next cycle."],
        unset: Unset::Off {
            means: "a cycle runs until no item is left",
            example: r#""1h""#,
        },
        set: |v, b| positive_duration(v).map(|x| b.max_duration = Some(x)),
        show: |b| b.max_duration.map(toml_duration),
    },
    Field {
        key: "retries",
        doc: &[
            "Immediate retries of a transient failure. Retry n waits backoff * 2^(n-1)",
            "plus a random extra of up to half that again, never less than the backoff",
            "nor more than backoff_max: \"1s\" gives 1-1.5s, then 2-3s, then 4-6s.",
        ],
        unset: Unset::Default,
        set: |v, b| int_in(v, 0, i64::from(MAX_RETRIES)).map(|x| b.retries = x),
        show: |b| Some(b.retries.to_string()),
    },
    Field {
        key: "backoff",
        doc: &[],
        unset: Unset::Default,
        set: |v, b| duration(v).map(|x| b.backoff = x),
        show: |b| Some(toml_duration(b.backoff)),
    },
    Field {
        key: "backoff_max",
        doc: &[],
        unset: Unset::Default,
        set: |v, b| duration(v).map(|x| b.backoff_max = x),
        show: |b| Some(toml_duration(b.backoff_max)),
    },
    Field {
        key: "max_attempts",
        doc: &["After this many attempts an item is quarantined for a human (manual tier)."],
        unset: Unset::Default,
        set: |v, b| int_in(v, 1, i64::from(u32::MAX)).map(|x| b.max_attempts = x),
        show: |b| Some(b.max_attempts.to_string()),
    },
    Field {
        key: "transient_exit_codes",
        doc: &["Worker exit codes that mean \"try again later\" (75 is EX_TEMPFAIL)."],
        unset: Unset::Default,
        set: |v, b| exit_codes(v).map(|x| b.transient_exit_codes = x),
        show: |b| {
            let codes: Vec<String> = b.transient_exit_codes.iter().map(i32::to_string).collect();
            Some(format!("[{}]", codes.join(", ")))
        },
    },
    Field {
        key: "transient_error_classes",
        doc: &[
            "Error classes (from the worker's last stderr line, a JSON object with",
            "\"error_class\") that mean \"try again later\" when the line has no \"transient\".",
        ],
        unset: Unset::Off {
            means: "without \"transient\", the exit code decides",
            example: r#"["TimeoutError", "ConnectionError", "RateLimitError"]"#,
        },
        set: |v, b| string_list(v, false).map(|x| b.transient_error_classes = x),
        // No class is the setting off.
        show: |b| {
            let classes = &b.transient_error_classes;
            (!classes.is_empty()).then(|| toml_strings(classes))
        },
    },
    Field {
        key: "rate_limit",
        doc: &[
            "At most this many worker calls per sec, min or hour, shared by all workers.",
            "Every call counts, immediate retries included; a run with nothing to do",
            "waits for nothing.",
        ],
        unset: Unset::Off {
            means: "no limit but `concurrency`",
            example: r#""60/min""#,
        },
        set: |v, b| parsed(v).map(|x| b.rate_limit = Some(x)),
        show: |b| b.rate_limit.map(|r| toml_string(&r.to_string())),
    },
    Field {
        key: "limit",
        doc: &[
            "The [limit.NAME] pool the batch draws from: its requests, tokens and calls",
            "in flight are shared with every batch naming it, on every runner of the store;",
            "a retry-after answer holds all of them.",
        ],
        unset: Unset::Off {
            means: "no pool",
            example: r#""openai""#,
        },
        set: |v, b| pool_name(v).map(|x| b.limit = Some(x)),
        show: |b| b.limit.as_deref().map(toml_string),
    },
    Field {
        key: "token_estimate",
        doc: &[
            "Tokens reserved from the pool before each call starts, settled with the",
            "worker's reported `usage` (kept when it reports none).",
        ],
        unset: Unset::Off {
            means: "nothing reserved: the reported usage is drawn after the call",
            example: "1200",
        },
        set: |v, b| int_in(v, 0, MAX_TOKEN_ESTIMATE).map(|x| b.token_estimate = Some(x)),
        show: |b| b.token_estimate.map(|n| n.to_string()),
    },
    Field {
        key: "estimate_field",
        doc: &[
            "A payload field holding each call's token estimate (`max_tokens`); an item",
            "without it reserves `token_estimate`.",
        ],
        unset: Unset::Off {
            means: "every call reserves `token_estimate`",
            example: r#""max_tokens""#,
        },
        set: |v, b| pool_name(v).map(|x| b.estimate_field = Some(x)),
        show: |b| b.estimate_field.as_deref().map(toml_string),
    },
    Field {
        key: "priority_field",
        doc: &[
            "An item field holding its claim priority (an integer, higher first, then",
            "older); `add --priority N` gives the items without it theirs.",
        ],
        unset: Unset::Off {
            means: "every item has the priority `add --priority` gave it (default 0)",
            example: r#""priority""#,
        },
        set: |v, b| pool_name(v).map(|x| b.priority_field = Some(x)),
        show: |b| b.priority_field.as_deref().map(toml_string),
    },
    Field {
        key: "max_hold",
        doc: &[
            "A worker's `retry_after_s` holds every call of the batch (retries included)",
            "for that long, and later runs too; a longer one is clamped to this.",
            "`nightshift unpause BATCH` lifts a hold.",
        ],
        unset: Unset::Default,
        set: |v, b| positive_duration(v).map(|x| b.max_hold = x),
        show: |b| Some(toml_duration(b.max_hold)),
    },
    Field {
        key: "max_cost",
        doc: &["Stop the cycle once workers have reported this much cost (in their unit)."],
        unset: Unset::Off {
            means: "no budget",
            example: "5.0",
        },
        set: |v, b| max_cost(v).map(|x| b.max_cost = Some(x)),
        show: |b| b.max_cost.map(|c| toml::Value::Float(c).to_string()),
    },
    Field {
        key: "budget",
        doc: &[
            "Spend per window (in the workers' cost unit), kept in the store for every",
            "runner and later runs; failed and retried attempts count. At it, no call",
            "starts (in-flight ones finish) until the window ends: windows are aligned",
            "in UTC, so \"20.0/day\" resets at 00:00Z. Also settable per [limit.NAME].",
        ],
        unset: Unset::Off {
            means: "no budget",
            example: r#""20.0/day""#,
        },
        set: |v, b| parsed(v).map(|x| b.budget = Some(x)),
        show: |b| b.budget.map(|x| toml_string(&x.to_string())),
    },
    Field {
        key: "version",
        doc: &[
            "The prompt or model version items are done under (any text). An item done",
            "under another version, or before one was set, is stale: `nightshift items",
            "BATCH --stale` lists them, `nightshift requeue BATCH --stale` runs them again.",
        ],
        unset: Unset::Off {
            means: "done is done, whatever the prompt",
            example: r#""prompt-v1""#,
        },
        set: |v, b| version(v).map(|x| b.version = Some(x)),
        show: |b| b.version.as_deref().map(toml_string),
    },
    Field {
        key: "schedule",
        doc: &[
            "Cron schedule for `nightshift daemon`: minute hour day month weekday, with an",
            "optional leading seconds field. Evaluated in `timezone`. Around DST changes",
            "each wall-clock time fires once: a time skipped by spring-forward fires when",
            "the clock jumps; a time repeated by fall-back fires the first time only.",
        ],
        unset: Unset::Off {
            means: "the daemon does not run the batch; `nightshift run` does",
            example: r#""0 2 * * *""#,
        },
        set: |v, b| parsed(v).map(|x| b.schedule = Some(x)),
        show: |b| b.schedule.as_ref().map(|s| toml_string(&s.expr)),
    },
    Field {
        key: "timezone",
        doc: &[
            "IANA time zone name for the schedule, such as \"Asia/Tokyo\" (with a",
            "`schedule` only).",
        ],
        unset: Unset::Default,
        set: |v, b| timezone(v).map(|x| b.timezone = x),
        show: |b| Some(toml_string(b.timezone.name())),
    },
    Field {
        key: "catch_up",
        doc: &[
            "If the machine was off at a fire time, run once on daemon start when the",
            "missed time is within this window (with a `schedule` only).",
        ],
        unset: Unset::Off {
            means: "a missed fire is not run",
            example: r#""6h""#,
        },
        set: |v, b| positive_duration(v).map(|x| b.catch_up = Some(x)),
        show: |b| b.catch_up.map(toml_duration),
    },
    Field {
        key: "overlap",
        doc: &[
            "When a fire time comes while the batch still runs: \"skip\" it, or \"queue\"",
            "one cycle to run right after (with a `schedule` only).",
        ],
        unset: Unset::Default,
        set: |v, b| {
            let choices = [Overlap::Skip, Overlap::Queue];
            choice(v, &choices, Overlap::as_str).map(|x| b.overlap = x)
        },
        show: |b| Some(toml_string(b.overlap.as_str())),
    },
    Field {
        key: "grace",
        doc: &["On stop, how long in-flight items may finish before they are released."],
        unset: Unset::Default,
        set: |v, b| duration(v).map(|x| b.grace = x),
        show: |b| Some(toml_duration(b.grace)),
    },
    Field {
        key: "lock_ttl",
        doc: &["Lifetime of the batch lock and item leases; renewed while the run lives."],
        unset: Unset::Default,
        set: |v, b| positive_duration(v).map(|x| b.lock_ttl = x),
        show: |b| Some(toml_duration(b.lock_ttl)),
    },
    Field {
        key: "runners",
        doc: &[
            "How many runners may run this batch at once, on any hosts sharing the store",
            "(a PostgreSQL store serves several hosts): each takes a seat of the batch",
            "lock and claims from the one queue. 1: a second runner steps down.",
        ],
        unset: Unset::Default,
        set: |v, b| int_in(v, 1, MAX_RUNNERS).map(|x| b.runners = x),
        show: |b| Some(b.runners.to_string()),
    },
    Field {
        key: "mode",
        doc: &[
            "\"process\": one worker process per item. \"persistent\": one long-lived worker",
            "per slot, reading items as JSON lines on stdin and answering on stdout (each",
            "answer naming its request's \"key\").",
        ],
        unset: Unset::Default,
        set: |v, b| {
            let choices = [WorkerMode::Process, WorkerMode::Persistent];
            choice(v, &choices, WorkerMode::as_str).map(|x| b.mode = x)
        },
        show: |b| Some(toml_string(b.mode.as_str())),
    },
    Field {
        key: "start_timeout",
        doc: &[
            "Persistent mode only: how much longer than item_timeout the first item sent",
            "to a fresh worker may take, for the worker's start-up (a model load).",
        ],
        unset: Unset::Off {
            means: "the first item has item_timeout, as every other",
            example: r#""2m""#,
        },
        set: |v, b| positive_duration(v).map(|x| b.start_timeout = Some(x)),
        show: |b| b.start_timeout.map(toml_duration),
    },
    Field {
        key: "alert",
        doc: &[
            "Command run after a cycle in which anything failed, with the run's summary",
            "JSON on stdin (argv; use sh -c for a shell).",
        ],
        unset: Unset::Off {
            means: "failures wait for `nightshift status` and `nightshift dlq`",
            example: r#"["sh", "-c", "mail -s nightshift you@example.com"]"#,
        },
        set: |v, b| argv(v).map(|x| b.alert = Some(x)),
        show: |b| b.alert.as_deref().map(toml_strings),
    },
    Field {
        key: "halt",
        doc: &[
            "Circuit breaker: \"N in a row\" or \"P% of the last N\" worker answers failed",
            "(retries included) stops the run from claiming and pauses the batch with the",
            "reason (\"halted: 5 consecutive ServiceUnavailable\"); the alert fires once.",
            "`nightshift unpause BATCH` (or `p` in the dashboard) clears it.",
        ],
        unset: Unset::Off {
            means: "failures never pause the batch by themselves",
            example: r#""5 in a row""#,
        },
        set: |v, b| parsed(v).map(|x| b.halt = Some(x)),
        show: |b| b.halt.map(|h| toml_string(&h.to_string())),
    },
];

/// A key at the top of the file. Each names a place, a path relative to the
/// config file's directory (a database URL stays as it is).
pub struct TopField {
    pub key: &'static str,
    /// What it does, one line each, as the comment above it in the example.
    pub doc: &'static [&'static str],
    /// Left out, the commands use this name (and the example sets it)...
    pub default_name: &'static str,
    /// ...beside this.
    pub beside: &'static str,
    /// Reads the value into the config.
    pub(super) set: fn(&Spanned<DeValue<'_>>, &mut Config) -> Conv<()>,
}

impl TopField {
    /// The value the example sets, as TOML.
    #[must_use]
    pub fn example_value(&self) -> String {
        toml_string(self.default_name)
    }

    /// The default as the docs state it.
    #[must_use]
    pub fn default_text(&self) -> String {
        format!("{} (beside {})", self.example_value(), self.beside)
    }
}

/// A batch key that does something only beside another setting: set
/// without it, it is refused (naming its line and why), not kept to do
/// nothing.
pub struct Requires {
    pub key: &'static str,
    /// The key that must be set (as `met` says) for `key` to act.
    pub needs: &'static str,
    pub met: fn(&BatchConfig) -> bool,
    /// The refusal: what `key` needs and what it is for.
    pub why: &'static str,
}

/// The keys that act only beside another.
pub const REQUIRES: &[Requires] = &[
    Requires {
        key: "token_estimate",
        needs: "limit",
        met: |b| b.limit.is_some(),
        why: "token_estimate needs a limit (it is reserved from the limit pool)",
    },
    Requires {
        key: "estimate_field",
        needs: "limit",
        met: |b| b.limit.is_some(),
        why: "estimate_field needs a limit (it is reserved from the limit pool)",
    },
    Requires {
        key: "timezone",
        needs: "schedule",
        met: |b| b.schedule.is_some(),
        why: "timezone needs a schedule (it is the zone the schedule is read in)",
    },
    Requires {
        key: "catch_up",
        needs: "schedule",
        met: |b| b.schedule.is_some(),
        why: "catch_up needs a schedule (it is the window for catching up a missed fire time)",
    },
    Requires {
        key: "overlap",
        needs: "schedule",
        met: |b| b.schedule.is_some(),
        why: "overlap needs a schedule (it says what a fire time does while the batch still runs)",
    },
    Requires {
        key: "start_timeout",
        needs: "mode",
        met: |b| b.mode == WorkerMode::Persistent,
        why: "start_timeout needs mode = \"persistent\" (in process mode each item's worker starts with it, within item_timeout)",
    },
];

/// Every key at the top of the file but the `batch` tables.
pub const TOP: &[TopField] = &[
    TopField {
        key: "db",
        doc: &[
            "The store holding items, runs, dead letters and the run log: a SQLite file,",
            "or a PostgreSQL database URL (postgres://user@host/db).",
        ],
        default_name: DEFAULT_DB_FILE,
        beside: "this file",
        set: |v, c| place(v, c).map(|x| c.db = Some(x)),
    },
    TopField {
        key: "log_dir",
        doc: &["Where rolling JSON-lines event logs are written."],
        default_name: "logs",
        beside: "the store",
        set: |v, c| place(v, c).map(|x| c.log_dir = Some(x)),
    },
];

/// Most tokens one call may reserve.
pub const MAX_TOKEN_ESTIMATE: i64 = 100_000_000;

/// A non-empty name without NUL bytes (a pool, a payload field).
fn pool_name(value: &Spanned<DeValue<'_>>) -> Conv<String> {
    path_value(value)
}

/// A path value, resolved against the directory of the file being read.
fn place(value: &Spanned<DeValue<'_>>, config: &Config) -> Conv<std::path::PathBuf> {
    let file = config.file.as_deref().unwrap_or(Path::new(""));
    Ok(resolve(file, &path_value(value)?))
}

const BATCH_KEYS: [&str; BATCH.len()] = {
    let mut keys = [""; BATCH.len()];
    let mut i = 0;
    while i < BATCH.len() {
        keys[i] = BATCH[i].key;
        i += 1;
    }
    keys
};

/// The rows' keys, `batch` for the `[batch.NAME]` tables and `limit` for
/// the `[limit.NAME]` pools.
const TOP_KEYS: [&str; TOP.len() + 2] = {
    let mut keys = ["batch"; TOP.len() + 2];
    keys[TOP.len() + 1] = "limit";
    let mut i = 0;
    while i < TOP.len() {
        keys[i] = TOP[i].key;
        i += 1;
    }
    keys
};

/// Keys allowed in a `[batch.NAME]` table, in the order the docs list them.
pub const BATCH_FIELDS: &[&str] = &BATCH_KEYS;

/// Keys allowed at the top of the file.
pub const TOP_LEVEL_FIELDS: &[&str] = &TOP_KEYS;

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn batch(text: &str) -> Result<BatchConfig, String> {
        let config =
            Config::parse(text, Path::new("nightshift.toml")).map_err(|e| e.to_string())?;
        Ok(config.batch_or_defaults("a"))
    }

    #[test]
    fn every_default_reads_back_as_the_default() {
        for row in BATCH {
            let shown = row.default_value();
            // A default is a value exactly when the row does not say it is off.
            assert_eq!(shown.is_some(), row.unset == Unset::Default, "{}", row.key);
            if let Some(value) = shown {
                // A key that acts only beside another is read beside it.
                let beside = match REQUIRES.iter().find(|r| r.key == row.key) {
                    Some(r) if r.needs == "schedule" => "schedule = \"0 2 * * *\"\n",
                    Some(r) => panic!("{} needs {}: give it here", r.key, r.needs),
                    None => "",
                };
                let text = format!("[batch.a]\n{beside}{} = {value}\n", row.key);
                let defaults = batch(&format!("[batch.a]\n{beside}"));
                assert_eq!(batch(&text), defaults, "{text}");
            }
        }
    }

    #[test]
    fn every_key_refuses_a_value_of_the_wrong_type_naming_itself() {
        for row in BATCH {
            let err = batch(&format!("[batch.a]\n\n{} = true\n", row.key)).unwrap_err();
            let at = format!("nightshift.toml:3: batch.a.{}: expected ", row.key);
            assert!(
                err.starts_with(&at) && err.ends_with("found boolean true"),
                "{err}"
            );
        }
        for row in TOP {
            let err = batch(&format!("{} = []\n", row.key)).unwrap_err();
            let at = format!("nightshift.toml:1: {}: expected a string", row.key);
            assert!(err.starts_with(&at), "{err}");
        }
    }

    #[test]
    fn the_allowed_keys_are_the_rows() {
        assert_eq!(BATCH_FIELDS.len(), BATCH.len());
        assert_eq!(TOP_LEVEL_FIELDS, ["db", "log_dir", "batch", "limit"]);
        assert_eq!(BATCH_FIELDS.first(), Some(&"worker"));
        for (i, key) in BATCH_FIELDS.iter().enumerate() {
            assert!(!BATCH_FIELDS[..i].contains(key), "{key} twice");
        }
    }
}
