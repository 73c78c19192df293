//! The dashboard: rendered into a buffer (snapshots), driven in a real
//! pseudo-terminal, and on PostgreSQL.

// Launching the dashboard from the command line.
mod cli;
// The counts on the real screen, and what waits.
mod counts;
// Who is alive, on the real screen.
mod liveness;
// The dashboard on a PostgreSQL store.
mod pg;
// The Pools pane and the waiting reasons, in a pseudo-terminal.
mod pools;
// The real binary in a pseudo-terminal.
mod pty;
// Every pane rendered (insta snapshots in `snapshots/`).
mod render;
// Text on the real screen: cuts, wraps, Japanese.
mod text;
// The poller and effects threads.
mod threads;
// Steering from the dashboard: the cancel and stop keys.
mod steer;
// A batch's budget in its detail: spent of the limit, the reset, the hold.
mod budget;
// The config file edited while the dashboard is open.
mod reload;
// The items search finds what the screen shows.
mod search;
