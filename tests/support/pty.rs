//! The real binary in a real pseudo-terminal, its output fed to a `vt100`
//! screen: what a user would see, and whether anything tried to set the
//! window title or the clipboard.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, MasterPty, PtySize, native_pty_system};

/// Long enough for a loaded CI machine; a healthy run takes milliseconds.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Whether the screen shows polled data: the header ends in `live`.
pub fn loaded(screen: &str) -> bool {
    screen
        .lines()
        .next()
        .is_some_and(|l| l.trim_end().ends_with(" live"))
}

/// Records what the program asked of the terminal besides drawing.
#[derive(Default)]
pub struct Watch {
    pub title_set: Arc<AtomicBool>,
    pub clipboard: Arc<AtomicBool>,
}

impl vt100::Callbacks for Watch {
    fn set_window_title(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.title_set.store(true, Ordering::SeqCst);
    }
    fn set_window_icon_name(&mut self, _: &mut vt100::Screen, _: &[u8]) {
        self.title_set.store(true, Ordering::SeqCst);
    }
    fn copy_to_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8], _: &[u8]) {
        self.clipboard.store(true, Ordering::SeqCst);
    }
}

pub struct Dash {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn Write + Send>,
    pub parser: Arc<Mutex<vt100::Parser<Watch>>>,
    pub child: Box<dyn portable_pty::Child + Send + Sync>,
    pub title_set: Arc<AtomicBool>,
    pub clipboard: Arc<AtomicBool>,
    /// Bytes the program wrote to the terminal so far.
    pub bytes: Arc<AtomicU64>,
    /// Those bytes themselves, as written.
    pub raw: Arc<Mutex<Vec<u8>>>,
    /// Every screen the output passed through since the last key (see
    /// [`Dash::wait_seen`]).
    seen: Arc<Mutex<VecDeque<String>>>,
    pub cols: u16,
}

/// Screens kept for [`Dash::wait_seen`]; the oldest go first.
const SEEN_SCREENS: usize = 4096;
/// The output is fed to the screen in pieces of this size, each screen
/// kept: a frame that a starved reader gets together with later ones is
/// still seen.
const SEEN_PIECE: usize = 1024;

impl Dash {
    /// Starts `nightshift ARGS` on `db` in a `cols`×`rows` terminal, as user
    /// `tester` on host `ptyhost`, with its state directory in `dir/state`.
    pub fn open(bin: &Path, dir: &Path, db: &Path, args: &[&str], size: (u16, u16)) -> Dash {
        Dash::open_env(bin, dir, db, args, size, &[])
    }

