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
