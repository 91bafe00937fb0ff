//! Command-line interface. The flags of each subcommand are a contract other
//! tools use; change them only by adding.

mod load;
mod search;

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use slate::{Client, CollectionConfig, Db, Metric, Server, ServerConfig};

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
    /// Serve a database over TCP (length-prefixed MessagePack, docs/protocol.md) until SIGINT/SIGTERM.
    Serve(ServeArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Database directory (RocksDB).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "memory",
        required_unless_present = "memory"
    )]
    db: Option<PathBuf>,
    /// Serve an empty in-memory database instead of --db.
    #[arg(long)]
    memory: bool,
    /// Address to listen on (loopback by default).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:7878")]
    addr: String,
    /// File holding the token every connection must present first.
    #[arg(long, value_name = "FILE")]
    auth_token_file: Option<PathBuf>,
    /// Largest request frame accepted, in bytes.
    #[arg(long, value_name = "N", default_value_t = slate::server::DEFAULT_MAX_FRAME_BYTES)]
    max_frame_bytes: usize,
    /// Connections served at once; more are refused.
    #[arg(long, value_name = "N", default_value_t = 128)]
    max_connections: usize,
    /// Close a connection that sends nothing for this many seconds (0: never).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    idle_timeout: u64,
    /// Bytes of changes one request's write may hold (an update_many over a
    /// large collection stages every document it changes); past it the
    /// request fails with transaction_too_large, changing nothing (0: no bound).
    #[arg(long, value_name = "N", default_value_t = slate::server::DEFAULT_MAX_TRANSACTION_BYTES)]
    max_transaction_bytes: u64,
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

/// Where the data is: a database directory, memory (loaded in this run), or
/// a server (find, count and search).
#[derive(Args, Clone)]
struct Target {
    /// Database directory (RocksDB).
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["memory", "server"],
        required_unless_present_any = ["memory", "server"]
    )]
    db: Option<PathBuf>,
    /// Use an in-memory database instead of --db (load it with --load).
    #[arg(long, conflicts_with = "server")]
    memory: bool,
    /// Query a `slate serve` at HOST:PORT instead of --db (find, count, search).
    #[arg(long, value_name = "HOST:PORT")]
    server: Option<String>,
    /// File holding the server's auth token (with --server).
    #[arg(long, value_name = "FILE", requires = "server")]
    auth_token_file: Option<PathBuf>,
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
    /// Distance metric: l2 (squared Euclidean), cosine or dot [default: l2;
    /// into an existing field, the field's own, and refused if it differs].
    #[arg(long)]
    metric: Option<String>,
    /// Keep an 8-bit code of every vector in memory (a quarter more at dim
    /// 384) so that unfiltered and selective filtered searches read fewer
    /// vectors; set when the collection is created.
    #[arg(long)]
    vector_codes: bool,
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
    /// Sort by FIELD, ascending, or FIELD:desc; repeatable. A field whose
    /// name holds a colon takes its direction explicitly (a:b:asc).
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

/// Opens the target's database; creates it only when `create` (a load):
/// a query on a mistyped `--db` fails without writing a database there.
fn open(target: &Target, create: bool) -> Result<Db, CliError> {
    match (&target.db, target.memory) {
        (_, true) => Ok(Db::memory()),
        (Some(dir), false) if create => Ok(Db::open(dir)?),
        (Some(dir), false) => Ok(Db::builder(dir).create_if_missing(false).open()?),
        (None, false) if target.server.is_some() => Err(CliError::Usage(
            "--server works with find, count and search; give --db DIR or --memory".into(),
        )),
        (None, false) => Err(CliError::Usage("give --db DIR or --memory".into())),
    }
}

/// A token file's bytes without the trailing newline an editor adds.
fn read_token(path: &Path) -> Result<Vec<u8>, CliError> {
    let mut token = std::fs::read(path).map_err(|e| CliError::io(path, e))?;
    while token.last().is_some_and(|b| b.is_ascii_whitespace()) {
        token.pop();
    }
    if token.is_empty() {
        return Err(CliError::Usage(format!(
            "{}: the auth token is empty",
            path.display()
        )));
    }
    Ok(token)
}

