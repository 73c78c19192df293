//! One module per command. Each turns parsed arguments into store calls and
//! printed output; none holds SQL.

pub mod add;
pub mod budgets;
pub mod daemon;
pub mod demo;
pub mod dlq;
pub mod failure;
pub mod init;
pub mod items;
pub mod log;
pub mod man;
pub mod metrics;
mod named;
pub mod pause;
pub mod pools;
pub mod prune;
pub mod requeue;
pub mod run;
mod scene;
pub mod schedule;
pub mod status;
pub mod steer;
mod table;
pub mod watch;

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;

use crate::cli::{Cli, Command};
use crate::config::{BatchConfig, Config, ConfigError};
use crate::store::{Access, Store, StoreError};

/// Bad input from the user: exit 2, nothing changed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UserError(pub String);

pub fn user_error(msg: impl Into<String>) -> anyhow::Error {
    UserError(msg.into()).into()
}

/// A `--reason` given must say something (`status`, `show`, the log and
/// the dashboard show it): blank, it is refused, saying `why` it is asked.
pub fn reason_given(reason: &str, why: &str) -> anyhow::Result<()> {
    if reason.trim().is_empty() {
        return Err(user_error(format!("--reason must say {why}")));
    }
    Ok(())
}

/// A `--class` given must name an error class: none is blank (a worker's
/// blank class takes the default one), so a blank one matched nothing and
/// read as "no such items".
pub fn class_given(class: Option<&str>) -> anyhow::Result<()> {
    if class.is_some_and(|c| c.trim().is_empty()) {
        return Err(user_error(
            "--class must name an error class (no item's is blank); `nightshift dlq BATCH` lists them",
        ));
    }
    Ok(())
}

/// The process exit status (documented in `cli::EXIT_CODES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    Failed = 1,
    Usage = 2,
    Store = 3,
    Internal = 4,
    /// A transient failure (EX_TEMPFAIL); only the demo's agent uses it.
    TempFail = 75,
    Interrupted = 130,
}

/// Maps an error to its exit status by what kind of error is in the chain.
pub fn exit_for(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if cause.is::<UserError>()
            || cause.is::<ConfigError>()
            || cause.is::<add::Rejected>()
            || cause.is::<crate::cli::Refusal>()
        {
            return Exit::Usage;
        }
        // The store cannot be written truthfully with such a clock.
        if cause.is::<crate::util::time::ClockError>() {
            return Exit::Store;
        }
        if let Some(store) = cause.downcast_ref::<StoreError>() {
            return if store.is_interrupted() {
                Exit::Interrupted
            } else if store.is_user_error() {
                Exit::Usage
            } else {
                Exit::Store
            };
        }
    }
    Exit::Internal
}

