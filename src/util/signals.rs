//! Termination signals (SIGINT, SIGTERM, SIGHUP; Ctrl-C elsewhere), counted:
//! long-lived commands stop gracefully on the first and at once on the next.

/// Calls `on_signal` with 1, 2, ... at each termination signal, forever
/// (spawn it, abort it when done).
#[cfg(unix)]
pub async fn count_termination(mut on_signal: impl FnMut(u32)) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    let mut count = 0;
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {}
        }
        count += 1;
        on_signal(count);
    }
}

#[cfg(not(unix))]
pub async fn count_termination(mut on_signal: impl FnMut(u32)) {
    let mut count = 0;
    while tokio::signal::ctrl_c().await.is_ok() {
        count += 1;
        on_signal(count);
    }
}

/// Signals the daemon caught before its own handling began (see
/// [`catch_early`]): a SIGHUP (a reload asked) and a SIGINT or SIGTERM (a
/// stop asked).
#[cfg(unix)]
static EARLY: std::sync::OnceLock<(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
)> = std::sync::OnceLock::new();

/// Catches SIGHUP, SIGINT and SIGTERM from the daemon's first moment: a
/// `systemctl reload` right after `start` came while the config loaded,
/// before [`count_stops_and_reloads`] listened, and its default action
/// killed the daemon (exit 129, nothing said). They are kept for it.
#[cfg(unix)]
pub fn catch_early() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let flags = EARLY.get_or_init(Default::default);
    let _ = signal_hook::flag::register(SIGHUP, std::sync::Arc::clone(&flags.0));
    for sig in [SIGINT, SIGTERM] {
        let _ = signal_hook::flag::register(sig, std::sync::Arc::clone(&flags.1));
    }
}

#[cfg(not(unix))]
pub fn catch_early() {}

/// The daemon's signals: `on_stop` with 1, 2, ... at each SIGINT or
/// SIGTERM, `on_reload` at each SIGHUP (what systemd's `ExecReload=kill
/// -HUP $MAINPID` sends), forever (spawn it, abort it when done).
#[cfg(unix)]
pub async fn count_stops_and_reloads(mut on_stop: impl FnMut(u32), mut on_reload: impl FnMut()) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    let mut count = 0;
    // What came before this listened (`catch_early`), acted on now.
    if let Some((reload, stop)) = EARLY.get() {
        use std::sync::atomic::Ordering::SeqCst;
        if reload.swap(false, SeqCst) {
            on_reload();
        }
        if stop.swap(false, SeqCst) {
            count += 1;
            on_stop(count);
        }
    }
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
            _ = hup.recv() => {
                on_reload();
                continue;
            }
        }
        count += 1;
        on_stop(count);
    }
}

#[cfg(not(unix))]
pub async fn count_stops_and_reloads(on_stop: impl FnMut(u32), _on_reload: impl FnMut()) {
    count_termination(on_stop).await;
}

/// Catches, with a handler that does nothing, every signal this process
/// was started with ignored (`nohup`: SIGHUP; a shell script's background
/// job: SIGINT and SIGQUIT; any parent: whatever it chose), so the process
/// still ignores them, but `exec` resets a caught signal to its default
/// where it passes an ignored one on: every child (a worker in either
/// mode, a source command, a hook) starts with none ignored, and a stop
/// sent to a worker's group reaches it. An ignored SIGCHLD would also have
/// the kernel reap workers before they are waited for. SIGPIPE stays as
/// the Rust runtime sets it (each spawn gives it back its default); the
/// signals no handler may take (SIGKILL, SIGSEGV, ...) are left alone.
/// Read from `/proc`: a disposition cannot be read without `unsafe`.
#[cfg(target_os = "linux")]
pub fn catch_inherited_ignores() {
    use signal_hook::consts::SIGPIPE;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let ignored = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let hex = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
            u64::from_str_radix(hex.trim(), 16).ok()
        })
        .unwrap_or(0);
    let unused = Arc::new(AtomicBool::new(false));
    // 32 and 33 are the C library's own, ignored in every process.
    for sig in (1..=64).filter(|&n| n != SIGPIPE && n != 32 && n != 33) {
        if ignored & (1u64 << (sig - 1)) != 0 {
            let _ = signal_hook::flag::register(sig, Arc::clone(&unused));
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn catch_inherited_ignores() {}

/// A stop request for bulk writes (`add`, `requeue`): set by the first
/// SIGINT, SIGTERM or SIGHUP once [`Stop::on_signals`] is installed. They
/// check it between chunks, so the chunk in hand commits whole and they can
/// say exactly how far they got. A second signal ends the process by the
/// signal's default action (each chunk is one transaction: nothing is left
/// half-written). The default value is never set.
#[derive(Debug, Clone, Default)]
pub struct Stop(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Stop {
    /// Installs the handlers; the returned flag is set by the first signal.
    #[cfg(unix)]
    pub fn on_signals() -> std::io::Result<Stop> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let stop = Stop::default();
        let seen = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            // Run in the order registered: the second signal finds `seen`.
            signal_hook::flag::register_conditional_default(sig, Arc::clone(&seen))?;
            signal_hook::flag::register(sig, Arc::clone(&seen))?;
            signal_hook::flag::register_usize(sig, Arc::clone(&stop.0), sig as usize)?;
        }
        Ok(stop)
    }

    #[cfg(not(unix))]
    pub fn on_signals() -> std::io::Result<Stop> {
        Ok(Stop::default())
    }

    /// Asks to stop as signal `sig` would.
    pub fn request(&self, sig: i32) {
        self.0
            .store(sig as usize, std::sync::atomic::Ordering::SeqCst);
    }

    /// The signal that asked to stop, by name (`SIGTERM`), if one did.
    pub fn requested(&self) -> Option<String> {
        match self.0.load(std::sync::atomic::Ordering::SeqCst) {
            0 => None,
            n => Some(signal_name(n as i32)),
        }
    }
}

#[cfg(unix)]
fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map_or_else(|_| format!("signal {sig}"), |s| s.as_str().to_string())
}

#[cfg(not(unix))]
fn signal_name(sig: i32) -> String {
    format!("signal {sig}")
}
