//! Can a worker program be started at all? Checked once before a run
//! claims anything (every item would otherwise fail the same way, each
//! spending an attempt), and asked again when a spawn fails, so that the
//! failure names the real cause: a script's `#!` line, not the script.

use std::path::{Path, PathBuf};

use crate::util::sanitize;

/// How much of a script the kernel reads for its `#!` line
/// (`BINPRM_BUF_SIZE`); a longer line is cut there.
const HEAD: usize = 256;

/// Why `program` (run in `work_dir`) cannot be started: not found, not
/// executable, a script with no `#!` line, or one whose `#!` line the
/// kernel cannot follow. `Ok` if it can, as far as can be told.
pub fn check(program: &str, work_dir: Option<&Path>) -> Result<(), String> {
    let files: Vec<PathBuf> = candidates(program, work_dir)
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    let Some(first) = files.first() else {
        return Err(format!("worker program {program:?} not found"));
    };
    // As the spawn searches `PATH`: the first file it may execute.
    let Some(path) = files.iter().find(|p| runnable(p)) else {
        return Err(format!(
            "worker program {} is not executable: `chmod +x` it, or name its interpreter \
             first (worker = [\"sh\", {program:?}])",
            shown(first)
        ));
    };
    match head(path) {
        Some(head) if head.starts_with(b"#!") => match interpreter_problem(&head, path, work_dir) {
            Some(why) => Err(format!(
                "worker program {} cannot start: {why}",
                shown(path)
            )),
            None => Ok(()),
        },
        Some(head) if is_text(&head) => Err(format!(
            "worker program {} is a script with no `#!` line, which no spawn can start: \
             begin it with one (#!/bin/sh), or name its interpreter first \
             (worker = [\"sh\", {program:?}])",
            shown(path)
        )),
        _ => Ok(()),
    }
}

/// What a spawn of `argv0` (found as `program`, run in `dir`) that failed
/// with `err` says: `argv0`, then [`start_failure`].
pub fn spawn_error(
    argv0: &str,
    program: Option<&Path>,
    dir: Option<&Path>,
    err: &std::io::Error,
) -> String {
    format!("{argv0}: {}", start_failure(argv0, program, dir, err))
}

/// Why a spawn of `argv0` (found as `program`, run in `dir`) failed with
/// `err`: the error, and, when the file is there but the interpreter its
/// `#!` line names is not, what is wrong with that line. For a worker, a
/// `source` and an `alert` alike.
pub fn start_failure(
    argv0: &str,
    program: Option<&Path>,
    dir: Option<&Path>,
    err: &std::io::Error,
) -> String {
    let path = program
        .map(Path::to_path_buf)
        .or_else(|| super::resolve(argv0))
        .unwrap_or_else(|| in_dir(Path::new(argv0), dir));
    let why = (err.kind() == std::io::ErrorKind::NotFound)
        .then(|| head(&path))
        .flatten()
        .filter(|head| head.starts_with(b"#!"))
        .and_then(|head| interpreter_problem(&head, &path, dir));
    match why {
        Some(why) => format!("{err}: the file is there, but {why}"),
        None => err.to_string(),
    }
}

