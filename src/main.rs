//! The `nightshift` binary: parse, dispatch, map errors to one clear line
//! and an exit code (see `cli::EXIT_CODES`).

#![forbid(unsafe_code)]
#![deny(clippy::unwrap_used)]
// As in `lib.rs`: no print macro, they panic on a closed stream.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use nightshift::cli::ParseError;
use nightshift::commands::{self, Exit};
use nightshift::util::sanitize;

fn main() -> ExitCode {
    nightshift::util::stdio::keep_open();
    nightshift::util::signals::catch_inherited_ignores();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(runner) = nightshift::runner::guard_arg(&args) {
        return ExitCode::from(nightshift::runner::serve_guard(&runner) as u8);
    }
    let (demo_parent, args) = nightshift::demo::take_parent_arg(args);
    if let Some(parent) = demo_parent {
        nightshift::demo::follow_parent(parent);
    }
    let cli = match nightshift::cli::parse(args.clone()) {
        Ok(cli) => cli,
        Err(ParseError::Clap(err)) => return usage_error(&args, &err),
        Err(ParseError::Refused { cli, why }) => {
            return ExitCode::from(commands::failure::report(&cli, &why.into()) as u8);
        }
    };
    if matches!(cli.command, Some(nightshift::cli::Command::Daemon(_))) {
        nightshift::util::signals::catch_early();
    }
    let code = commands::failure::guarded(&cli, || commands::dispatch(&cli));
    ExitCode::from(code as u8)
}

/// Clap's own output. Help and version print as clap renders them; a usage
/// error echoes what was typed, so it is printed plain and made inert (an
/// argument may carry escape sequences), and, asked for `--json`, as JSON
/// too.
fn usage_error(args: &[std::ffi::OsString], err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        err.exit();
    }
    nightshift::util::stdio::err_text(&sanitize::text(&err.render().to_string()));
    if let Some(answer) = commands::failure::usage_json(args, err) {
        // A reader gone has the stderr text; the status is a usage error's.
        let _ = commands::out_json(&answer);
    }
    ExitCode::from(Exit::Usage as u8)
}
