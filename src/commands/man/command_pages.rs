//! nightshift(1) and nightshift-COMMAND(1), from the CLI definition: the
//! global options once, on the main page; each command's own on its page.

use std::io::Write;

use anyhow::Context;
use clap_mangen::Man;
use clap_mangen::roff::{Roff, bold, roman};

use super::{Page, see_also};

/// nightshift(1).
pub(super) fn main_page(w: &mut dyn Write) -> anyhow::Result<()> {
    let cmd = crate::cli::command().disable_help_subcommand(true);
    let man = Man::new(cmd.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    let mut roff = Roff::new();
    roff.control("PP", []);
    roff.text([roman(
        "The global options may be given before or after the command: \
         nightshift --db /srv/nightshift/nightshift.db status is nightshift status --db /srv/nightshift/nightshift.db.",
    )]);
    roff.to_writer(w)?;
    commands(&cmd).to_writer(w)?;
    exit_status().to_writer(w)?;
    environment(&cmd).to_writer(w)?;
    files().to_writer(w)?;
    see_also(&Page::Main).to_writer(w)?;
    man.render_version_section(w)?;
    Ok(())
}

/// Each command's page and what it does.
fn commands(cmd: &clap::Command) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["COMMANDS"]);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        roff.control("TP", []);
        roff.text([bold(Page::Command(sub.get_name().into()).reference())]);
        roff.text([roman(
            sub.get_about().map(ToString::to_string).unwrap_or_default(),
        )]);
    }
    roff
}

/// The exit codes, from `cli::EXIT_CODES` (what `--help` prints).
fn exit_status() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    // `  0    meaning`, one line each.
    for line in crate::cli::EXIT_CODES.lines().skip(1) {
        let (code, meaning) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
        roff.control("TP", []);
        roff.text([bold(code)]);
        roff.text([roman(meaning.trim())]);
    }
    roff
}

fn environment(cmd: &clap::Command) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["ENVIRONMENT"]);
    for arg in cmd.get_arguments() {
        if let (Some(env), Some(long)) = (arg.get_env(), arg.get_long()) {
            roff.control("TP", []);
            roff.text([bold(env.to_string_lossy())]);
            roff.text([roman(format!(
                "The same as --{long}. Set but empty, it is refused (exit 2) unless --{long} is given."
            ))]);
        }
    }
    for (name, what) in [
        (
            "NO_COLOR",
            "Set and not empty: no colour, as with --no-color.",
        ),
        (
            "NIGHTSHIFT_HOST",
            "The host name recorded with locks, runs and user@host (default: the system's).",
        ),
        (
            "XDG_STATE_HOME",
            "The dashboard keeps the time of your last visit in $XDG_STATE_HOME/nightshift/ \
             (default: ~/.local/state/nightshift/).",
        ),
    ] {
        roff.control("TP", []);
        roff.text([bold(name)]);
        roff.text([roman(what)]);
    }
    roff.control("PP", []);
    roff.text([roman(
        "Workers get NIGHTSHIFT_BATCH, NIGHTSHIFT_KEY and more: see nightshift-worker(7).",
    )]);
    roff
}

fn files() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["FILES"]);
    for (name, what) in [
        (
            "nightshift.db",
            "The store (with its -wal and -shm), in the current directory unless --db, \
             NIGHTSHIFT_DB or the config's db says otherwise. Owner-only (0600).",
        ),
        (
            "nightshift.toml",
            "The config, beside the store (or --config): see nightshift.toml(5).",
        ),
        (
            "logs/",
            "Daily JSON-lines event logs, beside the store (the config's log_dir).",
        ),
        (
            "PAUSED",
            "A file of this name beside the store is an emergency stop: runs and schedule \
             fires do nothing while it exists.",
        ),
    ] {
        roff.control("TP", []);
        roff.text([bold(name)]);
        roff.text([roman(what)]);
    }
    roff
}

/// nightshift-COMMAND(1).
pub(super) fn command_page(name: &str, w: &mut dyn Write) -> anyhow::Result<()> {
    // The subcommand on its own: the global options are not copied into
    // it, so its page lists its own options and points to nightshift(1).
    let sub = crate::cli::command()
        .find_subcommand(name)
        .cloned()
        .with_context(|| format!("no command {name}"))?;
    let page = Page::Command(name.to_string());
    let sub = sub
        .display_name(page.title())
        .bin_name(format!("nightshift {name}"));
    let man = Man::new(sub).source(format!("nightshift {}", env!("CARGO_PKG_VERSION")));
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    let mut roff = Roff::new();
    roff.control("SH", ["GLOBAL OPTIONS"]);
    roff.text([roman(
        "--db, --config and --no-color, which every command takes, are described in nightshift(1).",
    )]);
    roff.to_writer(w)?;
    see_also(&page).to_writer(w)?;
    Ok(())
}
