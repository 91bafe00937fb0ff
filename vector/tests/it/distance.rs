//! SIMD kernels against the scalar reference.

use slate_vector::{distance, scalar, Metric};

use crate::common::Rng;

#[test]
fn simd_matches_scalar_on_every_length_up_to_1000() {
    let mut rng = Rng::new(1);
    for dim in 1..=1000usize {
        for scale in [1.0f32, 1e3] {
            let a: Vec<f32> = (0..dim).map(|_| rng.unit() * scale).collect();
            let b: Vec<f32> = (0..dim).map(|_| rng.unit() * scale).collect();
            for metric in Metric::ALL {
                let got = f64::from(distance(metric, &a, &b));
                let want = f64::from(scalar::distance(metric, &a, &b));
                // Error bound proportional to the magnitude of the summed terms
                // (cancellation in dot products), plus a small absolute slack.
                let magnitude = match metric {
                    Metric::L2 => scalar::l2sq(&a, &b),
                    Metric::Dot => a.iter().zip(&b).map(|(x, y)| f64::from(x * y).abs()).sum(),
                    _ => 1.0,
                };
                let tol = 1e-4 * magnitude + 1e-6;
                assert!(
                    (got - want).abs() <= tol,
                    "{metric} dim {dim}: simd {got} vs scalar {want}"
                );
            }
        }
    }
}

#[test]
fn parallel_and_opposite_vectors() {
    let mut rng = Rng::new(2);
    for dim in [1usize, 3, 17, 384, 1000] {
        let a: Vec<f32> = (0..dim).map(|_| rng.unit() + 2.0).collect();
        let twice: Vec<f32> = a.iter().map(|x| 2.0 * x).collect();
        let neg: Vec<f32> = a.iter().map(|x| -x).collect();
        assert!(distance(Metric::Cosine, &a, &twice).abs() < 1e-5, "dim {dim}");
        assert!(
            (distance(Metric::Cosine, &a, &neg) - 2.0).abs() < 1e-5,
            "dim {dim}"
        );
        assert_eq!(distance(Metric::L2, &a, &a), 0.0);
    }
}

#[test]
fn zero_vectors_agree_with_the_reference() {
    for dim in [1usize, 2, 15, 16, 17, 100] {
        let zero = vec![0.0f32; dim];
        let one = vec![1.0f32; dim];
        for (a, b) in [(&zero, &zero), (&zero, &one), (&one, &zero)] {
            assert_eq!(distance(Metric::Cosine, a, b), 1.0);
            assert_eq!(scalar::distance(Metric::Cosine, a, b), 1.0);
            assert_eq!(distance(Metric::Dot, a, b), 0.0);
        }
    }
}

/// Under cosine, a vector shorter than `MIN_COSINE_SQUARED_NORM` allows is
/// refused (f32 cannot normalise it: simsimd gave 0, "parallel", for
/// [-1e-23, 0] against [1, 0.5]); the zero vector is not, and down to the
/// shortest accepted the kernel agrees with the f64 reference.
#[test]
fn cosine_refuses_vectors_too_short_to_normalise_and_is_exact_above() {
    use slate_vector::{check_vector_for, MIN_COSINE_SQUARED_NORM};
    let mut rng = Rng::new(3);
    let shortest = MIN_COSINE_SQUARED_NORM.sqrt() * 1.01;
    for dim in [1usize, 2, 17, 384] {
        let zero = vec![0.0f32; dim];
        assert_eq!(check_vector_for(&zero, dim, Metric::Cosine), Ok(()));
        for scale in [1e-23f64, 1e-18, 1e-15] {
            let mut tiny = vec![0.0f32; dim];
            tiny[0] = -(scale as f32);
            assert!(
                check_vector_for(&tiny, dim, Metric::Cosine).is_err(),
                "dim {dim}: {scale:e} accepted"
            );
            // Other metrics compare such vectors exactly enough.
            assert_eq!(check_vector_for(&tiny, dim, Metric::L2), Ok(()));
            assert_eq!(check_vector_for(&tiny, dim, Metric::Dot), Ok(()));
        }
        for _ in 0..20 {
            let raw: Vec<f64> = (0..dim).map(|_| f64::from(rng.unit())).collect();
            let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-30);
            let short: Vec<f32> = raw.iter().map(|x| (x / norm * shortest) as f32).collect();
            assert_eq!(check_vector_for(&short, dim, Metric::Cosine), Ok(()), "dim {dim}");
            let other: Vec<f32> = (0..dim).map(|_| rng.unit()).collect();
            for (a, b) in [(&short, &other), (&other, &short), (&short, &short)] {
                let got = f64::from(distance(Metric::Cosine, a, b));
                let want = f64::from(scalar::distance(Metric::Cosine, a, b));
                assert!(
                    (got - want).abs() <= 1e-5,
                    "dim {dim}: simd {got} vs scalar {want}"
                );
            }
        }
    }
}
