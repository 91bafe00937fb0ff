//! Register-blocked dot products for batched search: [`QB`] queries against
//! [`RB`] rows per call, every component loaded once per call.
//!
//! One query at a time, a scan is bound by memory: each row is loaded to be
//! used once. A batch keeps rows in cache and is bound by arithmetic
//! instead, and simsimd's one-pair kernels spend two loads per FMA and one
//! horizontal sum per pair. Here the `QB × RB` partial sums stay in
//! registers while the components stream past, so each loaded vector of 16
//! floats feeds several FMAs.
//!
//! The sums come out in a different order than simsimd's, so they are not
//! bit-identical to its distances. The batch pass uses them only to rule
//! rows out, with an error bound ([`Approx`]); every row it cannot rule out
//! is scored by the same simsimd kernel as a single search.
//!
//! AVX-512F is detected at run time; elsewhere a portable loop gives the
//! same sums (to rounding).
#![allow(unsafe_code)]

use crate::metric::Metric;

/// Queries per kernel call.
pub(crate) const QB: usize = 4;
/// Rows per kernel call. The `QB × RB = 16` sums fill one vector register
/// when they are reduced, and with the `QB` query registers and one row
/// register they stay clear of AVX-512's 32 (a 4 × 6 block spilled).
pub(crate) const RB: usize = 4;

/// Which implementation computes the blocked sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// Plain Rust, any CPU.
    Portable,
    /// AVX-512F intrinsics; only ever built by [`Kernel::detect`] on a CPU
    /// that has the feature.
    #[cfg(target_arch = "x86_64")]
    Avx512,
}

