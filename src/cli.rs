//! The command line, as clap definitions only. Parsing never does anything;
//! `commands` acts on the parsed values.

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::model::{EventKind, Outcome, Status, Tier};

pub const EXIT_CODES: &str = "\
Exit codes:
  0    ok (also: a run that found the batch paused or its lock held, and stepped down)
  1    the run finished but items failed or were quarantined, or its source, lock or worker failed
  2    bad usage or bad input; nothing was changed
  3    the store could not be used (missing, corrupt, newer schema, locked, disk full, read-only)
  4    an unexpected internal error
  130  interrupted (a signal or stop, even after failures): unfinished items go back";

#[derive(Debug, Parser)]
#[command(
    name = "nightshift",
    version,
    about = "Unattended batches that are safe to re-run and easy to watch",
    long_about = "Unattended batches that are safe to re-run and easy to watch.\n\n\
        Without a subcommand, opens the dashboard (`nightshift watch`).",
    after_help = EXIT_CODES,
    subcommand_value_name = "COMMAND",
    propagate_version = true
)]
pub struct Cli {
    /// The store: a SQLite file or a postgres:// URL [default: ./nightshift.db].
    // The value is never shown in help: a URL may hold a password.
    #[arg(
        long,
        global = true,
        env = "NIGHTSHIFT_DB",
        hide_env_values = true,
        value_name = "PATH|URL",
        help_heading = GLOBAL
    )]
    pub db: Option<PathBuf>,
    /// The config file [default: nightshift.toml beside the store].
    // Without `hide_env_values` clap prints `[env: NIGHTSHIFT_CONFIG=]`
    // when it is unset.
    #[arg(
        long,
        global = true,
        env = "NIGHTSHIFT_CONFIG",
        hide_env_values = true,
        value_name = "FILE",
        help_heading = GLOBAL
    )]
    pub config: Option<PathBuf>,
    /// Never use colour (also: the NO_COLOR environment variable).
    #[arg(long, global = true, help_heading = GLOBAL)]
    pub no_color: bool,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The heading of the options every command takes.
pub const GLOBAL: &str = "Global options";

/// Commands that need neither store nor config: the global options mean
/// nothing there, so their help, man page and completions leave them out.
const STORELESS: [&str; 2] = ["man", "completions"];

/// The command line as clap sees it: the derive, with the global options
/// shadowed by hidden copies on the commands that use no store (clap copies
/// a global option only to subcommands that have none of that name).
#[must_use]
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let globals: Vec<clap::Arg> = global_args(&cmd).map(|a| a.hide(true)).collect();
    cmd.mut_subcommands(|sub| {
        if STORELESS.contains(&sub.get_name()) {
            sub.args(globals.clone())
        } else {
            sub
        }
    })
}

/// The command line for shell completions, which list hidden options too:
/// the global options copied by hand to every command but those that use
/// no store, instead of by clap to all of them.
#[must_use]
pub fn completion_command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let globals: Vec<clap::Arg> = global_args(&cmd).collect();
    cmd.mut_args(|a| a.global(false)).mut_subcommands(|sub| {
        if STORELESS.contains(&sub.get_name()) {
            sub
        } else {
            sub.args(globals.clone())
        }
    })
}

/// Why the command line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Clap's own: usage, help, version.
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// The command line is read, but refused before its command runs: the
    /// command is known, so the refusal is said as that command's failure
    /// (in JSON too, when it was asked for).
    #[error("{why}")]
    Refused { cli: Box<Cli>, why: Refusal },
}

/// Why a command line that clap read is refused before its command runs.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// An option's environment variable is set but empty, and no flag says
    /// otherwise. Clap would blame the flag, which the user never typed.
    #[error("{var} is set but empty (it stands for --{long}): unset it or give it a value")]
    EmptyEnv { var: String, long: String },
}

