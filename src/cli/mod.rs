//! Command-line interface. The flags of each subcommand are a contract other
//! tools use; change them only by adding.

mod load;
mod search;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use slate::{Db, Metric};

/// What can go wrong on the command line; each maps to an exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Input(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(transparent)]
    Slate(#[from] slate::Error),
}

impl CliError {
    pub fn io(path: &Path, source: std::io::Error) -> Self {
        CliError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

impl From<slate::core::Error> for CliError {
    fn from(e: slate::core::Error) -> Self {
        CliError::Slate(e.into())
    }
}

impl From<slate::query::Error> for CliError {
    fn from(e: slate::query::Error) -> Self {
        CliError::Slate(e.into())
    }
}

#[derive(Parser)]
#[command(
    name = "slate",
    version,
    about = "Slate: an embedded vector-plus-document store"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Load JSONL documents (and their vectors) into a collection.
    Load(LoadArgs),
    /// Print the documents matching a filter, one relaxed extended JSON document per line.
    Find(FindArgs),
    /// Print the number of documents matching a filter.
    Count(CountArgs),
    /// Run vector queries from a file: one JSON line per query, then a summary.
    Search(SearchArgs),
}

#[derive(Args)]
struct SearchArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    preload: Preload,
    /// The vector field to search.
    #[arg(long, value_name = "NAME")]
    field: String,
    /// Query vectors: raw little-endian f32 (.f32) or .fvecs.
    #[arg(long, value_name = "FILE")]
    queries: PathBuf,
    /// Hits per query.
    #[arg(long, value_name = "N", default_value_t = 10)]
    k: usize,
    /// Only documents matching this filter (relaxed extended JSON).
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,
    /// Fields returned with each hit besides _id and distance.
    #[arg(long, value_name = "F1,F2")]
    project: Option<String>,
    /// Threads per query scan (0: all cores).
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Answer all queries in one blocked pass (unfiltered only).
    #[arg(long)]
    batch: bool,
    /// Hybrid strategy: gather, scan, bitmap or auto.
    #[arg(long, default_value = "auto")]
    strategy: String,
    /// Add each query's plan and work counters to its line.
    #[arg(long)]
    explain: bool,
    /// Partition value(s) of a partitioned collection (JSON), repeatable.
    #[arg(long = "partition", value_name = "JSON")]
    partitions: Vec<String>,
}

/// Where the data is: a database directory, or memory (loaded in this run).
#[derive(Args, Clone)]
struct Target {
    /// Database directory (RocksDB).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "memory",
        required_unless_present = "memory"
    )]
    db: Option<PathBuf>,
    /// Use an in-memory database instead of --db (load it with --load).
    #[arg(long)]
    memory: bool,
    /// Collection name.
    #[arg(long, value_name = "NAME")]
    collection: String,
}

#[derive(Args)]
struct LoadArgs {
    #[command(flatten)]
    target: Target,
    /// JSONL file: one relaxed extended JSON document per line.
    #[arg(long, value_name = "FILE.jsonl")]
    docs: Option<PathBuf>,
    #[command(flatten)]
    extra: LoadExtra,
}

/// Indexes and vectors of a load (also accepted by find/count with --load).
#[derive(Args, Clone)]
struct LoadExtra {
    /// Create an index on FIELD (a dot path); repeatable.
    #[arg(long = "index", value_name = "FIELD")]
    indexes: Vec<String>,
    /// Vectors: raw little-endian f32 (row i is the i-th document) or .fvecs.
    #[arg(long, value_name = "FILE")]
    vectors: Option<PathBuf>,
    /// The vector field the vectors are stored in.
    #[arg(long, value_name = "NAME")]
    vector_field: Option<String>,
    /// Vector dimension (required for raw f32; checked for .fvecs).
    #[arg(long, value_name = "N")]
    dim: Option<usize>,
    /// Distance metric: l2 (squared Euclidean), cosine or dot.
    #[arg(long, default_value = "l2")]
    metric: String,
    /// No progress bar or summary on stderr.
    #[arg(long)]
    quiet: bool,
}

/// A JSONL file loaded before the query (with --memory).
#[derive(Args, Clone)]
struct Preload {
    /// Load this JSONL file first (with --memory: load then query in one process).
    #[arg(long, value_name = "FILE.jsonl")]
    load: Option<PathBuf>,
    #[command(flatten)]
    extra: LoadExtra,
}

#[derive(Args)]
struct FindArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    preload: Preload,
    /// Filter document (relaxed extended JSON).
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,
    /// Sort by FIELD, ascending, or FIELD:desc; repeatable.
    #[arg(long = "sort", value_name = "FIELD[:desc]")]
    sort: Vec<String>,
    /// Skip the first N results.
    #[arg(long, value_name = "N")]
    skip: Option<usize>,
    /// Return at most N results.
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Return only _id and these comma-separated fields.
    #[arg(long, value_name = "F1,F2")]
    project: Option<String>,
    /// Print the plan (with estimates) instead of the documents.
    #[arg(long)]
    explain: bool,
    /// Partition value(s) of a partitioned collection (JSON), repeatable.
    #[arg(long = "partition", value_name = "JSON")]
    partitions: Vec<String>,
}

