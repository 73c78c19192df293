//! Keeps README.md true:
//! - its dashboard captures are what the dashboard draws: each is rendered
//!   here from the dashboard fixture (clock, host and path injected, as in
//!   `tui::render`) and kept in `assets/screens/NAME.txt`;
//! - every `<!-- include: PATH -->` code block in it is that file, verbatim
//!   (the captures, the example worker and config);
//! - the example config `init` writes, `assets/examples/init.toml`, is the
//!   one the config's settings table writes;
//! - every `nightshift ...` command in its `sh` blocks parses;
//! - every file it links to exists.
//!
//! After a deliberate change to the dashboard or an example, run
//! `NIGHTSHIFT_UPDATE_SCREENS=1 cargo test --test it docs::readme` (it rewrites the
//! captures, the example config and the README's copies) and review the diff.

use crate::support::fixture;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use nightshift::cli::Cli;
use nightshift::config::Schedule;
use nightshift::store::{Access, Store};
use nightshift::tui::action::{Arrival, Intent, Pane};
use nightshift::tui::app::{App, BatchSchedule, Setup};
use nightshift::tui::theme::Palette;
use nightshift::tui::ui;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use unicode_width::UnicodeWidthStr;

use fixture::NOW;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(root().join("README.md")).unwrap()
}

fn updating() -> bool {
    std::env::var_os("NIGHTSHIFT_UPDATE_SCREENS").is_some_and(|v| !v.is_empty())
}

/// The README's captures: name, size, what the user did.
fn screens() -> Vec<(&'static str, (u16, u16), Vec<Intent>)> {
    vec![
        ("batches", (80, 24), vec![]),
        (
            "dead_letters",
            (80, 24),
            vec![Intent::GoPane(Pane::DeadLetters)],
        ),
        (
            "failed_item",
            (80, 24),
            vec![
                Intent::GoPane(Pane::Items),
                // Failed items only, the first one opened.
                Intent::CycleStatusBack,
                Intent::Open,
                Intent::PageDown,
            ],
        ),
    ]
}

/// The dashboard on the fixture after `actions`, as plain text.
fn render(size: (u16, u16), actions: &[Intent]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nightshift.db");
    fixture::build(
        &db,
        &fixture::Options {
            now: NOW,
            running: true,
        },
    );
    let store = Store::open(&db, Access::ReadOnly).unwrap();
    let mut setup = Setup::new(
        "/srv/nightshift/nightshift.db",
        "box-1",
        false,
        Palette::Mono,
    );
    setup.config.schedules = BTreeMap::from([(
        "articles".to_string(),
        BatchSchedule {
            schedule: Schedule::parse("0 2 * * *").unwrap(),
            tz: chrono_tz::Asia::Tokyo,
            catch_up: None,
        },
    )]);
    setup.config.batches = vec!["articles".into(), "newsletter".into()];
    let mut app = App::new(setup, NOW);
    app.update(Arrival::Resize(size.0, size.1));
    let poll = |app: &mut App| {
        // A changed query (a new window, a detail) is read again at once,
        // and so is a search still scanning, as the poller does.
        for _ in 0..10_000 {
            let (q, asked) = (app.query(), app.asked);
            let data = store.dashboard(&q, NOW).unwrap();
            let searching = data.items.as_ref().is_some_and(|p| p.searching.is_some());
            app.update(Arrival::Polled {
                at: NOW - 400,
                asked,
                result: Ok(Box::new(data)),
            });
            if app.query() == q && app.asked == asked && !searching {
                break;
            }
        }
    };
    poll(&mut app);
    for a in actions {
        app.update(a.clone());
        poll(&mut app);
    }
    let mut terminal = Terminal::new(TestBackend::new(size.0, size.1)).unwrap();
    terminal.draw(|f| ui::render(&app, f)).unwrap();
    let buffer = terminal.backend().buffer();
    let mut rows = Vec::new();
    for y in 0..size.1 {
        let mut row = String::new();
        let mut skip = 0;
        for x in 0..size.0 {
            // A wide character covers the next cell.
            if skip > 0 {
                skip -= 1;
                continue;
            }
            let symbol = buffer[(x, y)].symbol();
            skip = symbol.width().saturating_sub(1);
            row.push_str(symbol);
        }
        rows.push(row.trim_end().to_string());
    }
    rows.join("\n") + "\n"
}

