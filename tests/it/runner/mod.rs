//! `nightshift run`: real runners, real workers, real signals.

// The runner end to end: runs, retries, outcomes, process groups.
mod basics;
// An item waiting out its backoff says so in every view.
mod backoff;
// The rolling event log file of a run: lines while it goes, all by its end.
mod event_log;
// Faults from outside: a full disk, a foreign lock, a store replaced, rogue workers.
mod faults;
// Who is alive, in every view, after SIGKILLs.
mod liveness;
// One run at a time: the batch lock and its seats.
mod locks;
// Workers left behind, and holders that only look dead.
mod orphans;
// One gate for every worker call: retry-after holds and rate limits.
mod pace;
// Persistent workers (one process, many items).
mod persistent;
// The live progress line on a terminal: one row, fitted, waits said apart.
mod progress;
// Priority and not-before: which item a run starts first, and when.
mod priority;
// Runners sharing a batch.
mod shared;
// SIGINT, SIGHUP and second signals to `run`, the daemon, the dashboard, `add`.
mod signals;
// The runner's pace and its stops: rate limits, max_cost, SIGTERM, pause.
mod stop;
// Steering a live batch: cancel an item, stop a run, the circuit breaker.
mod steer;
// The worker's own words: each attempt's stderr tail, kept bounded and shown inert.
mod worker_words;
// Limit pools shared by batches and runners: tokens, requests, concurrency, 429 holds.
mod pools;
// Budgets that pause, not kill: per batch and per pool, kept in the store.
mod budgets;
