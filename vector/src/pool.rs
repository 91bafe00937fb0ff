//! Thread pools for parallel scans, cached by size.
//!
//! A search takes a `threads` count: `0` runs on the current rayon pool
//! (the global one unless the caller installed another), `1` runs on the
//! calling thread, `n > 1` runs on a dedicated pool of `min(n, cores)`
//! threads, built on first use and kept for the life of the process (one
//! pool per distinct size).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rayon::prelude::*;
use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::error::{Error, Result};

static POOLS: Mutex<Vec<Arc<ThreadPool>>> = Mutex::new(Vec::new());

/// The machine's cores, asked once: `available_parallelism` reads the
/// scheduler affinity and cgroup limits on every call, and the planner asks
/// on every search.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, NonZeroUsize::get))
}

fn pool(threads: usize) -> Result<Arc<ThreadPool>> {
    let mut pools = POOLS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(pool) = pools.iter().find(|p| p.current_num_threads() == threads) {
        return Ok(Arc::clone(pool));
    }
    let pool = ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("slate-vector-{i}"))
        .build()
        .map_err(|source| Error::ThreadPool { threads, source })?;
    let pool = Arc::new(pool);
    pools.push(Arc::clone(&pool));
    Ok(pool)
}

/// How many threads a search's `threads` argument runs its scans on: `0`
/// the current rayon pool's size, `n` at most the machine's cores.
pub fn effective(threads: usize) -> usize {
    if threads == 0 {
        rayon::current_num_threads()
    } else {
        threads.min(cores())
    }
}

/// Runs `job` where a search's `threads` count says (see the module
/// docs): on the current pool for `0` (or when its size is what `n`
/// asks), else on the dedicated pool of [`effective`]`(n)` threads. For
/// `1` the caller runs `job`'s work sequentially itself rather than ask.
pub fn install<R: Send>(threads: usize, job: impl FnOnce() -> R + Send) -> Result<R> {
    let n = effective(threads);
    if threads == 0 || n == rayon::current_num_threads() {
        return Ok(job());
    }
    Ok(pool(n)?.install(job))
}

/// Folds `items` into one accumulator on `threads` threads (see the module
/// docs). `merge` must be associative and, for deterministic results,
/// insensitive to how the items were grouped.
///
/// With `in_shares`, each thread folds one contiguous share of `items` into
/// one accumulator (exactly one per thread); without it, rayon may split
/// the items further (more accumulators, each starting empty). Shares suit
/// a lazily filtered scan, whose accumulator is a top-k heap that checks
/// every row's filter until it holds k matches.
pub(crate) fn fold<T, A, I, S, M>(
    threads: usize,
    in_shares: bool,
    items: &[T],
    init: I,
    step: S,
    merge: M,
) -> Result<A>
where
    T: Sync,
    A: Send,
    I: Fn() -> A + Sync + Send,
    S: Fn(A, &T) -> A + Sync + Send,
    M: Fn(A, A) -> A + Sync + Send,
{
    let n = effective(threads);
    if n <= 1 || items.len() <= 1 {
        return Ok(items.iter().fold(init(), step));
    }
    let job = || {
        if in_shares {
            items
                .par_chunks(items.len().div_ceil(n))
                .map(|chunk| chunk.iter().fold(init(), &step))
                .reduce(&init, &merge)
        } else {
            items.par_iter().fold(&init, &step).reduce(&init, &merge)
        }
    };
    install(threads, job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_count_gives_the_same_sum() {
        let items: Vec<u64> = (1..=1000).collect();
        for threads in [0, 1, 2, 3, 64] {
            let sum =
                fold(threads, false, &items, || 0u64, |a, &x| a + x, |a, b| a + b).expect("pool starts");
            assert_eq!(sum, 500_500, "threads = {threads}");
            let sum = fold(threads, true, &items, || 0u64, |a, &x| a + x, |a, b| a + b).expect("pool starts");
            assert_eq!(sum, 500_500, "threads = {threads}, in shares");
        }
    }
}
