//! The password libpq would send when the URL gives none: `PGPASSWORD`,
//! else the first matching line of the password file (`PGPASSFILE`, else
//! `~/.pgpass`). The `postgres` crate reads neither, and a role that needs
//! a password would fail with "password missing" where psql connects.
//!
//! The file is libpq's: `hostname:port:database:username:password` lines,
//! `*` matching anything in the first four fields, `\` escaping `:` and
//! `\`, `#` starting a comment line; the first matching line wins. A file
//! others may read is ignored, with a warning, as libpq ignores it.

use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use postgres::Config;
use postgres::config::Host;

use crate::util::sanitize;

/// The socket directories libpq is built with (upstream `/tmp`; Debian and
/// Red Hat `/var/run/postgresql`, which `/run/postgresql` is): a socket in
/// one of them also matches a `localhost` line. One elsewhere matches only
/// its own directory, as with psql.
const DEFAULT_SOCKET_DIRS: [&str; 3] = ["/tmp", "/var/run/postgresql", "/run/postgresql"];

/// Gives `config` a password when its URL has none and one is found.
pub(super) fn supply_password(config: &mut Config) {
    if config.get_password().is_some_and(|p| !p.is_empty()) {
        return;
    }
    if let Some(password) = std::env::var_os("PGPASSWORD").filter(|p| !p.is_empty()) {
        config.password(password.into_vec());
        return;
    }
    let Some(path) = file_path() else {
        return;
    };
    let text = match read_private(&path) {
        Ok(Some(text)) => text,
        Ok(None) => return,
        Err(ignored) => return warn_once(&ignored),
    };
    // One password for every host of the URL (the driver takes one): the
    // first host that has a line gives it.
    let found = wanted(config, || whoami::username().ok())
        .iter()
        .find_map(|w| find(&text, w).filter(|p| !p.is_empty()));
    if let Some(password) = found {
        config.password(password);
    }
}

/// `PGPASSFILE` when set, else `.pgpass` in the home directory.
fn file_path() -> Option<PathBuf> {
    let set = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(file) = set("PGPASSFILE") {
        return Some(PathBuf::from(file));
    }
    let home = set("HOME").map(PathBuf::from).or_else(|| {
        let user = nix::unistd::User::from_uid(nix::unistd::getuid()).ok()??;
        Some(user.dir)
    })?;
    Some(home.join(".pgpass"))
}

/// Why a password file was passed over.
#[derive(Debug, thiserror::Error)]
enum Ignored {
    #[error("password file {0} is not a plain file: not read")]
    NotAFile(PathBuf),
    #[error(
        "password file {0} has group or world access (permissions should be u=rw (0600) or less): not read"
    )]
    Readable(PathBuf),
}

/// The file's bytes; `None` when there is none (or it cannot be read),
/// which is silent, as in libpq.
fn read_private(path: &Path) -> Result<Option<Vec<u8>>, Ignored> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Err(Ignored::NotAFile(path.to_path_buf()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(Ignored::Readable(path.to_path_buf()));
    }
    Ok(std::fs::read(path).ok())
}

/// Said once per process: every session reads the file again.
fn warn_once(ignored: &Ignored) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        crate::util::stdio::err_line(&format!(
            "nightshift: warning: {}",
            sanitize::line(&ignored.to_string())
        ));
    }
}

/// What a line's first four fields are matched against, for one host.
#[derive(Debug, PartialEq)]
struct Wanted {
    /// Any of these in the host field matches.
    hosts: Vec<String>,
    port: String,
    dbname: String,
    user: String,
}

/// One [`Wanted`] per host of `config`, filled in as libpq and the driver
/// fill them: the user defaults to the OS user (`os_user`, which the driver
/// sends then), the database to the user, the port to 5432, the host to
/// `hostaddr`, else `localhost`.
fn wanted(config: &Config, os_user: impl FnOnce() -> Option<String>) -> Vec<Wanted> {
    let Some(user) = config
        .get_user()
        .map(str::to_string)
        .or_else(os_user)
        .filter(|u| !u.is_empty())
    else {
        return Vec::new();
    };
    let dbname = config.get_dbname().unwrap_or(&user).to_string();
    let (hosts, addrs, ports) = (
        config.get_hosts(),
        config.get_hostaddrs(),
        config.get_ports(),
    );
    (0..hosts.len().max(addrs.len()))
        .map(|i| {
            let names = match hosts.get(i) {
                Some(Host::Tcp(name)) if !name.is_empty() => vec![name.clone()],
                Some(Host::Unix(dir)) => {
                    let dir = dir.to_string_lossy().into_owned();
                    if DEFAULT_SOCKET_DIRS.contains(&dir.as_str()) {
                        vec![dir, "localhost".to_string()]
                    } else {
                        vec![dir]
                    }
                }
                _ => vec![addrs.get(i).map_or("localhost".into(), |a| a.to_string())],
            };
            let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
            Wanted {
                hosts: names,
                port: port.to_string(),
                dbname: dbname.clone(),
                user: user.clone(),
            }
        })
        .collect()
}

/// The password of the first line of `text` that matches `w` (empty when
/// that line gives none, which libpq takes for none too).
fn find(text: &[u8], w: &Wanted) -> Option<Vec<u8>> {
    text.split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| !line.is_empty() && !line.starts_with(b"#"))
        .find_map(|line| {
            let mut fields = fields(line).into_iter();
            let [host, port, dbname, user, password] =
                std::array::from_fn(|_| fields.next()).map(|f| f.unwrap_or_default());
            let matched = (host.any || w.hosts.iter().any(|h| host.value == h.as_bytes()))
                && port.is(&w.port)
                && dbname.is(&w.dbname)
                && user.is(&w.user);
            // Four fields are no line: libpq matches only with a fifth.
            (matched && password.present).then_some(password.value)
        })
}

/// One field of a line, its escapes undone.
#[derive(Debug, Default)]
struct Field {
    /// Exactly `*` (an escaped `\*` is a plain star).
    any: bool,
    value: Vec<u8>,
    /// Absent fields (a short line) are default, not present.
    present: bool,
}

impl Field {
    fn is(&self, wanted: &str) -> bool {
        self.any || self.value == wanted.as_bytes()
    }
}

/// `line` cut at each `:` not escaped by `\`.
fn fields(line: &[u8]) -> Vec<Field> {
    let field = |raw: &[u8], value| Field {
        any: raw == b"*",
        value,
        present: true,
    };
    let mut out = Vec::new();
    let mut value = Vec::new();
    let mut start = 0;
    let mut bytes = line.iter().enumerate();
    while let Some((i, &b)) = bytes.next() {
        match b {
            // A `\` ending the line stands for itself, as in libpq.
            b'\\' => value.push(bytes.next().map_or(b'\\', |(_, &next)| next)),
            b':' => {
                out.push(field(&line[start..i], std::mem::take(&mut value)));
                start = i + 1;
            }
            _ => value.push(b),
        }
    }
    out.push(field(&line[start..], value));
    out
}

#[cfg(test)]
mod tests;
