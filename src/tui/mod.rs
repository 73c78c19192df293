//! The dashboard (`nightshift watch`, or `nightshift` alone).
//!
//! Event → Action → `App::update` → render. Three sources feed one
//! channel: the keyboard (a thread blocked in `crossterm::event::read`;
//! the keymap makes its keys intents), the poller (store reads every
//! interval, off the UI thread, and the config file when it changed) and
//! the effects thread (writes, runner starts); those two send arrivals.
//! The loop renders after something happened, or once a second for the ages; ratatui then writes only the
//! cells that changed, and an unchanged frame writes nothing (the header
//! shows no ticking clock, ages past a minute step at the turn of the
//! minute): idle, the terminal is written at most once a minute. The terminal is restored on every way out: `q`,
//! Ctrl-C, SIGTERM/SIGHUP/SIGINT, and a panic (a hook restores it before
//! the message is printed).

pub mod action;
pub mod app;
pub mod config_file;
pub mod detail;
pub mod effects;
pub mod format;
pub mod keymap;
pub mod keys;
pub mod layout;
pub mod nav;
pub mod poller;
pub mod theme;
pub mod ui;
pub mod visits;

use std::io::{BufWriter, Stdout, Write as _};
use std::path::PathBuf;
use std::sync::Once;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::Duration;

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste, Event, KeyEventKind};
use crossterm::terminal::{
    BeginSynchronizedUpdate, EndSynchronizedUpdate, EnterAlternateScreen, LeaveAlternateScreen,
    disable_raw_mode, enable_raw_mode,
};
use crossterm::{cursor, execute, queue};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::buffer::Buffer;

use action::{Action, Arrival, Effect, Intent};
use app::{App, Setup};
use effects::{Effects, Job, RunnerSpawn};
use keymap::Mode;
use poller::{Cmd, Poller};
use visits::Visits;

use crate::util::time::now_ms;

/// What the loop reacts to.
pub enum Msg {
    Input(Event),
    /// The terminal went away (read failed).
    InputClosed,
    Signal(i32),
    /// From the poller or the effects thread.
    Arrival(Arrival),
}

pub struct Options {
    pub db: PathBuf,
    /// The `--config` given to the runners `r` starts.
    pub config: Option<PathBuf>,
    /// The config file to follow (see `config_file`).
    pub config_file: Option<config_file::ConfigFile>,
    pub setup: Setup,
    pub interval: Duration,
    pub state_dir: Option<PathBuf>,
    /// Track the runners `r` starts, so that the caller can stop them (the
    /// demo); `None`: they outlive the dashboard.
    pub runners: Option<effects::Runners>,
}

/// How the dashboard ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Quit,
    Signal(i32),
    TerminalGone,
}

type Backend = CrosstermBackend<BufWriter<Stdout>>;

/// The terminal in raw mode on the alternate screen; restored on drop.
struct Screen {
    terminal: Terminal<Backend>,
    /// What the terminal shows now, as last written.
    shown: Option<Buffer>,
}

fn restore() {
    let _ = disable_raw_mode();
    let mut out = std::io::stdout();
    let _ = execute!(
        out,
        EndSynchronizedUpdate,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        cursor::Show
    );
    let _ = out.flush();
}

