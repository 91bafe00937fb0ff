//! `slate load`: JSONL documents (and optionally their vectors) into a collection.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use bson::{Bson, Document};
use slate::{CollectionConfig, Db, Metric, VectorField};

use super::CliError;

/// The vectors of a load: one row per document, in file order.
pub struct Vectors {
    pub dim: usize,
    pub rows: Vec<f32>,
}

impl Vectors {
    pub fn len(&self) -> usize {
        self.rows.len() / self.dim.max(1)
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.rows[i * self.dim..(i + 1) * self.dim]
    }
}

/// Reads `.fvecs` (each row: little-endian i32 dimension, then that many
/// f32) or raw little-endian f32 rows of `dim` (any other extension).
/// `dim` is the dimension the rows must have, with what says so (for the
/// message when they do not).
pub fn read_vectors(path: &Path, dim: Option<(usize, &str)>) -> Result<Vectors, CliError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| CliError::io(path, e))?;
    let bad = |reason: String| CliError::Input(format!("{}: {reason}", path.display()));
    if path.extension().is_some_and(|e| e == "fvecs") {
        let mut rows = Vec::new();
        let mut file_dim = None;
        let mut at = 0usize;
        let mut row = 0usize;
        while at < bytes.len() {
            let head: [u8; 4] = bytes
                .get(at..at + 4)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| bad(format!("row {row}: truncated header")))?;
            let d = i32::from_le_bytes(head);
            let d = usize::try_from(d)
                .ok()
                .filter(|d| *d > 0)
                .ok_or_else(|| bad(format!("row {row}: dimension {d}")))?;
            if *file_dim.get_or_insert(d) != d {
                return Err(bad(format!(
                    "row {row} has dimension {d}, earlier rows {}",
                    file_dim.unwrap_or(d)
                )));
            }
            let body = bytes
                .get(at + 4..at + 4 + 4 * d)
                .ok_or_else(|| bad(format!("row {row}: truncated after {} bytes", bytes.len() - at)))?;
            rows.extend(
                body.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            at += 4 + 4 * d;
            row += 1;
        }
        let file_dim = file_dim.unwrap_or(dim.map_or(1, |(d, _)| d));
        if let Some((want, why)) = dim {
            if want != file_dim {
                return Err(bad(format!("vectors have dimension {file_dim}, but {why}")));
            }
        }
        Ok(Vectors { dim: file_dim, rows })
    } else {
        let (dim, _) = dim.ok_or_else(|| bad("raw f32 vectors need --dim".into()))?;
        let row_bytes = dim.checked_mul(4).filter(|&b| b > 0);
        if row_bytes.is_none_or(|b| !bytes.len().is_multiple_of(b)) {
            return Err(bad(format!(
                "{} bytes is not a whole number of rows of {dim} f32",
                bytes.len()
            )));
        }
        let rows = bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Vectors { dim, rows })
    }
}

/// Parses one line of relaxed extended JSON into a document.
pub fn parse_json_doc(line: &str, what: &str) -> Result<Document, CliError> {
    let value: serde_json::Value =
        serde_json::from_str(line).map_err(|e| CliError::Input(format!("{what}: invalid JSON: {e}")))?;
    if let Some(n) = too_big_integer(line) {
        return Err(CliError::Input(format!(
            "{what}: the integer {n} does not fit a 64-bit signed integer (it would be stored as a \
             rounded double); write it as {{\"$numberDecimal\": \"{n}\"}} or as a string"
        )));
    }
    match Bson::try_from(value) {
        Ok(Bson::Document(d)) => Ok(d),
        Ok(other) => Err(CliError::Input(format!(
            "{what}: expected a JSON object, got {other}"
        ))),
        Err(e) => Err(CliError::Input(format!("{what}: invalid extended JSON: {e}"))),
    }
}

/// The first integer literal in JSON text `line` outside int64's range
/// (JSON has one number type: serde_json reads such a literal as a double,
/// and extended JSON stores it so, silently rounded), if any. Read from the
/// text, since a literal past `u64` arrives as a double already; a number
/// written with a fraction or an exponent is a double by its own choice.
fn too_big_integer(line: &str) -> Option<&str> {
    let b = line.as_bytes();
    let mut at = 0;
    let mut in_string = false;
    while at < b.len() {
        let c = b[at];
        if in_string {
            match c {
                b'\\' => at += 1,
                b'"' => in_string = false,
                _ => {}
            }
            at += 1;
            continue;
        }
        match c {
            b'"' => {
                in_string = true;
                at += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = at;
                while at < b.len() && matches!(b[at], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9') {
                    at += 1;
                }
                let token = &line[start..at];
                let integer = !token.contains(['.', 'e', 'E']);
                if integer && token.parse::<i64>().is_err() {
                    return Some(token);
                }
            }
            _ => at += 1,
        }
    }
    None
}

