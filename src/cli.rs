//! The command line, as clap definitions only. Parsing never does anything;
//! `commands` acts on the parsed values.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::model::{Status, Tier};

pub const EXIT_CODES: &str = "\
Exit codes:
  0    ok (also: a run that found the batch paused or its lock held, and stepped down)
  1    the run finished but some items failed or were quarantined
  2    bad usage or bad input; nothing was changed
  3    the store could not be used (missing, corrupt, newer schema, locked, disk full, read-only)
  4    an unexpected internal error
  130  the run was interrupted (SIGINT/SIGTERM); unfinished items went back to pending";

#[derive(Debug, Parser)]
#[command(
    name = "nightshift",
    version,
    about = "Unattended batches that are safe to re-run and easy to watch",
    long_about = "Unattended batches that are safe to re-run and easy to watch.\n\n\
        Without a subcommand, opens the dashboard (`nightshift watch`).",
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub struct Cli {
    /// The store: a SQLite file or a postgres:// URL.
    // The value is never shown in help: a URL may hold a password.
    #[arg(
        long,
        global = true,
        env = "NIGHTSHIFT_DB",
        hide_env_values = true,
        value_name = "PATH|URL"
    )]
    pub db: Option<PathBuf>,
    /// The config file [default: nightshift.toml beside the store].
    #[arg(long, global = true, env = "NIGHTSHIFT_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Never use colour (also: the NO_COLOR environment variable).
    #[arg(long, global = true)]
    pub no_color: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the store and a commented example nightshift.toml (never overwrites).
    Init,
    /// Add items from JSON lines (a file, or - for stdin); idempotent by key.
    Add(AddArgs),
    /// Run one cycle of a batch: resume what is unfinished, retry what is
    /// worth retrying, dead-letter the rest.
    Run(RunArgs),
    /// Run scheduled batches at their fire times (long-lived; for systemd or tmux).
    Daemon(DaemonArgs),
    /// Show a batch's next fire times, in its time zone and in UTC.
    Schedule(ScheduleArgs),
    /// Show counts per batch.
    Status(StatusArgs),
    /// List the items of a batch.
    Items(ItemsArgs),
    /// Show one item: payload, result, attempts, op id, errors, events.
    Show(ShowArgs),
    /// Send failed items back to pending.
    Requeue(RequeueArgs),
    /// Mark items done without running them (outcome `skipped`).
    Skip(SkipArgs),
    /// Pause a batch: runs and schedule fires do nothing until unpaused.
    Pause(PauseArgs),
    /// Unpause a batch.
    Unpause(BatchArg),
    /// Dead letters grouped by error class, or exported as JSON lines.
    Dlq(DlqArgs),
    /// The run log (structured events).
    Log(LogArgs),
    /// Delete old done items, events and runs.
    Prune(PruneArgs),
    /// The whole product in one command: a demo store, a flaky simulated
    /// agent, runs, and the dashboard.
    Demo(DemoArgs),
    /// Print shell completions (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), e.g. `nightshift man > nightshift.1`.
    Man,
    /// The demo's simulated agent worker (reads one item, acts flaky).
    #[command(hide = true)]
    Agent,
    /// Open the dashboard (also: `nightshift` with no command).
    Watch(WatchArgs),
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run the scenario to completion without a terminal and print the summaries.
    #[arg(long)]
    pub headless: bool,
    /// Keep the demo's directory (store, config, logs) afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Put the demo in this directory instead of a temporary one (kept).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct BatchArg {
    /// Batch name.
    pub batch: String,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Batch to add to (created if new).
    pub batch: String,
    /// JSON-lines file, or - for stdin.
    #[arg(default_value = "-")]
    pub file: PathBuf,
    /// Derive each key from these fields (SHA-256 of their `a:b:c` join)
    /// instead of a `key` field; overrides the config's key_fields.
    #[arg(long, value_delimiter = ',', value_name = "a,b,c")]
    pub key_fields: Option<Vec<String>>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    pub batch: String,
    /// Workers at once [default: the config's concurrency, else 4].
    #[arg(long, short = 'j')]
    pub concurrency: Option<usize>,
    /// Process at most this many items.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Run only this item (pending or failed).
    #[arg(long)]
    pub key: Option<String>,
    /// Show what would run; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Stop claiming after this long (e.g. 1h).
    #[arg(long, value_parser = parse_duration_arg, value_name = "DUR")]
    pub max_duration: Option<Duration>,
    /// If another runner holds the batch, wait for it instead of stepping down.
    #[arg(long)]
    pub wait: bool,
    /// Print every event as it happens.
    #[arg(long, short)]
    pub verbose: bool,
    /// Print the run report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Detach from the terminal's session (used by the dashboard's resume
    /// key, so the run outlives the dashboard and ignores SIGHUP).
    #[arg(long, hide = true)]
    pub detached: bool,
    /// How the run was started (recorded with it).
    #[arg(long, value_enum, default_value = "manual", hide = true)]
    pub trigger: TriggerArg,
    /// The worker program and its arguments [default: the config's worker].
    #[arg(last = true, value_name = "WORKER")]
    pub worker: Vec<String>,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Only these batches [default: every batch with a `schedule`].
    #[arg(long = "batch", value_name = "NAME", num_args = 1.., value_delimiter = ',')]
    pub batches: Vec<String>,
    /// Print every event of the cycles as it happens.
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    pub batch: String,
    /// How many fire times to show.
    #[arg(long, short = 'n', default_value_t = 5, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub next: u16,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TriggerArg {
    Manual,
    Schedule,
    Dashboard,
}

