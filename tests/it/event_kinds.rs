//! Every kind of event the code writes is in the one list,
//! `nightshift::model::EventKind` (which `log --kind` validates against and
//! its help, the man page and the README print), and every kind in the list
//! is written somewhere.
//!
//! `NewEvent::new` takes an `EventKind` (pinned below), so the compiler
//! checks every event made through it. The sources under `src/` are read
//! with a small Rust lexer for the other places an event gets its kind:
//! - `NewEvent { kind: .., .. }`: a string literal (or an `if` choosing
//!   between literals), or a typed `EventKind::X`;
//! - SQL that inserts into `events` with a quoted kind;
//! - every `EventKind::X`: typed; it counts as written.
//!
//! A site whose kind cannot be read this way fails the test: pass an
//! `EventKind` to `NewEvent::new`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nightshift::model::EventKind;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Str(String),
    Ident(String),
    Punct(char),
    Other,
}

/// Tokens of Rust source, comments and char literals dropped.
fn lex(src: &str) -> Vec<(Tok, usize)> {
    let b: Vec<char> = src.chars().collect();
    let mut line = 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && b.get(i + 1) == Some(&'/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && b.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if c == '"' || ((c == 'r' || c == 'b') && raw_or_byte_string(&b, i)) {
            let start_line = line;
            let (text, next) = string(&b, i);
            line += text.matches('\n').count();
            out.push((Tok::Str(text), start_line));
            i = next;
        } else if c == '\'' {
            // A char literal ('a', '\n', '\'') or a lifetime ('a).
            if b.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
            }
            out.push((Tok::Other, line));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(b[start..i].iter().collect()), line));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_' || b[i] == '.') {
                if b[i] == '.' && b.get(i + 1) == Some(&'.') {
                    break;
                }
                i += 1;
            }
            out.push((Tok::Other, line));
        } else {
            out.push((Tok::Punct(c), line));
            i += 1;
        }
    }
    out
}

/// `r"..."`, `r#"..."#`, `b"..."`, `br"..."` start here?
fn raw_or_byte_string(b: &[char], i: usize) -> bool {
    let prev_ident = i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_');
    if prev_ident {
        return false;
    }
    let mut j = i;
    if b[j] == 'b' {
        j += 1;
    }
    if b.get(j) == Some(&'r') {
        j += 1;
        while b.get(j) == Some(&'#') {
            j += 1;
        }
    }
    j > i && b.get(j) == Some(&'"')
}

/// The text of the string literal starting at `i`, and where it ends.
fn string(b: &[char], mut i: usize) -> (String, usize) {
    if b[i] == 'b' {
        i += 1;
    }
    if b[i] == 'r' {
        i += 1;
        let mut hashes = 0;
        while b[i] == '#' {
            hashes += 1;
            i += 1;
        }
        i += 1;
        let start = i;
        loop {
            if b[i] == '"' && (0..hashes).all(|h| b.get(i + 1 + h) == Some(&'#')) {
                return (b[start..i].iter().collect(), i + 1 + hashes);
            }
            i += 1;
        }
    }
    i += 1;
    let mut text = String::new();
    while b[i] != '"' {
        if b[i] == '\\' {
            text.push(b[i + 1]);
            i += 2;
        } else {
            text.push(b[i]);
            i += 1;
        }
    }
    (text, i + 1)
}

fn is(t: &Tok, p: char) -> bool {
    *t == Tok::Punct(p)
}

fn ident(t: &Tok, name: &str) -> bool {
    matches!(t, Tok::Ident(n) if n == name)
}

/// The arguments of the call whose `(` is at `open`: token ranges, split at
/// top-level commas.
fn arguments(toks: &[(Tok, usize)], open: usize) -> Vec<std::ops::Range<usize>> {
    let mut args = Vec::new();
    let (mut depth, mut start) = (0, open + 1);
    for (i, (t, _)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    if start < i {
                        args.push(start..i);
                    }
                    return args;
                }
            }
            Tok::Punct(',') if depth == 1 => {
                args.push(start..i);
                start = i + 1;
            }
            _ => {}
        }
    }
    args
}

/// The string literals an argument evaluates to: a literal (`"x"`, also
/// `"x".into()`), or an `if`/`else` between literals. `None` when it is
/// anything else (a variable, a call).
fn literal_values(toks: &[(Tok, usize)]) -> Option<Vec<String>> {
    let mut values = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Str(s) => values.push(s.clone()),
            // `.into()` / `.to_string()` after a literal.
            Tok::Punct('.')
                if matches!(toks.get(i + 1), Some((Tok::Ident(m), _)) if m == "into" || m == "to_string")
                    && i > 0
                    && matches!(toks[i - 1].0, Tok::Str(_)) =>
            {
                i += 3;
            }
            Tok::Ident(k) if k == "if" || k == "else" => {}
            // The condition of an `if`: a plain name.
            Tok::Ident(_) if i > 0 && ident(&toks[i - 1].0, "if") => {}
            Tok::Punct('{' | '}') => {}
            _ => return None,
        }
        i += 1;
    }
    (!values.is_empty()).then_some(values)
}