/// The server's collection when the target is `--server`, else `None`.
fn remote(
    target: &Target,
    preload: &Preload,
    partitions: &[String],
) -> Result<Option<slate::RemoteCollection>, CliError> {
    let Some(addr) = &target.server else {
        return Ok(None);
    };
    if preload.load.is_some() || preload.extra.vectors.is_some() {
        return Err(CliError::Usage(
            "--load and --vectors need --db or --memory, not --server".into(),
        ));
    }
    let mut builder = Client::builder(addr.clone());
    if let Some(path) = &target.auth_token_file {
        builder = builder.auth_token(read_token(path)?);
    }
    let coll = builder.connect()?.collection(&target.collection)?;
    let values = partition_values(partitions)?;
    Ok(Some(if values.is_empty() {
        coll
    } else {
        coll.partitions(values)
    }))
}

fn load_spec(collection: &str, docs: Option<PathBuf>, extra: &LoadExtra) -> Result<load::LoadSpec, CliError> {
    let metric = extra
        .metric
        .as_deref()
        .map(|m| {
            m.parse::<Metric>()
                .map_err(|e| CliError::Usage(format!("--metric {m:?}: {e}")))
        })
        .transpose()?;
    Ok(load::LoadSpec {
        collection: collection.to_owned(),
        docs,
        indexes: extra.indexes.clone(),
        vectors: extra.vectors.clone(),
        vector_field: extra.vector_field.clone(),
        dim: extra.dim,
        metric,
        codes: extra.vector_codes,
        quiet: extra.quiet,
    })
}

/// Opens the target and runs the preload, if any. `check` judges the
/// collection as it will be after the load (the query's partitions, a
/// search's field and query vectors) before the load writes anything.
fn prepare(
    target: &Target,
    preload: &Preload,
    check: impl FnOnce(&CollectionConfig) -> Result<(), CliError>,
) -> Result<Db, CliError> {
    let loads = preload.load.is_some() || preload.extra.vectors.is_some();
    if !loads {
        if target.memory {
            return Err(CliError::Usage(
                "--memory starts empty: give --load FILE.jsonl".into(),
            ));
        }
        return open(target, false);
    }
    let spec = load_spec(&target.collection, preload.load.clone(), &preload.extra)?;
    load_checked(target, &spec, check)
}

/// Reads a load's files (a bad one fails before any database is opened),
/// opens the target, then checks and writes the load. A database directory
/// this created is removed again when the load is refused.
fn load_checked(
    target: &Target,
    spec: &load::LoadSpec,
    check: impl FnOnce(&CollectionConfig) -> Result<(), CliError>,
) -> Result<Db, CliError> {
    let parsed = load::read(spec)?;
    let created = match (&target.db, target.memory) {
        (Some(dir), false) => make_dir(dir)?,
        _ => None,
    };
    let outcome = open(target, true).and_then(|db| {
        let existing = load::existing(&db, spec)?;
        load::check_against(spec, &parsed, existing.as_ref())?;
        check(&load::config_after(spec, &parsed, existing.as_ref()))?;
        load::write(&db, spec, parsed, existing.as_ref())?;
        Ok(db)
    });
    if let (Err(_), Some(made)) = (&outcome, created) {
        // The database is closed by now. Only the directory this run made,
        // if it is still that one: best effort (the error is the refusal).
        if std::fs::canonicalize(made.path).is_ok_and(|now| now == made.canonical) {
            let _ = std::fs::remove_dir_all(&made.canonical);
        }
    }
    outcome
}

/// A directory this run created, as it resolved when it was made.
struct MadeDir<'a> {
    path: &'a Path,
    canonical: PathBuf,
}

/// Creates `dir` (and its parents) when it does not exist, and says so
/// only when this call made `dir` itself: one that exists (by any name:
/// `x/..` too) is not this run's to remove.
fn make_dir(dir: &Path) -> Result<Option<MadeDir<'_>>, CliError> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| CliError::io(parent, e))?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(Some(MadeDir {
            path: dir,
            canonical: std::fs::canonicalize(dir).map_err(|e| CliError::io(dir, e))?,
        })),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(CliError::io(dir, e)),
    }
}

/// Refuses partition values the collection would refuse, by the rule its
/// reads apply (`CollectionConfig::part`): values for one that is not
/// partitioned, none for one that is, values that cannot be partition keys.
fn check_partitions(config: &CollectionConfig, partitions: &[String]) -> Result<(), CliError> {
    let values = partition_values(partitions)?;
    if values.is_empty() {
        config.part(None)?;
    }
    for v in &values {
        config.part(Some(v))?;
    }
    Ok(())
}

