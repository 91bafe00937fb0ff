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
