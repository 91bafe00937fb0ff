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
//!
//! The integer dot product runs on AVX-512 VNNI where the CPU has it (one
//! `vpdpbusd` per 64 bytes, on the query's codes shifted to `u8` and
//! corrected by the row's code sum), on simsimd's `i8` kernel otherwise;
//! both are exact, so they give the same bounds.
#![allow(unsafe_code)]

use std::collections::BinaryHeap;

use ordered_float::OrderedFloat;
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
    /// `Σ c_i`, exact (corrects the shifted dot product).
    code_sum: i32,
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
    let mut code_sum = 0i64;
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
        code_sum += q as i64;
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
        // |Σ c_i| ≤ MAX_DIM × 127.
        code_sum: code_sum as i32,
    }
}

/// `Σ a_i·b_i` of `u8` and `i8` codes (equal lengths of at most
/// [`MAX_DIM`](crate::MAX_DIM): the sum fits an `i32`), by AVX-512 VNNI.
///
/// # Safety
/// The CPU must support `avx512f`, `avx512bw` and `avx512vnni`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn dot_u8_i8_vnni(a: &[u8], b: &[i8]) -> i32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let (mut acc0, mut acc1) = (_mm512_setzero_si512(), _mm512_setzero_si512());
    let mut i = 0;
    while i + 128 <= n {
        // SAFETY: `i + 128 <= n`: both 64-byte loads of each slice are in
        // bounds; the caller vouches for the target features.
        unsafe {
            let (a0, b0) = (
                _mm512_loadu_si512(pa.add(i).cast()),
                _mm512_loadu_si512(pb.add(i).cast()),
            );
            let (a1, b1) = (
                _mm512_loadu_si512(pa.add(i + 64).cast()),
                _mm512_loadu_si512(pb.add(i + 64).cast()),
            );
            acc0 = _mm512_dpbusd_epi32(acc0, a0, b0);
            acc1 = _mm512_dpbusd_epi32(acc1, a1, b1);
        }
        i += 128;
    }
    while i < n {
        let rest = n - i;
        let mask: u64 = if rest >= 64 { u64::MAX } else { (1u64 << rest) - 1 };
        // SAFETY: the mask reads only the `min(rest, 64)` bytes in bounds
        // (masked-off bytes are not accessed); features as above.
        unsafe {
            let a0 = _mm512_maskz_loadu_epi8(mask, pa.add(i).cast());
            let b0 = _mm512_maskz_loadu_epi8(mask, pb.add(i).cast());
            acc0 = _mm512_dpbusd_epi32(acc0, a0, b0);
        }
        i += 64;
    }
    _mm512_reduce_add_epi32(_mm512_add_epi32(acc0, acc1))
}

/// Whether this CPU runs [`dot_u8_i8_vnni`].
fn has_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// A bound on the distance between a query and one row, in a form a cap
/// tests without square roots (see [`Cap`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowBound {
    /// L2: bounds on `‖q − x̂‖²` (with room for their f64 rounding); other
    /// metrics: bounds on the distance itself.
    lo: f64,
    hi: f64,
    /// L2: `‖x − x̂‖` (rounded up); 0 otherwise.
    resid: f64,
}

/// Absolute slack for distances that underflow in the kernel's f32 sums.
const EPS: f64 = 1e-30;

/// A cap on the k-th distance, held with what [`RowBound`]s are tested
/// against: for L2, the square roots of the cap widened both ways.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cap {
    l2: bool,
    rel: f64,
    cap: f64,
    /// L2: `√((cap + EPS) / (1 − rel))` and `√((cap − EPS) / (1 + rel))`.
    root_lo: f64,
    root_hi: f64,
}

impl Cap {
    /// No cap yet (every row may enter).
    pub(crate) fn new(code: &QueryCode) -> Self {
        Cap {
            l2: code.metric == Metric::L2,
            rel: code.rel,
            cap: f64::INFINITY,
            root_lo: f64::INFINITY,
            root_hi: f64::INFINITY,
        }
    }

