//! The standard streams kept open. A process started with one of them
//! closed (`cmd <&-`, some service managers) hands that number to the next
//! file it opens: a store file or a worker's pipe would then take what we
//! print to stderr, or a pipe end meant for a worker would sit on 0–2,
//! where passing it on by `dup2` cannot work (`child::posix` then falls
//! back to `Command`).

/// Opens `/dev/null` on each of 0, 1 and 2 that is closed. Call first.
#[cfg(unix)]
pub fn keep_open() {
    use std::os::fd::{AsRawFd, IntoRawFd};
    // `open` takes the lowest free number: below 3 it fills a gap.
    while let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        if null.as_raw_fd() > 2 {
            return;
        }
        // Kept open for the life of the process, as that stream.
        let _ = null.into_raw_fd();
    }
}

#[cfg(not(unix))]
pub fn keep_open() {}