/// Renders every capture; rewrites the stale ones when updating (atomically:
/// tests run in parallel). Returns the stale ones.
fn refresh_screens() -> Vec<String> {
    let dir = root().join("assets/screens");
    let mut stale = Vec::new();
    for (name, size, actions) in screens() {
        let drawn = render(size, &actions);
        let file = dir.join(format!("{name}.txt"));
        if std::fs::read_to_string(&file).ok().as_deref() == Some(drawn.as_str()) {
            continue;
        }
        if updating() {
            std::fs::create_dir_all(&dir).unwrap();
            let tmp = tempfile::NamedTempFile::new_in(&dir).unwrap();
            std::fs::write(tmp.path(), &drawn).unwrap();
            tmp.persist(&file).unwrap();
        } else {
            stale.push(format!("{}; the dashboard draws:\n{drawn}", file.display()));
        }
    }
    stale
}

#[test]
fn dashboard_captures_are_what_the_dashboard_draws() {
    let stale = refresh_screens();
    assert!(
        stale.is_empty(),
        "out of date: {}\nAfter a deliberate change: NIGHTSHIFT_UPDATE_SCREENS=1 cargo test --test it docs::readme",
        stale.join("\n")
    );
}

/// The README's `<!-- include: PATH -->` blocks: (path, byte range of the
/// code block's body).
fn includes(readme: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = readme[from..].find("<!-- include: ") {
        let open = from + at;
        let path_end = open
            + readme[open..]
                .find(" -->\n")
                .expect("unclosed include marker");
        let path = readme[open + "<!-- include: ".len()..path_end].to_string();
        // The fence line (```lang) follows the marker.
        let fence = path_end + " -->\n".len();
        let body = fence + readme[fence..].find('\n').unwrap() + 1;
        let end = body
            + readme[body..]
                .find("```\n<!-- /include -->")
                .unwrap_or_else(|| panic!("include of {path}: no ``` then <!-- /include -->"));
        found.push((path, body..end));
        from = end;
    }
    found
}

/// Writes the example config from the settings table when it differs and
/// updating. Returns whether it is stale.
fn refresh_init_example() -> bool {
    let file = root().join("assets/examples/init.toml");
    let written = nightshift::config::example::text();
    if std::fs::read_to_string(&file).ok().as_deref() == Some(written.as_str()) {
        return false;
    }
    if !updating() {
        return true;
    }
    let tmp = tempfile::NamedTempFile::new_in(file.parent().unwrap()).unwrap();
    std::fs::write(tmp.path(), &written).unwrap();
    tmp.persist(&file).unwrap();
    false
}

#[test]
fn the_init_example_is_what_the_settings_table_writes() {
    assert!(
        !refresh_init_example(),
        "assets/examples/init.toml differs from config::example::text().\n\
         After a deliberate change: NIGHTSHIFT_UPDATE_SCREENS=1 cargo test --test it docs::readme"
    );
}

#[test]
fn readme_includes_its_files_verbatim() {
    if updating() {
        refresh_screens();
        refresh_init_example();
    }
    let mut readme = readme();
    let blocks = includes(&readme);
    let paths: Vec<&str> = blocks.iter().map(|(p, _)| p.as_str()).collect();
    for wanted in [
        "assets/screens/batches.txt",
        "assets/examples/minimal_worker.py",
        "assets/examples/nightshift.toml",
        "assets/examples/init.toml",
        "assets/examples/paid_api_worker.py",
    ] {
        assert!(
            paths.contains(&wanted),
            "README.md does not include {wanted}"
        );
    }
    let mut stale = Vec::new();
    // From the end, so that earlier ranges stay valid while rewriting.
    for (path, range) in blocks.into_iter().rev() {
        let file = std::fs::read_to_string(root().join(&path))
            .unwrap_or_else(|e| panic!("README.md includes {path}: {e}"));
        if readme[range.clone()] != file {
            if updating() {
                readme.replace_range(range, &file);
            } else {
                stale.push(path);
            }
        }
    }
    if updating() {
        std::fs::write(root().join("README.md"), &readme).unwrap();
    }
    assert!(
        stale.is_empty(),
        "README.md's copies of {stale:?} differ from the files.\n\
         After a deliberate change: NIGHTSHIFT_UPDATE_SCREENS=1 cargo test --test it docs::readme"
    );
}