/// Output whose reader is gone (`nightshift log | head`, a closed
/// terminal) is a normal end, not an error: the rule is
/// [`WriteFailed::reader_gone`](crate::util::stdio::WriteFailed::reader_gone).
/// A closed pipe met anywhere else means the same.
pub fn is_reader_gone(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<crate::util::stdio::WriteFailed>()
            .is_some_and(crate::util::stdio::WriteFailed::reader_gone)
            || c.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// What every command needs: where the store is, the config, how to print.
pub struct Ctx {
    pub db: PathBuf,
    pub config: Config,
    pub color: bool,
}

impl Ctx {
    pub fn from_cli(cli: &Cli) -> anyhow::Result<Ctx> {
        let (config, db) = crate::config::discover(cli.db.as_deref(), cli.config.as_deref())?;
        let color = !cli.no_color
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
            && std::io::stdout().is_terminal();
        Ok(Ctx { db, config, color })
    }

    /// For commands that only read: SQLite's read-only mode, no byte written.
    pub fn open_read(&self) -> anyhow::Result<Store> {
        Ok(Store::open(&self.db, Access::ReadOnly)?)
    }

    pub fn open_write(&self) -> anyhow::Result<Store> {
        Ok(Store::open(&self.db, Access::ReadWrite)?)
    }

    /// The batch's settings from the config, or the defaults.
    pub fn batch_config(&self, name: &str) -> BatchConfig {
        self.config.batch_or_defaults(name)
    }

    /// A read of `batch` that the store refused as an unknown batch, for a
    /// batch the config names: the store has not seen it yet (nothing
    /// added, never run), so what it holds is empty. A name neither knows
    /// stays an error.
    pub fn empty_if_unseen<T: Default>(
        &self,
        batch: &str,
        read: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match read {
            Err(e) if self.unseen(batch, &e) => Ok(T::default()),
            other => other,
        }
    }

    /// The same for a read naming `key` of `batch`: a batch the store has
    /// not seen has no item of that key.
    pub fn no_key_if_unseen<T>(
        &self,
        batch: &str,
        key: &str,
        read: Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        match read {
            Err(e) if self.unseen(batch, &e) => Err(StoreError::UnknownKey {
                batch: batch.to_string(),
                key: key.to_string(),
            }),
            other => other,
        }
    }

    /// Whether `e` refused `batch` as unknown to the store while the config
    /// names it: a batch not seen yet (nothing added, never run).
    fn unseen(&self, batch: &str, e: &StoreError) -> bool {
        matches!(e, StoreError::UnknownBatch { name, .. } if name == batch)
            && self.config.batch(batch).is_some()
    }

    /// Batches to show: the store's, plus configured ones not yet in it.
    pub fn all_batch_names(&self, store: &Store) -> anyhow::Result<Vec<String>> {
        Ok(self.with_configured(store.batch_names()?))
    }

    /// `names` (the store's) and the config's batches: one sorted list,
    /// each name once.
    fn with_configured(&self, mut names: Vec<String>) -> Vec<String> {
        names.extend(self.config.batches.keys().cloned());
        names.sort();
        names.dedup();
        names
    }

    /// An unknown batch's error lists the config's batches beside the
    /// store's: the store knows only those it has seen, and the commands
    /// take the config's too.
    fn known_with_configured(&self, mut err: anyhow::Error) -> anyhow::Error {
        if let Some(StoreError::UnknownBatch { known, .. }) = err.downcast_mut::<StoreError>() {
            *known = self.with_configured(std::mem::take(known));
        }
        err
    }
}

/// Runs the parsed command.
pub fn dispatch(cli: &Cli) -> anyhow::Result<Exit> {
    // These need no store, config or clock of the user's.
    match &cli.command {
        Some(Command::Agent) => return Ok(demo::agent()),
        Some(Command::Completions { shell }) => return completions(*shell),
        Some(Command::Man(args)) => return man::run(args),
        _ => {}
    }
    crate::util::time::check()?;
    if let Some(Command::Demo(args)) = &cli.command {
        return demo::run(args, cli.no_color);
    }
    let ctx = Ctx::from_cli(cli)?;
    run_command(&ctx, cli.command.as_ref()).map_err(|e| ctx.known_with_configured(e))
}

/// Runs a command that needs the store and the config.
fn run_command(ctx: &Ctx, command: Option<&Command>) -> anyhow::Result<Exit> {
    let Some(command) = command else {
        return watch::run(ctx, &crate::cli::WatchArgs::default());
    };
    match command {
        Command::Init(args) => init::run(ctx, args),
        Command::Add(args) => add::run(ctx, args),
        Command::Run(args) => run::run(ctx, args),
        Command::Daemon(args) => daemon::run(ctx, args),
        Command::Schedule(args) => schedule::run(ctx, args),
        Command::Status(args) => status::run(ctx, args),
        Command::Items(args) => items::list(ctx, args),
        Command::Show(args) => items::show(ctx, args),
        Command::Requeue(args) => requeue::requeue(ctx, args),
        Command::Skip(args) => requeue::skip(ctx, args),
        Command::Pause(args) => pause::pause(ctx, args),
        Command::Unpause(args) => pause::unpause(ctx, args),
        Command::Cancel(args) => steer::cancel(ctx, args),
        Command::Stop(args) => steer::stop(ctx, args),
        Command::Dlq(args) => dlq::run(ctx, args),
        Command::Log(args) => log::run(ctx, args),
        Command::Prune(args) => prune::run(ctx, args),
        Command::Watch(args) => watch::run(ctx, args),
        Command::Demo(_) | Command::Agent | Command::Completions { .. } | Command::Man(_) => {
            unreachable!("handled above")
        }
    }
}

/// Shell completions, generated from the CLI definition.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<Exit> {
    let mut cmd = crate::cli::completion_command();
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "nightshift", &mut buf);
    crate::util::stdio::write(
        crate::util::stdio::Stream::Out,
        &String::from_utf8_lossy(&buf),
    )?;
    Ok(Exit::Ok)
}

/// Writes a line to stdout for a one-shot command; errors (a closed pipe)
/// propagate and end the command (see `util::stdio`).
pub fn out(line: impl std::fmt::Display) -> anyhow::Result<()> {
    Ok(crate::util::stdio::write(
        crate::util::stdio::Stream::Out,
        &format!("{line}\n"),
    )?)
}

/// Prints a value as one line of JSON (terminal-inert: see
/// [`sanitize::json`](crate::util::sanitize::json)).
pub fn out_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string(value).context("encoding JSON")?;
    out(crate::util::sanitize::json(text))
}

/// Prints a value as indented JSON (terminal-inert).
pub fn out_json_pretty(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value).context("encoding JSON")?;
    out(crate::util::sanitize::json(text))
}