impl Kernel {
    /// The fastest kernel this CPU runs.
    pub(crate) fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Kernel::Avx512;
        }
        Kernel::Portable
    }

    /// `out[i][j] = queries[i] · rows[j]` over the first `dim` components,
    /// and which pairs `cut` keeps: bit `RB·i + j` of the result is set
    /// unless `cut` rules the pair out.
    ///
    /// # Panics
    /// If any slice is shorter than `dim`.
    pub(crate) fn dots(
        self,
        queries: &[&[f32]; QB],
        rows: &[&[f32]; RB],
        dim: usize,
        cut: &Cut<'_>,
        out: &mut [[f32; RB]; QB],
    ) -> u16 {
        assert!(
            queries.iter().chain(rows).all(|v| v.len() >= dim),
            "blocked kernel: a vector is shorter than dim {dim}"
        );
        match self {
            Kernel::Portable => {
                portable(queries, rows, dim, out);
                let mut kept = 0;
                for (i, sums) in out.iter().enumerate() {
                    for (j, &dot) in sums.iter().enumerate() {
                        if !cut.approx.rules_out(dot, cut.queries[i], cut.rows[j]) {
                            kept |= 1 << (RB * i + j);
                        }
                    }
                }
                kept
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx512` is only constructed after the CPU reported
            // AVX-512F, and every slice holds at least `dim` floats (checked
            // above), which is all the kernel reads.
            Kernel::Avx512 => unsafe { avx512(queries, rows, dim, cut, out) },
        }
    }

    /// Asks the CPU to start loading part `part` of `parts` of the cache
    /// lines of `rows` (a hint: it changes no result). The batch pass
    /// spreads the next group of rows over the calls that compare the
    /// current group with the queries, a few lines each: that hides the
    /// memory latency without filling the CPU's few line-fill buffers at
    /// once.
    pub(crate) fn prefetch(self, rows: &[&[f32]; RB], part: usize, parts: usize) {
        match self {
            Kernel::Portable => {}
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                // 16 floats to a 64-byte line.
                let lines = rows[0].len().div_ceil(16);
                let total = RB * lines;
                for t in total * part / parts..total * (part + 1) / parts {
                    let (row, line) = (rows[t / lines], t % lines);
                    // SAFETY: a prefetch never faults and reads nothing the
                    // program sees; the address lies inside `row` (whose
                    // length is the same `dim` as the first row's).
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(row.as_ptr().wrapping_add(16 * line).cast::<i8>()) };
                }
            }
        }
    }

    /// `‖v‖²` of each of `rows` over the first `dim` components.
    ///
    /// # Panics
    /// If any slice is shorter than `dim`.
    pub(crate) fn squared_norms(self, rows: &[&[f32]; RB], dim: usize) -> [f32; RB] {
        assert!(
            rows.iter().all(|v| v.len() >= dim),
            "blocked kernel: a vector is shorter than dim {dim}"
        );
        match self {
            Kernel::Portable => rows.map(|v| crate::metric::squared_norm(&v[..dim])),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as in `dots`.
            Kernel::Avx512 => unsafe { avx512_norms(rows, dim) },
        }
    }
}

/// The cut of one kernel call: [`Approx`] and its query and row parts.
#[derive(Debug)]
pub(crate) struct Cut<'a> {
    pub(crate) approx: &'a Approx,
    /// `approx.query_cut(..)` of each query.
    pub(crate) queries: [f32; QB],
    /// `approx.row_cut(..)` of each row.
    pub(crate) rows: [f32; RB],
}

fn portable(queries: &[&[f32]; QB], rows: &[&[f32]; RB], dim: usize, out: &mut [[f32; RB]; QB]) {
    for (q, sums) in queries.iter().zip(out.iter_mut()) {
        for (x, sum) in rows.iter().zip(sums.iter_mut()) {
            // Eight partial sums, as a vector kernel would keep.
            let mut acc = [0f32; 8];
            let (qc, xc) = (q[..dim].chunks_exact(8), x[..dim].chunks_exact(8));
            let (qr, xr) = (qc.remainder(), xc.remainder());
            for (a, b) in qc.zip(xc) {
                for l in 0..8 {
                    acc[l] += a[l] * b[l];
                }
            }
            for (l, (a, b)) in qr.iter().zip(xr).enumerate() {
                acc[l] += a * b;
            }
            *sum = acc.iter().sum();
        }
    }
}

/// # Safety
/// The CPU must support AVX-512F and every slice must hold at least `dim`
/// floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512(
    queries: &[&[f32]; QB],
    rows: &[&[f32]; RB],
    dim: usize,
    cut: &Cut<'_>,
    out: &mut [[f32; RB]; QB],
) -> u16 {
    use std::arch::x86_64::*;

    // Loads and stores go through the masked intrinsics, every lane on, and
    // `wrapping_add`: the same instructions as `_mm512_loadu_ps(p.add(off))`,
    // without the precondition checks that debug builds (tests and benches
    // included) would run on each, which keep the sums out of registers.
    const ALL: __mmask16 = !0;
    let [q0, q1, q2, q3] = queries.map(<[f32]>::as_ptr);
    let [x0, x1, x2, x3] = rows.map(<[f32]>::as_ptr);
    // acc[4i + j] sums queries[i] · rows[j].
    let mut acc = [_mm512_setzero_ps(); 16];
    let step = |mask: __mmask16, off: usize| {
        // SAFETY: the caller guarantees `dim` floats in every slice; `step`
        // is called with `off + 16 <= dim`, or with a mask covering only
        // lanes below `dim - off` (masked-off lanes are not read).
        let load = |p: *const f32| unsafe { _mm512_maskz_loadu_ps(mask, p.wrapping_add(off)) };
        let q = [load(q0), load(q1), load(q2), load(q3)];
        for (j, x) in [x0, x1, x2, x3].into_iter().enumerate() {
            let x = load(x);
            for (i, q) in q.iter().enumerate() {
                acc[4 * i + j] = _mm512_fmadd_ps(*q, x, acc[4 * i + j]);
            }
        }
    };
    for_each_step(dim, step);
    let sums = sum16(acc);
    // SAFETY: `out` is 16 contiguous f32 (`[[f32; 4]; 4]`), in the order of `acc`.
    unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr().cast::<f32>(), ALL, sums) };
    let bounds: [f32; 16] =
        std::array::from_fn(|v| cut.approx.combine(cut.queries[v / RB], cut.rows[v % RB]));
    // SAFETY: `bounds` is 16 contiguous f32.
    let bounds = unsafe { _mm512_maskz_loadu_ps(ALL, bounds.as_ptr()) };
    // Kept unless `sum < bound`; NaN compares unordered, so it is kept.
    _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(sums, bounds)
}

/// Calls `step(mask, off)` for each 16 components of `dim`: `off + 16 <=
/// dim` with every lane on, then at most one tail whose mask covers only
/// the lanes below `dim - off`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn for_each_step(dim: usize, mut step: impl FnMut(std::arch::x86_64::__mmask16, usize)) {
    let full = dim / 16 * 16;
    let mut off = 0;
    while off < full {
        step(!0, off);
        off += 16;
    }
    if full < dim {
        step((1u16 << (dim - full)) - 1, full);
    }
}

/// Lane `v` of the result is the sum of the 16 lanes of `acc[v]`: a
/// transpose-and-add in 45 shuffles and adds, where 16 separate horizontal
/// sums would take about 128.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn sum16(acc: [std::arch::x86_64::__m512; 16]) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;

    // Each 128-bit block of w[i] holds partial sums of acc[2i] and acc[2i+1]:
    // [a0+a2, b0+b2, a1+a3, b1+b3].
    let w: [__m512; 8] = std::array::from_fn(|i| {
        let (a, b) = (acc[2 * i], acc[2 * i + 1]);
        _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b))
    });
    // Each block of x[j] holds that block's sums of acc[4j .. 4j+4].
    let x: [__m512; 4] = std::array::from_fn(|j| {
        let (a, b) = (_mm512_castps_pd(w[2 * j]), _mm512_castps_pd(w[2 * j + 1]));
        // Pairs of floats move as one f64 lane; they are added as floats.
        let (lo, hi) = (_mm512_unpacklo_pd(a, b), _mm512_unpackhi_pd(a, b));
        _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi))
    });
    // Add the four blocks of each x[j] and put x[j]'s total in block j.
    // 0b10_00_10_00 takes blocks 0 and 2 of each operand, 0b11_01_11_01
    // blocks 1 and 3.
    let pair = |a: __m512, b: __m512| {
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0b10_00_10_00>(a, b),
            _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b),
        )
    };
    let (s01, s23) = (pair(x[0], x[1]), pair(x[2], x[3]));
    pair(s01, s23)
}

