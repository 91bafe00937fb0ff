//! Row codes: each row's vector also held as `dim` signed bytes with one
//! scale, from which a search bounds the row's exact distance after reading
//! a quarter of its bytes.
//!
//! A row `x` is coded as `c = round(x / s)` with `s = max|x_i| / 127`, and
//! keeps, beside `c`, the exact length of what the code misses,
//! `r = ‖x − s·c‖` (rounded up). A query `q` is coded the same way, with
//! `e = ‖q − s_q·c_q‖`. One integer dot product `D = c_q · c` (exact) then
//! pins `q · x` between
//!
//! ```text
//! s·s_q·D − s·e·‖c‖ − ‖q‖·r   and   s·s_q·D + s·e·‖c‖ + ‖q‖·r
//! ```
//!
//! (Cauchy–Schwarz on the two coding errors), and with it every metric's
//! distance. The bounds are then widened by the most the `f32` kernel can
//! round (it accumulates `dim` products), so that a row whose lower bound
//! exceeds a distance the kernel computed is certainly farther by the
//! kernel's own arithmetic: pruning on them never changes a result.

use simsimd::SpatialSimilarity;

use crate::metric::Metric;

/// The largest code magnitude.
const LEVELS: f32 = 127.0;

/// Squared norms past which no bound is given (f32 sums could overflow).
const HUGE_SQ: f64 = 1e36;

/// Norms below which cosine gives no bound (f32 squares could underflow).
const TINY_NORM: f64 = 1e-15;

/// Unit roundoff of `f32`.
const U32: f64 = f32::EPSILON as f64 / 2.0;

/// What a row's code needs beside its bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct CodeMeta {
    /// `s`: the row is about `scale × code`.
    scale: f32,
    /// `‖c‖²`, exact.
    code_sq: u32,
    /// `‖c‖`, rounded up.
    code_norm: f32,
    /// `‖x − s·c‖`, rounded up.
    resid: f32,
    /// `‖x‖`, rounded to nearest (cosine only).
    norm: f32,
}

/// `v` as an `f32` no smaller than `v`.
fn up(v: f64) -> f32 {
    let r = v as f32;
    if f64::from(r) < v {
        r.next_up()
    } else {
        r
    }
}

/// Codes `x` into `codes` (same length) and returns its metadata.
pub(crate) fn encode(x: &[f32], codes: &mut [i8]) -> CodeMeta {
    let max = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let scale = max / LEVELS;
    let mut code_sq = 0u64;
    let mut resid = 0.0f64;
    let mut norm = 0.0f64;
    for (c, &v) in codes.iter_mut().zip(x) {
        // `scale` may be 0 (a zero vector, or one so small that max / 127
        // underflows): every code is then 0 and the residual is `x` itself.
        let q = if scale > 0.0 {
            (v / scale).round().clamp(-LEVELS, LEVELS)
        } else {
            0.0
        };
        *c = q as i8;
        code_sq += (q as i64 * q as i64) as u64;
        let miss = f64::from(v) - f64::from(scale) * f64::from(q);
        resid += miss * miss;
        norm += f64::from(v) * f64::from(v);
    }
    CodeMeta {
        scale,
        // At most MAX_DIM × 127², below 2^32.
        code_sq: code_sq as u32,
        code_norm: up((code_sq as f64).sqrt()),
        // The sums above round too: a relative 1e-12 covers them.
        resid: up(resid.sqrt() * (1.0 + 1e-12)),
        norm: norm.sqrt() as f32,
    }
}

/// A query coded for bounding distances to coded rows.
#[derive(Debug, Clone)]
pub(crate) struct QueryCode {
    metric: Metric,
    codes: Vec<i8>,
    scale: f64,
    /// `‖q − s_q·c_q‖`, with room for rounding.
    err: f64,
    /// `‖q‖²` and `‖q‖`.
    sq: f64,
    norm: f64,
    /// How far (relatively) the `f32` kernel may round a distance.
    rel: f64,
}

