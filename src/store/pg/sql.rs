//! PostgreSQL's side of `dialect::sql`: the one-statement interface the
//! dialect-neutral statements run on. Times move by the session's clock
//! offset, text is kept by the stores' rule (`conn::text`), integer columns of any width
//! read as `i64`.

use std::borrow::Cow;

use postgres::types::{ToSql, Type};

use super::PgTx;
use super::conn::{Params, text};
use crate::store::dialect::sql::{Arg, Each, Row, Sql, Texts};
use crate::store::{Fault, Result, StoreError};

/// An `Arg` as bound: owned where it was moved or cleaned.
enum Bound<'a> {
    Int(i64),
    OptInt(Option<i64>),
    Bool(bool),
    Real(Option<f64>),
    Text(Cow<'a, str>),
    OptText(Option<Cow<'a, str>>),
}

impl Bound<'_> {
    fn sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Bound::Int(v) => v,
            Bound::OptInt(v) => v,
            Bound::Bool(v) => v,
            Bound::Real(v) => v,
            Bound::Text(v) => v,
            Bound::OptText(v) => v,
        }
    }
}

impl PgTx<'_> {
    fn bind<'a>(&self, args: &[Arg<'a>]) -> Vec<Bound<'a>> {
        args.iter()
            .map(|a| match *a {
                Arg::Int(v) => Bound::Int(v),
                Arg::OptInt(v) => Bound::OptInt(v),
                Arg::Bool(v) => Bound::Bool(v),
                Arg::OptReal(v) => Bound::Real(v),
                Arg::Text(v) => Bound::Text(text(v)),
                Arg::OptText(v) => Bound::OptText(v.map(text)),
                Arg::Time(t) => Bound::Int(self.c.tin(t)),
                Arg::OptTime(t) => Bound::OptInt(self.c.tin_opt(t)),
            })
            .collect()
    }
}

struct PgRow<'a> {
    r: &'a postgres::Row,
    /// The session's clock offset (`Conn::tout`).
    off: i64,
}

impl Row for PgRow<'_> {
    fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?
            .ok_or_else(|| self.unreadable(i, "NULL where a number belongs".into()))
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        Ok(match *self.r.columns()[i].type_() {
            Type::INT2 => self.r.try_get::<_, Option<i16>>(i)?.map(i64::from),
            Type::INT4 => self.r.try_get::<_, Option<i32>>(i)?.map(i64::from),
            _ => self.r.try_get(i)?,
        })
    }
    fn bool(&self, i: usize) -> Result<bool> {
        Ok(self.r.try_get(i)?)
    }
    fn real(&self, i: usize) -> Result<f64> {
        Ok(self.r.try_get(i)?)
    }
    fn opt_real(&self, i: usize) -> Result<Option<f64>> {
        Ok(self.r.try_get(i)?)
    }
    fn text(&self, i: usize) -> Result<String> {
        Ok(self.r.try_get(i)?)
    }
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        Ok(self.r.try_get(i)?)
    }
    fn time(&self, i: usize) -> Result<i64> {
        Ok(self.int(i)?.saturating_sub(self.off))
    }
    fn opt_time(&self, i: usize) -> Result<Option<i64>> {
        Ok(self.opt_int(i)?.map(|t| t.saturating_sub(self.off)))
    }
    fn lossy(&self, i: usize) -> Result<Option<String>> {
        self.opt_text(i)
    }
    fn unreadable(&self, _i: usize, why: String) -> StoreError {
        StoreError::Fault(Fault::Unreadable(format!("unreadable stored value: {why}")))
    }
}

impl Sql for PgTx<'_> {
    fn exec(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64> {
        let bound = self.bind(args);
        let refs: Vec<_> = bound.iter().map(Bound::sql).collect();
        self.c.x_neutral(sql, &refs)
    }

    fn text_of(&self, t: &Texts) -> &'static str {
        t.pg
    }

    fn rows(&mut self, sql: &str, args: &[Arg<'_>], each: Each<'_>) -> Result<()> {
        let bound = self.bind(args);
        let refs: Vec<_> = bound.iter().map(Bound::sql).collect();
        let off = self.c.off();
        for r in &self.c.q_neutral(sql, &refs)? {
            each(&PgRow { r, off })?;
        }
        Ok(())
    }
}

impl PgTx<'_> {
    /// Every row of a statement built at run time (a filter's, `$N`
    /// placeholders), each read by `f` as the neutral statements read theirs.
    pub(super) fn all_built<T>(
        &mut self,
        sql: &str,
        params: Params<'_>,
        f: impl Fn(&dyn Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        let off = self.c.off();
        self.c
            .q(sql, params)?
            .iter()
            .map(|r| f(&PgRow { r, off }))
            .collect()
    }
}