impl Screen {
    fn enter() -> anyhow::Result<Screen> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode()
            .map_err(|e| anyhow::anyhow!("cannot put the terminal in raw mode: {e}"))?;
        let mut out = std::io::stdout();
        if let Err(e) = execute!(
            out,
            EnterAlternateScreen,
            EnableBracketedPaste,
            cursor::Hide
        ) {
            restore();
            return Err(anyhow::anyhow!("cannot set up the terminal: {e}"));
        }
        let backend = CrosstermBackend::new(BufWriter::with_capacity(64 * 1024, std::io::stdout()));
        match Terminal::new(backend) {
            Ok(terminal) => Ok(Screen {
                terminal,
                shown: None,
            }),
            Err(e) => {
                restore();
                Err(anyhow::anyhow!("cannot set up the terminal: {e}"))
            }
        }
    }

    /// Renders `app` and writes what changed; a frame the same as the one
    /// shown writes nothing at all (not even the update markers), so an
    /// idle dashboard leaves the terminal (and tmux's activity flag) alone.
    fn draw(&mut self, app: &App) -> std::io::Result<()> {
        self.terminal.autoresize()?;
        let mut frame = self.terminal.get_frame();
        ui::render(app, &mut frame);
        let now = self.terminal.current_buffer_mut();
        if self.shown.as_ref() == Some(now) {
            // Drop the frame: the terminal's copy stays what it shows.
            now.reset();
            return Ok(());
        }
        self.shown = Some(now.clone());
        // One atomic update for terminals (and tmux) that support it.
        queue!(self.terminal.backend_mut(), BeginSynchronizedUpdate)?;
        self.terminal.apply_buffer()?;
        execute!(self.terminal.backend_mut(), EndSynchronizedUpdate)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

fn spawn_input(tx: Sender<Msg>) {
    let _ = std::thread::Builder::new()
        .name("nightshift-input".into())
        .spawn(move || {
            loop {
                match keys::read() {
                    Ok(events) => {
                        for ev in events {
                            if tx.send(Msg::Input(ev)).is_err() {
                                return;
                            }
                        }
                    }
                    Err(_) => {
                        let _ = tx.send(Msg::InputClosed);
                        return;
                    }
                }
            }
        });
}

#[cfg(unix)]
fn spawn_signals(tx: Sender<Msg>) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT, SIGQUIT])?;
    std::thread::Builder::new()
        .name("nightshift-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if tx.send(Msg::Signal(sig)).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

#[cfg(not(unix))]
fn spawn_signals(_tx: Sender<Msg>) -> anyhow::Result<()> {
    Ok(())
}

/// Runs the dashboard until the user quits, a signal arrives or the
/// terminal goes away.
pub fn run(mut opts: Options) -> anyhow::Result<Ended> {
    let read_only = opts.setup.read_only;
    let three_polls = i64::try_from(opts.interval.as_millis() * 3).unwrap_or(i64::MAX);
    opts.setup.stale_after = three_polls.max(app::STALE_AFTER);
    let mut app = App::new(opts.setup, now_ms());
    let (tx, rx) = std::sync::mpsc::channel();
    // From before the poller first opens the store (which may warn) until
    // the terminal is given back.
    let held = crate::util::stdio::hold();
    let access = if read_only {
        crate::store::Access::ReadOnly
    } else {
        crate::store::Access::ReadWrite
    };
    let poller = Poller::spawn(
        opts.db.clone(),
        access,
        opts.interval,
        opts.config_file.take(),
        tx.clone(),
    );
    let effects = (!read_only).then(|| {
        Effects::spawn(
            RunnerSpawn {
                db: opts.db.clone(),
                config: opts.config.clone(),
                log: opts
                    .state_dir
                    .as_ref()
                    .map(|d| d.join("dashboard-runs.log")),
                runners: opts.runners.clone(),
            },
            tx.clone(),
        )
    });
    let visits = Visits::new(opts.state_dir.as_deref(), &opts.db);
    if let Some(last) = visits.last() {
        poller.send(Cmd::Since(last));
    }
    let _ = visits.record(now_ms());

    spawn_signals(tx.clone())?;
    let mut screen = Screen::enter()?;
    let size = screen.terminal.size()?;
    app.update(Arrival::Resize(size.width, size.height));
    spawn_input(tx.clone());

    let mut sent: Option<(crate::store::DashQuery, u64)> = None;
    let mut dirty = true;
    let mut ended = Ended::Quit;
    let mut shown_second = app.now / 1000;
    loop {
        let question = (app.query(), app.asked);
        if sent.as_ref() != Some(&question) {
            poller.send(Cmd::Query {
                query: Box::new(question.0.clone()),
                asked: question.1,
            });
            sent = Some(question);
        }
        if dirty {
            if screen.draw(&app).is_err() {
                // The terminal is gone (SSH dropped): nothing left to show.
                ended = Ended::TerminalGone;
                break;
            }
            dirty = false;
        }
        if app.quit {
            break;
        }
        // Wake at the next second (ages under a minute, the stale warning),
        // or at once for a message; an unchanged frame writes nothing.
        let wait = 1000 - now_ms().rem_euclid(1000) + 1;
        let first = match rx.recv_timeout(Duration::from_millis(wait as u64)) {
            Ok(msg) => Some(msg),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let now = now_ms();
        app.update(Arrival::Tick(now));
        if now / 1000 != shown_second {
            shown_second = now / 1000;
            dirty = true;
        }
        for msg in first.into_iter().chain(rx.try_iter()) {
            let actions: Vec<Action> = match msg {
                Msg::Input(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    dirty = true;
                    keymap::lookup(app.mode, app.at(), &k)
                        .into_iter()
                        .map(Action::from)
                        .collect()
                }
                Msg::Input(Event::Resize(w, h)) => {
                    dirty = true;
                    vec![Arrival::Resize(w, h).into()]
                }
                Msg::Input(Event::Paste(text))
                    if matches!(app.mode, Mode::Filter | Mode::Prompt) =>
                {
                    dirty = true;
                    pasted(&text)
                        .chars()
                        .map(|c| Intent::Input(c).into())
                        .collect()
                }
                Msg::Input(_) => Vec::new(),
                Msg::InputClosed => {
                    ended = Ended::TerminalGone;
                    vec![Intent::Quit.into()]
                }
                Msg::Signal(sig) => {
                    ended = Ended::Signal(sig);
                    vec![Intent::Quit.into()]
                }
                Msg::Arrival(a) => {
                    dirty = true;
                    vec![a.into()]
                }
            };
            for action in actions {
                for effect in app.update(action) {
                    match effect {
                        Effect::Write(w) => match &effects {
                            Some(e) => e.send(Job::Write(w)),
                            None => {
                                app.update(Arrival::Done {
                                    ok: false,
                                    message: "read-only: nothing was changed".into(),
                                });
                            }
                        },
                        Effect::PrepareRequeue { batch, query, what } => {
                            if let Some(e) = &effects {
                                e.send(Job::Prepare { batch, query, what });
                            }
                        }
                        Effect::PollNow => poller.send(Cmd::Now),
                        Effect::Quit => {}
                    }
                }
            }
        }
        // After what arrived with them (a write that opened the store and
        // warned): the warning is the footer's last word.
        for line in held.news() {
            // The program's name is said by the screen it is on.
            let line = line.strip_prefix("nightshift: ").unwrap_or(&line);
            app.update(Arrival::Said(line.to_string()));
            dirty = true;
        }
    }
    let _ = visits.record(now_ms());
    drop(screen);
    // What was held is written on the terminal given back.
    drop(held);
    // Close the store cleanly before the process ends (see Poller::stop).
    poller.stop(Duration::from_secs(5));
    if let Some(effects) = effects {
        effects.stop(Duration::from_secs(5));
    }
    Ok(ended)
}

/// What a paste types into the filter or the prompt: one line, its line
/// breaks (and any other control character) a space between the words
/// they parted, none at its ends (a copied `k1` and its newline searches
/// for `k1`). Bracketed paste is asked for so that a pasted line break is
/// not Enter and the lines after it are not read as keys.
fn pasted(text: &str) -> String {
    text.split(char::is_control)
        .filter(|piece| !piece.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}