/// Parses `args` (the program name first) into a [`Cli`].
///
/// An option's environment variable that is set but empty is refused by
/// name rather than taken as unset: `NIGHTSHIFT_DB=$DB` with `$DB` unset
/// must not quietly open (or `init`) `./nightshift.db` instead.
///
/// # Errors
///
/// See [`ParseError`].
pub fn parse<I, T>(args: I) -> Result<Cli, ParseError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    use clap::parser::ValueSource;
    let mut cmd = command();
    // Clap reads the variables when the option is defined: the empty ones
    // are unhooked, and refused below unless a flag gave the value.
    let empty: Vec<(String, String, String)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let var = a.get_env()?;
            let set_empty = std::env::var_os(var).is_some_and(|v| v.is_empty());
            set_empty.then(|| {
                (
                    a.get_id().to_string(),
                    var.to_string_lossy().into_owned(),
                    a.get_long().unwrap_or(a.get_id().as_str()).to_string(),
                )
            })
        })
        .collect();
    for (id, _, _) in &empty {
        cmd = unhook_env(cmd, id);
    }
    let matches = cmd.try_get_matches_from(args)?;
    // The commands that use no store read neither option.
    let used = !matches
        .subcommand_name()
        .is_some_and(|name| STORELESS.contains(&name));
    if let Some((_, var, long)) = empty
        .into_iter()
        .filter(|_| used)
        .find(|(id, _, _)| matches.value_source(id) != Some(ValueSource::CommandLine))
    {
        let cli = Box::new(Cli::from_arg_matches(&matches)?);
        let why = Refusal::EmptyEnv { var, long };
        return Err(ParseError::Refused { cli, why });
    }
    Ok(Cli::from_arg_matches(&matches)?)
}

/// `cmd` with option `id` read from no environment variable, in every
/// command that has it (the hidden copies of [`command`] included).
fn unhook_env(cmd: clap::Command, id: &str) -> clap::Command {
    let cmd = if cmd.get_arguments().any(|a| a.get_id() == id) {
        cmd.mut_arg(id, |a| a.env(None))
    } else {
        cmd
    };
    cmd.mut_subcommands(|sub| unhook_env(sub, id))
}

/// Copies of the global options, as plain (non-global) options.
fn global_args(cmd: &clap::Command) -> impl Iterator<Item = clap::Arg> + '_ {
    cmd.get_arguments()
        .filter(|a| a.is_global_set())
        .map(|a| a.clone().global(false))
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the store and a commented example nightshift.toml (never overwrites).
    Init(InitArgs),
    /// Add items from JSON lines (a file, or - for stdin); idempotent by key.
    Add(AddArgs),
    /// Run one cycle of a batch: resume what is unfinished, retry what is
    /// worth retrying, dead-letter the rest.
    Run(RunArgs),
    /// Run scheduled batches at their fire times (long-lived; for systemd or
    /// tmux). SIGHUP reloads the config; a bad one is refused and the old kept.
    Daemon(DaemonArgs),
    /// Show a batch's next fire times, in its time zone and in UTC.
    Schedule(ScheduleArgs),
    /// Show counts per batch: pending, claimed, done, empty, skipped, retry,
    /// manual (each item in one), the last run that did work, and what holds
    /// each back (a pause, a retry-after hold).
    Status(StatusArgs),
    /// List the items of a batch.
    Items(ItemsArgs),
    /// Show one item: payload, result, attempts, op id, errors, events.
    Show(ShowArgs),
    /// Send failed items back to pending (or, with --outcome, done items to
    /// run again).
    Requeue(RequeueArgs),
    /// Mark items done without running them (outcome `skipped`).
    Skip(SkipArgs),
    /// Pause a batch: runs and schedule fires do nothing until unpaused.
    Pause(PauseArgs),
    /// Unpause a batch, and lift its retry-after hold (both recorded).
    Unpause(UnpauseArgs),
    /// Cancel one item: a running one has its worker stopped by the runner
    /// holding it (on any host, within a second); it goes to --to, never done.
    Cancel(CancelArgs),
    /// Stop the runs of a batch (any host, within a second): no new items,
    /// in-flight ones get the grace period; --now stops them at once.
    Stop(StopArgs),
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
        /// The shell to print completions for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff), or write every page to a directory.
    #[command(
        long_about = "Print a man page (roff), or write every page to a directory.\n\n\
            `nightshift man` prints nightshift(1), `nightshift man run` nightshift-run(1), \
            `nightshift man config` nightshift.toml(5) (every key of the config) and \
            `nightshift man worker` nightshift-worker(7) (the worker contract). \
            `nightshift man --dir ~/.local/share/man` writes them all where man finds them: \
            man1/nightshift.1, man1/nightshift-run.1, ..., man5/nightshift.toml.5, \
            man7/nightshift-worker.7 (replacing pages of those names)."
    )]
    Man(ManArgs),
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
pub struct InitArgs {
    /// Print what was created (and what existed already) as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UnpauseArgs {
    /// The batch to unpause (and whose retry-after hold to lift).
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// The page: a command (run, log, ...), `config` or `worker`
    /// [default: nightshift(1)].
    #[arg(value_name = "PAGE", conflicts_with = "dir")]
    pub page: Option<String>,
    /// Write every page under this man directory (DIR/man1, DIR/man5,
    /// DIR/man7; created if missing), e.g. ~/.local/share/man, and list the
    /// files written.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AddArgs {
    /// Batch to add to (created if new).
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// JSON-lines file, or - for stdin.
    #[arg(default_value = "-")]
    pub file: PathBuf,
    /// Derive each key from these fields (SHA-256 of their `a:b:c` join)
    /// instead of a `key` field; refused if the config's key_fields differ.
    #[arg(long, value_delimiter = ',', value_name = "a,b,c")]
    pub key_fields: Option<Vec<String>>,
    /// Claim priority of the new items (an integer; higher first, then
    /// older; default 0). A line's own priority field wins.
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = parse_priority_arg)]
    pub priority: Option<i32>,
    /// Read each item's priority from this field of its line (an integer);
    /// overrides the config's priority_field.
    #[arg(long, value_name = "FIELD")]
    pub priority_field: Option<String>,
    /// Claim the new items no earlier than this: an RFC 3339 time
    /// (2026-12-02T07:00:00+09:00) or a duration from now (30m, 2h, 1d).
    /// Until then they wait, `not-due`; the first run after it takes them.
    #[arg(allow_hyphen_values = true, long, value_parser = parse_when_arg, value_name = "TIME")]
    pub not_before: Option<crate::util::time::When>,
    /// Say how many items would be added and how many are present
    /// already; add nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The batch to run (configured in nightshift.toml, or given items by `add`).
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// Workers at once [default: the config's concurrency, else 4].
    #[arg(allow_negative_numbers = true, long, short = 'j', value_name = "N",
          value_parser = parse_concurrency_arg)]
    pub concurrency: Option<usize>,
    /// Process at most this many items.
    #[arg(allow_negative_numbers = true, long, value_name = "N", value_parser = parse_limit_arg)]
    pub limit: Option<usize>,
    /// Run only this item (pending or failed).
    #[arg(long)]
    pub key: Option<String>,
    /// Show what would run, and what waits and why (a pause, the lock, a
    /// retry-after hold); write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Stop claiming after this long (e.g. 1h).
    #[arg(allow_hyphen_values = true, long, value_parser = parse_positive_duration_arg, value_name = "DUR")]
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
    #[arg(long = "batch", value_name = "NAME", num_args = 1.., value_delimiter = ',',
          value_parser = crate::batch_name::parse_arg)]
    pub batches: Vec<String>,
    /// Print every event of the cycles as it happens.
    #[arg(long, short)]
    pub verbose: bool,
}

