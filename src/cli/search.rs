//! `slate search`: vector queries from a file, one JSON line per query.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use serde_json::{json, Value};
use slate::{Collection, CollectionConfig, RemoteCollection, SearchHit, Strategy};

use super::load::{read_vectors, Vectors};
use super::CliError;

/// Options of one `slate search` run.
pub struct SearchRun {
    pub field: String,
    pub queries: PathBuf,
    pub k: usize,
    pub filter: bson::Document,
    pub projection: Option<Vec<String>>,
    pub threads: usize,
    pub batch: bool,
    pub strategy: Strategy,
    pub explain: bool,
}

fn hit_json(hit: &SearchHit) -> Value {
    let mut obj = serde_json::Map::new();
    obj.insert("_id".into(), hit.id.clone().into_relaxed_extjson());
    // Always finite: stored and query components are bounded so that no
    // distance overflows (`slate::vector::component_limit`).
    obj.insert("distance".into(), json!(hit.distance));
    for (k, v) in &hit.doc {
        // `_id` and `distance` are the hit's own (a projected field of
        // either name does not replace them).
        if k != "_id" && k != "distance" {
            obj.insert(k.clone(), v.clone().into_relaxed_extjson());
        }
    }
    Value::Object(obj)
}

/// What `slate search` needs of a collection: the embedded one or a server's.
pub trait Searchable {
    fn config(&self) -> slate::Result<CollectionConfig>;
    fn batch(&self, run: &SearchRun, rows: &[f32]) -> slate::Result<Vec<Vec<SearchHit>>>;
    /// One query's hits and, with `run.explain`, its explain text.
    fn one(&self, run: &SearchRun, query: &[f32]) -> slate::Result<(Vec<SearchHit>, String)>;
}

impl Searchable for Collection {
    fn config(&self) -> slate::Result<CollectionConfig> {
        Collection::config(self)
    }

    fn batch(&self, run: &SearchRun, rows: &[f32]) -> slate::Result<Vec<Vec<SearchHit>>> {
        self.search_batch(&run.field, rows, run.k, run.threads, run.projection.as_deref())
    }

    fn one(&self, run: &SearchRun, query: &[f32]) -> slate::Result<(Vec<SearchHit>, String)> {
        let mut search = self
            .search(&run.field, query)
            .k(run.k)
            .threads(run.threads)
            .strategy(run.strategy)
            .filter(&run.filter);
        if let Some(p) = &run.projection {
            search = search.project(p.clone());
        }
        let (hits, explain) = search.explain()?;
        Ok((hits, explain.to_string()))
    }
}

impl Searchable for RemoteCollection {
    fn config(&self) -> slate::Result<CollectionConfig> {
        RemoteCollection::config(self)
    }

    fn batch(&self, run: &SearchRun, rows: &[f32]) -> slate::Result<Vec<Vec<SearchHit>>> {
        self.search_batch(&run.field, rows, run.k, run.threads, run.projection.as_deref())
    }

    fn one(&self, run: &SearchRun, query: &[f32]) -> slate::Result<(Vec<SearchHit>, String)> {
        let mut search = self
            .search(&run.field, query)
            .k(run.k)
            .threads(run.threads)
            .strategy(run.strategy)
            .filter(&run.filter);
        if let Some(p) = &run.projection {
            search = search.project(p.clone());
        }
        if run.explain {
            search.explain()
        } else {
            Ok((search.run()?, String::new()))
        }
    }
}

/// The run's query vectors, read and checked against the collection
/// `config` describes: its field must exist, and every query must have its
/// dimension and finite, bounded components.
pub fn queries_for(config: &CollectionConfig, run: &SearchRun) -> Result<Vectors, CliError> {
    let field = config.vector_field(&run.field).ok_or_else(|| {
        CliError::Usage(format!(
            "collection {:?} has no vector field {:?}",
            config.name, run.field
        ))
    })?;
    let queries = read_vectors(
        &run.queries,
        Some((
            field.dim,
            &format!("field {:?} holds {}-dimensional vectors", run.field, field.dim),
        )),
    )?;
    let n = queries.len();
    // Every query is checked before the first answer is printed: a bad
    // row refuses the run, named by its row, with nothing on stdout.
    for i in 0..n {
        slate::vector::check_vector_for(queries.row(i), field.dim, field.metric)
            .map_err(|e| CliError::Input(format!("{} query {i}: {e}", run.queries.display())))?;
    }
    Ok(queries)
}

/// Runs the search and prints its answers; `queries` are the run's query
/// vectors when already read and checked against `coll`'s configuration.
pub fn run(coll: &impl Searchable, run: &SearchRun, queries: Option<Vectors>) -> Result<(), CliError> {
    let queries = match queries {
        Some(queries) => queries,
        None => queries_for(&coll.config()?, run)?,
    };
    let n = queries.len();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let write_err = super::stdout_err;
    let start = Instant::now();
    if run.batch {
        let all = coll.batch(run, &queries.rows)?;
        let micros = start.elapsed().as_secs_f64() * 1e6 / n.max(1) as f64;
        for (i, hits) in all.iter().enumerate() {
            let line = json!({ "query": i, "hits": hits.iter().map(hit_json).collect::<Vec<_>>(), "micros": micros });
            writeln!(out, "{line}").map_err(write_err)?;
        }
    } else {
        for i in 0..n {
            let t = Instant::now();
            let (hits, explain) = coll.one(run, queries.row(i))?;
            let micros = t.elapsed().as_secs_f64() * 1e6;
            let mut line = json!({ "query": i, "hits": hits.iter().map(hit_json).collect::<Vec<_>>(), "micros": micros });
            if run.explain {
                line["explain"] = json!(explain);
            }
            writeln!(out, "{line}").map_err(write_err)?;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let summary = json!({ "summary": {
        "queries": n,
        "qps": n as f64 / secs.max(1e-9),
        // What the searches ran on (a request beyond the cores gets the cores).
        "threads": slate::vector::effective_threads(run.threads),
    }});
    writeln!(out, "{summary}").map_err(write_err)?;
    out.flush().map_err(write_err)
}
