//! The statement-level interface under the dialect traits, so that a
//! statement whose SQL is the same on both engines is written once: one
//! text with `?N` placeholders (`PgTx` rewrites them to `$N` when it first
//! prepares the statement in a session, and caches the statement under the
//! original text: no rewrite per call), values in and columns out in the
//! store's own types, on the caller's clock. Such statements are the
//! default methods of their dialect trait; one whose SQL differs on purpose
//! (row locks, engine functions, the hot paths) stays in `sqlite/` and
//! `pg/`, overriding or beside them.

use std::borrow::Cow;

use crate::model::Millis;
use crate::store::{Result, StoreError};

/// Text as every store keeps it: a NUL (a worker's stderr, its error
/// message, its result may hold one), which PostgreSQL's text cannot
/// hold, is kept as the `\x00` every view shows it as, and as a label
/// keeps it (`key::storable_label`): the same bytes read back the same
/// from either store. Each binding of text on both engines goes through
/// it.
pub(crate) fn kept(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\\x00"))
    } else {
        Cow::Borrowed(s)
    }
}

/// A value bound to a statement. `PgTx` moves times onto the database's
/// clock; both engines keep text by [`kept`] (see the `dialect` rules).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Int(i64),
    OptInt(Option<i64>),
    Bool(bool),
    OptReal(Option<f64>),
    Text(&'a str),
    OptText(Option<&'a str>),
    /// A time on the caller's clock.
    Time(Millis),
    OptTime(Option<Millis>),
}

/// One row of a result, its columns by index.
pub(crate) trait Row {
    fn int(&self, i: usize) -> Result<i64>;
    fn opt_int(&self, i: usize) -> Result<Option<i64>>;
    fn bool(&self, i: usize) -> Result<bool>;
    fn real(&self, i: usize) -> Result<f64>;
    fn opt_real(&self, i: usize) -> Result<Option<f64>>;
    fn text(&self, i: usize) -> Result<String>;
    fn opt_text(&self, i: usize) -> Result<Option<String>>;
    /// A stored time, on the caller's clock.
    fn time(&self, i: usize) -> Result<Millis>;
    fn opt_time(&self, i: usize) -> Result<Option<Millis>>;
    /// Text as a view reads it: on SQLite whatever bytes are stored, read
    /// lossily, so a hostile row cannot break a poll (PostgreSQL's text is
    /// valid already).
    fn lossy(&self, i: usize) -> Result<Option<String>>;
    /// The error for column `i`, whose stored text this build cannot read
    /// (`why`), as the engine reports unreadable values.
    fn unreadable(&self, i: usize, why: String) -> StoreError;
}

/// What `Sql::rows` passes each row to.
pub(crate) type Each<'a> = &'a mut dyn FnMut(&dyn Row) -> Result<()>;

/// A statement whose text differs by engine on purpose (a row lock, shards
/// summed, a sequence), bound and read once: both texts in the neutral
/// form.
pub(crate) struct Texts {
    pub(crate) sqlite: &'static str,
    pub(crate) pg: &'static str,
}

/// Runs one statement: the thin layer each dialect implements.
pub(crate) trait Sql {
    /// Runs `sql`; how many rows it changed.
    fn exec(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64>;
    /// Runs `sql`, passing its rows to `each` in order.
    fn rows(&mut self, sql: &str, args: &[Arg<'_>], each: Each<'_>) -> Result<()>;
    /// This engine's text of `t`.
    fn text_of(&self, t: &Texts) -> &'static str;
}

/// Every row of `sql`, each read by `f`.
pub(crate) fn all<S: Sql + ?Sized, T>(
    s: &mut S,
    sql: &str,
    args: &[Arg<'_>],
    f: impl Fn(&dyn Row) -> Result<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    s.rows(sql, args, &mut |r| {
        out.push(f(r)?);
        Ok(())
    })?;
    Ok(out)
}

/// The first row of `sql`, if any, read by `f`.
pub(crate) fn opt<S: Sql + ?Sized, T>(
    s: &mut S,
    sql: &str,
    args: &[Arg<'_>],
    f: impl Fn(&dyn Row) -> Result<T>,
) -> Result<Option<T>> {
    let mut out = None;
    s.rows(sql, args, &mut |r| {
        if out.is_none() {
            out = Some(f(r)?);
        }
        Ok(())
    })?;
    Ok(out)
}

/// The row `sql` always returns (an aggregate), read by `f`.
pub(crate) fn one<S: Sql + ?Sized, T>(
    s: &mut S,
    sql: &str,
    args: &[Arg<'_>],
    f: impl Fn(&dyn Row) -> Result<T>,
) -> Result<T> {
    opt(s, sql, args, f)?.ok_or_else(|| {
        StoreError::Fault(crate::store::Fault::Database(format!(
            "a statement that returns a row returned none: {sql}"
        )))
    })
}

/// A stored enum column read back (the schema's CHECKs keep it valid).
pub(crate) fn parsed<T: std::str::FromStr<Err = String>>(r: &dyn Row, i: usize) -> Result<T> {
    r.text(i)?.parse().map_err(|e| r.unreadable(i, e))
}

pub(crate) fn opt_parsed<T: std::str::FromStr<Err = String>>(
    r: &dyn Row,
    i: usize,
) -> Result<Option<T>> {
    r.opt_text(i)?
        .map(|t| t.parse().map_err(|e| r.unreadable(i, e)))
        .transpose()
}

/// `sql` with its `?N` placeholders as PostgreSQL's `$N` (none stands in a
/// string literal of ours; a `?` not before a digit is left as it is).
pub(crate) fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quoted = false;
    while let Some(ch) = chars.next() {
        if ch == '\'' {
            quoted = !quoted;
        }
        if ch == '?' && !quoted && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(ch);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::dollar_placeholders;

    #[test]
    fn placeholders_become_dollars_outside_literals() {
        assert_eq!(
            dollar_placeholders(
                "SELECT a FROM t WHERE b = ?1 AND c IN (?2, ?12) AND d = '?3' AND e ? 'k'"
            ),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $12) AND d = '?3' AND e ? 'k'"
        );
    }
}
