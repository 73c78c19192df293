//! Every command end to end: the real binary on temp-dir SQLite stores.
//! By theme: `add` and `init`; reading (`status`, `items`, `show`, `dlq`,
//! `log`); operating (`requeue`, `skip`, `pause`, `unpause`, `prune`).

mod add;
mod inspect;
mod operate;

// One definition of every count, in every view; what waits.
mod counts;
// Every command on both stores.
mod backends;
// A URL without a password: PGPASSWORD and the password file, as libpq reads them.
mod pgpass;
// Bad input of every kind: one clear line, a non-zero exit, nothing changed.
mod bad_input;
// A store and config found by their default relative names.
mod default_paths;
// A store and config given by relative paths.
mod paths;
// The shortest path: init, add, run, status.
mod smoke;
// Dry runs of every bulk action: prune, skip, add.
mod dry_runs;
// Versioned done: stale items listed and requeued exactly.
mod versions;
// Why items wait: every reason, in every view.
mod waiting;
// A closed stdout or stderr: no panic, the command's own exit code.
mod closed_streams;
// `--json` answers in JSON when the command fails too.
mod json_errors;
