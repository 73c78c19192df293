//! `--json` always answers in JSON: every command that takes it, ending in
//! an error, prints one JSON object on stdout naming the command, what was
//! wrong and the exit status, beside the same line on stderr and the same
//! exit status as without `--json`.

use crate::support as common;

use common::{Env, fingerprint};

/// A failing command with `--json` (or `--jsonl`), by the command's name.
struct Case {
    command: &'static str,
    args: &'static [&'static str],
    exit: i32,
    /// Fields of the command's own beside `error` (a refusal's details).
    own: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        command: "init",
        args: &["init", "--config", "bad.toml"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "add",
        args: &["add", "b", "bad.jsonl"],
        exit: 2,
        own: &["refused", "added"],
    },
    Case {
        command: "run",
        args: &["run", "nope"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "schedule",
        args: &["schedule", "b"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "status",
        args: &["status", "nope"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "status",
        args: &["status", "--config", "bad.toml"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "status",
        args: &["status", "--db", "missing.db"],
        exit: 3,
        own: &[],
    },
    Case {
        command: "items",
        args: &["items", "nope"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "show",
        args: &["show", "b", "zz"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "requeue",
        args: &["requeue", "b", "zz"],
        exit: 2,
        own: &["refused"],
    },
    Case {
        command: "skip",
        args: &["skip", "b", "zz", "--reason", "x"],
        exit: 2,
        own: &["refused"],
    },
    Case {
        command: "pause",
        args: &["pause", "nope"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "unpause",
        args: &["unpause", "nope"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "cancel",
        args: &["cancel", "b", "zz"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "stop",
        args: &["stop", "nope"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "dlq",
        args: &["dlq", "nope"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "log",
        args: &["log", "--key", "zz"],
        exit: 2,
        own: &[],
    },
    Case {
        command: "prune",
        args: &["prune", "--older-than", "1d", "--db", "missing.db"],
        exit: 3,
        own: &[],
    },
];

/// Runs `args` without and then with `flag`: the same exit status and
/// stderr, and with the flag one JSON object on stdout that says them.
#[track_caller]
fn answers_in_json(env: &Env, command: &str, args: &[&str], flag: &str, exit: i32, own: &[&str]) {
    let before = fingerprint(&env.db);
    let plain = env.run(args);
    plain.code(exit);
    assert_eq!(plain.stdout, "", "{args:?} printed a result: {plain:?}");
    let mut with = args.to_vec();
    with.push(flag);
    let ran = env.run(&with);
    ran.code(exit);
    assert_eq!(
        ran.stderr, plain.stderr,
        "{with:?}: stderr changed with {flag}"
    );
    assert_eq!(
        ran.stdout.lines().count(),
        1,
        "{with:?}: one JSON line: {ran:?}"
    );
    let answer = ran.json();
    let error = &answer["error"];
    assert_eq!(error["command"], command, "{with:?}: {answer}");
    assert_eq!(error["exit"], exit, "{with:?}: {answer}");
    let says = plain
        .stderr
        .strip_prefix("nightshift: error: ")
        .unwrap_or_else(|| panic!("{with:?}: {plain:?}"))
        .trim_end();
    assert_eq!(error["says"], says, "{with:?}: {answer}");
    for field in own {
        assert!(!answer[field].is_null(), "{with:?}: no {field:?}: {answer}");
    }
    assert_eq!(fingerprint(&env.db), before, "{with:?} changed the store");
}

#[test]
fn every_json_command_that_fails_answers_in_json() {
    let env = Env::new();
    env.failing_batch("b");
    env.write("bad.toml", "x = [\n");
    env.write("bad.jsonl", "{\"key\":\"x1\"}\n{\"key\": \"x2\"\n");
    for case in CASES {
        answers_in_json(&env, case.command, case.args, "--json", case.exit, case.own);
    }
    answers_in_json(&env, "dlq", &["dlq", "nope"], "--jsonl", 2, &[]);
    // The commands that take --json, each with a case above.
    let mut tested: Vec<&str> = CASES.iter().map(|c| c.command).collect();
    tested.dedup();
    let help = env.run(&["--help"]);
    for line in help.stdout.lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let takes = env.run(&[name, "--help"]);
        if line.starts_with("  ") && takes.code == 0 && takes.stdout.contains("--json") {
            assert!(
                tested.contains(&name),
                "{name} takes --json but has no case"
            );
        }
    }
}

/// An unreachable PostgreSQL store: its password is never shown, in JSON
/// either.
#[test]
fn an_unreachable_store_answers_in_json_without_its_password() {
    let env = Env::new();
    let ran = env.run(&[
        "status",
        "--json",
        "--db",
        "postgresql://me:s3cret@127.0.0.1:1/x",
    ]);
    ran.code(3);
    let answer = ran.json();
    assert_eq!(answer["error"]["command"], "status");
    assert_eq!(answer["error"]["exit"], 3);
    let says = answer["error"]["says"].as_str().unwrap();
    assert!(says.contains("127.0.0.1:1"), "{answer}");
    assert!(
        !ran.stdout.contains("s3cret") && !ran.stderr.contains("s3cret"),
        "{ran:?}"
    );
}

/// A command line the parser refuses (a flag's bad value, an unknown flag,
/// a missing argument, flags that conflict) with `--json` answers in JSON
/// too, with the parser's message; without `--json`, stdout stays empty.
#[test]
fn a_refused_command_line_answers_in_json() {
    let env = Env::new();
    for (command, args, says) in [
        (
            "dlq",
            &["dlq", "b", "--since", "0"][..],
            "invalid value '0' for '--since <DUR>'",
        ),
        (
            "dlq",
            &["dlq", "b", "--since", "soon", "--jsonl"][..],
            "invalid value 'soon' for '--since <DUR>'",
        ),
        (
            "items",
            &["items", "b", "--limit", "0"][..],
            "invalid value '0' for '--limit <N>'",
        ),
        (
            "status",
            &["--db", "x.db", "status", "--nope"][..],
            "unexpected argument '--nope' found",
        ),
        (
            "show",
            &["show", "b"][..],
            "the following required arguments were not provided: <KEY|LABEL>",
        ),
        (
            "schedule",
            &["schedule", "b", "-n", "0"][..],
            "invalid value '0' for '--next <N>'",
        ),
    ] {
        let plain: Vec<&str> = args.iter().copied().filter(|a| *a != "--jsonl").collect();
        let ran = env.run(&plain);
        assert_eq!(ran.code(2).stdout, "", "{plain:?}: {ran:?}");
        let mut with = args.to_vec();
        if !with.contains(&"--jsonl") {
            with.push("--json");
        }
        let ran = env.run(&with);
        ran.code(2);
        assert!(ran.stderr.starts_with("error: "), "{with:?}: {ran:?}");
        let answer = ran.json();
        assert_eq!(answer["error"]["command"], command, "{with:?}: {answer}");
        assert_eq!(answer["error"]["exit"], 2, "{with:?}: {answer}");
        let said = answer["error"]["says"].as_str().unwrap();
        assert!(said.starts_with(says), "{with:?}: {answer}");
    }
    // Flags that conflict with --json: refused, in JSON.
    let ran = env.run(&["status", "--short", "--json"]);
    let answer = ran.code(2).json();
    assert_eq!(
        answer["error"]["says"], "the argument '--short' cannot be used with '--json'",
        "{ran:?}"
    );
}

/// A refusal made before the command runs (`NIGHTSHIFT_DB` or
/// `NIGHTSHIFT_CONFIG` set but empty) answers in JSON like any other: every
/// `--json` command, the same stderr line and exit 2, nothing changed.
#[test]
fn an_empty_environment_variable_answers_in_json() {
    let env = Env::new();
    env.failing_batch("b");
    let before = fingerprint(&env.db);
    let mut cases: Vec<(&str, &[&str], &str)> = CASES
        .iter()
        .map(|c| (c.command, c.args, "--json"))
        .collect();
    cases.push(("dlq", &["dlq", "b"], "--jsonl"));
    for (command, args, flag) in cases {
        for (var, long) in [("NIGHTSHIFT_DB", "--db"), ("NIGHTSHIFT_CONFIG", "--config")] {
            if args.contains(&long) {
                continue;
            }
            let plain = common::ran(env.cmd().env(var, "").args(args).output().unwrap());
            plain.code(2);
            let says = plain
                .error_line()
                .strip_prefix("nightshift: error: ")
                .unwrap_or_else(|| panic!("{var} {args:?}: {plain:?}"))
                .to_string();
            assert!(
                says.contains(&format!("{var} is set but empty")),
                "{plain:?}"
            );
            let ran = common::ran(
                env.cmd()
                    .env(var, "")
                    .args(args)
                    .arg(flag)
                    .output()
                    .unwrap(),
            );
            ran.code(2);
            assert_eq!(ran.stderr, plain.stderr, "{var} {args:?} {flag}");
            let answer = ran.json();
            assert_eq!(
                answer["error"]["command"], command,
                "{var} {args:?}: {answer}"
            );
            assert_eq!(answer["error"]["exit"], 2, "{var} {args:?}: {answer}");
            assert_eq!(answer["error"]["says"], says, "{var} {args:?}: {answer}");
        }
    }
    assert_eq!(fingerprint(&env.db), before);
}
