//! Repeated timing: a warm-up run, then runs until both a minimum time and a
//! minimum count are reached; the median is the figure reported.

use std::time::{Duration, Instant};

use crate::Res;

/// How long to time each measurement.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Keep repeating until this much time has been spent timing.
    pub min_time: Duration,
    /// And at least this many timed runs.
    pub min_runs: usize,
    /// Never more than this many timed runs.
    pub max_runs: usize,
}

/// One measured operation: its median time and the rows it returned.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Measured {
    /// Median wall time of one run, milliseconds.
    pub ms: f64,
    /// Rows (documents, hits) one run returned.
    pub rows: usize,
    /// Timed runs.
    pub runs: usize,
}

impl Timing {
    /// Runs `f` once untimed, then times it; `f` returns the rows it produced.
    pub fn measure(&self, mut f: impl FnMut() -> Res<usize>) -> Res<Measured> {
        let rows = f()?;
        let mut times = Vec::new();
        let start = Instant::now();
        while times.len() < self.max_runs && (times.len() < self.min_runs || start.elapsed() < self.min_time)
        {
            let t = Instant::now();
            let got = f()?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
            if got != rows {
                return Err(format!("a run returned {got} rows, the first {rows}").into());
            }
        }
        Ok(Measured {
            ms: median(&mut times),
            rows,
            runs: times.len(),
        })
    }
}

/// Median of `xs` (reorders it); 0 for an empty slice.
pub fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[mid]
    } else {
        (xs[mid - 1] + xs[mid]) / 2.0
    }
}

/// Times one call of `f`, in milliseconds.
pub fn once<T>(f: impl FnOnce() -> Res<T>) -> Res<(T, f64)> {
    let t = Instant::now();
    let out = f()?;
    Ok((out, t.elapsed().as_secs_f64() * 1e3))
}