impl From<TriggerArg> for crate::model::Trigger {
    fn from(t: TriggerArg) -> crate::model::Trigger {
        match t {
            TriggerArg::Manual => crate::model::Trigger::Manual,
            TriggerArg::Schedule => crate::model::Trigger::Schedule,
            TriggerArg::Dashboard => crate::model::Trigger::Dashboard,
        }
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only this batch.
    pub batch: Option<String>,
    /// Machine-readable output.
    #[arg(long, conflicts_with_all = ["short", "prometheus"])]
    pub json: bool,
    /// One line for a tmux status bar.
    #[arg(long, conflicts_with = "prometheus")]
    pub short: bool,
    /// Prometheus text exposition format (node_exporter textfile collector).
    #[arg(long)]
    pub prometheus: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatusArg {
    Pending,
    Claimed,
    Done,
    Failed,
}

impl From<StatusArg> for Status {
    fn from(s: StatusArg) -> Status {
        match s {
            StatusArg::Pending => Status::Pending,
            StatusArg::Claimed => Status::Claimed,
            StatusArg::Done => Status::Done,
            StatusArg::Failed => Status::Failed,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TierArg {
    Retry,
    Manual,
}

impl From<TierArg> for Tier {
    fn from(t: TierArg) -> Tier {
        match t {
            TierArg::Retry => Tier::Retry,
            TierArg::Manual => Tier::Manual,
        }
    }
}

#[derive(Debug, Args)]
pub struct ItemsArgs {
    pub batch: String,
    #[arg(long, value_enum)]
    pub status: Option<StatusArg>,
    #[arg(long, value_enum)]
    pub tier: Option<TierArg>,
    /// Only failed items of this error class.
    #[arg(long, value_name = "ERROR_CLASS")]
    pub class: Option<String>,
    /// Substring of key, label or error message.
    #[arg(long)]
    pub search: Option<String>,
    /// At most this many items.
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    pub batch: String,
    /// The item's key, or its label (when exactly one item has it).
    #[arg(value_name = "KEY|LABEL")]
    pub key: String,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RequeueArgs {
    pub batch: String,
    /// Keys of failed items.
    pub keys: Vec<String>,
    /// Every failed item.
    #[arg(long, conflicts_with = "keys")]
    pub all_failed: bool,
    /// Failed items of this error class.
    #[arg(long, value_name = "ERROR_CLASS")]
    pub class: Option<String>,
    /// Failed items of this tier.
    #[arg(long, value_enum)]
    pub tier: Option<TierArg>,
    /// List exactly what would move; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Start the attempt count again from zero.
    #[arg(long)]
    pub reset_attempts: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SkipArgs {
    pub batch: String,
    #[arg(required = true)]
    pub keys: Vec<String>,
    /// Why (kept with the item and in the log).
    #[arg(long, required = true)]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct PauseArgs {
    pub batch: String,
    #[arg(long, default_value = "paused from the command line")]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct DlqArgs {
    pub batch: String,
    /// With --jsonl: only dead letters newer than this (e.g. 24h, 7d).
    /// Otherwise: count the last DUR against the DUR before [default: 24h].
    #[arg(long, value_parser = parse_duration_arg, value_name = "DUR")]
    pub since: Option<Duration>,
    /// Only this error class.
    #[arg(long, value_name = "ERROR_CLASS")]
    pub class: Option<String>,
    /// Export one JSON object per line: job_id, payload, error_class,
    /// message, attempt, failed_at (UTC, RFC 3339), tier, label, run_id.
    #[arg(long, conflicts_with = "json")]
    pub jsonl: bool,
    /// The grouped counts as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// Only this batch.
    pub batch: Option<String>,
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events.
    #[arg(long, short)]
    pub follow: bool,
    /// Only these kinds (repeatable or comma-separated; e.g. failed,empty,lock-held).
    #[arg(long, value_name = "KIND", value_delimiter = ',')]
    pub kind: Vec<String>,
    /// Only events of this item.
    #[arg(long)]
    pub key: Option<String>,
    /// How many of the newest events to print first.
    #[arg(long, short = 'n', default_value_t = 50)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove what is older than this (e.g. 30d).
    #[arg(long, value_parser = parse_duration_arg, value_name = "DUR", required = true)]
    pub older_than: Duration,
    /// Also delete failed items and dead letters older than that.
    #[arg(long)]
    pub include_failed: bool,
    /// Say what would be removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Never write: the write keys are disabled. Automatic when the store
    /// is not writable by you.
    #[arg(long)]
    pub read_only: bool,
    /// How often to read the store.
    #[arg(long, value_parser = parse_duration_arg, default_value = "1s", value_name = "DUR")]
    pub interval: Duration,
    /// Open on this batch.
    #[arg(long)]
    pub batch: Option<String>,
}

impl Default for WatchArgs {
    fn default() -> WatchArgs {
        WatchArgs {
            read_only: false,
            interval: Duration::from_secs(1),
            batch: None,
        }
    }
}

/// Durations on the command line: `30s`, `10m`, `2h`, `7d`.
pub fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    crate::duration::parse_duration(s).map_err(|e| e.to_string())
}