#[derive(Args)]
struct CountArgs {
    #[command(flatten)]
    target: Target,
    #[command(flatten)]
    preload: Preload,
    /// Filter document (relaxed extended JSON).
    #[arg(long, value_name = "JSON")]
    filter: Option<String>,
    /// Partition value(s) of a partitioned collection (JSON), repeatable.
    #[arg(long = "partition", value_name = "JSON")]
    partitions: Vec<String>,
}

fn open(target: &Target) -> Result<Db, CliError> {
    match (&target.db, target.memory) {
        (_, true) => Ok(Db::memory()),
        (Some(dir), false) => Ok(Db::open(dir)?),
        (None, false) => Err(CliError::Usage("give --db DIR or --memory".into())),
    }
}

fn load_spec(collection: &str, docs: Option<PathBuf>, extra: &LoadExtra) -> Result<load::LoadSpec, CliError> {
    let metric: Metric = extra
        .metric
        .parse()
        .map_err(|e| CliError::Usage(format!("--metric {:?}: {e}", extra.metric)))?;
    Ok(load::LoadSpec {
        collection: collection.to_owned(),
        docs,
        indexes: extra.indexes.clone(),
        vectors: extra.vectors.clone(),
        vector_field: extra.vector_field.clone(),
        dim: extra.dim,
        metric,
        quiet: extra.quiet,
    })
}

/// Opens the target and runs the preload, if any.
fn prepare(target: &Target, preload: &Preload) -> Result<Db, CliError> {
    let db = open(target)?;
    if preload.load.is_some() || preload.extra.vectors.is_some() {
        load::load(
            &db,
            &load_spec(&target.collection, preload.load.clone(), &preload.extra)?,
        )?;
    } else if target.memory {
        return Err(CliError::Usage(
            "--memory starts empty: give --load FILE.jsonl".into(),
        ));
    }
    Ok(db)
}

fn parse_filter(filter: &Option<String>) -> Result<bson::Document, CliError> {
    match filter {
        None => Ok(bson::Document::new()),
        Some(json) => load::parse_json_doc(json, "--filter"),
    }
}

fn collection(db: &Db, target: &Target, partitions: &[String]) -> Result<slate::Collection, CliError> {
    let coll = db.collection(&target.collection)?;
    if partitions.is_empty() {
        return Ok(coll);
    }
    let values = partitions
        .iter()
        .map(|p| {
            let v: serde_json::Value =
                serde_json::from_str(p).map_err(|e| CliError::Input(format!("--partition {p:?}: {e}")))?;
            bson::Bson::try_from(v).map_err(|e| CliError::Input(format!("--partition {p:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(coll.partitions(values))
}

fn print_doc(out: &mut impl Write, doc: bson::Document) -> Result<(), CliError> {
    let json = bson::Bson::Document(doc).into_relaxed_extjson();
    writeln!(out, "{json}").map_err(|e| CliError::io(Path::new("<stdout>"), e))
}

fn find(args: FindArgs) -> Result<(), CliError> {
    let db = prepare(&args.target, &args.preload)?;
    let coll = collection(&db, &args.target, &args.partitions)?;
    let mut query = coll.find(parse_filter(&args.filter)?);
    for s in &args.sort {
        query = query.sort(s.clone());
    }
    if let Some(n) = args.skip {
        query = query.skip(n);
    }
    if let Some(n) = args.limit {
        query = query.limit(n);
    }
    if let Some(p) = split_fields(&args.project) {
        query = query.project(p);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.explain {
        writeln!(out, "{}", query.explain()?).map_err(|e| CliError::io(Path::new("<stdout>"), e))?;
        return Ok(());
    }
    for doc in query.iter()? {
        print_doc(&mut out, doc.map_err(slate::Error::from)?)?;
    }
    out.flush().map_err(|e| CliError::io(Path::new("<stdout>"), e))
}

fn count(args: CountArgs) -> Result<(), CliError> {
    let db = prepare(&args.target, &args.preload)?;
    let coll = collection(&db, &args.target, &args.partitions)?;
    println!("{}", coll.count(parse_filter(&args.filter)?)?);
    Ok(())
}

fn split_fields(p: &Option<String>) -> Option<Vec<String>> {
    p.as_ref().map(|p| {
        p.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    })
}

fn search_cmd(args: SearchArgs) -> Result<(), CliError> {
    let db = prepare(&args.target, &args.preload)?;
    let coll = collection(&db, &args.target, &args.partitions)?;
    let strategy = args
        .strategy
        .parse()
        .map_err(|e: slate::query::Error| CliError::Usage(e.to_string()))?;
    let run = search::SearchRun {
        field: args.field,
        queries: args.queries,
        k: args.k,
        filter: parse_filter(&args.filter)?,
        projection: split_fields(&args.project),
        threads: args.threads,
        batch: args.batch,
        strategy,
        explain: args.explain,
    };
    search::run(&coll, &run)
}

/// Runs the command line; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Load(args) => open(&args.target).and_then(|db| {
            let spec = load_spec(&args.target.collection, args.docs.clone(), &args.extra)?;
            load::load(&db, &spec)
        }),
        Command::Find(args) => find(args),
        Command::Count(args) => count(args),
        Command::Search(args) => search_cmd(args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("slate: error: {e}");
            match e {
                CliError::Usage(_) => 2,
                _ => 1,
            }
        }
    }
}
