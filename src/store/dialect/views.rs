//! Statements the views read: the dashboard, `show`, "since you last
//! looked". Texts are read lossily on SQLite and long messages cut, so a
//! hostile or huge row cannot stall or break a poll.

use super::events::rare_kinds_only;
use super::sql::{self, Arg, Sql};
use crate::model::{Event, Millis, Run, Tier};
use crate::store::Result;
use crate::store::api::{EventsQuery, ItemFilter, ItemPage, ItemRow, ItemsQuery};

/// Which rows of a filter a page reads, in id order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowsPage {
    pub limit: usize,
    pub offset: usize,
    /// From the newest id backwards.
    pub backwards: bool,
    /// Matches are dense: SQLite then walks the table in rowid order
    /// (`NOT INDEXED`), which finds a page in a few rows where an index
    /// would sort every match first. PostgreSQL plans this itself.
    pub dense: bool,
}

const BATCH_CREATED_AT: &str = "SELECT created_at FROM batches WHERE id = ?1";
const RUN_STATES_SINCE: &str =
    "SELECT b.name, r.state, count(*) FROM runs r JOIN batches b ON b.id = r.batch_id
  WHERE r.started_at > ?1 OR r.ended_at > ?1 OR r.ended_at IS NULL
  GROUP BY 1, 2 ORDER BY 1, 2";

const DEAD_LETTER_COUNTS_SINCE: &str = "SELECT error_class, tier, count(*) FROM dead_letters
  WHERE batch_id = ?1 AND failed_at > ?2 GROUP BY 1, 2 ORDER BY 3 DESC, 1";

pub(crate) trait ViewsRead: Sql {
    /// When the batch was made.
    fn batch_created_at(&mut self, batch: i64) -> Result<Millis> {
        sql::one(self, BATCH_CREATED_AT, &[Arg::Int(batch)], |r| r.time(0))
    }

    /// The newest run that did work, and the newest run when it stepped
    /// down after it (see `BatchInfo::last_run`).
    fn runs_last(&mut self, batch: i64) -> Result<(Option<Run>, Option<Run>)> {
        super::runs::last(self, batch)
    }

    /// Claimed items of the batch leased to any run but those `except`,
    /// counted by their attempts: `(attempts, how many)`.
    fn claimed_attempts(&mut self, batch: i64, except: &[i64]) -> Result<Vec<(i64, i64)>>;
    /// Failed items of one error class, from the counters.
    fn class_count(&mut self, batch: i64, class: &str) -> Result<i64>;
    /// Items of the page's filter (`keys_only`: its search in keys and
    /// labels only, as the items pane searches), counted up to `cap + 1`.
    fn items_count_capped(
        &mut self,
        batch: i64,
        q: &ItemsQuery,
        keys_only: bool,
        cap: i64,
    ) -> Result<i64>;
    /// List rows of the page's filter (`keys_only` as above).
    fn item_rows(
        &mut self,
        batch: i64,
        q: &ItemsQuery,
        keys_only: bool,
        page: RowsPage,
    ) -> Result<Vec<ItemRow>>;
    /// SQLite's search of keys and labels, spread over polls: a page of
    /// what it has found so far (`None` without a search). PostgreSQL
    /// searches in one query: always `None`.
    fn search_page(&mut self, batch: i64, q: &ItemsQuery) -> Result<Option<ItemPage>>;
    /// The items whose label is exactly `label`, oldest first.
    fn items_labelled(&mut self, batch: i64, label: &str, limit: usize) -> Result<Vec<ItemRow>>;
    /// Keys of the items of a filter, oldest first.
    fn items_keys(&mut self, batch: i64, filter: &ItemFilter) -> Result<Vec<String>>;
    /// Which of these keys are failed now, oldest first.
    fn failed_among(&mut self, batch: i64, keys: &[String]) -> Result<Vec<String>>;
    /// The newest events (of the batch, of these kinds, up to an id),
    /// oldest first, their messages cut.
    fn events_rows(&mut self, batch: Option<i64>, q: &EventsQuery) -> Result<Vec<Event>>;
    /// The newest `limit` events of an item, oldest first.
    fn events_of_item(&mut self, item: i64, limit: usize) -> Result<Vec<Event>>;
    /// Dead letters since `since` by class and tier, the most first.
    fn dead_letter_counts_since(
        &mut self,
        batch: i64,
        since: Millis,
    ) -> Result<Vec<(String, Tier, i64)>> {
        let args = [Arg::Int(batch), Arg::Time(since)];
        sql::all(self, DEAD_LETTER_COUNTS_SINCE, &args, |r| {
            let tier = r.lossy(1)?.unwrap_or_default();
            let tier = tier.parse().map_err(|e| r.unreadable(1, e))?;
            Ok((r.lossy(0)?.unwrap_or_default(), tier, r.int(2)?))
        })
    }

