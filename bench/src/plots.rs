//! PNG plots (plotters, bitmap backend; text drawn with ab_glyph from a TTF
//! loaded at run time).

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};

use crate::report::Report;
use crate::Res;

const FONT: &str = "sans-serif";
const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a TTF for the plots' text: `$SLATE_BENCH_FONT`, else DejaVu Sans
/// (Debian package `fonts-dejavu-core`, installed by `scripts/setup.sh`).
pub fn load_font() -> Res<()> {
    let env = std::env::var("SLATE_BENCH_FONT").ok();
    let path = env
        .iter()
        .map(String::as_str)
        .chain(FONT_PATHS)
        .find(|p| Path::new(p).exists())
        .ok_or(
            "no TTF font for the plots: install fonts-dejavu-core (scripts/setup.sh) or set SLATE_BENCH_FONT",
        )?;
    let bytes: &'static [u8] = Box::leak(std::fs::read(path)?.into_boxed_slice());
    register_font(FONT, FontStyle::Normal, bytes).map_err(|_| format!("{path}: not a usable font"))?;
    Ok(())
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(120, 120, 120),
    RGBColor(148, 103, 189),
];

type Area<'a> = DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>;

fn err(e: impl std::fmt::Display) -> Box<dyn std::error::Error> {
    e.to_string().into()
}

/// An axis number without trailing zeros: 0.001, 250, 10k, 2.5M.
fn num(x: f64) -> String {
    let trim = |s: String| {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_owned()
        } else {
            s
        }
    };
    if x >= 1e6 {
        format!("{}M", trim(format!("{:.2}", x / 1e6)))
    } else if x >= 1e3 {
        format!("{}k", trim(format!("{:.2}", x / 1e3)))
    } else {
        trim(format!("{x:.4}"))
    }
}

fn color_of(name: &str, i: usize) -> RGBColor {
    match name {
        "gather" => COLORS[0],
        "scan" => COLORS[1],
        "bitmap" => COLORS[2],
        "auto" => COLORS[3],
        "reference" => COLORS[4],
        "plain" => COLORS[5],
        _ => COLORS[i % COLORS.len()],
    }
}

/// Lines of (x, y) on log-log axes.
fn log_lines(
    area: &Area<'_>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    lines: &[(String, Vec<(f64, f64)>)],
) -> Res<()> {
    let pts = lines.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(format!("plot {title}: no points").into());
    }
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((x0 * 0.7..x1 * 1.4).log_scale(), (y0 * 0.5..y1 * 2.0).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| num(*x))
        .y_label_formatter(&|y| num(*y))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    for (i, (name, points)) in lines.iter().enumerate() {
        let color = color_of(name, i);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// QPS against selectivity, one line per strategy and auto; indexed filter
/// on the left, not indexed on the right.
pub fn sweep(r: &Report, out: &Path) -> Res<()> {
    let root = BitMapBackend::new(out, (1400, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let panels = root.split_evenly((1, 2));
    for (area, indexed) in panels.iter().zip([true, false]) {
        let lines: Vec<(String, Vec<(f64, f64)>)> =
            ["gather", "scan", "bitmap", "auto", "reference", "plain"]
                .iter()
                .map(|k| {
                    let pts = r
                        .sweep
                        .iter()
                        .filter(|p| p.indexed == indexed)
                        .filter_map(|p| Some((p.selectivity, *p.qps.get(*k)?)))
                        .collect::<Vec<_>>();
                    (k.to_string(), pts)
                })
                .filter(|(_, p)| !p.is_empty())
                .collect();
        let title = format!(
            "{} × {}, k = {}: filter {}",
            num(r.sweep_size.n as f64),
            r.sweep_size.dim,
            r.sweep_size.k,
            if indexed { "indexed" } else { "not indexed" }
        );
        log_lines(
            area,
            &title,
            "fraction of rows matching (log)",
            "queries per second (log)",
            &lines,
        )?;
    }
    root.present().map_err(err)?;
    Ok(())
}

/// Search QPS against rows, dim 128, one line per mode and thread count.
pub fn vector_qps(r: &Report, out: &Path) -> Res<()> {
    let root = BitMapBackend::new(out, (900, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let dim = 128;
    let mut lines = Vec::new();
    for mode in ["single", "batch64"] {
        for threads in [1, 2] {
            let pts: Vec<(f64, f64)> = r
                .vector_search
                .iter()
                .filter(|v| v.dim == dim && v.mode == mode && v.threads == threads)
                .map(|v| (v.n as f64, v.qps))
                .collect();
            let t = if threads == 1 { "thread" } else { "threads" };
            lines.push((format!("{mode}, {threads} {t}"), pts));
        }
    }
    log_lines(
        &root,
        &format!("Exact top-10 search, dim {dim}"),
        "rows (log)",
        "queries per second (log)",
        &lines,
    )?;
    root.present().map_err(err)?;
    Ok(())
}

/// Slate ÷ SQLite per query at the largest document size: one bar for
/// MemoryStore, one for RocksStore (reopened), from 1 (equal) on a log axis.
pub fn sqlite_ratio(r: &Report, out: &Path) -> Res<()> {
    let t = r
        .documents
        .iter()
        .max_by_key(|t| t.n)
        .ok_or("no document table")?;
    let rows: Vec<_> = std::iter::once(&t.insert).chain(&t.queries).collect();
    let names: Vec<String> = rows.iter().map(|q| q.query.clone()).collect();
    let series = [
        ("memory/sqlite", "Slate memory ÷ SQLite"),
        ("rocks/sqlite", "Slate rocks ÷ SQLite"),
    ];
    let values: Vec<f64> = rows
        .iter()
        .flat_map(|q| series.iter().filter_map(|(k, _)| q.ratio.get(*k).copied()))
        .collect();
    let lo = values.iter().copied().fold(1.0f64, f64::min) * 0.7;
    let hi = values.iter().copied().fold(1.0f64, f64::max) * 1.4;
    let nq = rows.len() as f64;
    let root = BitMapBackend::new(out, (1100, 80 + 36 * rows.len() as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Slate time ÷ SQLite time, {} records (right of 1: Slate slower)",
                t.n
            ),
            (FONT, 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(290)
        .build_cartesian_2d((lo..hi).log_scale(), -0.5..nq - 0.5)
        .map_err(err)?;
    chart
        .configure_mesh()
        .y_labels(rows.len())
        .y_label_formatter(&|y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 {
                // Row 0 at the top.
                let row = names.len() as f64 - 1.0 - i;
                if row >= 0.0 {
                    names.get(row as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            } else {
                String::new()
            }
        })
        .disable_y_mesh()
        .x_desc("ratio (log)")
        .x_label_formatter(&|x| num(*x))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(err)?;
    for (s, (key, label)) in series.iter().enumerate() {
        let color = COLORS[s];
        let off = if s == 0 { -0.38 } else { 0.0 };
        chart
            .draw_series(rows.iter().enumerate().filter_map(|(i, q)| {
                let v = *q.ratio.get(*key)?;
                let y = nq - 1.0 - i as f64 + off;
                Some(Rectangle::new([(1.0, y), (v, y + 0.36)], color.filled()))
            }))
            .map_err(err)?
            .label(*label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled()));
    }
    chart
        .draw_series(LineSeries::new(
            [(1.0, -0.5), (1.0, nq - 0.5)],
            BLACK.stroke_width(1),
        ))
        .map_err(err)?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}
