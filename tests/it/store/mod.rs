//! The store: its contract on both backends, then what is particular to
//! each (PostgreSQL's server-side rules, SQLite's read-only opening, the
//! file and the files beside it).

// The contract suite: every backend semantic, on SQLite and PostgreSQL.
mod contract;
// The store's file, its paths and the files beside it.
mod file;
// PostgreSQL: schema, locks, clocks, concurrent writers.
mod pg;
// SQLite reads that never change a byte.
mod readonly;
// SQLite reads while writers come and go.
mod readonly_race;
// SQLite's hot statements count themselves: counters exact beside every writer.
mod self_counted;
