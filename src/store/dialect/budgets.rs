//! Statements on the budgets' spend ledger (`spend`).

use crate::store::Result;
use crate::store::api::{SpendKey, Spent};

pub(crate) trait BudgetsRead {
    /// What a budget's window has spent (zero for a window never drawn).
    fn spend_of(&mut self, key: &SpendKey) -> Result<Spent>;
}

pub(crate) trait BudgetsWrite {
    /// Adds one attempt's cost to its window.
    fn spend_add(&mut self, key: &SpendKey, micros: i64) -> Result<()>;
}