/// The name of the function the token at `at` is in (the nearest `fn`).
fn enclosing_fn(toks: &[(Tok, usize)], at: usize) -> Option<&str> {
    (0..at)
        .rev()
        .find_map(|i| match (&toks[i].0, toks.get(i + 1)) {
            (Tok::Ident(f), Some((Tok::Ident(name), _))) if f == "fn" => Some(name.as_str()),
            _ => None,
        })
}

/// Is this the body of the constructor (`NewEvent::new`) handing on its own
/// typed `kind` parameter? Its callers are checked by the compiler.
fn forwards_kind(toks: &[(Tok, usize)], at: usize, arg: &[(Tok, usize)]) -> bool {
    arg.first().is_some_and(|(t, _)| ident(t, "kind"))
        && matches!(enclosing_fn(toks, at), Some("new"))
}

/// A place where the code gives an event its kind.
#[derive(Debug)]
struct Site {
    file: String,
    line: usize,
    kinds: Result<Vec<String>, String>,
}

fn sites_in(file: &str, src: &str) -> Vec<Site> {
    let toks = lex(src);
    let mut sites = Vec::new();
    let mut site = |line: usize, kinds: Result<Vec<String>, String>| {
        sites.push(Site {
            file: file.to_string(),
            line,
            kinds,
        });
    };
    for i in 0..toks.len() {
        let t = |k: usize| toks.get(i + k).map(|(t, _)| t);
        let line = toks[i].1;
        // NewEvent { kind: "..".into(), .. }
        let definition = i > 0
            && matches!(&toks[i - 1].0, Tok::Ident(k) if k == "struct" || k == "impl" || k == "for");
        if ident(&toks[i].0, "NewEvent") && t(1).is_some_and(|t| is(t, '{')) && !definition {
            let fields = arguments(&toks, i + 1);
            for f in fields {
                let f = &toks[f];
                // A typed kind is counted where `EventKind::X` is.
                let typed = f.iter().any(|(t, _)| ident(t, "EventKind"));
                if f.len() > 2
                    && ident(&f[0].0, "kind")
                    && is(&f[1].0, ':')
                    && !typed
                    && !forwards_kind(&toks, i, &f[2..])
                {
                    site(
                        line,
                        literal_values(&f[2..]).ok_or_else(|| "the kind is not a literal".into()),
                    );
                }
            }
        }
        // EventKind::X anywhere: typed.
        if ident(&toks[i].0, "EventKind")
            && t(1).is_some_and(|t| is(t, ':'))
            && let Some(Tok::Ident(variant)) = t(3)
            && variant.chars().next().is_some_and(char::is_uppercase)
            // `EventKind::ALL` and other constants are not kinds.
            && !variant.chars().all(|c| c.is_uppercase() || c == '_')
        {
            let kind = EventKind::ALL
                .iter()
                .find(|k| format!("{k:?}") == *variant)
                .map(|k| vec![k.as_str().to_string()])
                .ok_or_else(|| format!("no EventKind::{variant}"));
            site(line, kind);
        }
        if let Tok::Str(sql) = &toks[i].0
            && sql.contains("INSERT INTO events")
        {
            site(line, sql_kind(sql));
        }
    }
    sites
}

