//! Removing old history: done items, events, runs, and (only when asked)
//! failed items and dead letters. Deletes go in paced chunks (`chunks`), so
//! runners are not held up.

use rusqlite::{Connection, params};
use serde::Serialize;

use super::chunks::Chunks;
use super::{Result, SqliteStore};
use crate::model::{Millis, NewEvent};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    pub done_items: i64,
    pub events: i64,
    pub runs: i64,
    pub failed_items: i64,
    pub dead_letters: i64,
    /// Old failed items and dead letters left in place (no `include_failed`).
    pub failed_items_kept: i64,
    pub dead_letters_kept: i64,
}

const DONE_ITEMS: &str = "FROM items WHERE status = 'done' AND updated_at < ?1";
const FAILED_ITEMS: &str = "FROM items WHERE status = 'failed' AND updated_at < ?1";
const EVENTS: &str = "FROM events WHERE at < ?1";
const RUNS: &str = "FROM runs WHERE ended_at IS NOT NULL AND ended_at < ?1";
const DEAD_LETTERS: &str = "FROM dead_letters WHERE failed_at < ?1";

fn count(c: &Connection, from: &str, cutoff: Millis) -> Result<i64> {
    Ok(c.query_row(&format!("SELECT count(*) {from}"), [cutoff], |r| r.get(0))?)
}

impl SqliteStore {
    /// Deletes history older than `cutoff`. Failed items and dead letters
    /// are only deleted with `include_failed`; otherwise they are counted
    /// and reported as kept. With `dry_run`, only counts.
    pub fn prune(
        &mut self,
        cutoff: Millis,
        include_failed: bool,
        dry_run: bool,
        actor: &str,
        now: Millis,
    ) -> Result<PruneReport> {
        let mut report = self.read(|c| {
            Ok(PruneReport {
                done_items: count(c, DONE_ITEMS, cutoff)?,
                events: count(c, EVENTS, cutoff)?,
                runs: count(c, RUNS, cutoff)?,
                failed_items: count(c, FAILED_ITEMS, cutoff)?,
                dead_letters: count(c, DEAD_LETTERS, cutoff)?,
                ..PruneReport::default()
            })
        })?;
        if !include_failed {
            report.failed_items_kept = std::mem::take(&mut report.failed_items);
            report.dead_letters_kept = std::mem::take(&mut report.dead_letters);
        }
        if dry_run {
            return Ok(report);
        }
        let mut targets = vec![("items", DONE_ITEMS), ("events", EVENTS), ("runs", RUNS)];
        if include_failed {
            targets.push(("items", FAILED_ITEMS));
            targets.push(("dead_letters", DEAD_LETTERS));
        }
        for (table, from) in targets {
            let mut chunks = Chunks::new(5_000);
            loop {
                let store = &mut *self;
                let (n, size) = chunks.run(|size| {
                    let n = store.write(|tx| {
                        Ok(tx.execute(
                            &format!(
                                "DELETE FROM {table} WHERE rowid IN (SELECT rowid {from} LIMIT ?2)"
                            ),
                            params![cutoff, size as i64],
                        )?)
                    });
                    (n, size)
                });
                if n? < size {
                    break;
                }
            }
        }
        self.write(|tx| {
            tx.execute("DELETE FROM minute_stats WHERE minute < ?1", [cutoff / 60_000])?;
            if include_failed {
                tx.execute("DELETE FROM dlq_hourly WHERE hour < ?1", [cutoff / 3_600_000])?;
            }
            super::events::insert(
                tx,
                &NewEvent {
                    at: now,
                    kind: "pruned".into(),
                    actor: Some(actor.to_string()),
                    message: format!(
                        "pruned {} done items, {} events, {} runs, {} failed items, {} dead letters",
                        report.done_items, report.events, report.runs, report.failed_items, report.dead_letters
                    ),
                    fields: serde_json::to_value(report).ok(),
                    ..NewEvent::default()
                },
            )?;
            Ok(())
        })?;
        Ok(report)
    }
}
