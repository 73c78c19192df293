//! The `nightshift` binary: parse, dispatch, map errors to one clear line
//! and an exit code (see `cli::EXIT_CODES`).

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

use nightshift::cli::Cli;
use nightshift::commands::{self, Exit};
use nightshift::util::sanitize;

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(parent) = cli.demo_parent {
        nightshift::demo::follow_parent(parent);
    }
    let code = match commands::dispatch(cli) {
        Ok(exit) => exit,
        Err(err) if commands::is_broken_pipe(&err) => Exit::Ok,
        Err(err) => {
            let mut msg = err.to_string();
            for cause in err.chain().skip(1) {
                let cause = cause.to_string();
                if !msg.contains(&cause) {
                    msg.push_str(": ");
                    msg.push_str(&cause);
                }
            }
            eprintln!("nightshift: error: {}", sanitize::text(&msg));
            commands::exit_for(&err)
        }
    };
    ExitCode::from(code as u8)
}
