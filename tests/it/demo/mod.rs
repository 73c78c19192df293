//! `nightshift demo`.

// The demo run from the command line.
mod cli;
// The demo's dashboard in a pseudo-terminal.
mod pty;
