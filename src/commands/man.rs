//! `nightshift man`: the manual pages. Each is generated, never written by
//! hand: nightshift(1) and nightshift-COMMAND(1) from the CLI definition,
//! nightshift.toml(5) from the config's settings table (`config_page`),
//! nightshift-worker(7) from the README's worker contract (`worker_page`).
//! Every page a page names can be produced: [`Page::all`] is that list.

mod command_pages;
mod config_page;
mod worker_page;

use std::path::Path;

use anyhow::Context;
use clap_mangen::roff::{Roff, roman};

use super::{Exit, out, user_error};
use crate::cli::ManArgs;
use crate::util::sanitize;

/// One manual page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    /// nightshift(1): global options, commands, exit status, files.
    Main,
    /// nightshift-COMMAND(1).
    Command(String),
    /// nightshift.toml(5): every key of the config.
    Config,
    /// nightshift-worker(7): what a worker reads, prints and exits with.
    Worker,
}

impl Page {
    /// Every page, in the order `--dir` writes them and SEE ALSO lists them.
    #[must_use]
    pub fn all() -> Vec<Page> {
        let mut pages = vec![Page::Main];
        pages.extend(command_names().into_iter().map(Page::Command));
        pages.extend([Page::Config, Page::Worker]);
        pages
    }

    /// What `nightshift man PAGE` takes: a command's name, `config`, `worker`.
    pub fn parse(name: &str) -> Result<Page, String> {
        let page = match name {
            "config" | "nightshift.toml" => Page::Config,
            "worker" => Page::Worker,
            _ if command_names().iter().any(|c| c == name) => Page::Command(name.to_string()),
            _ => {
                let names: Vec<String> = Page::all().iter().filter_map(Page::argument).collect();
                return Err(format!(
                    "no man page {:?}: give one of {}, or nothing for nightshift(1)",
                    sanitize::line(name),
                    names.join(", ")
                ));
            }
        };
        Ok(page)
    }

    /// The argument that selects this page (`None`: the main page).
    fn argument(&self) -> Option<String> {
        match self {
            Page::Main => None,
            Page::Command(name) => Some(name.clone()),
            Page::Config => Some("config".into()),
            Page::Worker => Some("worker".into()),
        }
    }

    fn title(&self) -> String {
        match self {
            Page::Main => "nightshift".into(),
            Page::Command(name) => format!("nightshift-{name}"),
            Page::Config => "nightshift.toml".into(),
            Page::Worker => "nightshift-worker".into(),
        }
    }

    fn section(&self) -> &'static str {
        match self {
            Page::Main | Page::Command(_) => "1",
            Page::Config => "5",
            Page::Worker => "7",
        }
    }

    /// `nightshift-run(1)`: how other pages name it.
    #[must_use]
    pub fn reference(&self) -> String {
        format!("{}({})", self.title(), self.section())
    }

    /// `nightshift-run.1`.
    #[must_use]
    pub fn file_name(&self) -> String {
        format!("{}.{}", self.title(), self.section())
    }

    /// The page as roff.
    pub fn render(&self) -> anyhow::Result<String> {
        let mut buf = Vec::new();
        match self {
            Page::Main => command_pages::main_page(&mut buf)?,
            Page::Command(name) => command_pages::command_page(name, &mut buf)?,
            Page::Config => {
                config_page::render(header(self)).to_writer(&mut buf)?;
                see_also(self).to_writer(&mut buf)?;
            }
            Page::Worker => {
                worker_page::render(header(self))?.to_writer(&mut buf)?;
                see_also(self).to_writer(&mut buf)?;
            }
        }
        let text = String::from_utf8(buf).context("the man page is not UTF-8")?;
        Ok(once_preamble(&text))
    }

    /// The pages this one points to.
    fn see_also(&self) -> Vec<Page> {
        let config = || Page::Config;
        match self {
            Page::Main => Page::all().into_iter().skip(1).collect(),
            Page::Command(name) => {
                let mut pages = vec![Page::Main];
                match name.as_str() {
                    "run" | "daemon" | "demo" => pages.extend([config(), Page::Worker]),
                    "init" | "add" | "schedule" | "status" => pages.push(config()),
                    _ => {}
                }
                pages
            }
            Page::Config => vec![Page::Main, Page::Command("init".into()), Page::Worker],
            Page::Worker => vec![Page::Main, Page::Command("run".into()), config()],
        }
    }
}

/// Each piece of a page written by `roff` opens with the same two lines
/// (the apostrophe string): one copy at the top is enough.
fn once_preamble(text: &str) -> String {
    const PREAMBLE: &str = ".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n";
    match text.strip_prefix(PREAMBLE) {
        Some(rest) => format!("{PREAMBLE}{}", rest.replace(PREAMBLE, "")),
        None => text.to_string(),
    }
}