/// Splits a shell line into words: quotes and backslash escapes, no
/// expansion. Stops at a comment.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                word.extend(chars.next());
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// The `nightshift` invocations in the README's `sh` blocks (a `cargo run
/// -- ARGS` counts as `nightshift ARGS`).
fn commands(readme: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        // Continued lines.
        if let Some(start) = line.strip_suffix('\\') {
            pending.push_str(start);
            pending.push(' ');
            continue;
        }
        let full = std::mem::take(&mut pending) + line;
        let w = words(&full);
        // One command per segment of a pipeline or list.
        for segment in w.split(|w| ["|", "||", "&&", ";"].contains(&w.as_str())) {
            // Environment assignments first (`NIGHTSHIFT_DB=... nightshift`).
            let segment: Vec<String> = segment
                .iter()
                .skip_while(|w| w.contains('=') && !w.starts_with('-'))
                .cloned()
                .collect();
            let first = segment.first().map(String::as_str);
            let args: Vec<String> = if first == Some("nightshift") {
                segment.clone()
            } else if first == Some("ssh")
                && let Some(i) = segment.iter().position(|w| w == "nightshift")
            {
                segment[i..].to_vec()
            } else if first == Some("cargo")
                && segment.get(1).is_some_and(|w| w == "run")
                && let Some(i) = segment.iter().position(|w| w == "--")
            {
                std::iter::once("nightshift".to_string())
                    .chain(segment[i + 1..].iter().cloned())
                    .collect()
            } else {
                continue;
            };
            // Redirections end the arguments.
            let args = args
                .into_iter()
                .take_while(|a| !a.starts_with('>') && !a.starts_with('<') && a != "2>&1")
                .collect();
            found.push(args);
        }
    }
    found
}

#[test]
fn readme_commands_parse() {
    let readme = readme();
    let commands = commands(&readme);
    assert!(commands.len() > 20, "found only {commands:?}");
    let mut bad = Vec::new();
    for args in &commands {
        if let Err(e) = Cli::try_parse_from(args) {
            bad.push(format!("{}\n  {}", args.join(" "), e.kind()));
        }
    }
    assert!(
        bad.is_empty(),
        "README commands that do not parse:\n{}",
        bad.join("\n")
    );
}

#[test]
fn readme_links_exist() {
    let readme = readme();
    let mut missing = Vec::new();
    for part in readme.split("](").skip(1) {
        let Some(target) = part.split(')').next() else {
            continue;
        };
        if target.contains("://") || target.starts_with('#') {
            continue;
        }
        let path = target.split('#').next().unwrap_or(target);
        if !Path::new(&root().join(path)).exists() {
            missing.push(target.to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "README links to missing files: {missing:?}"
    );
}

#[test]
fn the_shell_splitter() {
    assert_eq!(
        words(r#"nightshift pause articles --reason "db migration" # why"#),
        [
            "nightshift",
            "pause",
            "articles",
            "--reason",
            "db migration"
        ]
    );
    assert_eq!(words("a 'b c'd \\e"), ["a", "b cd", "e"]);
    assert_eq!(
        words("jq -r '.error_class' # x"),
        ["jq", "-r", ".error_class"]
    );
}

/// The README's table of event kinds is the list the code has
/// (`EventKind`, which `log --kind` checks and its help prints).
#[test]
fn readme_lists_every_event_kind() {
    use nightshift::model::EventKind;
    let mut table = String::from("| kind | what it records |\n| --- | --- |\n");
    for kind in EventKind::ALL {
        table.push_str(&format!("| `{}` | {} |\n", kind.as_str(), kind.doc()));
    }
    let readme = readme();
    let (open, close) = ("<!-- event-kinds -->\n", "<!-- /event-kinds -->");
    let start = readme
        .find(open)
        .expect("README.md has no <!-- event-kinds --> table")
        + open.len();
    let end = start
        + readme[start..]
            .find(close)
            .expect("no <!-- /event-kinds -->");
    assert!(
        readme[start..end] == table,
        "README.md's event kinds differ from EventKind; put this between the markers:\n{table}"
    );
}