/// What is wrong with the `#!` line at the start of `head` (the file at
/// `path`), as the kernel reads it: the interpreter is the first word, and
/// the rest of the line (blanks at its ends trimmed) its one argument.
fn interpreter_problem(head: &[u8], path: &Path, work_dir: Option<&Path>) -> Option<String> {
    let line = &head[2..];
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let line = String::from_utf8_lossy(line);
    let blank = |c: char| c == ' ' || c == '\t';
    let trimmed = line.trim_matches(blank);
    if trimmed.ends_with('\r') {
        let word = trimmed.rsplit(blank).next().unwrap_or_default();
        return Some(format!(
            "its `#!` line ends in a carriage return (the file has Windows line ends), so \
             the kernel looks for {}, which is not there: give it Unix line ends \
             (sed -i 's/\\r$//' {})",
            escaped(word),
            sanitize::shell_word(&path.display().to_string())
        ));
    }
    let (interpreter, argument) = match trimmed.split_once(blank) {
        Some((i, a)) => (i, Some(a.trim_matches(blank))),
        None => (trimmed, None),
    };
    if interpreter.is_empty() {
        return Some("its `#!` line names no interpreter".to_string());
    }
    let found = in_dir(Path::new(interpreter), work_dir);
    if !found.is_file() {
        return Some(format!(
            "its `#!` line names the interpreter {}, which is not found",
            escaped(interpreter)
        ));
    }
    if !runnable(&found) {
        return Some(format!(
            "its `#!` line names the interpreter {}, which is not executable",
            escaped(interpreter)
        ));
    }
    if found.file_name().is_some_and(|n| n == "env") {
        return argument.and_then(|a| env_problem(a, work_dir));
    }
    None
}

/// What is wrong with `env`'s one argument from a `#!` line: the program
/// it names is not in `PATH`, or it is a program and its arguments given
/// without `-S`, which `env` takes as one program name. An argument with
/// other options, or a variable set, is left to the spawn.
fn env_problem(argument: &str, work_dir: Option<&Path>) -> Option<String> {
    let program = match argument.strip_prefix("-S") {
        Some(rest) => rest
            .split_whitespace()
            .find(|w| *w != "-i" && *w != "-")
            .filter(|w| !w.starts_with('-') && !w.contains('='))?,
        None if argument.starts_with('-') || argument.contains('=') => return None,
        None => argument,
    };
    if candidates(program, work_dir).iter().any(|p| p.is_file()) {
        return None;
    }
    Some(if program.contains([' ', '\t']) {
        format!(
            "its `#!` line gives `env` {}, which the kernel passes as one word: no program \
             of that name is found in PATH (write `#!/usr/bin/env -S {}` to split it)",
            escaped(program),
            sanitize::line(program)
        )
    } else {
        format!(
            "its `#!` line runs `env {}`, and {} is not found in PATH",
            sanitize::line(program),
            escaped(program)
        )
    })
}

/// Where a spawn in `work_dir` looks for `program`, in order: the path
/// it is, or each `PATH` directory's file of that name.
fn candidates(program: &str, work_dir: Option<&Path>) -> Vec<PathBuf> {
    if program.contains('/') {
        return vec![in_dir(Path::new(program), work_dir)];
    }
    std::env::var_os("PATH")
        .map(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| in_dir(&dir.join(program), work_dir))
                .collect()
        })
        .unwrap_or_default()
}

/// `path` as the worker's spawn finds it, a relative one in `dir`.
fn in_dir(path: &Path, dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

/// The first bytes of the file, as the kernel reads them to start it.
fn head(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(HEAD);
    std::fs::File::open(path)
        .and_then(|f| f.take(HEAD as u64).read_to_end(&mut head))
        .ok()?;
    Some(head)
}

/// Text, not a binary: `exec` refuses it without a `#!` line (ENOEXEC).
/// A binary of another format (read by the kernel's binfmt) has bytes no
/// text has, and is left to the spawn.
fn is_text(head: &[u8]) -> bool {
    !head.is_empty()
        && !head.contains(&0)
        // Text, but for a character the read cut short.
        && std::str::from_utf8(head).map_or_else(|e| e.error_len().is_none(), |_| true)
}

fn shown(path: &Path) -> String {
    sanitize::line(&path.display().to_string()).into_owned()
}

/// A word of a `#!` line quoted with its control characters (a `\r`)
/// shown as escapes.
fn escaped(word: &str) -> String {
    format!("\"{}\"", sanitize::line(word))
}

/// May this process execute `path`?
#[cfg(unix)]
fn runnable(path: &Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::X_OK).is_ok()
}

#[cfg(not(unix))]
fn runnable(_path: &Path) -> bool {
    true
}
