//! The SQLite peer (rusqlite, bundled, same process): the same records in a
//! table of real columns with an index on `status`, or as JSON text with an
//! expression index on `json_extract(doc, '$.status')`. WAL journal,
//! `synchronous = OFF` (Slate's RocksStore runs with sync off too), `ANALYZE`
//! after loading.

use std::hint::black_box;
use std::path::Path;

use rusqlite::{params, Connection};

use crate::records::Rec;
use crate::Res;

/// How the records are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// One column per field; `status` indexed.
    Columns,
    /// `id INTEGER PRIMARY KEY, doc TEXT`; `json_extract(doc, '$.status')` indexed.
    Json,
}

const COLS: &str = "id, name, status, contacts_count, product_recommendation1, \
     product_recommendation2, product_recommendation3, last_contacted_at, notes";

/// One row read back into Rust values (every column), as an application would.
#[derive(Debug)]
#[allow(dead_code)] // read into, never inspected: the read is what is timed
pub struct Row {
    pub id: i64,
    pub name: String,
    pub status: String,
    pub contacts_count: i64,
    pub rec1: String,
    pub rec2: String,
    pub rec3: String,
    pub last_contacted_at: Option<i64>,
    pub notes: Option<String>,
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get(0)?,
        name: r.get(1)?,
        status: r.get(2)?,
        contacts_count: r.get(3)?,
        rec1: r.get(4)?,
        rec2: r.get(5)?,
        rec3: r.get(6)?,
        last_contacted_at: r.get(7)?,
        notes: r.get(8)?,
    })
}

/// Opens (or creates) a database file with the benchmark's settings.
pub fn open(path: &Path) -> Res<Connection> {
    let conn = Connection::open(path)?;
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF;")?;
    conn.busy_timeout(std::time::Duration::from_secs(30))?;
    Ok(conn)
}