    /// The cap (infinite at first).
    pub(crate) fn value(&self) -> f64 {
        self.cap
    }

    /// Lowers the cap to `cap`.
    pub(crate) fn set(&mut self, cap: f64) {
        self.cap = cap;
        self.root_lo = ((cap + EPS) / (1.0 - self.rel)).sqrt();
        self.root_hi = ((cap - EPS).max(0.0) / (1.0 + self.rel)).sqrt();
    }

    /// Whether the row's distance certainly exceeds the cap, by the
    /// kernel's arithmetic.
    #[inline]
    pub(crate) fn rules_out(&self, b: &RowBound) -> bool {
        if self.l2 {
            // (√lo − r)²(1 − rel) − EPS > cap  ⟺  √lo > root_lo + r.
            let t = self.root_lo + b.resid;
            b.lo > t * t
        } else {
            b.lo > self.cap
        }
    }

    /// The row's upper bound, if it is below the cap.
    #[inline]
    pub(crate) fn below(&self, b: &RowBound) -> Option<f64> {
        if self.l2 {
            // (√hi + r)²(1 + rel) + EPS < cap  ⟺  √hi < root_hi − r.
            let t = self.root_hi - b.resid;
            (t > 0.0 && b.hi < t * t).then(|| upper(b, self.rel))
        } else {
            (b.hi < self.cap).then_some(b.hi)
        }
    }
}

/// Rows bounded from their codes one at a time, for the `k` nearest with
/// nothing to check: the `k` smallest upper bounds (below a cap known
/// beforehand, if any) cap the k-th distance, and a row whose lower bound
/// exceeds the cap cannot enter. Used by gather and the coded scans.
pub(crate) struct Pruner<'q, T> {
    code: &'q QueryCode,
    k: usize,
    cap: Cap,
    /// The k smallest upper bounds below the cap (a max-heap; not sized by
    /// k, which may exceed the rows by far).
    highs: BinaryHeap<OrderedFloat<f64>>,
    kept: Vec<(T, Option<RowBound>)>,
    seen: u64,
}

impl<'q, T: Copy> Pruner<'q, T> {
    /// For the `k` nearest to `code`'s query, under `known` (a bound on the
    /// k-th distance already, or infinite); room for `capacity` survivors.
    pub(crate) fn new(code: &'q QueryCode, k: usize, known: f64, capacity: usize) -> Self {
        let mut cap = Cap::new(code);
        if known.is_finite() {
            cap.set(known);
        }
        Pruner {
            code,
            k,
            cap,
            highs: BinaryHeap::new(),
            kept: Vec::with_capacity(capacity),
            seen: 0,
        }
    }

    /// Bounds visible row `row` from its code (`None`, or no bound, as for
    /// a zero vector under cosine: the row is kept, to be read).
    pub(crate) fn offer(&mut self, row: T, code: Option<(&[i8], &CodeMeta)>) {
        self.seen += 1;
        let Some(b) = code.and_then(|(codes, meta)| self.code.row(codes, meta)) else {
            self.kept.push((row, None));
            return;
        };
        if let Some(hi) = self.cap.below(&b) {
            self.highs.push(OrderedFloat(hi));
            if self.highs.len() > self.k {
                self.highs.pop();
            }
            if let (true, Some(top)) = (self.highs.len() == self.k, self.highs.peek()) {
                self.cap.set(top.0);
            }
        }
        if !self.cap.rules_out(&b) {
            self.kept.push((row, Some(b)));
        }
    }

    /// The rows offered that the final cap cannot rule out (the cap only
    /// fell, so rows kept early may be ruled out now), in the order
    /// offered, and how many rows were offered.
    pub(crate) fn survivors(mut self) -> (Vec<T>, u64) {
        let cap = self.cap;
        self.kept.retain(|(_, b)| b.is_none_or(|b| !cap.rules_out(&b)));
        (self.kept.into_iter().map(|(row, _)| row).collect(), self.seen)
    }
}