/// `‖v‖²` of each of `rows`, four independent sums at once.
///
/// # Safety
/// The CPU must support AVX-512F and every slice must hold at least `dim`
/// floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512_norms(rows: &[&[f32]; RB], dim: usize) -> [f32; RB] {
    use std::arch::x86_64::*;

    let ptrs = rows.map(<[f32]>::as_ptr);
    let mut acc = [_mm512_setzero_ps(); RB];
    let step = |mask: __mmask16, off: usize| {
        for (acc, p) in acc.iter_mut().zip(ptrs) {
            // SAFETY: as in `avx512`.
            let x = unsafe { _mm512_maskz_loadu_ps(mask, p.wrapping_add(off)) };
            *acc = _mm512_fmadd_ps(x, x, *acc);
        }
    };
    for_each_step(dim, step);
    acc.map(|a| _mm512_reduce_add_ps(a))
}

/// When a blocked dot product proves a row farther than a query's current
/// k-th best distance, under simsimd's distance for the same pair.
///
/// Float sums of `dim` products are within `γ · Σ|aᵢbᵢ| ≤ γ‖a‖‖b‖` of the
/// exact sum, `γ = n·u / (1 - n·u)`, `u = 2⁻²⁴`, whatever the summation
/// order (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1).
/// The blocked value and simsimd's are each that close to the exact
/// distance (for L2, `γ(‖a‖ + ‖b‖)²`, norms included), so they differ by at
/// most twice the bound. The cut subtracts `slack = 8γ`, which also covers
/// its own few roundings and bounds `(‖a‖ + ‖b‖)² ≤ 2(‖a‖² + ‖b‖²)`, so that
/// the test is one add (or multiply) and one compare per pair:
/// `rules_out(dot, query_cut(‖a‖², bound), row_cut(‖b‖²))`.
///
/// Non-finite inputs never rule a row out (every compare with NaN is
/// false), except where a sum overflows, as for simsimd's own distances.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Approx {
    metric: Metric,
    slack: f32,
    /// Absolute slack for products that underflow.
    tiny: f32,
}

