//! Distance metrics and the SIMD distance kernels (simsimd's safe API).
//!
//! Convention: smaller is nearer. `L2` is the squared Euclidean distance,
//! `Cosine` is `1 - cosine similarity` (so in `[0, 2]`; a zero vector is at
//! distance 1 from everything, itself included), `Dot` is the negated inner
//! product.

use std::fmt;
use std::str::FromStr;

use simsimd::SpatialSimilarity;

use crate::error::{Error, VectorError};

/// How two vectors are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Metric {
    /// Squared Euclidean distance.
    L2,
    /// One minus cosine similarity.
    Cosine,
    /// Negated inner product.
    Dot,
}

impl Metric {
    /// Every metric, in declaration order.
    pub const ALL: [Metric; 3] = [Metric::L2, Metric::Cosine, Metric::Dot];

    /// The metric's name as written in configs: `l2`, `cosine`, `dot`.
    pub const fn name(self) -> &'static str {
        match self {
            Metric::L2 => "l2",
            Metric::Cosine => "cosine",
            Metric::Dot => "dot",
        }
    }

    /// The kernel for this metric, picked once per scan rather than per row.
    pub(crate) fn kernel(self) -> fn(&[f32], &[f32]) -> f32 {
        match self {
            Metric::L2 => l2sq,
            Metric::Cosine => cosine,
            Metric::Dot => neg_dot,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = Error;

    /// Parses `l2`, `cosine` or `dot` (ASCII case-insensitive).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Metric::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| Error::UnknownMetric { name: s.to_owned() })
    }
}

/// Distance between `a` and `b` under `metric` (smaller is nearer), computed
/// with simsimd's SIMD kernels.
///
/// `a` and `b` must have the same length; if they do not, the result is NaN
/// (which sorts after every distance). The kernels accumulate in `f32`:
/// components beyond about `1e19` in magnitude overflow, and the result is
/// then meaningless (though still deterministic).
pub fn distance(metric: Metric, a: &[f32], b: &[f32]) -> f32 {
    metric.kernel()(a, b)
}

fn l2sq(a: &[f32], b: &[f32]) -> f32 {
    <f32 as SpatialSimilarity>::l2sq(a, b).map_or(f32::NAN, |d| d as f32)
}

fn neg_dot(a: &[f32], b: &[f32]) -> f32 {
    <f32 as SpatialSimilarity>::dot(a, b).map_or(f32::NAN, |d| -(d as f32))
}

/// `‖v‖²` by simsimd's dot product.
pub(crate) fn squared_norm(v: &[f32]) -> f32 {
    -neg_dot(v, v)
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    match <f32 as SpatialSimilarity>::cos(a, b) {
        None => f32::NAN,
        // simsimd returns 0 when both vectors are zero; we define a zero vector
        // to be at distance 1. Exactly 0 is otherwise reached only by parallel
        // vectors, so the zero test rarely runs (and stops at the first non-zero).
        Some(d) if d == 0.0 && (is_zero(a) || is_zero(b)) => 1.0,
        Some(d) => d as f32,
    }
}

fn is_zero(v: &[f32]) -> bool {
    v.iter().all(|&x| x == 0.0)
}

/// The largest magnitude a component of a `dim`-dimensional vector may
/// have: two such vectors are at most `dim · (2 · limit)²` apart under l2,
/// half of `f32::MAX` (rounding and summation order get the other half),
/// and their inner product and norms are smaller, so no distance between
/// them overflows f32 (`f32::MAX` is about 3.4e38; the limit is 3.3e17 at
/// dim 384).
pub fn component_limit(dim: usize) -> f32 {
    (f64::from(f32::MAX) / (8.0 * dim.max(1) as f64)).sqrt() as f32
}

/// The smallest squared norm (summed in f64) a vector other than zero may
/// have under cosine: 1e-28, a norm of 1e-14. Shorter, the squared norm
/// simsimd sums in f32 underflows (or loses its precision in subnormals),
/// and the distance it gives is 0 or off, where the f64 reference is not.
pub const MIN_COSINE_SQUARED_NORM: f64 = 1e-28;

/// [`check_vector`], and under cosine a vector that is zero or at least
/// [`MIN_COSINE_SQUARED_NORM`] long: what a vector stored in, or searched
/// for in, a field of `metric` must pass.
pub fn check_vector_for(v: &[f32], dim: usize, metric: Metric) -> Result<(), VectorError> {
    check_vector(v, dim)?;
    if metric == Metric::Cosine {
        let squared: f64 = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum();
        if squared != 0.0 && squared < MIN_COSINE_SQUARED_NORM {
            return Err(VectorError::TooShort { norm: squared.sqrt() });
        }
    }
    Ok(())
}