/// The visible commands (`help` and the demo's hidden agent left out).
fn command_names() -> Vec<String> {
    crate::cli::command()
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| c.get_name().to_string())
        .collect()
}

/// `.TH` and the source line shared by every page.
fn header(page: &Page) -> Roff {
    let mut roff = Roff::new();
    let source = format!("nightshift {}", env!("CARGO_PKG_VERSION"));
    roff.control(
        "TH",
        [
            page.title().as_str(),
            page.section(),
            "",
            source.as_str(),
            "",
        ],
    );
    roff
}

/// The SEE ALSO section.
fn see_also(page: &Page) -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["SEE ALSO"]);
    let refs: Vec<String> = page.see_also().iter().map(Page::reference).collect();
    roff.text([roman(refs.join(", "))]);
    roff
}

/// `nightshift man [PAGE]` prints a page; `--dir DIR` writes them all.
pub fn run(args: &ManArgs) -> anyhow::Result<Exit> {
    if let Some(dir) = &args.dir {
        return write_all(dir);
    }
    let page = match &args.page {
        Some(name) => Page::parse(name).map_err(user_error)?,
        None => Page::Main,
    };
    let text = page.render()?;
    crate::util::stdio::write(crate::util::stdio::Stream::Out, &text)?;
    Ok(Exit::Ok)
}

/// Writes every page where `man` looks for it: `DIR/man1/nightshift.1`,
/// `DIR/man5/nightshift.toml.5`, ...
fn write_all(dir: &Path) -> anyhow::Result<Exit> {
    let shown = |p: &Path| sanitize::line(&p.display().to_string()).into_owned();
    let mut written = Vec::new();
    for page in Page::all() {
        let sub = dir.join(format!("man{}", page.section()));
        std::fs::create_dir_all(&sub)
            .map_err(|e| user_error(format!("cannot create {}: {e}", shown(&sub))))?;
        let path = sub.join(page.file_name());
        std::fs::write(&path, page.render()?)
            .map_err(|e| user_error(format!("cannot write {}: {e}", shown(&path))))?;
        written.push(path);
    }
    // Said once every page is written: a reader that stops early (`| head`)
    // must not leave the pages after it unwritten.
    for path in &written {
        out(shown(path))?;
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nightshift-run(1)` and the like, as a page names them.
    fn references(text: &str) -> Vec<String> {
        let text = text.replace("\\-", "-");
        let mut refs = Vec::new();
        for (i, _) in text.match_indices("nightshift") {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '-' || c == '.' || c == '('))
                .unwrap_or(rest.len());
            let word = &rest[..end];
            if let Some(open) = word.find('(')
                && rest[end..].starts_with(')')
                && word[open + 1..].chars().all(|c| c.is_ascii_digit())
                && open + 1 < word.len()
            {
                refs.push(format!("{word})"));
            }
        }
        refs
    }

    #[test]
    fn every_page_renders_and_every_page_named_can_be_produced() {
        let all: Vec<String> = Page::all().iter().map(Page::reference).collect();
        for page in Page::all() {
            let text = page.render().unwrap();
            let th = format!(".TH {} {}", page.title(), page.section());
            assert!(text.contains(&th), "{}: {th}", page.reference());
            assert_eq!(text.matches(".ds Aq").count(), 2, "{}", page.reference());
            let named = references(&text);
            assert!(
                !named.is_empty() || page == Page::Main,
                "{}",
                page.reference()
            );
            for r in named {
                assert!(
                    all.contains(&r),
                    "{} names {r}, which no page is",
                    page.reference()
                );
            }
        }
        assert!(all.contains(&"nightshift-run(1)".to_string()));
        assert!(
            !all.iter()
                .any(|p| p.contains("help") || p.contains("agent"))
        );
    }

    #[test]
    fn pages_are_chosen_by_name() {
        assert_eq!(Page::parse("run"), Ok(Page::Command("run".into())));
        assert_eq!(Page::parse("config"), Ok(Page::Config));
        assert_eq!(Page::parse("worker"), Ok(Page::Worker));
        let err = Page::parse("rn").unwrap_err();
        assert!(
            err.contains("\"rn\"") && err.contains("run, daemon"),
            "{err}"
        );
    }

    #[test]
    fn command_pages_leave_the_global_options_to_the_main_page() {
        let run = Page::Command("run".into()).render().unwrap();
        assert!(!run.contains("\\fB\\-\\-db\\fR"), "{run}");
        assert!(run.contains("\\-\\-dry\\-run"));
        assert!(run.contains("nightshift(1)"));
        let main = Page::Main.render().unwrap();
        assert_eq!(
            main.matches("\\fB\\-\\-db\\fR").count(),
            2,
            "synopsis and options"
        );
        assert!(main.contains(".SH \"GLOBAL OPTIONS\""), "{main}");
        assert!(main.contains("NIGHTSHIFT_CONFIG"));
    }
}