    /// Runs by batch and state that overlap the time since `since`: begun
    /// or ended after it, or still running.
    fn run_states_since(&mut self, since: Millis) -> Result<Vec<(String, String, i64)>> {
        sql::all(self, RUN_STATES_SINCE, &[Arg::Time(since)], |r| {
            Ok((r.text(0)?, r.text(1)?, r.int(2)?))
        })
    }

    /// Events of `kind` since `since` by batch name ('' for none).
    fn event_counts_since(&mut self, kind: &str, since: Millis) -> Result<Vec<(String, i64)>> {
        let args = [Arg::Text(kind), Arg::Time(since)];
        // The kind index's condition after the kind (see `DENSE_KINDS`).
        let sql = format!(
            "SELECT coalesce(b.name, ''), count(*)
               FROM events e LEFT JOIN batches b ON b.id = e.batch_id
              WHERE e.kind = ?1{} AND e.at > ?2 GROUP BY 1 ORDER BY 1",
            rare_kinds_only(&[kind])
        );
        sql::all(self, &sql, &args, |r| Ok((r.text(0)?, r.int(1)?)))
    }

    /// The fields text of every event of `kind` since `since`, with its
    /// batch name ('' for none).
    fn event_fields_since(
        &mut self,
        kind: &str,
        since: Millis,
    ) -> Result<Vec<(String, Option<String>)>> {
        let args = [Arg::Text(kind), Arg::Time(since)];
        let sql = format!(
            "SELECT coalesce(b.name, ''), e.fields
               FROM events e LEFT JOIN batches b ON b.id = e.batch_id
              WHERE e.kind = ?1{} AND e.at > ?2",
            rare_kinds_only(&[kind])
        );
        sql::all(self, &sql, &args, |r| Ok((r.text(0)?, r.lossy(1)?)))
    }
}

/// The items pane's search of keys and labels, matching them as the
/// dashboard draws them (`text::drawable`: a halfwidth `ｶﾞ` is drawn
/// `ガ`), so text typed from the screen finds its item, on both engines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DrawnSearch {
    /// The text to bind: the search as drawn.
    pub text: String,
    /// It holds a kana that stored text may hold in halfwidth.
    drawn: bool,
}

impl DrawnSearch {
    pub(crate) fn new(search: &str) -> DrawnSearch {
        let text = crate::util::text::drawable(search).into_owned();
        let kana = crate::util::text::drawn_kana();
        let drawn = text.chars().any(|c| kana.iter().any(|(_, k)| *k == c));
        DrawnSearch { text, drawn }
    }

    /// `(find(key, p) > 0 OR find(label, p) > 0)`, each column taken as
    /// drawn where the search needs it (`find`: `instr` or `strpos`;
    /// `param`: the bound text's placeholder). Text that draws as stored
    /// is searched as stored (no `replace` per row).
    pub(crate) fn cond(&self, find: &str, cols: [&str; 2], param: &str) -> String {
        let col = |c: &str| {
            if !self.drawn {
                return c.to_string();
            }
            // The list holds kana and sound marks only: no quote to escape.
            crate::util::text::drawn_kana()
                .iter()
                .fold(c.to_string(), |e, (from, to)| {
                    format!("replace({e}, '{from}', '{to}')")
                })
        };
        format!(
            "({find}({}, {param}) > 0 OR {find}({}, {param}) > 0)",
            col(cols[0]),
            col(cols[1])
        )
    }
}
