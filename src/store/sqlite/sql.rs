//! SQLite's side of `dialect::sql`: the one-statement interface the
//! dialect-neutral statements run on.

use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};

use super::SqliteTx;
use crate::store::dialect::sql::{Arg, Each, Row, Sql, Texts, kept};
use crate::store::{Result, StoreError};

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Arg::Int(v) | Arg::Time(v) => ToSqlOutput::Owned(Value::Integer(v)),
            Arg::OptInt(v) | Arg::OptTime(v) => {
                ToSqlOutput::Owned(v.map_or(Value::Null, Value::Integer))
            }
            Arg::Bool(v) => ToSqlOutput::Owned(Value::Integer(i64::from(v))),
            Arg::OptReal(v) => ToSqlOutput::Owned(v.map_or(Value::Null, Value::Real)),
            Arg::Text(v) => text(v),
            Arg::OptText(v) => v.map_or(ToSqlOutput::Owned(Value::Null), text),
        })
    }
}

/// `v` bound as the stores keep text (`kept`).
pub(crate) fn text(v: &str) -> ToSqlOutput<'_> {
    match kept(v) {
        std::borrow::Cow::Borrowed(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
        std::borrow::Cow::Owned(v) => ToSqlOutput::Owned(Value::Text(v)),
    }
}

/// Column `idx` as text whatever is stored there, invalid UTF-8 replaced.
pub(super) fn lossy(r: &rusqlite::Row<'_>, idx: usize) -> rusqlite::Result<Option<String>> {
    Ok(match r.get_ref(idx)? {
        ValueRef::Null => None,
        ValueRef::Text(b) | ValueRef::Blob(b) => Some(String::from_utf8_lossy(b).into_owned()),
        ValueRef::Integer(i) => Some(i.to_string()),
        ValueRef::Real(f) => Some(f.to_string()),
    })
}

struct SqliteRow<'a, 'r>(&'a rusqlite::Row<'r>);

impl Row for SqliteRow<'_, '_> {
    fn int(&self, i: usize) -> Result<i64> {
        Ok(self.0.get(i)?)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        Ok(self.0.get(i)?)
    }
    fn bool(&self, i: usize) -> Result<bool> {
        Ok(self.0.get(i)?)
    }
    fn real(&self, i: usize) -> Result<f64> {
        Ok(self.0.get(i)?)
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>> {
        Ok(self.0.get(i)?)
    }
    fn text(&self, i: usize) -> Result<String> {
        Ok(self.0.get(i)?)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        Ok(self.0.get(i)?)
    }
    fn time(&self, i: usize) -> Result<i64> {
        Ok(self.0.get(i)?)
    }
    fn opt_time(&self, i: usize) -> Result<Option<i64>> {
        Ok(self.0.get(i)?)
    }
    fn lossy(&self, i: usize) -> Result<Option<String>> {
        Ok(lossy(self.0, i)?)
    }
    fn unreadable(&self, i: usize, why: String) -> StoreError {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, why.into()).into()
    }
}

impl Sql for SqliteTx<'_> {
    fn exec(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64> {
        let n = self
            .conn
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(args))?;
        Ok(n as u64)
    }

    fn text_of(&self, t: &Texts) -> &'static str {
        t.sqlite
    }

    fn rows(&mut self, sql: &str, args: &[Arg<'_>], each: Each<'_>) -> Result<()> {
        let mut st = self.conn.prepare_cached(sql)?;
        let mut rows = st.query(rusqlite::params_from_iter(args))?;
        while let Some(r) = rows.next()? {
            each(&SqliteRow(r))?;
        }
        Ok(())
    }
}

impl SqliteTx<'_> {
    /// Every row of a statement built at run time (a filter's), each read
    /// by `f` as the neutral statements read theirs.
    pub(super) fn all_built<T>(
        &self,
        sql: &str,
        args: impl rusqlite::Params,
        f: impl Fn(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let mut st = self.conn.prepare(sql)?;
        let mut rows = st.query(args)?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(f(&SqliteRow(r))?);
        }
        Ok(out)
    }
}
