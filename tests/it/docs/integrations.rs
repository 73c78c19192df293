//! Completions, man page and Prometheus metrics, generated from the real
//! CLI definition and the real store.

use crate::support as common;

use common::Env;

fn stdout(env: &Env, args: &[&str]) -> String {
    let out = env.cmd().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn completions_and_man_page_are_generated_from_the_cli() {
    let env = Env::bare();
    for shell in ["bash", "zsh", "fish"] {
        let text = stdout(&env, &["completions", shell]);
        insta::assert_snapshot!(format!("completions_{shell}"), text);
    }
    // The global options on every command but those that use no store.
    let fish = stdout(&env, &["completions", "fish"]);
    let with_db: Vec<&str> = fish
        .lines()
        .filter(|l| l.contains(" -l db "))
        .filter_map(|l| l.split("__fish_nightshift_using_subcommand ").nth(1))
        .filter_map(|l| l.split('"').next())
        .collect();
    assert!(
        with_db.contains(&"log") && with_db.contains(&"run"),
        "{with_db:?}"
    );
    assert!(
        !with_db.contains(&"man") && !with_db.contains(&"completions"),
        "{with_db:?}"
    );
    let man = stdout(&env, &["man"]);
    assert!(man.contains(".TH nightshift 1"));
    insta::assert_snapshot!("man_page", man);
    for (page, th) in [
        ("run", ".TH nightshift-run 1"),
        ("log", ".TH nightshift-log 1"),
        ("config", ".TH nightshift.toml 5"),
        ("worker", ".TH nightshift-worker 7"),
    ] {
        let text = stdout(&env, &["man", page]);
        assert!(text.contains(th), "{page}: {text}");
        insta::assert_snapshot!(format!("man_page_{page}"), text);
    }
}

/// `nightshift-run(1)`, `nightshift.toml(5)`, ...: the pages a page names.
fn named_pages(roff: &str) -> Vec<String> {
    let text = roff.replace("\\-", "-");
    let mut names = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("nightshift") {
        rest = &rest[i..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '.'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(end);
        if let Some(section) = after
            .strip_prefix('(')
            .and_then(|a| a.split_once(')'))
            .map(|(s, _)| s)
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        {
            names.push(format!("{name}.{section}"));
        }
        rest = &rest[end.max(1)..];
    }
    names
}

/// A reader that stops early (`man --dir DIR | head -1`) leaves every
/// page written: the pages were written as they were listed, and the
/// closed pipe stopped it after the first.
#[test]
fn man_dir_writes_every_page_even_when_its_listing_is_cut() {
    let env = Env::bare();
    let (whole, cut) = (env.path("whole"), env.path("cut"));
    stdout(&env, &["man", "--dir", whole.to_str().unwrap()]);
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = env
        .std_cmd()
        .args(["man", "--dir", cut.to_str().unwrap()])
        .stdout(writer)
        .status()
        .unwrap();
    assert!(status.success(), "{status:?}");
    let count = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|s| std::fs::read_dir(s.unwrap().path()).unwrap().count())
            .sum::<usize>()
    };
    assert!(count(&whole) > 20, "{}", count(&whole));
    assert_eq!(count(&cut), count(&whole), "every page written");
}

#[test]
fn man_dir_writes_every_page_that_any_page_names() {
    let env = Env::bare();
    let dir = env.path("share/man");
    let listed = stdout(&env, &["man", "--dir", dir.to_str().unwrap()]);
    // Every page in the directory `man` looks in for its section.
    let mut written = Vec::new();
    for section in std::fs::read_dir(&dir).unwrap() {
        let section = section.unwrap().path();
        let suffix = section
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .strip_prefix("man")
            .unwrap()
            .to_string();
        for page in std::fs::read_dir(&section).unwrap() {
            let name = page.unwrap().file_name().into_string().unwrap();
            assert!(
                name.ends_with(&format!(".{suffix}")),
                "{name} in man{suffix}"
            );
            written.push(name);
        }
    }
    written.sort();
    let mut said: Vec<String> = listed
        .lines()
        .map(|l| l.rsplit('/').next().unwrap().to_string())
        .collect();
    said.sort();
    assert_eq!(said, written, "it lists what it wrote");
    for page in [
        "nightshift.1",
        "nightshift-run.1",
        "nightshift-man.1",
        "nightshift.toml.5",
        "nightshift-worker.7",
    ] {
        assert!(
            written.iter().any(|w| w == page),
            "{page} missing from {written:?}"
        );
    }
    assert!(
        !written
            .iter()
            .any(|w| w.contains("help") || w.contains("agent")),
        "{written:?}"
    );
    let path = |page: &str| {
        dir.join(format!("man{}", page.rsplit('.').next().unwrap()))
            .join(page)
    };
    let main = std::fs::read_to_string(path("nightshift.1")).unwrap();
    let mut everything: Vec<String> = named_pages(&main);
    everything.push("nightshift.1".into());
    everything.sort();
    everything.dedup();
    assert_eq!(
        everything, written,
        "the main page names every page there is"
    );
    for page in &written {
        let text = std::fs::read_to_string(path(page)).unwrap();
        // The file is what `nightshift man PAGE` prints.
        let arg = match page.as_str() {
            "nightshift.1" => None,
            "nightshift.toml.5" => Some("config"),
            other => other
                .strip_prefix("nightshift-")
                .and_then(|p| p.split('.').next()),
        };
        let printed = stdout(&env, &["man"].into_iter().chain(arg).collect::<Vec<_>>());
        assert_eq!(text, printed, "{page}");
        for named in named_pages(&text) {
            assert!(
                written.contains(&named),
                "{page} names {named}, which was not written"
            );
        }
    }
    let bad = env.cmd().args(["man", "rn"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("no man page \"rn\"") && err.contains("run,"),
        "{err}"
    );
}

/// Every command, argument and option says what it is, in `--help`, the
/// man pages and the completions alike (they are generated from one
/// definition).
#[test]
fn every_command_and_option_has_a_description() {
    fn check(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} {}", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                missing.push(name.clone());
            }
            check(sub, &name, missing);
        }
    }
    let mut cmd = nightshift::cli::command();
    cmd.build();
    let mut missing = Vec::new();
    check(&cmd, "nightshift", &mut missing);
    assert!(missing.is_empty(), "undescribed: {missing:?}");
    // The global options are described once, and not on commands that use no store.
    let env = Env::bare();
    for storeless in ["man", "completions"] {
        let help = stdout(&env, &[storeless, "--help"]);
        assert!(
            !help.contains("--db") && !help.contains("--config"),
            "{help}"
        );
    }
    let help = stdout(&env, &["log", "--help"]);
    assert!(
        help.contains("Global options:\n      --db <PATH|URL>"),
        "{help}"
    );
    assert!(
        help.contains("[env: NIGHTSHIFT_CONFIG]"),
        "no trailing =: {help}"
    );
    assert!(!help.contains("NIGHTSHIFT_CONFIG="), "{help}");
}