#[derive(Debug, Args)]
pub struct ScheduleArgs {
    /// The batch whose `schedule` to show.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// How many fire times to show.
    #[arg(allow_negative_numbers = true, long, short = 'n', default_value_t = 5, value_name = "N",
          value_parser = parse_fire_times_arg)]
    pub next: u16,
    /// Print the fire times as JSON.
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
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: Option<String>,
    /// Machine-readable output.
    #[arg(long, conflicts_with_all = ["short", "prometheus"])]
    pub json: bool,
    /// One line for a tmux status bar: finished✓ failed✗ to-do… per batch.
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
pub enum OutcomeArg {
    Done,
    Empty,
    Skipped,
}

impl From<OutcomeArg> for Outcome {
    fn from(o: OutcomeArg) -> Outcome {
        match o {
            OutcomeArg::Done => Outcome::Done,
            OutcomeArg::Empty => Outcome::Empty,
            OutcomeArg::Skipped => Outcome::Skipped,
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
    /// The batch to list.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// Only items in this status.
    #[arg(long, value_enum)]
    pub status: Option<StatusArg>,
    /// Only failed items of this tier.
    #[arg(long, value_enum)]
    pub tier: Option<TierArg>,
    /// Only done items with this outcome: done (a result), empty (nothing
    /// on stdout) or skipped (marked done by a person).
    #[arg(long, value_enum, conflicts_with_all = ["tier", "class"])]
    pub outcome: Option<OutcomeArg>,
    /// Only failed items of this error class.
    #[arg(long, value_name = "ERROR_CLASS")]
    pub class: Option<String>,
    /// Substring of key, label or error message.
    #[arg(long, value_name = "TEXT")]
    pub search: Option<String>,
    /// Only items done under an older version than the batch's `version`
    /// (or before it had one).
    #[arg(long, conflicts_with_all = ["status", "tier", "outcome", "class"])]
    pub stale: bool,
    /// At most this many items.
    #[arg(allow_negative_numbers = true, long, value_name = "N", value_parser = parse_limit_arg)]
    pub limit: Option<usize>,
    /// One JSON object per item, one per line (times in UTC, RFC 3339).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The item's batch.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// The item's key, or its label (when exactly one item has it).
    #[arg(value_name = "KEY|LABEL")]
    pub key: String,
    /// Also what each kept attempt printed on stderr (its last 16 KiB),
    /// newest first.
    #[arg(long)]
    pub attempts: bool,
    /// The item, its failed attempts and its events as JSON (with
    /// --attempts, the attempts' stderr too); times in UTC, RFC 3339.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RequeueArgs {
    /// The batch whose items to requeue.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// Keys of failed items (with --outcome: of done items with that outcome).
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
    /// Done items with this outcome instead (empty: they succeeded with
    /// nothing): back to pending, to run again; their result and
    /// operation id are dropped, their attempts kept.
    #[arg(long, value_enum, conflicts_with_all = ["all_failed", "class", "tier"])]
    pub outcome: Option<OutcomeArg>,
    /// The items done under an older version than the batch's `version`
    /// (or before it had one), to run them again under this one.
    #[arg(long, conflicts_with_all = ["keys", "all_failed", "class", "tier", "outcome"])]
    pub stale: bool,
    /// List exactly what would move; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Start the attempt count again from zero.
    #[arg(long)]
    pub reset_attempts: bool,
    /// Claim them no earlier than this: an RFC 3339 time
    /// (2026-12-02T07:00:00+09:00) or a duration from now (30m, 2h, 1d).
    /// Until then they wait, `not-due`; the first run after it takes them.
    #[arg(allow_hyphen_values = true, long, value_parser = parse_when_arg, value_name = "TIME")]
    pub not_before: Option<crate::util::time::When>,
    /// Print what moved (or would move) as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SkipArgs {
    /// The items' batch.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// Keys of the items to mark done.
    #[arg(required = true)]
    pub keys: Vec<String>,
    /// Why (kept with the item and in the log).
    #[arg(long, required = true, value_name = "TEXT")]
    pub reason: String,
    /// Say which items would be skipped and which are done already; change
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print which items were skipped and which were done already, as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Where `cancel` sends the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CancelToArg {
    /// Back to pending: it runs again.
    Pending,
    /// The manual tier (error class `Cancelled`): it waits for a human.
    Manual,
}

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The item's batch.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// The key of the item to cancel.
    pub key: String,
    /// Where the item goes: `manual` (it waits for a human, as `Cancelled`)
    /// or `pending` (it runs again).
    #[arg(long, value_enum, default_value = "manual", value_name = "WHERE")]
    pub to: CancelToArg,
    /// Why (kept with the item and in the log).
    #[arg(
        long,
        default_value = "cancelled from the command line",
        value_name = "TEXT"
    )]
    pub reason: String,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StopArgs {
    /// The batch whose runs to stop.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// Stop in-flight workers at once (their items go back to pending), as
    /// a second SIGTERM does.
    #[arg(long)]
    pub now: bool,
    /// Print which runners were asked, as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The batch to pause (configured, or already in the store).
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// Why (shown by `status` and the dashboard, kept in the log). Left
    /// out: "paused from the command line", and a batch already paused
    /// keeps its reason.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Print what was done as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DlqArgs {
    /// The batch whose dead letters to show.
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: String,
    /// With --jsonl: only dead letters newer than this (e.g. 24h, 7d).
    /// Otherwise: count the last DUR against the DUR before [default: 24h].
    #[arg(allow_hyphen_values = true, long, value_parser = parse_positive_duration_arg, value_name = "DUR")]
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
    #[arg(value_parser = crate::batch_name::parse_arg)]
    pub batch: Option<String>,
    /// One JSON object per event, one per line (times in UTC, RFC 3339).
    #[arg(long)]
    pub json: bool,
    /// Keep printing new events.
    #[arg(long, short)]
    pub follow: bool,
    /// Only these kinds (repeatable or comma-separated; e.g.
    /// failed,quarantined,empty).
    #[arg(long, value_name = "KIND", value_delimiter = ',', value_enum)]
    pub kind: Vec<EventKind>,
    /// Only events of this item.
    ///
    /// Its key or label, as `show` takes it (without BATCH: a key of any
    /// batch, or a label one item of any batch has); a name no item has is
    /// refused.
    #[arg(long)]
    pub key: Option<String>,
    /// How many of the newest events to print first (0: every one).
    #[arg(
        allow_negative_numbers = true,
        long,
        short = 'n',
        default_value_t = 50,
        value_name = "N",
        value_parser = parse_events_arg
    )]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Remove what is older than this (e.g. 30d).
    #[arg(allow_hyphen_values = true, long, value_parser = parse_positive_duration_arg, value_name = "DUR", required = true)]
    pub older_than: Duration,
    /// Also delete failed items and dead letters older than that.
    #[arg(long)]
    pub include_failed: bool,
    /// Also forget the keys of items done before then: pruning keeps the
    /// key of every done item it removes, so that adding it again does not
    /// run it again. Forgotten keys run again when added again.
    #[arg(long)]
    pub forget_keys: bool,
    /// Say what would be removed; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the counts as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Never write: the write keys are disabled. Automatic when the store
    /// is not writable by you.
    #[arg(long)]
    pub read_only: bool,
    /// How often to read the store.
    #[arg(allow_hyphen_values = true, long, value_parser = parse_positive_duration_arg, default_value = "1s", value_name = "DUR")]
    pub interval: Duration,
    /// Open on this batch.
    #[arg(long, value_name = "NAME", value_parser = crate::batch_name::parse_arg)]
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