/// The kind an `INSERT INTO events (...) VALUES (...)` or `... SELECT ...`
/// writes: a quoted kind, or none when it comes from bound values (a
/// `NewEvent`'s kind, checked where that was made).
fn sql_kind(sql: &str) -> Result<Vec<String>, String> {
    let rest = &sql[sql.find("INSERT INTO events").unwrap() + "INSERT INTO events".len()..];
    let cols_start = rest.find('(').ok_or("no column list")?;
    let cols_end = rest.find(')').ok_or("no column list")?;
    let cols: Vec<&str> = rest[cols_start + 1..cols_end]
        .split(',')
        .map(str::trim)
        .collect();
    let n = cols
        .iter()
        .position(|c| *c == "kind")
        .ok_or("no kind column")?;
    let after = &rest[cols_end + 1..];
    let values = if let Some(v) = after.trim_start().strip_prefix("VALUES") {
        v.trim_start().strip_prefix('(').ok_or("VALUES without (")?
    } else if let Some(v) = after.trim_start().strip_prefix("SELECT") {
        v
    } else {
        return Err("neither VALUES nor SELECT".into());
    };
    // Split at top-level commas, minding parentheses and quotes.
    let (mut exprs, mut cur, mut depth, mut quoted) = (Vec::new(), String::new(), 0, false);
    for c in values.chars() {
        match c {
            '\'' => quoted = !quoted,
            '(' if !quoted => depth += 1,
            ')' if !quoted && depth == 0 => break,
            ')' if !quoted => depth -= 1,
            ',' if !quoted && depth == 0 => {
                exprs.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
        if exprs.len() > n {
            break;
        }
    }
    exprs.push(cur);
    let expr = exprs.get(n).ok_or("fewer values than columns")?.trim();
    if let Some(quoted) = expr.strip_prefix('\'').and_then(|e| e.strip_suffix('\'')) {
        Ok(vec![quoted.to_string()])
    } else if !expr.contains('\'') {
        // A parameter or a column of bound rows: a `NewEvent`'s kind.
        Ok(Vec::new())
    } else {
        Err(format!(
            "the kind is neither quoted nor a parameter: {expr}"
        ))
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn all_sites() -> Vec<Site> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files.sort();
    let mut sites = Vec::new();
    for path in files {
        let rel = path.strip_prefix(&root).unwrap().display().to_string();
        // The list itself names every kind.
        if rel.ends_with("model/event_kind.rs") {
            continue;
        }
        sites.extend(sites_in(&rel, &std::fs::read_to_string(&path).unwrap()));
    }
    sites
}

#[test]
fn every_kind_the_code_writes_is_listed_and_every_listed_kind_is_written() {
    // The one constructor takes a typed kind: the compiler checks its calls.
    let _typed: fn(i64, &str, EventKind, String) -> nightshift::model::NewEvent =
        |at, batch, kind, message| nightshift::model::NewEvent::new(at, batch, kind, message);
    let sites = all_sites();
    let listed: BTreeSet<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
    let mut written = BTreeSet::new();
    let mut problems = Vec::new();
    for s in &sites {
        match &s.kinds {
            Ok(kinds) => {
                for k in kinds {
                    if !listed.contains(k.as_str()) {
                        problems.push(format!(
                            "{}:{}: writes the kind {k:?}, which EventKind does not list",
                            s.file, s.line
                        ));
                    }
                    written.insert(k.clone());
                }
            }
            Err(why) => problems.push(format!("{}:{}: {why}", s.file, s.line)),
        }
    }
    for k in &listed {
        if !written.contains(*k) {
            problems.push(format!("EventKind lists {k:?}, which nothing writes"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The scan sees the writers (not a test that passes by finding nothing).
    assert!(sites.len() > 40, "only {} sites found", sites.len());
}

#[test]
fn the_scanner_reads_each_shape_of_site() {
    let src = r##"
        fn a() {
            NewEvent { at, kind: "pruned".into(), ..NewEvent::default() };
            NewEvent { at, kind: EventKind::Pruned.to_string(), ..NewEvent::default() };
            NewEvent::new(now, b, EventKind::Failed, "m");
            let c = 'x'; let s = r#"a "quoted" one"#; // NewEvent { kind: "comment" }
            tx.execute("INSERT INTO events (at, kind, message) VALUES (?1, 'claimed', ?2)", []);
            c.q("INSERT INTO events (at, kind) SELECT $1, $2 FROM x", &[]);
            NewEvent { at, kind: if empty { "empty" } else { "done" } };
            NewEvent { at, kind: format!("x"), ..NewEvent::default() };
        }
        fn new(kind: EventKind) -> NewEvent { NewEvent { kind: kind.as_str().to_string() } }
    "##;
    let got: Vec<_> = sites_in("x.rs", src)
        .into_iter()
        .map(|s| (s.line, s.kinds))
        .collect();
    let ok = |line, kinds: &[&str]| (line, Ok(kinds.iter().map(|k| k.to_string()).collect()));
    assert_eq!(
        got[..6],
        [
            ok(3, &["pruned"]),
            ok(4, &["pruned"]),
            ok(5, &["failed"]),
            ok(7, &["claimed"]),
            ok(8, &[]),
            ok(9, &["empty", "done"]),
        ]
    );
    assert_eq!(got[6].0, 10);
    assert!(
        got[6]
            .1
            .as_ref()
            .is_err_and(|e| e.contains("not a literal")),
        "{:?}",
        got[6]
    );
    assert_eq!(got.len(), 7, "{got:?}");
}
