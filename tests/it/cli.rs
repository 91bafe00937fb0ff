//! The `slate` binary on a generated JSONL file: load, find, count, explain, errors.
//!
//! Expected outputs are computed here from the generated documents, by code that does not
//! use the library's filter or sort.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};
use slate::bson::{Bson, Document};

const DOCS: i64 = 2000;

/// Document `i` of the generated file: nested paths, arrays (some empty), nulls, dates,
/// ObjectIds, missing fields.
fn generated(i: i64) -> Value {
    let mut d = json!({
        "_id": i,
        "name": format!("item{i}"),
        "status": format!("s{}", i % 50),
        // A permutation of 0..2000: no ties in a sort on n.
        "n": (i * 37) % DOCS,
        "when": { "$date": format!("2024-01-{:02}T{:02}:30:00Z", 1 + i % 28, i % 24) },
        "ref": { "$oid": format!("{:024x}", i * 7919) },
        "note": null,
    });
    match i % 7 {
        0 => {}
        1 => d["meta"] = json!({ "score": null }),
        _ => d["meta"] = json!({ "score": i % 40, "deep": { "w": [i % 3, i % 5] } }),
    }
    match i % 4 {
        0 => {}
        1 => d["tags"] = json!([]),
        _ => d["tags"] = json!([format!("t{}", i % 3), format!("t{}", i % 5)]),
    }
    d
}

fn jsonl(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn generated_lines() -> Vec<String> {
    (0..DOCS).map(|i| generated(i).to_string()).collect()
}

/// A JSON value as the CLI reads it (relaxed extended JSON to BSON).
fn to_bson(v: Value) -> Document {
    match Bson::try_from(v).expect("extended JSON") {
        Bson::Document(d) => d,
        other => panic!("not a document: {other:?}"),
    }
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slate"))
        .args(args)
        .output()
        .expect("run the slate binary")
}

/// Runs `slate args`, expecting success; returns stdout.
#[track_caller]
fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "slate {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 stdout")
}

/// Runs `slate args`, expecting failure; returns stderr.
#[track_caller]
fn fails(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        !out.status.success(),
        "slate {args:?} succeeded:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        out.stdout.is_empty(),
        "slate {args:?} failed but printed {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stderr).expect("utf-8 stderr")
}

fn parse_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

struct Loaded {
    dir: tempfile::TempDir,
    docs: PathBuf,
}

impl Loaded {
    fn db(&self) -> PathBuf {
        self.dir.path().join("db")
    }
}

/// Writes the generated file and loads it into collection `c` with an index on `status`.
fn loaded() -> Loaded {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = dir.path().join("docs.jsonl");
    std::fs::write(&docs, jsonl(&generated_lines())).expect("write jsonl");
    let l = Loaded { dir, docs };
    ok(&[
        "load",
        "--db",
        s(&l.db()),
        "--collection",
        "c",
        "--docs",
        s(&l.docs),
        "--index",
        "status",
        "--quiet",
    ]);
    l
}

// The filter of the find tests, and its meaning written out by hand.
const FILTER: &str = r#"{"status": {"$in": ["s1", "s2", "s3", "s44"]}, "meta.score": {"$gte": 10}}"#;

fn filter_matches(i: i64) -> bool {
    [1, 2, 3, 44].contains(&(i % 50)) && i % 7 >= 2 && i % 40 >= 10
}

/// `--filter FILTER --sort n:desc --skip 1 --limit 5 --project name,n`, computed by hand.
fn expected_page() -> Vec<Value> {
    let mut hits: Vec<i64> = (0..DOCS).filter(|i| filter_matches(*i)).collect();
    hits.sort_by_key(|i| std::cmp::Reverse((i * 37) % DOCS));
    hits.iter()
        .skip(1)
        .take(5)
        .map(|&i| json!({ "_id": i, "name": format!("item{i}"), "n": (i * 37) % DOCS }))
        .collect()
}

const PAGE: [&str; 10] = [
    "--filter",
    FILTER,
    "--sort",
    "n:desc",
    "--skip",
    "1",
    "--limit",
    "5",
    "--project",
    "name,n",
];