/// Event kinds as `--kind` values: the list, each with what it records.
impl ValueEnum for EventKind {
    fn value_variants<'a>() -> &'a [EventKind] {
        EventKind::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.as_str()).help(self.doc()))
    }
}

/// Moments on the command line: RFC 3339, or a duration from now.
pub fn parse_when_arg(s: &str) -> Result<crate::util::time::When, String> {
    crate::util::time::parse_when(s)
}

/// Durations on the command line: `30s`, `10m`, `2h`, `7d`.
pub fn parse_duration_arg(s: &str) -> Result<Duration, String> {
    crate::duration::parse_duration(s).map_err(|e| e.to_string())
}

/// Every duration flag's parser: a length longer than none. None would
/// count nothing (`dlq --since`), run nothing (`run --max-duration`),
/// spin (`watch --interval`) or remove everything done up to now, failed
/// items and dead letters too (`prune --older-than`, where a variable left
/// empty in `${DAYS}d` gives `0d`): one rule for all of them.
pub fn parse_positive_duration_arg(s: &str) -> Result<Duration, String> {
    match parse_duration_arg(s)? {
        d if d.is_zero() => Err(format!("{s:?} is no time at all: give a length, e.g. 24h")),
        d => Ok(d),
    }
}

/// A whole number from `min` to `max` (`None`: as large as the flag's
/// type holds), refused in words that give the range: Rust's own
/// ("invalid digit found in string" for `-2`, "number too large to fit in
/// target type") named neither what was wrong nor what is taken. Plain
/// digits, a `-` before them at most.
fn whole_in<T: TryFrom<i128>>(s: &str, min: i128, max: Option<i128>) -> Result<T, String> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let plain = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    let n = s
        .parse::<i128>()
        .ok()
        .filter(|n| plain && *n >= min && max.is_none_or(|max| *n <= max))
        .and_then(|n| T::try_from(n).ok());
    n.ok_or_else(|| match max {
        None => format!("{s:?} is not a whole number of at least {min}"),
        Some(max) => format!("{s:?} is not a whole number from {min} to {max}"),
    })
}

