//! Reading a store whose layout is a few versions behind this build,
//! without migrating it: a read-only open (the morning `status`, the
//! dashboard over SSH) must not write, and refusing every store the
//! previous release left made the first look after an upgrade fail.
//!
//! Where every migration since the store's version only adds columns (or
//! drops triggers, which reads do not see), the
//! reader shadows each table that gained some with a temporary view of the
//! same name: the table's own columns, then each added one with the value
//! its migration gives existing rows (its default, else NULL). The
//! statements then read what they would read after the upgrade. A store
//! older than that (a migration that adds a table, moves data or changes
//! more) is still refused, with the way to upgrade it, unless the
//! migration says how a reader sees what it made from the rows it had (a
//! `-- readers: ` line: a view over the old tables, see [`READERS`]).

/// A column a migration adds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Added {
    pub table: String,
    pub column: String,
    /// Its SQL type as the migration declares it.
    pub sql_type: String,
    /// The value existing rows get: its `DEFAULT`, else NULL.
    pub default: Option<String>,
}

/// What a migration that makes more than columns (a table from the rows
/// of others) gives readers of a store it has not run on: a line of the
/// migration, `-- readers: CREATE TEMP VIEW t AS SELECT … FROM schema.u`,
/// that shows them what it would have made.
const READERS: &str = "-- readers: ";

/// The view `migration` gives readers (`READERS`), if any.
fn readers_view(migration: &str) -> Option<&str> {
    migration
        .lines()
        .find_map(|l| l.trim().strip_prefix(READERS))
        .map(str::trim)
}

/// What a store at a version lacks to be read as the current one.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Missing {
    /// By table in the order added, the columns it lacks.
    pub tables: Vec<(String, Vec<Added>)>,
    /// The views migrations give readers for what they made (`READERS`).
    pub made: Vec<String>,
}

impl Missing {
    pub(crate) fn is_empty(&self) -> bool {
        self.tables.is_empty() && self.made.is_empty()
    }
}

/// The columns `migration` adds, if adding columns (and dropping
/// triggers, changing indexes) is all it does; none if it gives readers
/// a view of what it does (`READERS`).
fn added_by(migration: &str) -> Option<Vec<Added>> {
    if readers_view(migration).is_some() {
        return Some(Vec::new());
    }
    let text: String = migration
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    for statement in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        let words: Vec<&str> = statement.split_whitespace().collect();
        let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
        let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
        let rest = match upper.as_slice() {
            [
                "ALTER",
                "TABLE",
                _,
                "ADD",
                "COLUMN",
                "IF",
                "NOT",
                "EXISTS",
                ..,
            ] => 8,
            ["ALTER", "TABLE", _, "ADD", "COLUMN", ..] => 5,
            // A trigger that kept other rows up to date, gone: reads do not
            // see it, and a reader writes nothing it would have fired on.
            ["DROP", "TRIGGER", ..] | ["DROP", "FUNCTION", ..] => continue,
            // An index changes how a read finds its rows, never which.
            ["DROP", "INDEX", ..] | ["CREATE", "INDEX", ..] => continue,
            _ => return None,
        };
        let table = words[2].rsplit('.').next().unwrap_or(words[2]);
        let (column, decl) = words[rest..].split_first()?;
        // The type's words, up to the first constraint.
        let ends = |w: &&str| {
            matches!(
                w.to_ascii_uppercase().as_str(),
                "NOT"
                    | "NULL"
                    | "DEFAULT"
                    | "REFERENCES"
                    | "CHECK"
                    | "PRIMARY"
                    | "UNIQUE"
                    | "COLLATE"
                    | "GENERATED"
                    | "CONSTRAINT"
            )
        };
        let sql_type = decl
            .iter()
            .take_while(|w| !ends(w))
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        if sql_type.is_empty() {
            return None;
        }
        let default = upper[rest + 1..]
            .iter()
            .position(|w| *w == "DEFAULT")
            .and_then(|i| decl.get(i + 1))
            .map(|d| d.to_string());
        let plain = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !plain(table) || !plain(column) {
            return None;
        }
        out.push(Added {
            table: table.to_string(),
            column: column.to_string(),
            sql_type,
            default,
        });
    }
    Some(out)
}

/// The oldest version a reader can read through views, of a store whose
/// migrations (`migrations[i]` takes it from version `i` to `i + 1`) are
/// these: the versions after it only add columns.
pub(crate) fn readable_from(migrations: &[&str]) -> i32 {
    let additive = migrations
        .iter()
        .rev()
        .take_while(|m| added_by(m).is_some())
        .count();
    (migrations.len() - additive) as i32
}

/// What a store at `version` lacks; `None` when it is too old to read
/// that way (see [`readable_from`]).
pub(crate) fn missing(migrations: &[&str], version: i32) -> Option<Missing> {
    // Current (every open but the first after an upgrade): nothing to
    // parse.
    if version >= migrations.len() as i32 {
        return Some(Missing::default());
    }
    if version < readable_from(migrations) {
        return None;
    }
    let mut out = Missing::default();
    let since = &migrations[version.max(0) as usize..];
    for added in since.iter().filter_map(|m| added_by(m)).flatten() {
        match out.tables.iter_mut().find(|(t, _)| *t == added.table) {
            Some((_, cols)) => cols.push(added),
            None => out.tables.push((added.table.clone(), vec![added])),
        }
    }
    out.made = since
        .iter()
        .filter_map(|m| readers_view(m))
        .map(str::to_string)
        .collect();
    Some(out)
}

