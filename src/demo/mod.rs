//! `nightshift demo`: the whole product in one command, nothing to install.
//! A fresh store in a temporary directory, two batches with natural keys, a
//! simulated flaky agent worker (this same binary, see `agent`), runs, and
//! (interactively) the dashboard in front.

pub mod agent;

use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::model::NewItem;
use crate::store::Store;
use crate::util::time::now_ms;

/// Where the demo lives; the directory is removed on drop unless kept.
pub struct Demo {
    pub dir: PathBuf,
    pub db: PathBuf,
    pub config: PathBuf,
    temp: Option<tempfile::TempDir>,
}

impl Demo {
    /// Keeps the directory after the demo ends.
    pub fn keep(&mut self) {
        if let Some(t) = self.temp.take() {
            let _ = t.keep();
        }
    }
}

const SITES: [&str; 4] = ["blog", "tech", "news", "travel"];
const CATEGORIES: [&str; 5] = ["rust", "sqlite", "ops", "ai", "notes"];
const ACCOUNTS: [&str; 4] = ["search-jp", "search-us", "display", "video"];

fn config_text(exe: &Path) -> String {
    let exe = exe
        .display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    format!(
        r#"# The demo's configuration: two batches, one simulated flaky agent.
db = "nightshift.db"
log_dir = "logs"

# One provider account shared by both batches: its limits and its budget
# are kept in the store, for every runner (the dashboard's Pools pane, `6`).
[limit.agent_api]
requests = "600/min"
tokens = "400000/min"
concurrency = 8
budget = "20.0/day"

[batch.articles]
worker = ["{exe}", "agent"]
key_fields = ["site", "category", "slug"]
concurrency = 4
limit = "agent_api"
token_estimate = 1200
item_timeout = "3s"
retries = 2
backoff = "200ms"
backoff_max = "1s"
max_attempts = 5
transient_error_classes = ["ServiceUnavailable", "RateLimitError", "ConnectionError"]
grace = "2s"
lock_ttl = "10s"

[batch.reports]
worker = ["{exe}", "agent"]
key_fields = ["date", "account"]
concurrency = 2
limit = "agent_api"
token_estimate = 1200
item_timeout = "5s"
retries = 2
backoff = "200ms"
backoff_max = "1s"
schedule = "*/20 * * * * *"
timezone = "Asia/Tokyo"
catch_up = "1h"
grace = "2s"
lock_ttl = "10s"
"#
    )
}

fn articles() -> Vec<NewItem> {
    let mut items = Vec::new();
    for (i, site) in SITES.iter().enumerate() {
        for (j, category) in CATEGORIES.iter().enumerate() {
            for n in 0..8 {
                let slug = format!("{category}-notes-{:02}", i * 40 + j * 8 + n + 1);
                items.push(item(
                    &[("site", site), ("category", category), ("slug", &slug)],
                    None,
                ));
            }
        }
    }
    // The long operation: it times out once, then resumes from its op id.
    items.push(item(
        &[
            ("site", "blog"),
            ("category", "ai"),
            ("slug", "a-very-long-essay"),
        ],
        Some(("slow", serde_json::Value::Bool(true))),
    ));
    items
}

fn reports(today: chrono::NaiveDate) -> Vec<NewItem> {
    let mut items = Vec::new();
    for back in 1..=10 {
        let date = (today - chrono::Days::new(back))
            .format("%Y-%m-%d")
            .to_string();
        for account in ACCOUNTS {
            items.push(item(&[("date", &date), ("account", account)], None));
        }
    }
    items
}

fn item(fields: &[(&str, &str)], extra: Option<(&str, serde_json::Value)>) -> NewItem {
    let mut obj = serde_json::Map::new();
    for (k, v) in fields {
        obj.insert(
            (*k).to_string(),
            serde_json::Value::String((*v).to_string()),
        );
    }
    if let Some((k, v)) = extra {
        obj.insert(k.to_string(), v);
    }
    let value = serde_json::Value::Object(obj);
    let names: Vec<String> = fields.iter().map(|(k, _)| (*k).to_string()).collect();
    crate::key::derive_line(&value.to_string(), &crate::key::KeySpec::Fields(names))
        .expect("demo items have their key fields")
}

