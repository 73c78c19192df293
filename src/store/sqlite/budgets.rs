//! The budgets' spend ledger (the rules are in `ops::budgets`).

use rusqlite::{OptionalExtension, params};

use super::SqliteTx;
use crate::store::Result;
use crate::store::api::{SpendKey, Spent};
use crate::store::dialect::{BudgetsRead, BudgetsWrite};

const SPENT: &str = "SELECT micros, attempts FROM spend
    WHERE scope = ?1 AND name = ?2 AND period_ms = ?3 AND window_start = ?4";
const ADD: &str = "INSERT INTO spend (scope, name, period_ms, window_start, micros, attempts)
    VALUES (?1, ?2, ?3, ?4, ?5, 1)
    ON CONFLICT (scope, name, period_ms, window_start)
    DO UPDATE SET micros = micros + excluded.micros, attempts = attempts + 1";

impl BudgetsRead for SqliteTx<'_> {
    fn spend_of(&mut self, key: &SpendKey) -> Result<Spent> {
        let row = self
            .conn
            .prepare_cached(SPENT)?
            .query_row(
                params![
                    key.scope.as_str(),
                    key.name,
                    key.period_ms,
                    key.window_start
                ],
                |r| {
                    Ok(Spent {
                        micros: r.get(0)?,
                        attempts: r.get(1)?,
                    })
                },
            )
            .optional()?;
        Ok(row.unwrap_or_default())
    }
}

impl BudgetsWrite for SqliteTx<'_> {
    fn spend_add(&mut self, key: &SpendKey, micros: i64) -> Result<()> {
        self.conn.prepare_cached(ADD)?.execute(params![
            key.scope.as_str(),
            key.name,
            key.period_ms,
            key.window_start,
            micros
        ])?;
        Ok(())
    }
}