#[test]
fn find_prints_the_expected_documents() {
    let l = loaded();
    let db = l.db();
    let mut args = vec!["find", "--db", s(&db), "--collection", "c"];
    args.extend(PAGE);
    let out = ok(&args);
    let want = expected_page();
    assert_eq!(want.len(), 5, "the test's filter is too selective");
    assert_eq!(parse_lines(&out), want, "stdout:\n{out}");
    // Each line is one relaxed extended JSON document, `_id` first then the projection's order.
    for line in out.lines() {
        assert!(
            line.starts_with("{\"_id\":") && line.contains("\"name\":"),
            "{line}"
        );
        assert!(line.find("\"name\"") < line.find("\"n\""), "{line}");
    }

    // Dates and ObjectIds in filters and output, nested projection.
    let filter = r#"{"when": {"$gte": {"$date": "2024-01-27T00:00:00Z"}}, "ref": {"$ne": {"$oid": "000000000000000000000000"}}, "meta.deep.w": 2}"#;
    let out = ok(&[
        "find",
        "--db",
        s(&db),
        "--collection",
        "c",
        "--filter",
        filter,
        "--project",
        "when,ref,meta.deep.w,tags",
    ]);
    let want: Vec<Document> = (0..DOCS)
        .filter(|i| 1 + i % 28 >= 27 && i % 7 >= 2 && (i % 3 == 2 || i % 5 == 2))
        .map(|i| {
            let g = generated(i);
            let mut p = json!({ "_id": i, "when": g["when"], "ref": g["ref"], "meta": { "deep": { "w": g["meta"]["deep"]["w"] } } });
            if let Some(tags) = g.get("tags") {
                p["tags"] = tags.clone();
            }
            to_bson(p)
        })
        .collect();
    let got: Vec<Document> = parse_lines(&out).into_iter().map(to_bson).collect();
    assert!(!want.is_empty());
    crate::assert_same_docs(&got, &want, "dates, ObjectIds, nested projection");
    assert!(
        out.contains(r#""when":{"$date":"2024-01-27T"#),
        "relaxed dates:\n{out}"
    );
    assert!(out.contains(r#""ref":{"$oid":""#), "ObjectIds:\n{out}");
}

#[test]
fn count_and_explain() {
    let l = loaded();
    let db = l.db();
    let count = |filter: Option<&str>| -> u64 {
        let mut args = vec!["count", "--db", s(&db), "--collection", "c"];
        if let Some(f) = filter {
            args.extend(["--filter", f]);
        }
        ok(&args).trim().parse().expect("a number")
    };
    assert_eq!(count(None), DOCS as u64);
    assert_eq!(
        count(Some(FILTER)),
        (0..DOCS).filter(|i| filter_matches(*i)).count() as u64
    );
    assert_eq!(count(Some(r#"{"status": "s7"}"#)), 40);
    assert_eq!(
        count(Some(r#"{"note": null, "meta": {"$exists": false}}"#)),
        (0..DOCS).filter(|i| i % 7 == 0).count() as u64
    );
    assert_eq!(count(Some(r#"{"tags": {"$size": 0}}"#)), 500);

    let explain = |filter: &str| {
        ok(&[
            "find",
            "--db",
            s(&db),
            "--collection",
            "c",
            "--filter",
            filter,
            "--explain",
        ])
    };
    let plan = explain(r#"{"status": "s7"}"#);
    assert!(
        plan.contains("IndexScan") && plan.contains("field=status"),
        "indexed equality:\n{plan}"
    );
    assert!(plan.contains("estimate=40"), "{plan}");
    let plan = explain(r#"{"n": {"$gte": 5}}"#);
    assert!(
        plan.contains("Scan") && !plan.contains("IndexScan"),
        "unindexed range:\n{plan}"
    );
}

#[test]
fn memory_database_loaded_in_the_same_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = dir.path().join("docs.jsonl");
    std::fs::write(&docs, jsonl(&generated_lines())).expect("write jsonl");
    let mut args = vec![
        "find",
        "--memory",
        "--load",
        s(&docs),
        "--collection",
        "c",
        "--index",
        "status",
        "--quiet",
    ];
    args.extend(PAGE);
    assert_eq!(parse_lines(&ok(&args)), expected_page());
    let n = ok(&[
        "count",
        "--memory",
        "--load",
        s(&docs),
        "--collection",
        "c",
        "--quiet",
        "--filter",
        r#"{"status": "s7"}"#,
    ]);
    assert_eq!(n.trim(), "40");
    // --memory without --load is refused.
    let err = fails(&["count", "--memory", "--collection", "c"]);
    assert!(err.contains("--load"), "{err}");
}

#[test]
fn a_bad_line_writes_nothing() {
    let l = loaded();
    let db = l.db();
    let mut lines = generated_lines();
    lines.truncate(20);
    lines[6] = r#"{"_id": 6, "name": garbage"#.to_owned();
    let bad = l.dir.path().join("bad.jsonl");
    std::fs::write(&bad, jsonl(&lines)).expect("write");
    let err = fails(&[
        "load",
        "--db",
        s(&db),
        "--collection",
        "bad",
        "--docs",
        s(&bad),
        "--index",
        "status",
    ]);
    assert!(err.contains("line 7"), "names the line: {err}");
    let err = fails(&["count", "--db", s(&db), "--collection", "bad"]);
    assert!(err.contains("unknown collection") && err.contains("bad"), "{err}");

    // A bad line in a load into an existing collection: it keeps what it had.
    let err = fails(&["load", "--db", s(&db), "--collection", "c", "--docs", s(&bad)]);
    assert!(err.contains("line 7"), "{err}");
    assert_eq!(
        ok(&["count", "--db", s(&db), "--collection", "c"]).trim(),
        DOCS.to_string()
    );
}

#[test]
fn text_the_loader_cannot_read_is_named_and_a_query_creates_no_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    // A query on a --db that holds no database fails and leaves none there.
    let missing = dir.path().join("typo");
    fails(&["count", "--db", s(&missing), "--collection", "c"]);
    fails(&["find", "--db", s(&missing), "--collection", "c"]);
    assert!(!missing.exists(), "a query created {missing:?}");
    // A byte order mark before the first document is not part of it.
    let bom = dir.path().join("bom.jsonl");
    std::fs::write(&bom, "\u{feff}{\"_id\": 1}\n{\"_id\": 2}\n").expect("write");
    ok(&[
        "load",
        "--db",
        s(&db),
        "--collection",
        "b",
        "--docs",
        s(&bom),
        "--quiet",
    ]);
    assert_eq!(ok(&["count", "--db", s(&db), "--collection", "b"]).trim(), "2");
    // A line that is not UTF-8 is named, and nothing is written.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, b"{\"_id\": 1}\n{\"_id\": \"\xff\"}\n").expect("write");
    let err = fails(&["load", "--db", s(&db), "--collection", "u", "--docs", s(&bad)]);
    assert!(err.contains("line 2") && err.contains("UTF-8"), "{err}");
    let err = fails(&["count", "--db", s(&db), "--collection", "u"]);
    assert!(err.contains("unknown collection"), "{err}");
    // An integer past int64, nested anywhere, would be stored as a rounded
    // double: refused by its line (in a filter too), nothing written.
    let big = dir.path().join("big.jsonl");
    std::fs::write(
        &big,
        "{\"_id\": 1}\n{\"_id\": 2, \"h\": [{\"x\": 18446744073709551615}]}\n",
    )
    .expect("write");
    let err = fails(&["load", "--db", s(&db), "--collection", "u", "--docs", s(&big)]);
    assert!(
        err.contains("line 2") && err.contains("18446744073709551615"),
        "{err}"
    );
    let err = fails(&["count", "--db", s(&db), "--collection", "u"]);
    assert!(err.contains("unknown collection"), "{err}");
    let err = fails(&[
        "count",
        "--db",
        s(&db),
        "--collection",
        "b",
        "--filter",
        r#"{"_id": 9223372036854775808}"#,
    ]);
    assert!(err.contains("--filter") && err.contains("64-bit"), "{err}");
    // Past u64 (read as a double before any check could see an integer)
    // and below i64::MIN too; digits inside a string are text.
    for (line, token) in [
        (r#"{"_id": 1, "h": 18446744073709551616}"#, "18446744073709551616"),
        (
            r#"{"_id": 1, "s": "99999999999999999999", "h": -9223372036854775809}"#,
            "-9223372036854775809",
        ),
    ] {
        std::fs::write(&big, format!("{line}\n")).expect("write");
        let err = fails(&["load", "--db", s(&db), "--collection", "u", "--docs", s(&big)]);
        assert!(err.contains("line 1") && err.contains(token), "{err}");
    }
    // i64's own limits are integers still.
    let edge = dir.path().join("edge.jsonl");
    std::fs::write(
        &edge,
        "{\"_id\": 9223372036854775807, \"m\": -9223372036854775808, \"f\": 1e30, \"t\": \"1234567890123456789012\\\"3\"}\n",
    )
    .expect("write");
    ok(&[
        "load",
        "--db",
        s(&db),
        "--collection",
        "e",
        "--docs",
        s(&edge),
        "--quiet",
    ]);
    let got = ok(&["find", "--db", s(&db), "--collection", "e"]);
    assert!(
        got.contains("9223372036854775807") && got.contains("-9223372036854775808"),
        "{got}"
    );
}

#[test]
fn a_document_that_cannot_be_inserted_names_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    // Line 3 is blank (skipped); line 9 repeats line 2's _id.
    let mut lines: Vec<String> = (0..12).map(|i| generated(i).to_string()).collect();
    lines[2] = String::new();
    lines[8] = json!({ "_id": 1, "name": "again" }).to_string();
    let file = dir.path().join("dup.jsonl");
    std::fs::write(&file, jsonl(&lines)).expect("write");
    let err = fails(&["load", "--db", s(&db), "--collection", "d", "--docs", s(&file)]);
    assert!(err.contains("duplicate _id 1"), "{err}");
    assert!(err.contains("line 9"), "names the line of the document: {err}");
    // Not even the database directory the load would have created is left.
    let err = fails(&["count", "--db", s(&db), "--collection", "d"]);
    assert!(err.contains("no database here"), "{err}");
    assert!(!db.exists());
    // A path that did not exist as written but names an existing database
    // (through a directory the load makes) is not the load's to remove.
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, jsonl(&lines[..2])).expect("write");
    ok(&[
        "load",
        "--db",
        s(&db),
        "--collection",
        "kept",
        "--docs",
        s(&good),
        "--quiet",
    ]);
    let roundabout = dir.path().join("missing").join("..").join("db");
    fails(&[
        "load",
        "--db",
        s(&roundabout),
        "--collection",
        "d",
        "--docs",
        s(&file),
    ]);
    assert_eq!(ok(&["count", "--db", s(&db), "--collection", "kept"]).trim(), "2");
}

#[test]
fn unknown_operators_and_collections_are_named() {
    let l = loaded();
    let db = l.db();
    let err = fails(&[
        "find",
        "--db",
        s(&db),
        "--collection",
        "c",
        "--filter",
        r#"{"n": {"$foo": 1}}"#,
    ]);
    assert!(err.contains("$foo"), "{err}");
    let err = fails(&[
        "count",
        "--db",
        s(&db),
        "--collection",
        "c",
        "--filter",
        r#"{"$or": [{"m": {"$foo": 1}}]}"#,
    ]);
    assert!(err.contains("$foo") && err.contains("\"m\""), "{err}");
    let err = fails(&["find", "--db", s(&db), "--collection", "nope"]);
    assert!(
        err.contains("unknown collection") && err.contains("nope"),
        "{err}"
    );
    let err = fails(&["count", "--db", s(&db), "--collection", "nope", "--filter", "{}"]);
    assert!(err.contains("nope"), "{err}");
    let err = fails(&[
        "find",
        "--db",
        s(&db),
        "--collection",
        "c",
        "--filter",
        "{not json",
    ]);
    assert!(err.contains("--filter"), "{err}");
}

/// A vector field on a dot path: `load --vectors` puts each row there
/// (beside the document's other fields under the same parent), where
/// `search` finds it; a document whose path runs through a value that is
/// not a document, or that already holds a value there, is refused by its
/// line, and nothing is loaded.
#[test]
fn load_puts_vectors_on_a_dot_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = dir.path().join("docs.jsonl");
    let lines = [
        r#"{"_id": 0, "emb": {"model": "m1"}}"#,
        r#"{"_id": 1}"#,
        r#"{"_id": 2, "emb": {}}"#,
    ];
    std::fs::write(&docs, jsonl(&lines.map(String::from))).expect("write docs");
    let rows: [[f32; 2]; 3] = [[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]];
    let vectors = dir.path().join("v.f32");
    std::fs::write(
        &vectors,
        rows.iter()
            .flatten()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .expect("write vectors");
    let queries = dir.path().join("q.f32");
    std::fs::write(
        &queries,
        [0.9f32, 0.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .expect("write queries");
    let db = dir.path().join("db");
    let load = |docs: &Path, collection: &str| {
        vec![
            "load".to_owned(),
            "--db".into(),
            s(&db).into(),
            "--collection".into(),
            collection.into(),
            "--docs".into(),
            s(docs).into(),
            "--vectors".into(),
            s(&vectors).into(),
            "--vector-field".into(),
            "emb.v".into(),
            "--dim".into(),
            "2".into(),
            "--quiet".into(),
        ]
    };
    let args = load(&docs, "c");
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let out = ok(&[
        "search",
        "--db",
        s(&db),
        "--collection",
        "c",
        "--field",
        "emb.v",
        "--queries",
        s(&queries),
        "--k",
        "3",
    ]);
    let lines = parse_lines(&out);
    let ids: Vec<i64> = lines[0]["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| h["_id"].as_i64().expect("an id"))
        .collect();
    assert_eq!(ids, [1, 0, 2], "{out}");
    let found = ok(&[
        "find",
        "--db",
        s(&db),
        "--collection",
        "c",
        "--filter",
        r#"{"_id": 0}"#,
    ]);
    assert!(
        found.contains("\"model\":\"m1\""),
        "the parent's other fields stay: {found}"
    );
    for (bad, want) in [
        (r#"{"_id": 1, "emb": 7}"#, "\"emb\" is not a document but int"),
        (
            r#"{"_id": 1, "emb": {"v": [1, 2]}}"#,
            "already has a value at vector field \"emb.v\"",
        ),
    ] {
        let file = dir.path().join("bad.jsonl");
        std::fs::write(
            &file,
            jsonl(&[r#"{"_id": 0}"#, bad, r#"{"_id": 2}"#].map(String::from)),
        )
        .expect("write");
        let args = load(&file, "d");
        let err = fails(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(err.contains(want) && err.contains("line 2"), "{err}");
        let err = fails(&["count", "--db", s(&db), "--collection", "d"]);
        assert!(err.contains("\"d\""), "nothing loaded: {err}");
    }
}

/// `slate load --vector-codes` keeps row codes: a gather then rules most
/// rows out by their codes, and every query's hits are those of a
/// collection loaded without codes.
#[test]
fn vector_codes_prune_a_gather_and_change_no_hit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (n, dim) = (2_000usize, 16usize);
    let docs = dir.path().join("docs.jsonl");
    let lines: Vec<String> = (0..n)
        .map(|i| format!("{{\"_id\": {i}, \"g\": {}}}", i % 4))
        .collect();
    std::fs::write(&docs, jsonl(&lines)).expect("write docs");
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut unit = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    };
    let floats: Vec<u8> = (0..(n + 3) * dim).flat_map(|_| unit().to_le_bytes()).collect();
    let (vectors, queries) = (dir.path().join("v.f32"), dir.path().join("q.f32"));
    std::fs::write(&vectors, &floats[..n * dim * 4]).expect("write vectors");
    std::fs::write(&queries, &floats[n * dim * 4..]).expect("write queries");
    let db = dir.path().join("db");
    let dim_s = dim.to_string();
    for (collection, codes) in [("plain", false), ("coded", true)] {
        let mut args = vec![
            "load",
            "--db",
            s(&db),
            "--collection",
            collection,
            "--docs",
            s(&docs),
            "--index",
            "g",
            "--vectors",
            s(&vectors),
            "--vector-field",
            "v",
            "--dim",
            &dim_s,
            "--quiet",
        ];
        if codes {
            args.push("--vector-codes");
        }
        ok(&args);
    }
    let wider = dir.path().join("w.f32");
    std::fs::write(&wider, vec![0u8; n * (dim + 1) * 4]).expect("write");
    let dim1 = (dim + 1).to_string();
    // Vectors of another size, another metric, or codes the field does not
    // keep: refused before any insert, naming the field's own setting.
    let refused = [
        (&wider, &dim1, &[][..], format!("holds {dim}-dimensional vectors")),
        (
            &vectors,
            &dim_s,
            &["--metric", "cosine"][..],
            "compares \"v\" by l2, not cosine".to_owned(),
        ),
        (
            &vectors,
            &dim_s,
            &["--vector-codes"][..],
            "keeps no codes".to_owned(),
        ),
    ];
    for (file, dim_arg, extra, want) in refused {
        let mut args = vec![
            "load",
            "--db",
            s(&db),
            "--collection",
            "plain",
            "--docs",
            s(&docs),
            "--vectors",
            s(file),
            "--vector-field",
            "v",
            "--dim",
            dim_arg,
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let err = fails(&args);
        assert!(err.contains(&want), "{err}");
    }
    let search = |collection: &str, explain: bool| {
        let mut args = vec![
            "search",
            "--db",
            s(&db),
            "--collection",
            collection,
            "--field",
            "v",
            "--queries",
            s(&queries),
            "--k",
            "10",
            "--filter",
            r#"{"g": {"$in": [1, 2]}}"#,
            "--strategy",
            "gather",
        ];
        if explain {
            args.push("--explain");
        }
        ok(&args)
    };
    let hits = |out: &str| -> Vec<Value> {
        parse_lines(out)
            .into_iter()
            .filter_map(|mut v| v.get_mut("hits").map(Value::take))
            .collect()
    };
    let (plain, coded) = (search("plain", false), search("coded", false));
    assert_eq!(hits(&coded), hits(&plain));
    assert_eq!(hits(&coded).len(), 3);
    // 1,000 candidates each: most ruled out by the codes, none without.
    let pruned = |out: &str| -> Vec<u64> {
        out.split("rows_pruned=")
            .skip(1)
            .map(|rest| {
                rest.split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("count")
            })
            .collect()
    };
    let coded = pruned(&search("coded", true));
    assert_eq!(coded.len(), 3, "one explain per query");
    assert!(coded.iter().all(|&p| p > 500), "{coded:?}");
    assert!(pruned(&search("plain", true)).iter().all(|&p| p == 0));
}

/// Two-dimensional vectors `rows` as raw little-endian f32.
fn f32_file(path: &Path, rows: &[[f32; 2]]) {
    let bytes: Vec<u8> = rows.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write vectors");
}

/// Documents 0 to 3 (`docs.jsonl`) and their vectors (`v.f32`) in `dir`:
/// document `i` at `x` = 0, 1, 3, 2.
fn four_points(dir: &Path) -> (PathBuf, PathBuf) {
    let docs = dir.join("docs.jsonl");
    std::fs::write(
        &docs,
        jsonl(&(0..4).map(|i| format!("{{\"_id\": {i}}}")).collect::<Vec<_>>()),
    )
    .expect("write");
    let vectors = dir.join("v.f32");
    f32_file(&vectors, &[[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [2.0, 0.0]]);
    (docs, vectors)
}

#[test]
fn bad_query_input_prints_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let (docs, vectors) = four_points(dir.path());

    // A query refused after `--load` used to find the load committed.
    let bad_filter = r#"{"a": {"$foo": 1}}"#;
    let loads = ["--db", s(&db), "--collection", "c", "--load", s(&docs), "--quiet"];
    let queries = dir.path().join("q.f32");
    f32_file(&queries, &[[0.0, 0.0]]);
    let missing = dir.path().join("missing.f32");
    let nan = dir.path().join("nan.f32");
    f32_file(&nan, &[[0.0, 0.0], [f32::NAN, 1.0]]);
    for (command, names) in [
        (vec!["find", "--filter", bad_filter], "$foo"),
        (vec!["find", "--sort", "a:sideways"], "sideways"),
        (vec!["find", "--sort", "a", "--sort", "a:desc"], "named twice"),
        (vec!["count", "--filter", bad_filter], "$foo"),
        (
            vec![
                "search",
                "--field",
                "v",
                "--queries",
                s(&queries),
                "--filter",
                bad_filter,
            ],
            "$foo",
        ),
        (
            vec!["search", "--field", "v", "--queries", s(&queries), "--k", "0"],
            "--k",
        ),
        (
            vec!["search", "--field", "v", "--queries", s(&missing)],
            "missing.f32",
        ),
        // Refused by the collection the load would make (not partitioned),
        // before the load writes it.
        (vec!["find", "--partition", "\"t1\""], "is not partitioned"),
        (vec!["count", "--partition", "\"t1\""], "is not partitioned"),
        (vec!["find", "--project", ""], "project"),
        (vec!["find", "--project", "a,,b"], "project"),
        // The field and the query vectors are judged against the collection
        // the load makes.
        (
            vec![
                "search",
                "--field",
                "w",
                "--queries",
                s(&queries),
                "--vectors",
                s(&vectors),
                "--vector-field",
                "v",
                "--dim",
                "2",
            ],
            "no vector field \"w\"",
        ),
        (
            vec![
                "search",
                "--field",
                "v",
                "--queries",
                s(&nan),
                "--vectors",
                s(&vectors),
                "--vector-field",
                "v",
                "--dim",
                "2",
            ],
            "query 1",
        ),
    ] {
        let mut args = command.clone();
        args.extend_from_slice(&loads);
        let err = fails(&args);
        assert!(err.contains(names), "{command:?}: {err}");
        let err = fails(&["count", "--db", s(&db), "--collection", "c"]);
        assert!(
            err.contains("no database here"),
            "{command:?} left a database: {err}"
        );
    }

    ok(&[
        "load",
        "--db",
        s(&db),
        "--collection",
        "c",
        "--docs",
        s(&docs),
        "--vectors",
        s(&vectors),
        "--vector-field",
        "v",
        "--dim",
        "2",
        "--quiet",
    ]);
    fn search<'a>(db: &'a Path, queries: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "search",
            "--db",
            s(db),
            "--collection",
            "c",
            "--field",
            "v",
            "--queries",
            s(queries),
        ];
        args.extend_from_slice(extra);
        args
    }
    // A NaN in the third query: refused before the first two are printed,
    // and named by its own row.
    f32_file(&queries, &[[0.0, 0.0], [1.0, 0.0], [f32::NAN, 0.0]]);
    let err = fails(&search(&db, &queries, &[]));
    assert!(err.contains("query 2"), "{err}");
    // An empty filter is no filter: --batch takes it.
    f32_file(&queries, &[[0.0, 0.0]]);
    let out = parse_lines(&ok(&search(
        &db,
        &queries,
        &["--batch", "--filter", "{}", "--k", "2"],
    )));
    assert_eq!(out[0]["hits"].as_array().map(Vec::len), Some(2), "{out:?}");
    // No query at all still has its filter checked.
    let empty = dir.path().join("empty.f32");
    std::fs::write(&empty, b"").expect("write");
    let err = fails(&search(&db, &empty, &["--filter", bad_filter]));
    assert!(err.contains("$foo"), "{err}");
    // .fvecs of another dimension: the field's, not a `--dim` search lacks.
    let fvecs = dir.path().join("q.fvecs");
    let row: Vec<u8> = 3i32.to_le_bytes().into_iter().chain([0u8; 12]).collect();
    std::fs::write(&fvecs, row).expect("write");
    let err = fails(&search(&db, &fvecs, &[]));
    assert!(
        err.contains("field \"v\" holds 2-dimensional vectors") && !err.contains("--dim"),
        "{err}"
    );

    // A component so large that distances would overflow to infinity (and
    // stop ordering hits) is refused at load, naming it.
    let huge = dir.path().join("huge.f32");
    f32_file(&huge, &[[0.0, 0.0], [1e20, 0.0], [0.0, 0.0], [0.0, 0.0]]);
    let err = fails(&[
        "load",
        "--db",
        s(&db),
        "--collection",
        "h",
        "--docs",
        s(&docs),
        "--vectors",
        s(&huge),
        "--vector-field",
        "v",
        "--dim",
        "2",
        "--quiet",
    ]);
    assert!(err.contains("would overflow"), "{err}");
    f32_file(&queries, &[[-1e20, 0.0]]);
    let err = fails(&search(&db, &queries, &["--k", "1"]));
    assert!(err.contains("query 0") && err.contains("would overflow"), "{err}");

    // Into an existing database: a refused query leaves its collection
    // unwritten (the database stays, as it was).
    let err = fails(&[
        "find",
        "--db",
        s(&db),
        "--collection",
        "p",
        "--load",
        s(&docs),
        "--quiet",
        "--partition",
        "\"t1\"",
    ]);
    assert!(err.contains("is not partitioned"), "{err}");
    let err = fails(&["count", "--db", s(&db), "--collection", "p"]);
    assert!(err.contains("unknown collection"), "{err}");
    // A dimension whose row size overflows is a bad input, not a panic.
    let out = run(&[
        "load",
        "--db",
        s(&db),
        "--collection",
        "d",
        "--docs",
        s(&docs),
        "--vectors",
        s(&vectors),
        "--vector-field",
        "v",
        "--dim",
        "4611686018427387904",
        "--quiet",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not a whole number of rows"), "{err}");
    // `load --memory` would load into nothing that outlives it.
    let out = run(&["load", "--memory", "--collection", "m", "--docs", s(&docs)]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("would keep nothing"));
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    use std::io::Read;
    let l = loaded();
    let mut child = Command::new(env!("CARGO_BIN_EXE_slate"))
        .args(["find", "--db", s(&l.db()), "--collection", "c"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // One line read, then the pipe closed with most of the 2,000 documents
    // (several pipe buffers) unwritten, as `| head -1` does.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut first = [0u8; 64];
    stdout.read_exact(&mut first).expect("read");
    drop(stdout);
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--queries /dev/stdin` beside `--load`: the queries are read once, when
/// the load checks them, and that read is the one searched (a second read
/// of the pipe found it empty).
#[cfg(unix)]
#[test]
fn queries_piped_in_are_read_once_beside_a_load() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = tempfile::tempdir().expect("tempdir");
    let (docs, vectors) = four_points(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_slate"))
        .args([
            "search",
            "--memory",
            "--collection",
            "c",
            "--load",
            s(&docs),
            "--vectors",
            s(&vectors),
            "--vector-field",
            "v",
            "--dim",
            "2",
            "--field",
            "v",
            "--queries",
            "/dev/stdin",
            "--k",
            "2",
            "--quiet",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn slate");
    let query: Vec<u8> = [2.9f32, 0.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&query)
        .expect("write the query");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines = parse_lines(&String::from_utf8(out.stdout).expect("utf-8"));
    // One answer, then the summary.
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1]["summary"]["queries"], 1, "{lines:?}");
    let ids: Vec<i64> = lines[0]["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|h| h["_id"].as_i64().expect("_id"))
        .collect();
    assert_eq!(ids, [2, 3]);
}