/// Refuses, before anything is opened or loaded, the input that needs no
/// database to be judged bad: a filter (its JSON and its operators), sort
/// specs, partition values and projection paths. With `--db DIR --load
/// FILE` the load commits before the query runs, so a query refused after
/// it would leave the documents behind.
fn precheck(
    filter: &Option<String>,
    sort: &[String],
    partitions: &[String],
    project: &Option<String>,
) -> Result<(), CliError> {
    slate::query::Filter::parse(&parse_filter(filter)?).map_err(slate::query::Error::from)?;
    let fields = sort
        .iter()
        .map(|spec| {
            slate::query::SortField::parse(spec).map_err(|e| CliError::Input(format!("--sort {spec:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    slate::query::check_sort(&fields).map_err(slate::Error::from)?;
    partition_values(partitions)?;
    slate::query::check_projection(split_fields(project).as_deref())?;
    Ok(())
}

fn parse_filter(filter: &Option<String>) -> Result<bson::Document, CliError> {
    match filter {
        None => Ok(bson::Document::new()),
        Some(json) => load::parse_json_doc(json, "--filter"),
    }
}

fn partition_values(partitions: &[String]) -> Result<Vec<bson::Bson>, CliError> {
    partitions
        .iter()
        .map(|p| {
            let v: serde_json::Value =
                serde_json::from_str(p).map_err(|e| CliError::Input(format!("--partition {p:?}: {e}")))?;
            bson::Bson::try_from(v).map_err(|e| CliError::Input(format!("--partition {p:?}: {e}")))
        })
        .collect()
}

fn collection(db: &Db, target: &Target, partitions: &[String]) -> Result<slate::Collection, CliError> {
    let coll = db.collection(&target.collection)?;
    if partitions.is_empty() {
        return Ok(coll);
    }
    Ok(coll.partitions(partition_values(partitions)?))
}

fn print_doc(out: &mut impl Write, doc: bson::Document) -> Result<(), CliError> {
    let json = bson::Bson::Document(doc).into_relaxed_extjson();
    writeln!(out, "{json}").map_err(stdout_err)
}

pub(crate) fn stdout_err(e: std::io::Error) -> CliError {
    CliError::io(Path::new(STDOUT), e)
}

const STDOUT: &str = "<stdout>";

/// Whether `e` is stdout closed by its reader (`slate find ... | head`):
/// the end of the output, not a failure.
fn stdout_closed(e: &CliError) -> bool {
    matches!(e, CliError::Io { path, source } if path == STDOUT && source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// `find --server`: the same query sent to a server, printed the same way.
fn find_remote(coll: &slate::RemoteCollection, args: &FindArgs) -> Result<(), CliError> {
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
        writeln!(out, "{}", query.explain()?).map_err(stdout_err)?;
    } else {
        // A failed print (stdout closed by `| head`) stops the download too.
        let mut failed = None;
        let found = query.for_each(|doc| {
            print_doc(&mut out, doc).map_err(|e| {
                let stop = slate::Error::Connection {
                    addr: STDOUT.into(),
                    reason: e.to_string(),
                };
                failed = Some(e);
                stop
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        found?;
    }
    out.flush().map_err(stdout_err)
}

fn find(args: FindArgs) -> Result<(), CliError> {
    if let Some(coll) = remote(&args.target, &args.preload, &args.partitions)? {
        return find_remote(&coll, &args);
    }
    precheck(&args.filter, &args.sort, &args.partitions, &args.project)?;
    let db = prepare(&args.target, &args.preload, |config| {
        check_partitions(config, &args.partitions)
    })?;
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
        writeln!(out, "{}", query.explain()?).map_err(stdout_err)?;
        return out.flush().map_err(stdout_err);
    }
    for doc in query.iter()? {
        print_doc(&mut out, doc.map_err(slate::Error::from)?)?;
    }
    out.flush().map_err(stdout_err)
}

fn count(args: CountArgs) -> Result<(), CliError> {
    let n = match remote(&args.target, &args.preload, &args.partitions)? {
        Some(coll) => coll.count(parse_filter(&args.filter)?)?,
        None => {
            precheck(&args.filter, &[], &args.partitions, &None)?;
            let db = prepare(&args.target, &args.preload, |config| {
                check_partitions(config, &args.partitions)
            })?;
            let coll = collection(&db, &args.target, &args.partitions)?;
            coll.count(parse_filter(&args.filter)?)?
        }
    };
    // A closed stdout is an error to report, not a panic (as `println!` has).
    let mut out = std::io::stdout().lock();
    writeln!(out, "{n}")
        .and_then(|()| out.flush())
        .map_err(stdout_err)
}

/// `--project`'s comma-separated paths, trimmed. An empty one stays, for
/// the projection check to name (`--project ""` or `a,,b` is a mistake,
/// not a request for `_id` alone).
fn split_fields(p: &Option<String>) -> Option<Vec<String>> {
    p.as_ref()
        .map(|p| p.split(',').map(str::trim).map(str::to_owned).collect())
}

fn search_cmd(args: SearchArgs) -> Result<(), CliError> {
    let strategy = args
        .strategy
        .parse()
        .map_err(|e: slate::query::Error| CliError::Usage(e.to_string()))?;
    if args.batch && !parse_filter(&args.filter)?.is_empty() {
        return Err(CliError::Usage(
            "--batch runs unfiltered queries; drop --filter or --batch".into(),
        ));
    }
    if args.k == 0 {
        return Err(CliError::Usage("--k must be at least 1".into()));
    }
    std::fs::metadata(&args.queries).map_err(|e| CliError::io(&args.queries, e))?;
    precheck(&args.filter, &[], &args.partitions, &args.project)?;
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
    let remote = remote(&args.target, &args.preload, &args.partitions)?;
    // A load checks the queries against the collection it makes: they are
    // read then, and not again.
    let mut checked = None;
    let db = match remote {
        Some(_) => None,
        None => Some(prepare(&args.target, &args.preload, |config| {
            check_partitions(config, &args.partitions)?;
            checked = Some(search::queries_for(config, &run)?);
            Ok(())
        })?),
    };
    match (remote, db) {
        (Some(coll), _) => search::run(&coll, &run, None),
        (None, Some(db)) => search::run(&collection(&db, &args.target, &args.partitions)?, &run, checked),
        (None, None) => Err(CliError::Usage("give --db DIR, --memory or --server ADDR".into())),
    }
}

fn serve(args: ServeArgs) -> Result<(), CliError> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let (db, what) = match (&args.db, args.memory) {
        (_, true) => (Db::memory(), "an in-memory database".to_owned()),
        (Some(dir), false) => (Db::open(dir)?, dir.display().to_string()),
        (None, false) => return Err(CliError::Usage("give --db DIR or --memory".into())),
    };
    let mut config = ServerConfig::new(args.addr.clone())
        .max_frame_bytes(args.max_frame_bytes)
        .max_connections(args.max_connections)
        .idle_timeout(std::time::Duration::from_secs(args.idle_timeout))
        .max_transaction_bytes((args.max_transaction_bytes > 0).then_some(args.max_transaction_bytes));
    if let Some(path) = &args.auth_token_file {
        config = config.auth_token(read_token(path)?);
    }
    // Registered before the server starts, so that no signal goes unheard.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| CliError::io(Path::new("<signals>"), e))?;
    let server = Server::start(db, config).map_err(|e| CliError::Io {
        path: format!("--addr {}", args.addr),
        source: e,
    })?;
    let addr = server.local_addr();
    if !addr.ip().is_loopback() && args.auth_token_file.is_none() {
        eprintln!("slate: warning: serving {addr} beyond loopback without --auth-token-file");
    }
    let mut out = std::io::stdout().lock();
    // Not `stdout_err`: a server that cannot say where it listens fails
    // (a closed stdout here is not the end of some output).
    writeln!(out, "slate: serving {what} on {addr}")
        .and_then(|()| out.flush())
        .map_err(|e| CliError::io(Path::new("<stdout: the serving line>"), e))?;
    drop(out);
    let signal = signals.forever().next();
    eprintln!(
        "slate: signal {}: finishing open requests, then stopping",
        signal.unwrap_or_default()
    );
    server.shutdown();
    eprintln!("slate: stopped");
    Ok(())
}

fn load_cmd(args: &LoadArgs) -> Result<(), CliError> {
    if args.target.memory {
        return Err(CliError::Usage(
            "slate load --memory would keep nothing: give --db DIR, or load with find/count/search --memory --load FILE".into(),
        ));
    }
    let spec = load_spec(&args.target.collection, args.docs.clone(), &args.extra)?;
    load_checked(&args.target, &spec, |_| Ok(())).map(drop)
}

/// Runs the command line; returns the process exit code.
pub fn run() -> i32 {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Load(args) => load_cmd(&args),
        Command::Find(args) => find(args),
        Command::Count(args) => count(args),
        Command::Search(args) => search_cmd(args),
        Command::Serve(args) => serve(args),
    };
    match result {
        Ok(()) => 0,
        // Rust ignores SIGPIPE: a reader that stopped early (`| head`)
        // shows up as this error, and ends the output as SIGPIPE would.
        Err(e) if stdout_closed(&e) => 0,
        Err(e) => {
            eprintln!("slate: error: {e}");
            match e {
                CliError::Usage(_) => 2,
                _ => 1,
            }
        }
    }
}