/// What to load.
pub struct LoadSpec {
    pub collection: String,
    pub docs: Option<PathBuf>,
    pub indexes: Vec<String>,
    pub vectors: Option<PathBuf>,
    pub vector_field: Option<String>,
    pub dim: Option<usize>,
    /// `--metric`, if given (l2 when the field is created without it).
    pub metric: Option<Metric>,
    /// Row codes for the vector field (`--vector-codes`).
    pub codes: bool,
    pub quiet: bool,
}

/// Puts a document's vector at dot path `rest` of `doc` (`field` is the
/// whole path, for messages), creating the documents on the way, as the
/// vector field reads it back: a key named `a.b` would hold bytes no path
/// reaches. Refuses a path through a value that is not a document, and a
/// document that already holds a value there, which the vector would
/// silently replace.
fn put_vector(doc: &mut Document, field: &str, rest: &str, row: Bson) -> Result<(), String> {
    let (head, tail) = match rest.split_once('.') {
        Some((head, tail)) => (head, Some(tail)),
        None => (rest, None),
    };
    match (doc.get_mut(head), tail) {
        (None, None) => {
            doc.insert(head, row);
            Ok(())
        }
        (Some(_), None) => Err(format!(
            "the document already has a value at vector field {field:?}, which --vectors would replace"
        )),
        (None, Some(tail)) => {
            let mut inner = Document::new();
            put_vector(&mut inner, field, tail, row)?;
            doc.insert(head, inner);
            Ok(())
        }
        (Some(Bson::Document(inner)), Some(tail)) => put_vector(inner, field, tail, row),
        (Some(other), Some(_)) => Err(format!(
            "{head:?} is not a document but {}, so vector field {field:?} cannot go under it",
            slate::core::value::type_name(other.element_type())
        )),
    }
}

/// A load read and checked, not yet written.
pub struct Parsed {
    start: Instant,
    docs: Vec<Document>,
    /// The file line of each document (blank lines are skipped), for messages.
    lines: Vec<usize>,
    vectors: Option<Vectors>,
}

/// Reads and parses the load's files, touching no database: bad flags, a
/// bad file or a bad line fail here.
pub fn read(spec: &LoadSpec) -> Result<Parsed, CliError> {
    let start = Instant::now();
    if spec.vectors.is_some() != spec.vector_field.is_some() {
        return Err(CliError::Usage("--vectors and --vector-field go together".into()));
    }
    let dim_flag = spec.dim.map(|d| format!("--dim says {d}"));
    let vectors = match &spec.vectors {
        Some(path) => Some(read_vectors(path, spec.dim.zip(dim_flag.as_deref()))?),
        None => None,
    };
    // Read and parse every document first: nothing is written for a bad file.
    let mut docs: Vec<Document> = Vec::new();
    let mut lines: Vec<usize> = Vec::new();
    match (&spec.docs, &vectors) {
        (Some(path), _) => {
            let file = File::open(path).map_err(|e| CliError::io(path, e))?;
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            let bar = progress(size, spec.quiet, "parsing");
            for (i, line) in BufReader::new(file).lines().enumerate() {
                let line = line.map_err(|e| match e.kind() {
                    std::io::ErrorKind::InvalidData => {
                        CliError::Input(format!("{} line {}: not UTF-8 text", path.display(), i + 1))
                    }
                    _ => CliError::io(path, e),
                })?;
                bar.inc(line.len() as u64 + 1);
                // A byte order mark, as some editors write, is not JSON.
                let text = if i == 0 {
                    line.strip_prefix('\u{feff}').unwrap_or(&line)
                } else {
                    &line
                };
                if text.trim().is_empty() {
                    continue;
                }
                docs.push(parse_json_doc(
                    text,
                    &format!("{} line {}", path.display(), i + 1),
                )?);
                lines.push(i + 1);
            }
            bar.finish_and_clear();
        }
        (None, Some(v))
            if spec
                .vectors
                .as_ref()
                .is_some_and(|p| p.extension().is_some_and(|e| e == "fvecs")) =>
        {
            docs = (0..v.len()).map(|i| bson::doc! { "_id": i as i64 }).collect();
        }
        _ => {
            return Err(CliError::Usage(
                "--docs is required (it may be omitted only with .fvecs vectors)".into(),
            ))
        }
    }
    if let (Some(v), Some(field)) = (&vectors, &spec.vector_field) {
        if v.len() != docs.len() {
            return Err(CliError::Input(format!(
                "{} documents but {} vectors",
                docs.len(),
                v.len()
            )));
        }
        for (i, d) in docs.iter_mut().enumerate() {
            let row = Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: v.row(i).iter().flat_map(|x| x.to_le_bytes()).collect(),
            });
            put_vector(d, field, field, row).map_err(|reason| {
                let at = match (&spec.docs, lines.get(i)) {
                    (Some(path), Some(line)) => format!("{} line {line}", path.display()),
                    _ => format!("vector row {i}"),
                };
                CliError::Input(format!("{at}: {reason}"))
            })?;
        }
    }
    Ok(Parsed {
        start,
        docs,
        lines,
        vectors,
    })
}