/// The statements that shadow each table with a view of its current
/// columns: `CREATE TEMP VIEW t AS SELECT *, … FROM {schema}.t`. `typed`:
/// each added value cast to its declared type (PostgreSQL needs a NULL's).
pub(crate) fn views(missing: &Missing, schema: &str, typed: bool) -> String {
    let made = missing.made.iter().map(|v| format!("{v};\n"));
    missing
        .tables
        .iter()
        .map(|(table, cols)| {
            let cols: Vec<String> = cols
                .iter()
                .map(|c| {
                    let value = c.default.as_deref().unwrap_or("NULL");
                    match typed {
                        true => format!("CAST({value} AS {}) AS {}", c.sql_type, c.column),
                        false => format!("{value} AS {}", c.column),
                    }
                })
                .collect();
            format!(
                "CREATE TEMP VIEW {table} AS SELECT *, {} FROM {schema}.{table};\n",
                cols.join(", ")
            )
        })
        .chain(made)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_migrations_that_add_columns_are_read_through_views() {
        let added = added_by(
            "-- a comment; with a semicolon\n\
             ALTER TABLE nightshift.run_usage ADD COLUMN IF NOT EXISTS est BIGINT NOT NULL DEFAULT 0;\n\
             ALTER TABLE items ADD COLUMN retry_at INTEGER;",
        )
        .expect("additive");
        assert_eq!(
            added,
            [
                Added {
                    table: "run_usage".into(),
                    column: "est".into(),
                    sql_type: "BIGINT".into(),
                    default: Some("0".into()),
                },
                Added {
                    table: "items".into(),
                    column: "retry_at".into(),
                    sql_type: "INTEGER".into(),
                    default: None,
                },
            ]
        );
        for more in [
            "CREATE TABLE t (a INTEGER);",
            "ALTER TABLE items ADD COLUMN a INTEGER; UPDATE items SET a = 1;",
            "ALTER TABLE items DROP COLUMN a;",
            "ALTER TABLE items RENAME COLUMN a TO b;",
            "CREATE TRIGGER t AFTER INSERT ON items BEGIN SELECT 1; END;",
        ] {
            assert_eq!(added_by(more), None, "{more}");
        }
        assert_eq!(
            added_by("DROP TRIGGER t ON nightshift.items;\nDROP FUNCTION nightshift.t();"),
            Some(vec![]),
            "a trigger gone changes nothing a read sees"
        );
        assert_eq!(
            added_by("DROP INDEX q;\nCREATE INDEX q ON items (a, b)\n    WHERE a = 1 OR b = 'x';"),
            Some(vec![]),
            "an index changed changes how a read finds rows, not which"
        );
        let migrations = [
            "CREATE TABLE items (id INTEGER);",
            "ALTER TABLE items ADD COLUMN a INTEGER;",
            "CREATE TABLE more (a INTEGER);",
            "ALTER TABLE items ADD COLUMN b TEXT;",
            "ALTER TABLE runs ADD COLUMN c INTEGER NOT NULL DEFAULT 0; ALTER TABLE items ADD COLUMN d DOUBLE PRECISION;",
        ];
        assert_eq!(readable_from(&migrations), 3);
        assert_eq!(missing(&migrations, 2), None, "a table since: refused");
        assert_eq!(
            views(&missing(&migrations, 3).unwrap(), "main", false),
            "CREATE TEMP VIEW items AS SELECT *, NULL AS b, NULL AS d FROM main.items;\n\
             CREATE TEMP VIEW runs AS SELECT *, 0 AS c FROM main.runs;\n"
        );
        assert_eq!(
            views(&missing(&migrations, 4).unwrap(), "nightshift", true),
            "CREATE TEMP VIEW runs AS SELECT *, CAST(0 AS INTEGER) AS c FROM nightshift.runs;\n\
             CREATE TEMP VIEW items AS SELECT *, CAST(NULL AS DOUBLE PRECISION) AS d FROM nightshift.items;\n"
        );
        assert_eq!(
            missing(&migrations, 5),
            Some(Missing::default()),
            "current: nothing"
        );
        // A table made from the rows of another, with its view for readers.
        let keyed = [
            "CREATE TABLE items (id INTEGER, key TEXT);",
            "CREATE TABLE keys (key TEXT, item_id INTEGER);\n\
             -- readers: CREATE TEMP VIEW keys AS SELECT key, id AS item_id FROM main.items\n\
             INSERT INTO keys SELECT key, id FROM items;",
            "ALTER TABLE items ADD COLUMN a INTEGER;",
        ];
        assert_eq!(readable_from(&keyed), 1);
        assert_eq!(
            views(&missing(&keyed, 1).unwrap(), "main", false),
            "CREATE TEMP VIEW items AS SELECT *, NULL AS a FROM main.items;\n\
             CREATE TEMP VIEW keys AS SELECT key, id AS item_id FROM main.items;\n"
        );
    }
}
