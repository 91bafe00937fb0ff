//! `slate-bench`: Slate's benchmark report in one run. Seed 000's document
//! workload and seed 001's partitioned layout beside SQLite, seed 002's vector
//! workload against the memory bandwidth measured in the same run, SIFT-small
//! recall, the hybrid selectivity sweep, and seed 000's embedded-against-TCP
//! table; written to `<out>/report.md`, `<out>/report.json` and PNG plots.
//! `--only tcp` runs the TCP section alone into `<out>/tcp.md` and
//! `<out>/tcp.json`. Exits non-zero if any figure is missing.

// Like every Slate binary: glibc malloc slows the per-document buffers (README, "Allocator").
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod concurrency;
mod docs;
mod partition;
mod plots;
mod records;
mod report;
mod sqlite;
mod tcp;
mod timing;
mod vectors;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use slate_bench::sweep::{run_sweep, SweepConfig};

use crate::report::{Machine, Report, SweepSize};
use crate::timing::Timing;

/// Errors of the benchmark run.
pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Slate's benchmark report: every figure beside a peer measured in the same run.
#[derive(Debug, Parser)]
#[command(name = "slate-bench", version)]
struct Args {
    /// Small sizes and short timings (about a minute): checks that every figure is produced.
    #[arg(long)]
    quick: bool,
    /// Directory for report.md, report.json and the PNG plots.
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// Run one section alone, written to `<out>/<section>.md` and `<out>/<section>.json`.
    #[arg(long, value_enum)]
    only: Option<Section>,
}

/// A section that runs alone with `--only`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Section {
    /// Seed 000's TCP table: embedded against a server on loopback.
    Tcp,
}

/// The sizes of one mode.
#[derive(Debug)]
struct Plan {
    doc_sizes: Vec<usize>,
    partition_n: usize,
    tcp_n: usize,
    timing: Timing,
    vector_sizes: Vec<(usize, usize)>,
    vector_time: Duration,
    bandwidth_mib: usize,
    sweep: SweepConfig,
}

fn plan(quick: bool) -> Plan {
    if quick {
        Plan {
            doc_sizes: vec![5_000],
            partition_n: 5_000,
            tcp_n: 5_000,
            timing: Timing {
                min_time: Duration::from_millis(40),
                min_runs: 2,
                max_runs: 50,
            },
            vector_sizes: vec![
                (2_000, 128),
                (5_000, 128),
                (10_000, 128),
                (10_000, 384),
                (10_000, 768),
            ],
            vector_time: Duration::from_millis(60),
            bandwidth_mib: 512,
            sweep: SweepConfig {
                n: 20_000,
                dim: 128,
                k: 10,
                queries: 8,
                min_time: Duration::from_millis(40),
                ..SweepConfig::default()
            },
        }
    } else {
        Plan {
            doc_sizes: vec![10_000, 100_000],
            partition_n: 100_000,
            tcp_n: 100_000,
            timing: Timing {
                min_time: Duration::from_millis(700),
                min_runs: 3,
                max_runs: 1_000,
            },
            vector_sizes: vec![
                (10_000, 128),
                (50_000, 128),
                (100_000, 128),
                (100_000, 384),
                (100_000, 768),
            ],
            vector_time: Duration::from_secs(1),
            bandwidth_mib: 1024,
            sweep: SweepConfig {
                n: 100_000,
                dim: 384,
                k: 10,
                queries: 16,
                min_time: Duration::from_millis(500),
                ..SweepConfig::default()
            },
        }
    }
}

/// The command line that reproduces this run.
fn command(args: &Args) -> String {
    let mut command = String::from("cargo run -p slate-bench --");
    if args.quick {
        command.push_str(" --quick");
    }
    if let Some(Section::Tcp) = args.only {
        command.push_str(" --only tcp");
    }
    command.push_str(&format!(" --out {}", args.out.display()));
    command
}

fn mode(args: &Args) -> String {
    if args.quick { "quick" } else { "full" }.into()
}

/// `--only tcp`: the TCP section alone; returns the figures missing.
fn run_tcp_only(args: &Args) -> Res<Vec<String>> {
    let start = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", start.elapsed().as_secs_f64());
    let p = plan(args.quick);
    let tcp = tcp::run(p.tcp_n, &p.timing, &log)?;
    let only = tcp::Only {
        command: command(args),
        mode: mode(args),
        cpu: report::Machine::cpu(),
        cores: report::Machine::cores(),
        tcp,
        seconds: start.elapsed().as_secs_f64(),
    };
    std::fs::create_dir_all(&args.out)?;
    let json = serde_json::to_value(&only)?;
    std::fs::write(args.out.join("tcp.json"), serde_json::to_string_pretty(&json)?)?;
    std::fs::write(args.out.join("tcp.md"), tcp::only_markdown(&only))?;
    let mut missing = Vec::new();
    report::missing_figures(&json, "$", &mut missing);
    eprintln!(
        "slate-bench: TCP section ({} mode) done in {:.0} s; report in {}",
        only.mode,
        only.seconds,
        args.out.join("tcp.md").display()
    );
    Ok(missing)
}