impl Approx {
    pub(crate) fn new(metric: Metric, dim: usize) -> Approx {
        // MAX_DIM is 65,536, so `n·u` stays far below 1.
        let n = (dim + 2) as f64 * f64::from(f32::EPSILON) / 2.0;
        Approx {
            metric,
            slack: (8.0 * n / (1.0 - n)) as f32,
            tiny: dim as f32 * f32::MIN_POSITIVE * 4.0,
        }
    }

    /// The query's part of the cut, from its squared norm `aa` and its
    /// current k-th best distance `bound` (recompute when the bound moves).
    pub(crate) fn query_cut(&self, aa: f32, bound: f32) -> f32 {
        let s = self.slack;
        match self.metric {
            // ‖a-b‖² ≥ (1 - 2s)(‖a‖² + ‖b‖²) - 2a·b - tiny > bound
            Metric::L2 => ((1.0 - 2.0 * s) * aa - self.tiny - bound) / 2.0,
            // -a·b - s(‖a‖² + ‖b‖²)/2 - tiny > bound
            Metric::Dot => -bound - self.tiny - s * aa / 2.0,
            // 1 - a·b / ‖a‖‖b‖ - s - 1e-5 > bound; the 1e-5 covers
            // simsimd's refined reciprocal square root (~1e-7).
            Metric::Cosine => (1.0 - s - 1e-5 - bound) * aa.sqrt(),
        }
    }

    /// The row's part of the cut, from its squared norm `bb`.
    pub(crate) fn row_cut(&self, bb: f32) -> f32 {
        match self.metric {
            Metric::L2 => (1.0 - 2.0 * self.slack) * bb / 2.0,
            Metric::Dot => -self.slack * bb / 2.0,
            Metric::Cosine => bb.sqrt(),
        }
    }

    /// The value a pair's blocked dot product must reach to be kept.
    #[inline]
    pub(crate) fn combine(&self, query_cut: f32, row_cut: f32) -> f32 {
        match self.metric {
            Metric::Cosine => query_cut * row_cut,
            Metric::L2 | Metric::Dot => query_cut + row_cut,
        }
    }