/// Checks that `v` has `dim` components, all finite and within
/// [`component_limit`].
pub fn check_vector(v: &[f32], dim: usize) -> Result<(), VectorError> {
    let limit = component_limit(dim);
    // One pass when the vector is good: a NaN or an infinity fails the
    // comparison too. Only a bad vector is looked at again, for its error.
    if v.len() == dim && v.iter().fold(true, |ok, x| ok & (x.abs() <= limit)) {
        return Ok(());
    }
    check_finite(v, dim)?;
    match v.iter().position(|x| x.abs() > limit) {
        Some(index) => Err(VectorError::TooLarge {
            index,
            value: v[index],
            limit,
        }),
        None => Ok(()),
    }
}

/// Checks that `v` has `dim` components, all finite: what a vector stored
/// before [`component_limit`] existed is held to when a cache is loaded
/// (a database must still open).
pub(crate) fn check_finite(v: &[f32], dim: usize) -> Result<(), VectorError> {
    if v.len() != dim {
        return Err(VectorError::WrongDimension {
            expected: dim,
            got: v.len(),
        });
    }
    // One pass without an early exit (it vectorises: a query is checked on
    // every search); the bad element is looked for only when there is one.
    if v.iter().fold(true, |ok, x| ok & x.is_finite()) {
        return Ok(());
    }
    match v.iter().position(|x| !x.is_finite()) {
        Some(index) => Err(VectorError::NonFinite {
            index,
            value: v[index],
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Metric::ALL {
            assert_eq!(m.to_string().parse::<Metric>().ok(), Some(m));
        }
        assert_eq!("COSINE".parse::<Metric>().ok(), Some(Metric::Cosine));
        match "hamming".parse::<Metric>() {
            Err(Error::UnknownMetric { name }) => assert_eq!(name, "hamming"),
            other => panic!("expected UnknownMetric, got {other:?}"),
        }
    }

    #[test]
    fn known_values() {
        let a = [1.0, 2.0, 3.0];
        let b = [4.0, 6.0, 3.0];
        assert_eq!(distance(Metric::L2, &a, &b), 25.0);
        assert_eq!(distance(Metric::Dot, &a, &b), -25.0);
        assert!(distance(Metric::Cosine, &a, &a).abs() < 1e-6);
        let c = [-1.0, -2.0, -3.0];
        assert!((distance(Metric::Cosine, &a, &c) - 2.0).abs() < 1e-6);
    }

    #[test]
    fn zero_vector_cosine_is_one() {
        let z = [0.0f32; 5];
        let v = [1.0, 0.0, 2.0, 0.0, 1.0];
        assert_eq!(distance(Metric::Cosine, &z, &z), 1.0);
        assert_eq!(distance(Metric::Cosine, &z, &v), 1.0);
        assert_eq!(distance(Metric::Cosine, &v, &z), 1.0);
    }

    #[test]
    fn mismatched_lengths_give_nan() {
        for m in Metric::ALL {
            assert!(distance(m, &[1.0, 2.0], &[1.0]).is_nan());
        }
    }

    #[test]
    fn check_vector_refuses_bad_input() {
        assert_eq!(check_vector(&[1.0, 2.0], 2), Ok(()));
        assert_eq!(
            check_vector(&[1.0], 2),
            Err(VectorError::WrongDimension { expected: 2, got: 1 })
        );
        assert!(matches!(
            check_vector(&[1.0, f32::NAN], 2),
            Err(VectorError::NonFinite { index: 1, value }) if value.is_nan()
        ));
        assert_eq!(
            check_vector(&[f32::NEG_INFINITY, 1.0], 2),
            Err(VectorError::NonFinite {
                index: 0,
                value: f32::NEG_INFINITY
            })
        );
        // Finite but past the limit: l2 to its opposite would be infinite.
        assert!(matches!(
            check_vector(&[0.0, -1e20], 2),
            Err(VectorError::TooLarge { index: 1, value, .. }) if value == -1e20
        ));
        // At the limit, every metric's distance between the farthest two
        // vectors stays finite.
        for dim in [1, 2, 384, 65_536] {
            let limit = component_limit(dim);
            let (a, b) = (vec![limit; dim], vec![-limit; dim]);
            assert_eq!(check_vector(&a, dim), Ok(()));
            assert_eq!(check_vector(&b, dim), Ok(()));
            for metric in [Metric::L2, Metric::Cosine, Metric::Dot] {
                for (x, y) in [(&a, &b), (&a, &a)] {
                    let d = distance(metric, x, y);
                    assert!(d.is_finite(), "{metric:?} at dim {dim}: {d}");
                }
            }
        }
    }
}