    /// [`Dash::open`] with `vars` set in its environment too.
    pub fn open_env(
        bin: &Path,
        dir: &Path,
        db: &Path,
        args: &[&str],
        size: (u16, u16),
        vars: &[(&str, &str)],
    ) -> Dash {
        let (cols, rows) = size;
        let pair = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(bin);
        cmd.args(args);
        cmd.cwd(dir);
        cmd.env("NIGHTSHIFT_DB", db);
        cmd.env("XDG_STATE_HOME", dir.join("state"));
        cmd.env("TERM", "xterm-256color");
        cmd.env("NIGHTSHIFT_HOST", "ptyhost");
        cmd.env("USER", "tester");
        cmd.env_remove("NO_COLOR");
        cmd.env_remove("NIGHTSHIFT_CONFIG");
        for (name, value) in vars {
            cmd.env(name, value);
        }
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let watch = Watch::default();
        let title_set = watch.title_set.clone();
        let clipboard = watch.clipboard.clone();
        let parser = Arc::new(Mutex::new(vt100::Parser::new_with_callbacks(
            std::num::NonZeroU16::new(rows).unwrap(),
            std::num::NonZeroU16::new(cols).unwrap(),
            0,
            watch,
        )));
        let bytes = Arc::new(AtomicU64::new(0));
        let mut reader = pair.master.try_clone_reader().unwrap();
        let seen = Arc::new(Mutex::new(VecDeque::new()));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let (p, b, kept, r) = (parser.clone(), bytes.clone(), seen.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 65536];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        b.fetch_add(n as u64, Ordering::SeqCst);
                        r.lock().unwrap().extend_from_slice(&buf[..n]);
                        for piece in buf[..n].chunks(SEEN_PIECE) {
                            let mut parser = p.lock().unwrap();
                            parser.process(piece);
                            let screen = parser.screen().contents();
                            drop(parser);
                            let mut kept = kept.lock().unwrap();
                            if kept.len() == SEEN_SCREENS {
                                kept.pop_front();
                            }
                            kept.push_back(screen);
                        }
                    }
                }
            }
        });
        let writer = pair.master.take_writer().unwrap();
        Dash {
            master: pair.master,
            writer,
            parser,
            child,
            title_set,
            clipboard,
            bytes,
            raw,
            seen,
            cols,
        }
    }

    /// Sends one key (bytes as a terminal sends them). Keys go one at a
    /// time: an Esc followed at once by a letter would read as Alt+letter.
    pub fn key(&mut self, bytes: &str) {
        self.seen.lock().unwrap().clear();
        self.writer.write_all(bytes.as_bytes()).unwrap();
        self.writer.flush().unwrap();
        std::thread::sleep(Duration::from_millis(40));
    }

    /// Sends several keys in one write, as a terminal delivers keys
    /// pressed quickly (they reach the program in one read).
    pub fn keys_at_once(&mut self, bytes: &str) {
        self.seen.lock().unwrap().clear();
        self.writer.write_all(bytes.as_bytes()).unwrap();
        self.writer.flush().unwrap();
    }

    /// Types text, one key at a time.
    pub fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            self.key(&c.to_string());
        }
    }

    pub fn rows(&self) -> Vec<String> {
        let parser = self.parser.lock().unwrap();
        parser.screen().rows(0, self.cols).collect()
    }

    pub fn screen(&self) -> String {
        self.rows().join("\n")
    }

    /// Waits until the screen satisfies `pred` and has settled (a frame
    /// can arrive in several reads); panics with the screen.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if pred(&screen) {
                std::thread::sleep(Duration::from_millis(30));
                let again = self.screen();
                if again == screen {
                    return screen;
                }
                continue;
            }
            if start.elapsed() > PATIENCE {
                panic!("waited for {what}; the screen shows:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until a screen since the last key showed `text`, and returns
    /// that screen: for a message shown a few seconds, which a test thread
    /// starved on a loaded machine may never sample on the screen itself.
    pub fn wait_seen(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(screen) = self.seen.lock().unwrap().iter().find(|s| s.contains(text)) {
                return screen.clone();
            }
            if start.elapsed() > PATIENCE {
                panic!("waited for {text}; the screen shows:\n{}", self.screen());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn wait_text(&self, text: &str) -> String {
        self.wait_for(text, |s| s.contains(text))
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.cols = cols;
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        self.parser.lock().unwrap().screen_mut().set_size(
            std::num::NonZeroU16::new(rows).unwrap(),
            std::num::NonZeroU16::new(cols).unwrap(),
        );
    }

    /// Waits for the program to end; its exit code.
    pub fn wait_exit(&mut self) -> u32 {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.exit_code();
            }
            if start.elapsed() > PATIENCE {
                let _ = self.child.kill();
                panic!(
                    "the dashboard did not exit; the screen shows:\n{}",
                    self.screen()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the first poll's data (the header says `live`).
    pub fn wait_loaded(&self) -> String {
        self.wait_for("the first poll", loaded)
    }

    /// Whether the terminal gets back to normal after the program ended
    /// (its last bytes may still be on their way to the reader).
    pub fn wait_restored(&self) -> bool {
        let start = Instant::now();
        while start.elapsed() < PATIENCE {
            if self.restored() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Whether the terminal is back to normal: main screen, cursor shown.
    pub fn restored(&self) -> bool {
        let parser = self.parser.lock().unwrap();
        let screen = parser.screen();
        !screen.alternate_screen() && !screen.hide_cursor()
    }

    pub fn pid(&self) -> u32 {
        self.child.process_id().unwrap()
    }
}

impl Drop for Dash {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