/// A small validator of the Prometheus text exposition format (0.0.4):
/// every sample belongs to a family announced by HELP and TYPE, names and
/// labels are well formed, and values are numbers.
fn check_exposition(text: &str) -> Result<usize, String> {
    use std::collections::HashSet;
    let name_ok = |n: &str| {
        let mut chars = n.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let (mut helped, mut typed) = (HashSet::new(), HashSet::new());
    let mut samples = 0;
    for (n, line) in text.lines().enumerate() {
        let at = |msg: &str| format!("line {}: {msg}: {line}", n + 1);
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            if !name_ok(name) {
                return Err(at("bad HELP name"));
            }
            helped.insert(name.to_string());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let (name, kind) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            if !name_ok(name)
                || !["gauge", "counter", "untyped", "summary", "histogram"].contains(&kind)
            {
                return Err(at("bad TYPE"));
            }
            typed.insert(name.to_string());
        } else if line.starts_with('#') || line.is_empty() {
            continue;
        } else {
            let (series, value) = line.rsplit_once(' ').ok_or_else(|| at("no value"))?;
            value
                .parse::<f64>()
                .map_err(|_| at("value is not a number"))?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (
                    name,
                    rest.strip_suffix('}')
                        .ok_or_else(|| at("unclosed labels"))?,
                ),
                None => (series, ""),
            };
            if !name_ok(name) || !helped.contains(name) || !typed.contains(name) {
                return Err(at("sample without a well-formed, announced family"));
            }
            let mut rest = labels;
            while !rest.is_empty() {
                let (label, after) = rest.split_once("=\"").ok_or_else(|| at("bad label"))?;
                if !name_ok(label) {
                    return Err(at("bad label name"));
                }
                let mut end = None;
                let mut escaped = false;
                for (i, c) in after.char_indices() {
                    match (escaped, c) {
                        (true, _) => escaped = false,
                        (false, '\\') => escaped = true,
                        (false, '"') => {
                            end = Some(i);
                            break;
                        }
                        _ => {}
                    }
                }
                let end = end.ok_or_else(|| at("unterminated label value"))?;
                rest = after[end + 1..]
                    .strip_prefix(',')
                    .unwrap_or(&after[end + 1..]);
            }
            samples += 1;
        }
    }
    Ok(samples)
}

#[test]
fn prometheus_metrics_are_valid_exposition_format() {
    let env = Env::new();
    env.add_items("articles", 4);
    let quote = env.write("quote.jsonl", "{\"key\":\"a\\\"b\\\\c\"}\n");
    env.cmd()
        .args(["add", "we\"ird"])
        .arg(&quote)
        .assert()
        .success();
    let worker = env.script(
        "w.sh",
        "cat >/dev/null; case \"$NIGHTSHIFT_KEY\" in k1) exit 1;; esac; echo '{}'",
    );
    env.cmd()
        .args(["run", "articles", "--"])
        .arg(&worker)
        .assert()
        .code(1);

    let text = stdout(&env, &["status", "--prometheus"]);
    let samples = check_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(samples >= 14, "{text}");
    assert!(
        text.contains("nightshift_items{batch=\"articles\",status=\"done\",outcome=\"done\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("nightshift_items{batch=\"articles\",status=\"failed\",tier=\"manual\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("nightshift_items{batch=\"we\\\"ird\",status=\"pending\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("nightshift_last_run_success{batch=\"articles\",state=\"failed\"} 0"),
        "{text}"
    );
    assert!(
        check_exposition("nightshift_x 1").is_err(),
        "the validator rejects unannounced samples"
    );
}