    /// Whether the pair with blocked dot product `dot` is certainly farther
    /// than the bound `query_cut` was computed with.
    #[inline]
    pub(crate) fn rules_out(&self, dot: f32, query_cut: f32, row_cut: f32) -> bool {
        dot < self.combine(query_cut, row_cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::{distance, squared_norm};

    fn rng_vec(state: &mut u64, dim: usize, scale: f32) -> Vec<f32> {
        (0..dim)
            .map(|_| {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                ((*state % 20_001) as f32 / 10_000.0 - 1.0) * scale
            })
            .collect()
    }

    fn kernels() -> Vec<Kernel> {
        let mut k = vec![Kernel::Portable];
        if Kernel::detect() != Kernel::Portable {
            k.push(Kernel::detect());
        }
        k
    }

    #[test]
    fn blocked_dots_match_a_scalar_sum_on_odd_dimensions() {
        let mut state = 0x9e37_79b9_7f4a_7c15;
        for dim in [1, 2, 7, 15, 16, 17, 31, 33, 100, 384, 1_000] {
            let qs: Vec<Vec<f32>> = (0..QB).map(|_| rng_vec(&mut state, dim, 3.0)).collect();
            let xs: Vec<Vec<f32>> = (0..RB).map(|_| rng_vec(&mut state, dim, 3.0)).collect();
            let q: [&[f32]; QB] = std::array::from_fn(|i| qs[i].as_slice());
            let x: [&[f32]; RB] = std::array::from_fn(|j| xs[j].as_slice());
            for kernel in kernels() {
                let mut out = [[0.0; RB]; QB];
                let approx = Approx::new(Metric::L2, dim);
                let keep_all = Cut {
                    approx: &approx,
                    queries: [f32::NEG_INFINITY; QB],
                    rows: [0.0; RB],
                };
                assert_eq!(kernel.dots(&q, &x, dim, &keep_all, &mut out), 0xffff);
                for i in 0..QB {
                    for j in 0..RB {
                        let exact: f64 = qs[i]
                            .iter()
                            .zip(&xs[j])
                            .map(|(&a, &b)| f64::from(a) * f64::from(b))
                            .sum();
                        let scale: f64 = qs[i]
                            .iter()
                            .zip(&xs[j])
                            .map(|(&a, &b)| f64::from((a * b).abs()))
                            .sum();
                        let err = (f64::from(out[i][j]) - exact).abs();
                        assert!(
                            err <= dim as f64 * 1.2e-7 * scale + 1e-30,
                            "{kernel:?} dim {dim} ({i},{j}): {} vs {exact}",
                            out[i][j]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn blocked_norms_match_a_scalar_sum() {
        let mut state = 0x6a09_e667_f3bc_c908;
        for dim in [1, 5, 16, 17, 384, 999] {
            let xs: Vec<Vec<f32>> = (0..RB).map(|_| rng_vec(&mut state, dim, 7.0)).collect();
            let x: [&[f32]; RB] = std::array::from_fn(|j| xs[j].as_slice());
            for kernel in kernels() {
                for (v, norm) in xs.iter().zip(kernel.squared_norms(&x, dim)) {
                    let exact: f64 = v.iter().map(|&a| f64::from(a) * f64::from(a)).sum();
                    assert!(
                        (f64::from(norm) - exact).abs() <= dim as f64 * 1.2e-7 * exact,
                        "{kernel:?} dim {dim}: {norm} vs {exact}"
                    );
                }
            }
        }
    }

    /// The cut must never rule out a row at exactly the bound (it may then
    /// still enter on its id), on vectors built to be close (where L2
    /// cancels most) and far apart; and it must rule out clearly farther rows.
    #[test]
    fn the_cut_keeps_every_row_at_the_bound_and_drops_far_ones() {
        let mut state = 0x2545_f491_4f6c_dd1d;
        for dim in [1, 3, 16, 97, 384, 768] {
            for metric in Metric::ALL {
                let approx = Approx::new(metric, dim);
                for trial in 0..40 {
                    let a = rng_vec(&mut state, dim, 1e3);
                    let b: Vec<f32> = if trial % 2 == 0 {
                        let noise = rng_vec(&mut state, dim, 1e-2);
                        a.iter().zip(&noise).map(|(x, n)| x + n).collect()
                    } else {
                        rng_vec(&mut state, dim, 1e3)
                    };
                    let q: [&[f32]; QB] = [&a; QB];
                    let x: [&[f32]; RB] = [&b; RB];
                    let (aa, bb) = (squared_norm(&a), squared_norm(&b));
                    let exact = distance(metric, &a, &b);
                    for kernel in kernels() {
                        // The kernel's own verdict, which must agree with
                        // `rules_out` on its sums.
                        let cut = |bound| {
                            let cut = Cut {
                                approx: &approx,
                                queries: [approx.query_cut(aa, bound); QB],
                                rows: [approx.row_cut(bb); RB],
                            };
                            let mut out = [[0.0; RB]; QB];
                            let kept = kernel.dots(&q, &x, dim, &cut, &mut out);
                            let ruled_out = approx.rules_out(out[0][0], cut.queries[0], cut.rows[0]);
                            assert_eq!(kept & 1 == 0, ruled_out, "{kernel:?} {metric} dim {dim}");
                            ruled_out
                        };
                        assert!(
                            !cut(exact),
                            "{kernel:?} {metric} dim {dim}: ruled out at its own distance {exact}"
                        );
                        // Far apart at dim ≥ 16: the distance is well above its error.
                        if trial % 2 == 1 && dim >= 16 {
                            let below = match metric {
                                Metric::L2 => exact * 0.9,
                                // Dot's slack scales with the norms, not the distance.
                                Metric::Dot => exact - 0.01 * (aa + bb),
                                Metric::Cosine => exact - 0.01,
                            };
                            assert!(
                                cut(below),
                                "{kernel:?} {metric} dim {dim}: kept at {exact} against {below}"
                            );
                        }
                    }
                }
            }
        }
    }
}
