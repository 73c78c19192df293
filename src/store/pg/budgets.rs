//! The budgets' spend ledger (see the SQLite store's `budgets`). A
//! window's start is its name, not a time compared with the server's
//! clock, so it is not moved by the clock offset.

use super::PgTx;
use super::conn::text;
use crate::store::Result;
use crate::store::api::{SpendKey, Spent};
use crate::store::dialect::{BudgetsRead, BudgetsWrite};

const SPENT: &str = "SELECT micros, attempts FROM spend
    WHERE scope = $1 AND name = $2 AND period_ms = $3 AND window_start = $4";
const ADD: &str = "INSERT INTO spend (scope, name, period_ms, window_start, micros, attempts)
    VALUES ($1, $2, $3, $4, $5, 1)
    ON CONFLICT (scope, name, period_ms, window_start)
    DO UPDATE SET micros = spend.micros + excluded.micros, attempts = spend.attempts + 1";

impl BudgetsRead for PgTx<'_> {
    fn spend_of(&mut self, key: &SpendKey) -> Result<Spent> {
        let row = self.c.opt(
            SPENT,
            &[
                &key.scope.as_str(),
                &text(&key.name),
                &key.period_ms,
                &key.window_start,
            ],
        )?;
        Ok(row.map_or_else(Spent::default, |r| Spent {
            micros: r.get(0),
            attempts: r.get(1),
        }))
    }
}

impl BudgetsWrite for PgTx<'_> {
    fn spend_add(&mut self, key: &SpendKey, micros: i64) -> Result<()> {
        self.c.x(
            ADD,
            &[
                &key.scope.as_str(),
                &text(&key.name),
                &key.period_ms,
                &key.window_start,
                &micros,
            ],
        )?;
        Ok(())
    }
}
