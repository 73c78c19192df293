//! SQLite's bulk chunks (`dialect::Bulk`): a requeue's and a redrive's,
//! each in one write transaction (see `ops::requeue`).
//!
//! Why they differ from PostgreSQL's (`pg/bulk.rs`): here a chunk is a few
//! statements over `json_each`, each paying its setup once per chunk,
//! where PostgreSQL does the whole chunk in one CTE, one round trip.

use std::collections::HashSet;

use rusqlite::{params, params_from_iter};

use super::SqliteTx;
use super::counted::{self, Left};
use crate::model::Millis;
use crate::store::api::Selection;
use crate::store::dialect::Bulk;
use crate::store::{Fault, Result, StoreError};

/// The parameters of a requeue chunk's statements: the ids, the time, the
/// version when there is one, then `rest`.
fn chunk_args<'a>(
    ids: &'a dyn rusqlite::ToSql,
    now: &'a dyn rusqlite::ToSql,
    version: &'a Option<&str>,
    rest: &[&'a dyn rusqlite::ToSql],
) -> Vec<&'a dyn rusqlite::ToSql> {
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![ids, now];
    all.extend(version.as_ref().map(|v| v as &dyn rusqlite::ToSql));
    all.extend_from_slice(rest);
    all
}

impl Bulk for SqliteTx<'_> {
    fn requeue_chunk(
        &mut self,
        batch: i64,
        sel: &Selection,
        ids: &[i64],
        reset_attempts: bool,
        actor: &str,
        now: Millis,
    ) -> Result<HashSet<i64>> {
        let ids = super::hot::ids_json(ids.iter().copied())?;
        // The chunk counts itself (below): no trigger of its own.
        let _off = counted::TriggersOff::new(self.conn)?;
        // Parameters: ?1 the ids, ?2 now, then the version (only when there
        // is one), then what each statement binds after it. What is fixed
        // for the whole requeue is written into the statement instead (a
        // per-row `CASE` or `json_patch` cost about 3 % of the chunk).
        let version = sel.stale.as_deref();
        let next = if version.is_some() { 4 } else { 3 };
        // Still in the state the selection moves (a run may have changed it).
        let from = sel.moves_sql("?3");
        // The not-before time as stored, and as the event says it.
        let not_before = (
            sel.not_before,
            sel.not_before.map(crate::util::time::rfc3339),
        );
        let reset = if reset_attempts { "true" } else { "false" };
        let not_before_field = match not_before.1 {
            Some(_) => format!(", 'not_before', ?{}", next + 2),
            None => String::new(),
        };
        // The events in the order of `ids` (json_each the outer loop), which
        // is item id order: no sort. Both writes are `OR ROLLBACK`, as a
        // claim is (`hot::claim::claim_items!`): no statement journal, and a
        // failure ends the chunk's transaction, which it would anyway; the
        // update flips `self_counted`, so no trigger (whose `OR IGNORE`
        // the clause would override) fires.
        let mut event_args = chunk_args(&ids, &now, &version, &[&batch, &actor]);
        event_args.extend(not_before.1.as_ref().map(|t| t as &dyn rusqlite::ToSql));
        self.conn
            .prepare_cached(&format!(
                "INSERT OR ROLLBACK INTO events (at, batch_id, key, item_id, kind, actor, message, fields)
                 SELECT ?2, ?{b}, i.key, i.id, 'requeued', ?{a},
                        'requeued from ' || coalesce(i.tier, i.outcome) || ' by ' || ?{a},
                        json_object('tier', i.tier, 'outcome', i.outcome, 'error_class', i.error_class,
                                    'op_id', i.op_id, 'reset_attempts', json('{reset}'){not_before_field})
                   FROM json_each(?1) AS j CROSS JOIN items AS i ON i.id = j.value
                  WHERE true{from}",
                b = next,
                a = next + 1,
            ))?
            .execute(params_from_iter(event_args))?;
        // What the move takes out of the counters, read in its transaction:
        // the move counts itself (`self_counted`, see `counted`), once for
        // the chunk, where the triggers counted each row (five statements
        // a row, a fifth of the requeue).
        let mut moved = HashSet::with_capacity(ids.len());
        let mut left = Left::default();
        {
            // Each row's bucket and failed class as the triggers read them.
            let mut st = self.conn.prepare_cached(&format!(
                "SELECT i.id, {}, CASE i.status WHEN 'failed' THEN i.tier END, i.error_class
                   FROM json_each(?1) AS j CROSS JOIN items AS i ON i.id = j.value
                  WHERE true{}",
                super::schema::bucket!("i"),
                sel.moves_sql("?2")
            ))?;
            let mut args: Vec<&dyn rusqlite::ToSql> = vec![&ids];
            args.extend(version.as_ref().map(|v| v as &dyn rusqlite::ToSql));
            let mut rows = st.query(params_from_iter(args))?;
            while let Some(r) = rows.next()? {
                moved.insert(r.get(0)?);
                let text = |i| r.get_ref(i).and_then(|v| Ok(v.as_str_or_null()?));
                left.add(text(1)?.unwrap_or_default(), text(2)?, text(3)?);
            }
        }
        // A done item runs again from scratch; a failed one has no outcome,
        // and keeps its result and operation id.
        let cleared = if sel.outcome.is_some() || version.is_some() {
            "outcome = NULL, result = NULL, op_id = NULL,"
        } else {
            ""
        };
        let reset = if reset_attempts { "attempts = 0," } else { "" };
        let n = self
            .conn
            .prepare_cached(&format!(
                "UPDATE OR ROLLBACK items AS i SET status = 'pending', tier = NULL, next_attempt_at = ?{next},
                        {cleared} {reset} updated_at = ?2, self_counted = 1 - i.self_counted
                  WHERE i.id IN (SELECT value FROM json_each(?1)){from}"
            ))?
            .execute(params_from_iter(chunk_args(
                &ids,
                &now,
                &version,
                &[&not_before.0],
            )))?;
        // The same rows: nothing else writes between, in one transaction.
        if n as i64 != left.total() {
            return Err(StoreError::Fault(Fault::Database(format!(
                "a requeue chunk moved {n} items of the {} it counted",
                left.total()
            ))));
        }
        counted::requeued(self.conn, batch, &left)?;
        Ok(moved)
    }

    fn redrive_chunk(
        &mut self,
        batch: i64,
        run: Option<i64>,
        now: Millis,
        limit: usize,
        message: &str,
    ) -> Result<Vec<String>> {
        let moved: Vec<(i64, String)> = self
            .conn
            .prepare_cached(
                "UPDATE items SET status = 'pending', tier = NULL, next_attempt_at = NULL, updated_at = ?2
                  WHERE id IN (SELECT id FROM items
                                WHERE batch_id = ?1 AND status = 'failed' AND tier = 'retry'
                                  AND next_attempt_at <= ?2 LIMIT ?3)
                 RETURNING id, key",
            )?
            .query_map(params![batch, now, limit as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        let mut logged = self.conn.prepare_cached(
            "INSERT INTO events (at, batch_id, run_id, key, item_id, kind, message)
             VALUES (?1, ?2, ?3, ?4, ?5, 'redriven', ?6)",
        )?;
        for (item, key) in &moved {
            logged.execute(params![now, batch, run, key, item, message])?;
        }
        let keys = moved.into_iter().map(|(_, key)| key).collect();
        Ok(keys)
    }
}