/// `run --concurrency`: as the config's `concurrency`, 1 to
/// [`MAX_CONCURRENCY`](crate::config::MAX_CONCURRENCY).
pub fn parse_concurrency_arg(s: &str) -> Result<usize, String> {
    let most = i128::try_from(crate::config::MAX_CONCURRENCY).ok();
    whole_in(s, 1, most)
}

/// `add --priority`: any integer a line's priority field may hold.
pub fn parse_priority_arg(s: &str) -> Result<i32, String> {
    whole_in(s, i32::MIN.into(), Some(i32::MAX.into()))
}

/// `schedule --next`: 1 to 1000 fire times.
pub fn parse_fire_times_arg(s: &str) -> Result<u16, String> {
    whole_in(s, 1, Some(1000))
}

/// `log --limit`: the newest N events first, 0 for every one (a count
/// past the store's integers asks for every one too).
pub fn parse_events_arg(s: &str) -> Result<usize, String> {
    whole_in(s, 0, None).map_err(|e| format!("{e} (0: every event)"))
}

/// A `--limit`: at least one, since a limit of none would silently do
/// nothing (and say "no items match" where items do).
pub fn parse_limit_arg(s: &str) -> Result<usize, String> {
    match whole_in(s, 1, None) {
        Ok(n) => Ok(n),
        Err(_) if s == "0" => Err("0 would do nothing: leave --limit out for no limit".into()),
        Err(e) => Err(e),
    }
}
