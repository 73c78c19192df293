//! How a command that failed says so: one line on stderr and its exit
//! status, and, when it was asked for `--json` (or `--jsonl`), one JSON
//! object on stdout too, so that a script piping it into `jq` never reads
//! nothing. The one rule for every command; a command adds to the object
//! only what is its own (the lines `add` refused, the keys `requeue` and
//! `skip` refused).

use serde_json::{Value, json};

use super::{Exit, exit_for, out_json};
use crate::cli::{Cli, Command};
use crate::util::sanitize;

/// Runs `command` as the outcome of the command `cli` names: its exit
/// status, its failure said by [`report`]. A panic (a bug: no input is
/// meant to reach one) is said as the internal error it is, exit 4 and in
/// JSON when asked, rather than Rust's 101 with nothing on stdout; Rust's
/// own hook has already printed where it happened.
pub fn guarded(cli: &Cli, command: impl FnOnce() -> anyhow::Result<Exit>) -> Exit {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(command)) {
        Ok(Ok(exit)) => exit,
        Ok(Err(err)) if super::is_reader_gone(&err) => Exit::Ok,
        Ok(Err(err)) => report(cli, &err),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let err = anyhow::anyhow!("internal error (a bug, please report it): {what}");
            report(cli, &err)
        }
    }
}

/// Says that the command failed with `err`, and returns its exit status.
pub fn report(cli: &Cli, err: &anyhow::Error) -> Exit {
    let says = message(err);
    let exit = exit_for(err);
    crate::util::stdio::err_line(&format!("nightshift: error: {}", sanitize::text(&says)));
    if let Some(command) = cli.command.as_ref()
        && let Some(answer) = json_answer(command, err, &says, exit)
    {
        // A reader gone has the stderr line; the status is the error's.
        let _ = out_json(&answer);
    }
    exit
}

/// The error and each cause it does not already say, joined; no password
/// given anywhere (a libpq keyword string, a URL in a message) is kept.
fn message(err: &anyhow::Error) -> String {
    let mut msg = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !msg.contains(&cause) {
            msg.push_str(": ");
            msg.push_str(&cause);
        }
    }
    crate::store::without_password_values(&msg)
}

/// `--json`'s answer for `command` ending in `err`, when it was asked for
/// JSON: `{"error": {"command", "says", "exit"}}`, beside what the command
/// itself says of a refusal.
fn json_answer(command: &Command, err: &anyhow::Error, says: &str, exit: Exit) -> Option<Value> {
    let name = json_asked(command)?;
    let own = match command {
        Command::Add(a) if exit == Exit::Usage => Some(super::add::refused_json(a, err)),
        Command::Requeue(a) => super::requeue::refused_json(&a.batch, a.dry_run, err),
        Command::Skip(a) => super::requeue::refused_json(&a.batch, a.dry_run, err),
        _ => None,
    };
    let mut answer = own.unwrap_or_else(|| json!({}));
    answer["error"] = json!({
        "command": name,
        "says": says,
        "exit": exit as u8,
    });
    Some(answer)
}

/// The command's name, when it was asked to answer in JSON.
pub fn json_asked(command: &Command) -> Option<&'static str> {
    let (name, json) = match command {
        Command::Init(a) => ("init", a.json),
        Command::Add(a) => ("add", a.json),
        Command::Run(a) => ("run", a.json),
        Command::Schedule(a) => ("schedule", a.json),
        Command::Status(a) => ("status", a.json),
        Command::Items(a) => ("items", a.json),
        Command::Show(a) => ("show", a.json),
        Command::Requeue(a) => ("requeue", a.json),
        Command::Skip(a) => ("skip", a.json),
        Command::Pause(a) => ("pause", a.json),
        Command::Unpause(a) => ("unpause", a.json),
        Command::Cancel(a) => ("cancel", a.json),
        Command::Stop(a) => ("stop", a.json),
        Command::Dlq(a) => ("dlq", a.json || a.jsonl),
        Command::Log(a) => ("log", a.json),
        Command::Prune(a) => ("prune", a.json),
        Command::Daemon(_)
        | Command::Demo(_)
        | Command::Completions { .. }
        | Command::Man(_)
        | Command::Agent
        | Command::Watch(_) => return None,
    };
    json.then_some(name)
}

/// `--json`'s answer for a command line the parser refused (a flag's bad
/// value, an unknown flag, a missing argument), when `args` name a command
/// that takes `--json` (or `--jsonl`) and ask for it: the parser's
/// message (its first paragraph, on one line), exit 2.
pub fn usage_json(args: &[std::ffi::OsString], err: &clap::Error) -> Option<Value> {
    let cmd = crate::cli::command();
    let globals: Vec<(String, bool)> = cmd
        .get_arguments()
        .filter_map(|a| {
            let takes = a.get_action().takes_values();
            Some((format!("--{}", a.get_long()?), takes))
        })
        .collect();
    let mut rest = args.iter().skip(1).map(|a| a.to_string_lossy());
    let name = loop {
        let arg = rest.next()?;
        match globals.iter().find(|(long, _)| *long == arg) {
            Some((_, true)) => {
                rest.next();
            }
            Some((_, false)) => {}
            None if arg.starts_with('-') => {}
            None => break arg,
        }
    };
    let sub = cmd.find_subcommand(name.as_ref())?;
    let json = rest.take_while(|a| a != "--").any(|a| {
        (a == "--json" || a == "--jsonl")
            && sub.get_arguments().any(|x| x.get_long() == Some(&a[2..]))
    });
    if !json {
        return None;
    }
    // The message is the first paragraph; the tip and usage follow.
    let rendered = err.render().to_string();
    let says: Vec<&str> = rendered
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let says = says.join(" ");
    let says = says.strip_prefix("error: ").unwrap_or(&says);
    Some(json!({"error": {
        "command": sub.get_name(),
        "says": crate::store::without_password_values(says),
        "exit": Exit::Usage as u8,
    }}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        match crate::cli::parse(args.iter().copied()) {
            Ok(cli) => cli,
            Err(_) => panic!("{args:?} parses"),
        }
    }

    /// A bug that panics is the documented internal error (4), not Rust's
    /// 101; an error is said with its own status; an outcome passes.
    #[test]
    fn a_panic_is_an_internal_error() {
        let status = cli(&["nightshift", "status"]);
        assert_eq!(guarded(&status, || panic!("a bug")), Exit::Internal);
        assert_eq!(
            guarded(&status, || panic!("a bug in {}", "an item")),
            Exit::Internal
        );
        let refused = || Err(crate::commands::user_error("no such batch"));
        assert_eq!(guarded(&status, refused), Exit::Usage);
        assert_eq!(guarded(&status, || Ok(Exit::Failed)), Exit::Failed);
    }
}