impl QueryCode {
    /// Codes `query` (finite, of the rows' dimension) for `metric`.
    pub(crate) fn new(metric: Metric, query: &[f32]) -> Self {
        let mut codes = vec![0i8; query.len()];
        let meta = encode(query, &mut codes);
        let sq: f64 = query.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
        QueryCode {
            metric,
            codes,
            scale: f64::from(meta.scale),
            err: f64::from(meta.resid),
            sq,
            norm: sq.sqrt() * (1.0 + 1e-12),
            // simsimd accumulates `dim` terms in f32 lanes: a relative error
            // of at most about (dim + 2)·u; twice that, plus room for the
            // final reductions, is kept.
            rel: 2.0 * (query.len() as f64 + 8.0) * U32,
        }
    }

    /// Bounds `(lo, hi)` on the distance the metric's kernel computes
    /// between the query and the row coded as `codes`, `meta`; `None` when
    /// none can be given (a zero vector under cosine).
    #[inline]
    pub(crate) fn bounds(&self, codes: &[i8], meta: &CodeMeta) -> Option<(f64, f64)> {
        // Past about 1e18 the kernel's f32 sums may overflow (see
        // [`distance`](crate::distance)): no bound.
        let s = f64::from(meta.scale);
        if self.sq > HUGE_SQ || s * s * f64::from(meta.code_sq) > HUGE_SQ {
            return None;
        }
        let dot = <i8 as SpatialSimilarity>::dot(&self.codes, codes)?;
        let centre = s * self.scale * dot;
        // q·x lies within `centre ± spread`.
        let spread = s * self.err * f64::from(meta.code_norm) + self.norm * f64::from(meta.resid);
        match self.metric {
            Metric::L2 => {
                let xx = s * s * f64::from(meta.code_sq);
                // ‖q − x̂‖² within [a_lo, a_hi]; then ‖q − x‖ within r of ‖q − x̂‖.
                let q_dot = s * self.err * f64::from(meta.code_norm);
                let a_lo = (self.sq - 2.0 * (centre + q_dot) + xx).max(0.0);
                let a_hi = (self.sq - 2.0 * (centre - q_dot) + xx).max(0.0);
                let r = f64::from(meta.resid);
                let lo = (a_lo.sqrt() - r).max(0.0);
                let hi = a_hi.sqrt() + r;
                // f64 rounding in the sums above, absolutely.
                let tiny = 1e-9 * (self.sq + xx) + 1e-30;
                Some((
                    lo * lo * (1.0 - self.rel) - tiny,
                    hi * hi * (1.0 + self.rel) + tiny,
                ))
            }
            Metric::Dot => {
                // The kernel's error is relative to Σ|q_i x_i| ≤ ‖q‖·‖x‖.
                let x_norm = s * f64::from(meta.code_norm) + f64::from(meta.resid);
                let slack = self.rel * self.norm * x_norm + 1e-30;
                Some((-(centre + spread) - slack, -(centre - spread) + slack))
            }
            Metric::Cosine => {
                // A zero vector's distance is a convention, and the kernel's
                // f32 sums of squares underflow for tiny ones: no bound.
                let x_norm = f64::from(meta.norm);
                if x_norm < TINY_NORM || self.norm < TINY_NORM {
                    return None;
                }
                // ‖q‖·‖x‖, from below and above (‖x‖ was rounded to f32).
                let (d_lo, d_hi) = (
                    self.norm * x_norm * (1.0 - 4.0 * U32) / (1.0 + 1e-12),
                    self.norm * x_norm * (1.0 + 4.0 * U32),
                );
                let (p_lo, p_hi) = (centre - spread, centre + spread);
                let most = if p_hi >= 0.0 { p_hi / d_lo } else { p_hi / d_hi };
                let least = if p_lo >= 0.0 { p_lo / d_hi } else { p_lo / d_lo };
                // The kernel's three f32 sums each round by `rel`, relative
                // to ‖q‖·‖x‖ at most; its normalisation (an approximate
                // inverse square root refined once) by less than 1e-5.
                let slack = 2.0 * self.rel + 1e-5;
                Some((1.0 - most.min(1.0) - slack, 1.0 - least.max(-1.0) + slack))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::metric::distance;

    fn coded(x: &[f32]) -> (Vec<i8>, CodeMeta) {
        let mut codes = vec![0i8; x.len()];
        let meta = encode(x, &mut codes);
        (codes, meta)
    }

    fn vector(dim: std::ops::Range<usize>) -> impl Strategy<Value = Vec<f32>> {
        prop::collection::vec(
            prop_oneof![-1.0f32..1.0, -1e4f32..1e4, Just(0.0f32), -1e-20f32..1e-20,],
            dim,
        )
    }

    #[test]
    fn a_code_reconstructs_within_its_residual() {
        let x = [0.5f32, -1.0, 0.25, 0.0, 0.3333];
        let (codes, meta) = coded(&x);
        assert_eq!(codes[1], -127);
        let miss: f64 = x
            .iter()
            .zip(&codes)
            .map(|(&v, &c)| (f64::from(v) - f64::from(meta.scale) * f64::from(c)).powi(2))
            .sum();
        assert!(miss.sqrt() <= f64::from(meta.resid));
        assert!(meta.resid < 0.01, "{meta:?}");
        assert_eq!(
            meta.code_sq,
            codes.iter().map(|&c| i32::from(c).pow(2) as u32).sum()
        );
    }

    #[test]
    fn a_zero_vector_codes_to_zero() {
        let (codes, meta) = coded(&[0.0; 8]);
        assert!(codes.iter().all(|&c| c == 0));
        assert_eq!(meta, CodeMeta::default());
        // Cosine gives no bound for it; the others bound it exactly.
        let q = [1.0f32; 8];
        assert_eq!(QueryCode::new(Metric::Cosine, &q).bounds(&codes, &meta), None);
        let (lo, hi) = QueryCode::new(Metric::L2, &q)
            .bounds(&codes, &meta)
            .expect("bounds");
        assert!(lo <= 8.0 && 8.0 <= hi && hi - lo < 1e-3, "{lo} {hi}");
    }

    #[test]
    fn bounds_are_tight_enough_to_prune() {
        // Two unrelated 384-d vectors in [-1, 1]: their distance (about 256)
        // is bounded within about 2% (what lets a search skip most rows).
        let mut state = 7u64;
        let mut next = || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let (q, x): (Vec<f32>, Vec<f32>) = (0..384).map(|_| (next(), next())).unzip();
        let (codes, meta) = coded(&x);
        let (lo, hi) = QueryCode::new(Metric::L2, &q)
            .bounds(&codes, &meta)
            .expect("bounds");
        let d = f64::from(distance(Metric::L2, &q, &x));
        assert!(lo <= d && d <= hi);
        assert!((hi - lo) / d < 0.02, "{lo} {d} {hi}");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The kernel's own distance always lies within the bounds, for
        /// every metric, at any scale of either vector.
        #[test]
        fn the_kernel_distance_lies_within_the_bounds(
            pair in (1usize..70).prop_flat_map(|d| (vector(d..d + 1), vector(d..d + 1))),
            near in any::<bool>(),
        ) {
            let (q, mut x) = pair;
            if near {
                // x close to q, where L2 is near 0 and cosine near 0.
                for (xi, qi) in x.iter_mut().zip(&q) {
                    *xi = qi + *xi * 1e-3;
                }
            }
            let (codes, meta) = coded(&x);
            for metric in Metric::ALL {
                let d = f64::from(distance(metric, &q, &x));
                if let Some((lo, hi)) = QueryCode::new(metric, &q).bounds(&codes, &meta) {
                    prop_assert!(lo <= d && d <= hi, "{metric}: {lo} <= {d} <= {hi}");
                }
            }
        }
    }
}