/// The configuration of the collection the load goes into, if it exists:
/// read once, for [`check_against`], [`config_after`] and [`write`].
pub fn existing(db: &Db, spec: &LoadSpec) -> Result<Option<CollectionConfig>, CliError> {
    if !db.list_collections()?.contains(&spec.collection) {
        return Ok(None);
    }
    Ok(Some(db.collection(&spec.collection)?.config()?))
}

/// The configuration the collection will have once `parsed` is written:
/// its own (`existing`) with the load's indexes, else the one the load
/// creates.
pub fn config_after(
    spec: &LoadSpec,
    parsed: &Parsed,
    existing: Option<&CollectionConfig>,
) -> CollectionConfig {
    if let Some(have) = existing {
        let mut have = have.clone();
        for ix in &spec.indexes {
            if !have.indexes.contains(ix) {
                have = have.index(ix.clone());
            }
        }
        return have;
    }
    let mut config = CollectionConfig::new(&spec.collection);
    if let (Some(field), Some(v)) = (&spec.vector_field, &parsed.vectors) {
        config = config.vector_field_config(
            VectorField::new(field.clone(), v.dim, spec.metric.unwrap_or(Metric::L2)).with_codes(spec.codes),
        );
    }
    for ix in &spec.indexes {
        config = config.index(ix.clone());
    }
    config
}

/// Refuses a load into an existing collection whose vector field differs
/// from what the load says: before anything is written.
pub fn check_against(
    spec: &LoadSpec,
    parsed: &Parsed,
    existing: Option<&CollectionConfig>,
) -> Result<(), CliError> {
    let Some(have) = existing else {
        return Ok(());
    };
    let vectors = &parsed.vectors;
    if let Some(field) = &spec.vector_field {
        let Some(vf) = have.vector_field(field) else {
            return Err(CliError::Usage(format!(
                "collection {:?} exists without vector field {field:?}",
                spec.collection
            )));
        };
        // Vectors of another size: said so up front, not as the first
        // document's failure.
        if let Some(v) = vectors.as_ref().filter(|v| v.dim != vf.dim) {
            return Err(CliError::Usage(format!(
                "collection {:?} holds {}-dimensional vectors in {field:?}; these are {}-dimensional",
                spec.collection, vf.dim, v.dim
            )));
        }
        // Settings fixed when the field was created: a load that asks
        // for others is refused rather than silently given the field's.
        if let Some(metric) = spec.metric.filter(|&m| m != vf.metric) {
            return Err(CliError::Usage(format!(
                    "collection {:?} compares {field:?} by {}, not {metric} (--metric is set when a collection is created)",
                    spec.collection, vf.metric
                )));
        }
        if spec.codes && !vf.codes {
            return Err(CliError::Usage(format!(
                    "collection {:?} keeps no codes for {field:?} (--vector-codes is set when a collection is created)",
                    spec.collection
                )));
        }
    }
    Ok(())
}

/// Writes a load in one transaction (creating the collection when it is
/// new): a document refused leaves the database as it was.
pub fn write(
    db: &Db,
    spec: &LoadSpec,
    parsed: Parsed,
    existing: Option<&CollectionConfig>,
) -> Result<(), CliError> {
    let config = config_after(spec, &parsed, existing);
    let Parsed {
        start, docs, lines, ..
    } = parsed;
    let n = docs.len();
    let bar = progress(n as u64, spec.quiet, "inserting");
    let mut txn = db.begin()?;
    if let Some(have) = existing {
        for ix in &spec.indexes {
            if !have.indexes.contains(ix) {
                txn.create_index(&spec.collection, ix)?;
            }
        }
    } else {
        // In the same commit as the documents: a load stopped before it
        // (a refused line, a kill) leaves no collection behind.
        txn.create_collection(config)?;
    }
    let mut failure = None;
    for (i, d) in docs.into_iter().enumerate() {
        if let Err(e) = txn.insert(&spec.collection, d) {
            failure = Some(CliError::Input(match lines.get(i) {
                Some(line) => format!("document {} (line {line}): {e}", i + 1),
                None => format!("document {}: {e}", i + 1),
            }));
            break;
        }
        bar.inc(1);
    }
    // A refused document rolls the whole load back, the collection it
    // created included (dropping the transaction).
    match failure {
        Some(e) => return Err(e),
        None => {
            txn.commit()?;
        }
    }
    bar.finish_and_clear();
    let elapsed = start.elapsed();
    if !spec.quiet {
        eprintln!(
            "loaded {n} documents into {:?} in {:.2?} ({:.0} docs/s)",
            spec.collection,
            elapsed,
            n as f64 / elapsed.as_secs_f64().max(1e-9)
        );
    }
    Ok(())
}

fn progress(len: u64, quiet: bool, what: &'static str) -> indicatif::ProgressBar {
    if quiet {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg:>10} [{bar:40}] {percent}% {elapsed}") {
        bar.set_style(style);
    }
    bar.set_message(what);
    bar
}