impl Variant {
    /// Short name for tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Columns => "sqlite",
            Variant::Json => "sqlite-json",
        }
    }

    /// The SQL expression reading `field`.
    pub fn field(self, field: &str) -> String {
        match self {
            Variant::Columns => field.to_owned(),
            Variant::Json => format!("json_extract(doc, '$.{field}')"),
        }
    }

    /// `SELECT <every field> FROM table`.
    pub fn select_all(self, table: &str) -> String {
        match self {
            Variant::Columns => format!("SELECT {COLS} FROM {table}"),
            Variant::Json => format!("SELECT doc FROM {table}"),
        }
    }

    /// Creates `table`; with `partitioned`, a `user` column leads the primary
    /// key (rows clustered by user, as Slate's partitioned keys are) and the
    /// status index.
    pub fn create(self, conn: &Connection, table: &str, partitioned: bool) -> Res<()> {
        let sql = match (self, partitioned) {
            (Variant::Columns, false) => format!(
                "CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL,
                   contacts_count INTEGER NOT NULL, product_recommendation1 TEXT NOT NULL,
                   product_recommendation2 TEXT NOT NULL, product_recommendation3 TEXT NOT NULL,
                   last_contacted_at INTEGER, notes TEXT);
                 CREATE INDEX {table}_status ON {table} (status);"
            ),
            (Variant::Columns, true) => format!(
                "CREATE TABLE {table} (user TEXT NOT NULL, id INTEGER NOT NULL, name TEXT NOT NULL,
                   status TEXT NOT NULL, contacts_count INTEGER NOT NULL,
                   product_recommendation1 TEXT NOT NULL, product_recommendation2 TEXT NOT NULL,
                   product_recommendation3 TEXT NOT NULL, last_contacted_at INTEGER, notes TEXT,
                   PRIMARY KEY (user, id)) WITHOUT ROWID;
                 CREATE INDEX {table}_status ON {table} (user, status);"
            ),
            (Variant::Json, false) => format!(
                "CREATE TABLE {table} (id INTEGER PRIMARY KEY, doc TEXT NOT NULL);
                 CREATE INDEX {table}_status ON {table} (json_extract(doc, '$.status'));"
            ),
            (Variant::Json, true) => return Err("the JSON variant is not partitioned".into()),
        };
        conn.execute_batch(&sql)?;
        Ok(())
    }

    /// Inserts `recs` in one transaction.
    pub fn insert(self, conn: &mut Connection, table: &str, recs: &[Rec], partitioned: bool) -> Res<()> {
        let tx = conn.transaction()?;
        {
            match (self, partitioned) {
                (Variant::Columns, false) => {
                    let mut stmt = tx.prepare_cached(&format!(
                        "INSERT INTO {table} ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                    ))?;
                    for r in recs {
                        stmt.execute(params![
                            r.id,
                            r.name,
                            r.status,
                            r.contacts_count,
                            r.rec1,
                            r.rec2,
                            r.rec3,
                            r.last_contacted_at,
                            r.notes
                        ])?;
                    }
                }
                (Variant::Columns, true) => {
                    let mut stmt = tx.prepare_cached(&format!(
                        "INSERT INTO {table} (user, {COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
                    ))?;
                    for r in recs {
                        stmt.execute(params![
                            r.user,
                            r.id,
                            r.name,
                            r.status,
                            r.contacts_count,
                            r.rec1,
                            r.rec2,
                            r.rec3,
                            r.last_contacted_at,
                            r.notes
                        ])?;
                    }
                }
                (Variant::Json, _) => {
                    let mut stmt =
                        tx.prepare_cached(&format!("INSERT INTO {table} (id, doc) VALUES (?1, ?2)"))?;
                    for r in recs {
                        stmt.execute(params![r.id, r.to_json()])?;
                    }
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Runs `sql` (which selects what [`Variant::select_all`] selects) and
    /// reads every row into Rust values: a struct per row, or a parsed
    /// `serde_json::Value` per JSON document.
    pub fn rows(self, conn: &Connection, sql: &str) -> Res<usize> {
        let mut stmt = conn.prepare_cached(sql)?;
        match self {
            Variant::Columns => {
                let rows: Vec<Row> = stmt.query_map([], read_row)?.collect::<rusqlite::Result<_>>()?;
                black_box(&rows);
                Ok(rows.len())
            }
            Variant::Json => {
                let mut rows = stmt.query([])?;
                let mut docs = Vec::new();
                while let Some(r) = rows.next()? {
                    let text = r.get_ref(0)?.as_str()?;
                    docs.push(serde_json::from_str::<serde_json::Value>(text)?);
                }
                black_box(&docs);
                Ok(docs.len())
            }
        }
    }

    /// Like [`Variant::rows`] but only walks the rows (nothing collected).
    pub fn stream(self, conn: &Connection, sql: &str) -> Res<usize> {
        let mut stmt = conn.prepare_cached(sql)?;
        let mut rows = stmt.query([])?;
        let mut n = 0;
        while let Some(r) = rows.next()? {
            match self {
                Variant::Columns => {
                    black_box(read_row(r)?);
                }
                Variant::Json => {
                    let text = r.get_ref(0)?.as_str()?;
                    black_box(serde_json::from_str::<serde_json::Value>(text)?);
                }
            }
            n += 1;
        }
        Ok(n)
    }

    /// `id`, `name` and `status` of every row (`where_sql` may narrow it).
    pub fn projection(self, conn: &Connection, table: &str) -> Res<usize> {
        let sql = format!(
            "SELECT id, {}, {} FROM {table}",
            self.field("name"),
            self.field("status")
        );
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows: Vec<(i64, String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        black_box(&rows);
        Ok(rows.len())
    }

    /// One query per id; `user` narrows to one partition's rows.
    pub fn lookups(self, conn: &Connection, table: &str, ids: &[i64], user: Option<&str>) -> Res<usize> {
        let mut sql = format!("{} WHERE id = ?1", self.select_all(table));
        if let Some(user) = user {
            sql.push_str(&format!(" AND user = '{user}'"));
        }
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut found = 0;
        for id in ids {
            match self {
                Variant::Columns => {
                    black_box(stmt.query_row([id], read_row)?);
                }
                Variant::Json => {
                    let text: String = stmt.query_row([id], |r| r.get(0))?;
                    black_box(serde_json::from_str::<serde_json::Value>(&text)?);
                }
            }
            found += 1;
        }
        Ok(found)
    }

    /// All ids in one query (`WHERE id IN (...)`).
    pub fn lookups_batch(self, conn: &Connection, table: &str, ids: &[i64]) -> Res<usize> {
        let list: Vec<String> = ids.iter().map(i64::to_string).collect();
        let sql = format!("{} WHERE id IN ({})", self.select_all(table), list.join(","));
        self.rows(conn, &sql)
    }
}

/// `ANALYZE`, so the planner knows the index's selectivity.
pub fn analyze(conn: &Connection) -> Res<()> {
    conn.execute_batch("ANALYZE;")?;
    Ok(())
}
