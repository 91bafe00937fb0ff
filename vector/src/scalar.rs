//! Reference implementation of the three distances, for tests: plain loops
//! accumulating in `f64`, following the same conventions as
//! [`distance`](crate::distance) (a zero vector is at cosine distance 1, the
//! cosine distance is clamped at 0, mismatched lengths give NaN).

use crate::Metric;

/// Squared Euclidean distance.
pub fn l2sq(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::NAN;
    }
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = f64::from(x) - f64::from(y);
            d * d
        })
        .sum()
}

/// Inner product (not negated).
pub fn dot(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::NAN;
    }
    a.iter().zip(b).map(|(&x, &y)| f64::from(x) * f64::from(y)).sum()
}

/// One minus the cosine similarity, clamped at 0; 1 if either vector is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::NAN;
    }
    let (mut ab, mut a2, mut b2) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        ab += x * y;
        a2 += x * x;
        b2 += y * y;
    }
    if a2 == 0.0 || b2 == 0.0 {
        return 1.0;
    }
    (1.0 - ab / (a2.sqrt() * b2.sqrt())).max(0.0)
}

/// The distance under `metric`, rounded to `f32` like the SIMD kernels' result.
pub fn distance(metric: Metric, a: &[f32], b: &[f32]) -> f32 {
    (match metric {
        Metric::L2 => l2sq(a, b),
        Metric::Cosine => cosine(a, b),
        Metric::Dot => -dot(a, b),
    }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_values() {
        assert_eq!(l2sq(&[1.0, 2.0], &[4.0, 6.0]), 25.0);
        assert_eq!(dot(&[1.0, 2.0], &[4.0, 6.0]), 16.0);
        assert_eq!(distance(Metric::Dot, &[1.0, 2.0], &[4.0, 6.0]), -16.0);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 1.0);
        assert_eq!(cosine(&[0.0, 0.0], &[0.0, 0.0]), 1.0);
        assert_eq!(cosine(&[2.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[1.0, 0.0], &[-1.0, 0.0]) - 2.0).abs() < 1e-12);
        assert!(l2sq(&[1.0], &[1.0, 2.0]).is_nan());
    }
}
