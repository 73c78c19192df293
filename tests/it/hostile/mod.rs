//! What others do to us: workers that misbehave, text that tries to reach
//! the terminal, users without the rights.

// Other users and permissions (as `nobody`: needs root).
mod access;
// Control characters and escapes from workers and input.
mod injection;
// Workers that lie, flood, hang or crash; property tests.
mod workers;