/// An L2 row's upper bound on the kernel's distance.
fn upper(b: &RowBound, rel: f64) -> f64 {
    let hi = b.hi.sqrt() + b.resid;
    hi * hi * (1.0 + rel) + EPS
}

/// A query coded for bounding distances to coded rows.
#[derive(Debug, Clone)]
pub(crate) struct QueryCode {
    metric: Metric,
    codes: Vec<i8>,
    /// `c_q + 128`, for the VNNI kernel; empty when the CPU lacks it.
    shifted: Vec<u8>,
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
        let shifted = if has_vnni() {
            codes.iter().map(|&c| (i16::from(c) + 128) as u8).collect()
        } else {
            Vec::new()
        };
        QueryCode {
            metric,
            shifted,
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

    /// `c_q · c`, exact.
    #[inline]
    fn code_dot(&self, codes: &[i8], meta: &CodeMeta) -> Option<f64> {
        #[cfg(target_arch = "x86_64")]
        if !self.shifted.is_empty() && codes.len() == self.shifted.len() {
            // SAFETY: `shifted` is filled only when `has_vnni()` found the
            // kernel's features on this CPU.
            let shifted = unsafe { dot_u8_i8_vnni(&self.shifted, codes) };
            // Σ (c_q,i + 128)·c_i − 128·Σ c_i, in i64: exact.
            return Some((i64::from(shifted) - 128 * i64::from(meta.code_sum)) as f64);
        }
        <i8 as SpatialSimilarity>::dot(&self.codes, codes)
    }

    /// Bounds `(lo, hi)` on the distance the metric's kernel computes
    /// between the query and the row coded as `codes`, `meta`; `None` when
    /// none can be given (a zero vector under cosine). (Searches test a
    /// [`RowBound`] against a [`Cap`] instead, without square roots.)
    #[cfg(test)]
    pub(crate) fn bounds(&self, codes: &[i8], meta: &CodeMeta) -> Option<(f64, f64)> {
        let b = self.row(codes, meta)?;
        Some(if self.metric == Metric::L2 {
            let lo = (b.lo.sqrt() - b.resid).max(0.0);
            (lo * lo * (1.0 - self.rel) - EPS, upper(&b, self.rel))
        } else {
            (b.lo, b.hi)
        })
    }

    /// The row's bound in the form a [`Cap`] tests; `None` as for
    /// [`bounds`](Self::bounds).
    #[inline]
    pub(crate) fn row(&self, codes: &[i8], meta: &CodeMeta) -> Option<RowBound> {
        // Past about 1e18 the kernel's f32 sums may overflow (see
        // [`distance`](crate::distance)): no bound.
        let s = f64::from(meta.scale);
        if self.sq > HUGE_SQ || s * s * f64::from(meta.code_sq) > HUGE_SQ {
            return None;
        }
        let dot = self.code_dot(codes, meta)?;
        let centre = s * self.scale * dot;
        // q·x̂ lies within `centre ± code_err` (the query's coding error);
        // q·x within `centre ± spread` (the row's too).
        let code_err = s * self.err * f64::from(meta.code_norm);
        let spread = code_err + self.norm * f64::from(meta.resid);
        match self.metric {
            Metric::L2 => {
                let xx = s * s * f64::from(meta.code_sq);
                // ‖q − x̂‖² within [lo, hi]; then ‖q − x‖ within r of ‖q − x̂‖.
                // f64 rounding in these sums, absolutely.
                let tiny = 1e-9 * (self.sq + xx);
                Some(RowBound {
                    lo: (self.sq - 2.0 * (centre + code_err) + xx - tiny).max(0.0),
                    hi: (self.sq - 2.0 * (centre - code_err) + xx + tiny).max(0.0),
                    resid: f64::from(meta.resid),
                })
            }
            Metric::Dot => {
                // The kernel's error is relative to Σ|q_i x_i| ≤ ‖q‖·‖x‖.
                let x_norm = s * f64::from(meta.code_norm) + f64::from(meta.resid);
                let slack = self.rel * self.norm * x_norm + EPS;
                Some(RowBound {
                    lo: -(centre + spread) - slack,
                    hi: -(centre - spread) + slack,
                    resid: 0.0,
                })
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
                Some(RowBound {
                    lo: 1.0 - most.min(1.0) - slack,
                    hi: 1.0 - least.max(-1.0) + slack,
                    resid: 0.0,
                })
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

    #[test]
    fn the_vnni_dot_product_is_exact() {
        let mut state = 3u64;
        let mut next = || {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (state >> 33) as u32
        };
        for n in [1usize, 5, 63, 64, 65, 127, 128, 129, 384, 1_000] {
            for extreme in [false, true] {
                let b: Vec<i8> = (0..n)
                    .map(|_| {
                        if extreme {
                            [-127i8, 127][next() as usize % 2]
                        } else {
                            (next() % 255) as u8 as i8
                        }
                    })
                    .map(|c| c.max(-127))
                    .collect();
                let a: Vec<u8> = (0..n).map(|_| if extreme { 255 } else { next() as u8 }).collect();
                let want: i64 = a.iter().zip(&b).map(|(&x, &y)| i64::from(x) * i64::from(y)).sum();
                if has_vnni() {
                    // SAFETY: just checked.
                    assert_eq!(i64::from(unsafe { dot_u8_i8_vnni(&a, &b) }), want, "n {n}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A cap rules a row out only when the kernel's distance exceeds
        /// it, and reports an upper bound below it only when there is one.
        #[test]
        fn a_cap_rules_out_only_what_the_kernel_puts_beyond_it(
            pair in (1usize..70).prop_flat_map(|d| (vector(d..d + 1), vector(d..d + 1))),
            at in 0.0f64..2.0,
        ) {
            let (q, x) = pair;
            let (codes, meta) = coded(&x);
            for metric in Metric::ALL {
                let d = f64::from(distance(metric, &q, &x));
                let code = QueryCode::new(metric, &q);
                let Some(b) = code.row(&codes, &meta) else { continue };
                let mut cap = Cap::new(&code);
                prop_assert!(!cap.rules_out(&b));
                // Caps around the distance: below, at and above it.
                let c = if d >= 0.0 { d * at } else { d * (2.0 - at) };
                cap.set(c);
                if cap.rules_out(&b) {
                    prop_assert!(d > c, "{metric}: {d} ruled out by {c}");
                }
                if let Some(hi) = cap.below(&b) {
                    prop_assert!(d <= hi && hi < c, "{metric}: {d} <= {hi} < {c}");
                }
                // And the cap's tests are the bounds' own, up to rounding:
                // a cap a hair below the lower bound rules the row out, a
                // hair above it does not; likewise for the upper bound.
                let (lo, hi) = code.bounds(&codes, &meta).expect("bounds");
                let hair = |v: f64, up: bool| v + v.abs().max(1e-20) * if up { 1e-9 } else { -1e-9 };
                if lo > 1e-12 {
                    cap.set(hair(lo, false));
                    prop_assert!(cap.rules_out(&b), "{metric}: lo {lo}");
                    cap.set(hair(lo, true));
                    prop_assert!(!cap.rules_out(&b), "{metric}: lo {lo}");
                }
                if hi > 1e-12 || metric != Metric::L2 {
                    cap.set(hair(hi, true));
                    prop_assert_eq!(cap.below(&b).map(|h| (h - hi).abs() <= 1e-9 * hi.abs()), Some(true));
                    cap.set(hair(hi, false));
                    prop_assert_eq!(cap.below(&b), None);
                }
            }
        }

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
