//! Completions, man page and Prometheus metrics, generated from the real
//! CLI definition and the real store.

mod common;

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
    let man = stdout(&env, &["man"]);
    assert!(man.contains(".TH nightshift 1"));
    insta::assert_snapshot!("man_page", man);
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
