//! Budgets' spend ledger (see `runner::budget` for the design): one row
//! per budget (a batch's or a pool's) and window, summed in millionths of
//! the workers' cost unit, so every runner on every host adds to one sum
//! and a later run reads it back.

use crate::store::api::{SpendAdd, SpendKey, Spent};
use crate::store::{Result, Store};

impl Store {
    /// Adds attempts' costs to their windows. The runner queues it without
    /// waiting: its writer commits it in its next group, beside whatever
    /// else arrived, so a call waits for no transaction of its own.
    pub fn add_spend(&mut self, adds: &[SpendAdd]) -> Result<()> {
        if adds.is_empty() {
            return Ok(());
        }
        self.write_tx(|tx| {
            for a in adds {
                tx.spend_add(&a.key, a.micros)?;
            }
            Ok(())
        })
    }

    /// What each budget's window has spent, in the order asked.
    pub fn spent(&self, keys: &[SpendKey]) -> Result<Vec<Spent>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        self.read_tx(|tx| keys.iter().map(|k| tx.spend_of(k)).collect())
    }
}
