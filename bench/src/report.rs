//! The report: every figure as JSON, the tables as markdown, and the check
//! that every figure was produced.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;
use slate_bench::sweep::SweepPoint;

use crate::concurrency::Concurrency;
use crate::docs::{self, MEMORY, ROCKS, ROCKS_FRESH, SQLITE, SQLITE_JSON};
use crate::partition;
use crate::tcp;
use crate::vectors::{Bandwidth, InsertRow, Recall, SearchRow};

/// This machine.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `model name` from /proc/cpuinfo ("unknown" elsewhere).
    pub cpu: String,
    pub cores: usize,
    /// Last-level cache size as the kernel reports it ("unknown" elsewhere).
    pub l3_cache: String,
    pub bandwidth: Bandwidth,
}

impl Machine {
    /// Describes this machine; `bandwidth` is measured by the caller.
    pub fn here(bandwidth: Bandwidth) -> Self {
        let l3_cache = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        Self {
            cpu: Self::cpu(),
            cores: Self::cores(),
            l3_cache,
            bandwidth,
        }
    }

    /// `model name` from /proc/cpuinfo ("unknown" elsewhere).
    pub fn cpu() -> String {
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into())
    }

    /// Cores available to this process.
    pub fn cores() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// The sweep's size.
#[derive(Debug, Clone, Serialize)]
pub struct SweepSize {
    pub n: usize,
    pub dim: usize,
    pub k: usize,
}

/// Every figure of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub command: String,
    pub mode: String,
    pub machine: Machine,
    pub documents: Vec<docs::Table>,
    pub partitioned: partition::Table,
    pub concurrency: Vec<Concurrency>,
    /// Seed 000's TCP table: embedded against a server on loopback.
    pub tcp: tcp::Table,
    pub vector_insert: Vec<InsertRow>,
    pub vector_search: Vec<SearchRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recall: Option<Recall>,
    pub sweep_size: SweepSize,
    pub sweep: Vec<SweepPoint>,
    /// Wall time of the whole run, seconds.
    pub seconds: f64,
    pub notes: Vec<String>,
}

