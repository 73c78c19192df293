//! Every command end to end: the real binary on temp-dir SQLite stores.
//! By theme: `add` and `init`; reading (`status`, `items`, `show`, `dlq`,
//! `log`); operating (`requeue`, `skip`, `pause`, `unpause`, `prune`).

#[path = "../common/mod.rs"]
mod common;

mod add;
mod inspect;
mod operate;
