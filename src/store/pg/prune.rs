//! Removing old history (see `store::prune`), in paced chunks.

use super::PgStore;
use super::conn::Conn;
use crate::model::{Millis, NewEvent};
use crate::store::chunks::Chunks;
use crate::store::{PruneReport, Result};

const DONE_ITEMS: &str = "FROM items WHERE status = 'done' AND updated_at < $1";
const FAILED_ITEMS: &str = "FROM items WHERE status = 'failed' AND updated_at < $1";
const EVENTS: &str = "FROM events WHERE at < $1";
const RUNS: &str = "FROM runs WHERE ended_at IS NOT NULL AND ended_at < $1";
const DEAD_LETTERS: &str = "FROM dead_letters WHERE failed_at < $1";

fn count(c: &mut Conn, from: &str, cutoff: i64) -> Result<i64> {
    Ok(c.one(&format!("SELECT count(*)::int8 {from}"), &[&cutoff])?
        .get(0))
}

impl PgStore {
    /// Deletes history older than `cutoff` (see `Store::prune`).
    pub fn prune(
        &mut self,
        cutoff: Millis,
        include_failed: bool,
        dry_run: bool,
        actor: &str,
        now: Millis,
    ) -> Result<PruneReport> {
        let mut report = self.read(|c| {
            let cutoff = c.tin(cutoff);
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
                    let n = store.write(|c| {
                        let cutoff = c.tin(cutoff);
                        c.x(
                            &format!("DELETE FROM {table} WHERE id IN (SELECT id {from} LIMIT $2)"),
                            &[&cutoff, &(size as i64)],
                        )
                    });
                    (n, size)
                });
                if n? < size as u64 {
                    break;
                }
            }
        }
        self.write(|c| {
            let cutoff = c.tin(cutoff);
            c.x(
                "DELETE FROM minute_stats WHERE minute < $1",
                &[&(cutoff / 60_000)],
            )?;
            if include_failed {
                c.x(
                    "DELETE FROM dlq_hourly WHERE hour < $1",
                    &[&(cutoff / 3_600_000)],
                )?;
            }
            super::events::insert(
                c,
                &NewEvent {
                    at: now,
                    kind: "pruned".into(),
                    actor: Some(actor.to_string()),
                    message: format!(
                        "pruned {} done items, {} events, {} runs, {} failed items, {} dead letters",
                        report.done_items,
                        report.events,
                        report.runs,
                        report.failed_items,
                        report.dead_letters
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