/// Every number in `v` that is missing (null), not finite or zero, and every
/// empty string or list, by JSON path.
pub fn missing_figures(v: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    use serde_json::Value;
    match v {
        Value::Null => out.push(format!("{path}: null")),
        Value::Number(n) => match n.as_f64() {
            Some(x) if x.is_finite() && x != 0.0 => {}
            other => out.push(format!("{path}: {other:?}")),
        },
        Value::String(s) if s.is_empty() => out.push(format!("{path}: empty")),
        Value::Array(xs) if xs.is_empty() && path != "$.notes" => out.push(format!("{path}: empty list")),
        Value::Array(xs) => {
            for (i, x) in xs.iter().enumerate() {
                missing_figures(x, &format!("{path}[{i}]"), out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                missing_figures(x, &format!("{path}.{k}"), out);
            }
        }
        _ => {}
    }
}

/// Milliseconds to three significant digits.
pub fn ms(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else if x >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn ratio(x: Option<&f64>) -> String {
    match x {
        Some(r) if *r > 1.0 => format!("**{r:.2}**"),
        Some(r) => format!("{r:.2}"),
        None => "–".into(),
    }
}

fn get(m: &BTreeMap<String, f64>, k: &str) -> String {
    m.get(k).map_or("–".into(), |x| ms(*x))
}

pub fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A row that Slate loses: (table, query, which ratio, ratio).
pub fn losses(r: &Report) -> Vec<(String, String, String, f64)> {
    let mut out = Vec::new();
    let mut scan = |table: String, rows: Vec<(&String, &BTreeMap<String, f64>)>| {
        for (q, ratios) in rows {
            for (k, v) in ratios {
                if *v > 1.0 {
                    out.push((table.clone(), q.clone(), k.clone(), *v));
                }
            }
        }
    };
    for t in &r.documents {
        let rows = std::iter::once(&t.insert)
            .chain(&t.queries)
            .map(|row| (&row.query, &row.ratio))
            .collect();
        scan(format!("documents, N = {}", thousands(t.n)), rows);
    }
    let p = &r.partitioned;
    let rows = std::iter::once(&p.insert)
        .chain(&p.queries)
        .map(|row| (&row.query, &row.ratio))
        .collect();
    scan(format!("partitioned, 3 × {}", thousands(p.n)), rows);
    for c in &r.concurrency {
        let name = format!("{} writers + {} readers", c.writers, c.readers);
        scan(
            format!("concurrency, N = {}", thousands(c.n)),
            vec![(&name, &c.ratio)],
        );
    }
    out
}

/// The markdown tables (image links relative to the report directory, under
/// `plots`).
pub fn markdown(r: &Report, plots: &str) -> String {
    let mut s = String::new();
    let bw = &r.machine.bandwidth;
    let _ = writeln!(s, "# Slate benchmark report ({} mode)\n", r.mode);
    let _ = writeln!(
        s,
        "`{}` — {}, {} cores, L3 {}; memory read bandwidth measured in this run: {:.1} GiB/s on one \
         thread, {:.1} GiB/s on two (sum over {} MiB). Whole run: {:.0} s. Times are medians in \
         milliseconds; a ratio is Slate's time ÷ SQLite's (**bold**: above 1, Slate is slower).\n",
        r.command,
        r.machine.cpu,
        r.machine.cores,
        r.machine.l3_cache,
        bw.one_thread_gib_s,
        bw.two_threads_gib_s,
        bw.buffer_mib,
        r.seconds
    );
    for note in &r.notes {
        let _ = writeln!(s, "> {note}\n");
    }
    for t in &r.documents {
        let _ = writeln!(
            s,
            "## Documents (seed 000): {} users × {} records\n",
            t.users,
            thousands(t.n)
        );
        let _ = writeln!(
            s,
            "| query | rows | Slate memory | Slate rocks, after insert | Slate rocks, reopened | SQLite | \
             SQLite JSON | memory ÷ SQLite | rocks ÷ SQLite | memory ÷ JSON | rocks ÷ JSON |"
        );
        let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for row in std::iter::once(&t.insert).chain(&t.queries) {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                row.query,
                thousands(row.rows),
                get(&row.ms, MEMORY),
                get(&row.ms, ROCKS_FRESH),
                get(&row.ms, ROCKS),
                get(&row.ms, SQLITE),
                get(&row.ms, SQLITE_JSON),
                ratio(row.ratio.get("memory/sqlite")),
                ratio(row.ratio.get("rocks/sqlite")),
                ratio(row.ratio.get("memory/sqlite-json")),
                ratio(row.ratio.get("rocks/sqlite-json")),
            );
        }
        s.push('\n');
    }
    let p = &r.partitioned;
    let _ = writeln!(
        s,
        "## Key-partitioned layout (seed 001): {} partitions × {} records in one collection\n",
        p.users,
        thousands(p.n)
    );
    let _ = writeln!(
        s,
        "| query | rows | Slate memory | Slate rocks, reopened | SQLite | memory ÷ SQLite | rocks ÷ SQLite |"
    );
    let _ = writeln!(s, "|---|--:|--:|--:|--:|--:|--:|");
    for row in std::iter::once(&p.insert).chain(&p.queries) {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.query,
            thousands(row.rows),
            get(&row.ms, MEMORY),
            get(&row.ms, ROCKS),
            get(&row.ms, SQLITE),
            ratio(row.ratio.get("memory/sqlite")),
            ratio(row.ratio.get("rocks/sqlite")),
        );
    }
    s.push('\n');
    if let Some(flat) = r.documents.iter().find(|t| t.n == p.n) {
        let _ = writeln!(
            s,
            "Partitioned against flat keys (same N, Slate RocksStore reopened):\n"
        );
        let _ = writeln!(s, "| operation | flat | partitioned | partitioned ÷ flat |");
        let _ = writeln!(s, "|---|--:|--:|--:|");
        let pairs = [
            ("bulk insert", Some(&flat.insert), Some(&p.insert)),
            (
                "status = active",
                flat.queries
                    .iter()
                    .find(|q| q.query.starts_with("status = active (")),
                p.queries.iter().find(|q| q.query == "1 prefix: status = active"),
            ),
            (
                "1,000 point lookups",
                flat.queries.iter().find(|q| q.query.ends_with("point lookups")),
                p.queries.iter().find(|q| q.query.ends_with("point lookups")),
            ),
        ];
        for (name, a, b) in pairs {
            if let (Some(a), Some(b)) = (a.and_then(|a| a.ms.get(ROCKS)), b.and_then(|b| b.ms.get(ROCKS))) {
                let _ = writeln!(s, "| {name} | {} | {} | {:.2} |", ms(*a), ms(*b), b / a);
            }
        }
        s.push('\n');
    }
    let _ = writeln!(s, "## Concurrency (seed 000): 2 writers + 4 readers\n");
    let _ = writeln!(
        s,
        "| records | inserted per writer | Slate memory | Slate rocks | SQLite | memory ÷ SQLite | rocks ÷ SQLite |"
    );
    let _ = writeln!(s, "|--:|--:|--:|--:|--:|--:|--:|");
    for c in &r.concurrency {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            thousands(c.n),
            thousands(c.inserted_per_writer),
            get(&c.ms, MEMORY),
            get(&c.ms, ROCKS),
            get(&c.ms, SQLITE),
            ratio(c.ratio.get("memory/sqlite")),
            ratio(c.ratio.get("rocks/sqlite")),
        );
    }
    s.push('\n');
    tcp::markdown(&r.tcp, &mut s);
    let _ = writeln!(s, "## Vector insert (seed 002), MemoryStore, 10 batches\n");
    let _ = writeln!(s, "| rows × dim | ms | vectors/s |");
    let _ = writeln!(s, "|---|--:|--:|");
    for i in &r.vector_insert {
        let _ = writeln!(
            s,
            "| {} × {} | {} | {} |",
            thousands(i.n),
            i.dim,
            ms(i.ms),
            thousands(i.vectors_per_s as usize)
        );
    }
    s.push('\n');
    let _ = writeln!(s, "## Exact vector search (seed 002), k = 10, l2\n");
    let _ = writeln!(
        s,
        "Bytes scanned per second against the bandwidth measured above for the same thread count. \
         A batch counts every query's pass over the rows; its blocked scan reuses rows from cache, \
         so it can pass 100%.\n"
    );
    let _ = writeln!(
        s,
        "| rows × dim | vectors, MiB | mode | threads | ms/query | QPS | GiB/s | of bandwidth |"
    );
    let _ = writeln!(s, "|---|--:|---|--:|--:|--:|--:|--:|");
    for v in &r.vector_search {
        let _ = writeln!(
            s,
            "| {} × {} | {:.0} | {} | {} | {} | {} | {:.1} | {:.0}% |",
            thousands(v.n),
            v.dim,
            (v.n * v.dim * 4) as f64 / (1u64 << 20) as f64,
            v.mode,
            v.threads,
            ms(v.ms_per_query),
            thousands(v.qps.round() as usize),
            v.gib_s,
            v.of_bandwidth * 100.0
        );
    }
    s.push('\n');
    if let Some(rc) = &r.recall {
        let _ = writeln!(
            s,
            "SIFT-small ({} × {}, {} queries, shipped ground truth): recall@10 = {:.3}, {} QPS on one thread.\n",
            thousands(rc.base),
            rc.dim,
            rc.queries,
            rc.recall_at_10,
            thousands(rc.qps_one_thread.round() as usize)
        );
    }
    let sz = &r.sweep_size;
    let _ = writeln!(
        s,
        "## Hybrid selectivity sweep: {} × {}, k = {}, one thread, QPS\n",
        thousands(sz.n),
        sz.dim,
        sz.k
    );
    let _ = writeln!(
        s,
        "| filter | matching | auto chose | gather | scan | bitmap | auto | auto, repeated filter | kernel reference | plain reference | auto ÷ best forced |"
    );
    let _ = writeln!(s, "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for p in &r.sweep {
        let q = |k: &str| p.qps.get(k).map_or("–".into(), |x| format!("{x:.0}"));
        let best = ["gather", "scan", "bitmap"]
            .iter()
            .filter_map(|k| p.qps.get(*k))
            .fold(0.0f64, |a, b| a.max(*b));
        let auto = p.qps.get("auto").copied().unwrap_or(0.0);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            p.label,
            thousands(p.matching),
            p.auto_choice,
            q("gather"),
            q("scan"),
            q("bitmap"),
            q("auto"),
            q(slate_bench::sweep::REPEATED),
            q("reference"),
            q("plain"),
            if best > 0.0 { auto / best } else { 0.0 }
        );
    }
    s.push('\n');
    let _ = writeln!(s, "## Where Slate is slower than SQLite\n");
    let l = losses(r);
    if l.is_empty() {
        let _ = writeln!(s, "Nowhere in this run.\n");
    } else {
        let _ = writeln!(s, "| table | row | ratio | Slate ÷ SQLite |");
        let _ = writeln!(s, "|---|---|---|--:|");
        for (t, q, k, v) in l {
            let _ = writeln!(s, "| {t} | {q} | {k} | {v:.2} |");
        }
        s.push('\n');
    }
    let _ = writeln!(s, "## Plots\n");
    for (file, title) in [
        ("sweep.png", "QPS against selectivity"),
        ("vector_qps.png", "QPS against dataset size"),
        ("sqlite_ratio.png", "Slate ÷ SQLite per query"),
    ] {
        let _ = writeln!(s, "![{title}]({plots}{file})\n");
    }
    s
}