fn run(args: &Args) -> Res<Report> {
    let start = Instant::now();
    let log = move |msg: &str| eprintln!("[{:6.1}s] {msg}", start.elapsed().as_secs_f64());
    let p = plan(args.quick);
    let mut notes = Vec::new();

    log("memory bandwidth");
    let bandwidth = vectors::bandwidth(p.bandwidth_mib, p.vector_time * 2);
    let machine = Machine::here(bandwidth);

    let mut documents = Vec::new();
    for &n in &p.doc_sizes {
        documents.push(docs::run(n, &p.timing, &log)?);
    }
    let partitioned = partition::run(p.partition_n, &p.timing, &log)?;
    let mut concurrency = Vec::new();
    for &n in &p.doc_sizes {
        concurrency.push(concurrency::run(n, &log)?);
    }
    let tcp = tcp::run(p.tcp_n, &p.timing, &log)?;

    let mut vector_insert = Vec::new();
    let mut vector_search = Vec::new();
    for &(n, dim) in &p.vector_sizes {
        let (ins, rows) = vectors::run_size(n, dim, &machine.bandwidth, p.vector_time, &log)?;
        vector_insert.push(ins);
        vector_search.extend(rows);
    }
    let sift = vectors::siftsmall_dir();
    let recall = vectors::recall(&sift, &log)?;
    if recall.is_none() {
        notes.push(format!(
            "SIFT-small not found at {}: recall@10 skipped.",
            sift.display()
        ));
    }

    log(&format!(
        "hybrid sweep: {} × {}, {} queries",
        p.sweep.n, p.sweep.dim, p.sweep.queries
    ));
    let sweep = run_sweep(&p.sweep)?;

    Ok(Report {
        command: command(args),
        mode: mode(args),
        machine,
        documents,
        partitioned,
        concurrency,
        tcp,
        vector_insert,
        vector_search,
        recall,
        sweep_size: SweepSize {
            n: p.sweep.n,
            dim: p.sweep.dim,
            k: p.sweep.k,
        },
        sweep,
        seconds: start.elapsed().as_secs_f64(),
        notes,
    })
}

fn write(report: &Report, out: &std::path::Path) -> Res<Vec<String>> {
    std::fs::create_dir_all(out)?;
    let json = serde_json::to_value(report)?;
    std::fs::write(out.join("report.json"), serde_json::to_string_pretty(&json)?)?;
    std::fs::write(out.join("report.md"), report::markdown(report, ""))?;
    let mut missing = Vec::new();
    report::missing_figures(&json, "$", &mut missing);
    plots::load_font()?;
    type Draw = fn(&Report, &std::path::Path) -> Res<()>;
    let plots: [(&str, Draw); 3] = [
        ("sweep.png", plots::sweep),
        ("vector_qps.png", plots::vector_qps),
        ("sqlite_ratio.png", plots::sqlite_ratio),
    ];
    for (file, draw) in plots {
        let path = out.join(file);
        match draw(report, &path) {
            Ok(()) if std::fs::metadata(&path).map(|m| m.len() > 0).unwrap_or(false) => {}
            Ok(()) => missing.push(format!("{file}: empty")),
            Err(e) => missing.push(format!("{file}: {e}")),
        }
    }
    Ok(missing)
}

fn main() {
    // SAFETY: first in main, before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        slate::allocator::tune_mimalloc()
    };
    let args = Args::parse();
    if let Some(Section::Tcp) = args.only {
        match run_tcp_only(&args) {
            Ok(missing) if missing.is_empty() => return,
            Ok(missing) => {
                eprintln!("slate-bench: figures missing or zero:");
                for m in missing {
                    eprintln!("  {m}");
                }
            }
            Err(e) => eprintln!("slate-bench: {e}"),
        }
        std::process::exit(1);
    }
    let result = run(&args).and_then(|report| {
        let missing = write(&report, &args.out)?;
        Ok((report, missing))
    });
    match result {
        Ok((report, missing)) if missing.is_empty() => {
            eprintln!(
                "slate-bench: {} mode done in {:.0} s; report in {}",
                report.mode,
                report.seconds,
                args.out.display()
            );
            let losses = report::losses(&report);
            eprintln!(
                "  {} ratios above 1 (Slate slower than SQLite): see \"Where Slate is slower\" in report.md",
                losses.len()
            );
        }
        Ok((_, missing)) => {
            eprintln!("slate-bench: figures missing or zero:");
            for m in missing {
                eprintln!("  {m}");
            }
            std::process::exit(1);
        }
        Err(e) => {
            eprintln!("slate-bench: {e}");
            std::process::exit(1);
        }
    }
}