/// Creates the demo's directory, config and store with ~200 items.
pub fn setup(dir: Option<&Path>) -> anyhow::Result<Demo> {
    let (dir, temp) = match dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            (d.to_path_buf(), None)
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("nightshift-demo-")
                .tempdir()
                .context("creating a temporary directory")?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    let exe = crate::util::identity::this_program().context("finding this program's path")?;
    let config = dir.join("nightshift.toml");
    std::fs::write(&config, config_text(&exe))
        .with_context(|| format!("writing {}", config.display()))?;
    let db = dir.join("nightshift.db");
    let (mut store, _) = Store::create(&db)?;
    let now = now_ms();
    store.add_items("articles", &articles(), now, |_| {})?;
    store.add_items(
        "reports",
        &reports(crate::util::time::now().date_naive()),
        now,
        |_| {},
    )?;
    Ok(Demo {
        dir,
        db,
        config,
        temp,
    })
}

/// The demo passes its pid to its runner and scheduler as the first two
/// arguments, `--demo-parent PID`: an argument, not an environment variable,
/// so that their workers do not inherit it; taken off before the command
/// line is parsed, so that it is no option a user sees (in `--help` or the
/// shell completions).
pub fn take_parent_arg(
    mut args: Vec<std::ffi::OsString>,
) -> (Option<i32>, Vec<std::ffi::OsString>) {
    if args.get(1).is_some_and(|a| a == PARENT_ARG) {
        let pid = args.get(2).and_then(|p| p.to_str()?.parse().ok());
        if pid.is_some() {
            args.drain(1..3);
            return (pid, args);
        }
    }
    (None, args)
}

const PARENT_ARG: &str = "--demo-parent";

/// Called first thing by a child of the demo (`--demo-parent PID`): it asks
/// the kernel for SIGTERM when the demo dies, so a demo killed with SIGKILL
/// (which cannot clean up) still leaves nothing running. SIGTERM, not
/// SIGKILL: a runner then stops as it does on Ctrl-C, releasing its leases
/// and lock. (The signal follows the *thread* that spawned the child: the
/// demo spawns its children from its main thread, which lives as long as
/// the demo.)
pub fn follow_parent(parent: i32) {
    #[cfg(target_os = "linux")]
    {
        let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM);
        // The demo may have died between our fork and the call above.
        if parent != nix::unistd::getppid().as_raw() {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
}

/// A child `nightshift` process of the demo (a daemon, a runner). Dropping
/// it stops it: SIGTERM, a short wait, then SIGKILL, so quitting the demo
/// leaves nothing running.
pub struct Child {
    child: std::process::Child,
    name: &'static str,
    signalled: bool,
}

impl Child {
    /// Starts `nightshift --db DB --config CONFIG ARGS...` with its output
    /// going to `<demo dir>/<name>.log`. Both paths are explicit and the
    /// user's `NIGHTSHIFT_DB`/`NIGHTSHIFT_CONFIG` are not passed on, so the
    /// demo can never run against the user's real store.
    pub fn spawn(demo: &Demo, name: &'static str, args: &[&str]) -> anyhow::Result<Child> {
        let exe = crate::util::identity::this_program().context("finding this program's path")?;
        let log = std::fs::File::create(demo.dir.join(format!("{name}.log")))
            .with_context(|| format!("creating the {name} log"))?;
        // `--db=PATH`: joined, so a directory named like an option
        // (`demo --dir -x`) is still read as the path.
        let joined = |flag: &str, path: &Path| {
            let mut arg = std::ffi::OsString::from(flag);
            arg.push(path);
            arg
        };
        let child = std::process::Command::new(exe)
            .arg(PARENT_ARG)
            .arg(std::process::id().to_string())
            .arg(joined("--db=", &demo.db))
            .arg(joined("--config=", &demo.config))
            .args(args)
            .env_remove("NIGHTSHIFT_DB")
            .env_remove("NIGHTSHIFT_CONFIG")
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().context("opening the log")?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting the demo's {name}"))?;
        Ok(Child {
            child,
            name,
            signalled: false,
        })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Has it exited?
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// How it ended, once it has: its exit code (`None` for a signal).
    pub fn exit_code(&mut self) -> Option<Option<i32>> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.code()),
            _ => None,
        }
    }

    /// Asks it to stop (SIGTERM: a runner stops claiming and lets in-flight
    /// items finish within its grace; a daemon stops firing), without
    /// waiting. A second call does nothing: a second SIGTERM would make
    /// them kill their workers at once.
    pub fn terminate(&mut self) {
        if self.signalled || self.exited() {
            return;
        }
        self.signalled = true;
        #[cfg(unix)]
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGTERM,
            );
        }
        #[cfg(not(unix))]
        let _ = self.child.kill();
    }

    /// SIGTERM (unless sent already), then up to `grace` for it to finish,
    /// then SIGKILL.
    pub fn stop(&mut self, grace: std::time::Duration) {
        self.terminate();
        let deadline = std::time::Instant::now() + grace;
        while std::time::Instant::now() < deadline {
            if self.exited() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop(std::time::Duration::from_secs(10));
    }
}
