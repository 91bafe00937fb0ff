//! mimalloc's settings for Slate's binaries and benches (README, "Allocator").

use std::ffi::c_long;

use libmimalloc_sys::mi_option_t;

/// How long mimalloc keeps freed memory before returning it to the OS, in
/// milliseconds, once [`tune_mimalloc`] has run (mimalloc's default: 1,000).
pub const PURGE_DELAY_MS: i64 = 10_000;

/// Positions in mimalloc.h's `mi_option_t` (mimalloc v3, the `mimalloc`
/// crate's default; the Rust bindings name no constants for these).
const MI_OPTION_PURGE_DELAY: mi_option_t = 15;
const MI_OPTION_PAGE_RECLAIM_ON_FREE: mi_option_t = 35;

/// What [`tune_mimalloc`] sets: each option and its value.
const SETTINGS: [(mi_option_t, i64); 2] = [
    (MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS),
    (MI_OPTION_PAGE_RECLAIM_ON_FREE, 1),
];

/// The major version the positions above belong to.
const MIMALLOC_MAJOR: i32 = 3;

/// Tunes mimalloc for how Slate's results are made and dropped. Each setting
/// yields to its `MIMALLOC_*` environment variable when that is set (under
/// any name and case mimalloc reads), and nothing is set on a mimalloc other
/// than v3 (the `v2` feature), whose options sit at other positions.
///
/// - **Purge delay 10 s** (`MIMALLOC_PURGE_DELAY`; default one second). A
///   find that materialises 100,000 documents frees them all when its
///   results drop; with the default, the next find's allocations often land
///   on pages the OS has to fault in and zero again.
/// - **Reclaim on free** (`MIMALLOC_PAGE_RECLAIM_ON_FREE=1`; default 0). A
///   large find builds its documents on the rayon pool and the caller frees
///   them on its own thread. By default each of those frees is a cross-thread
///   free; with this, the freeing thread takes over the pages the pool's
///   threads have let go (mimalloc abandons full pages) and frees into them
///   as its own.
///
/// BENCHMARKS.md has the measurements. Affects only a program whose global
/// allocator is mimalloc.
///
/// # Safety
///
/// mimalloc's option setter is not thread-safe: call this first in `main`,
/// before any other thread exists (no thread pool, no open `Db`).
#[allow(unsafe_code)]
pub unsafe fn tune_mimalloc() {
    // SAFETY: reads a constant.
    if unsafe { libmimalloc_sys::mi_version() } / 10_000 != MIMALLOC_MAJOR {
        return;
    }
    for (option, value) in SETTINGS {
        // SAFETY: the caller runs this before any other thread exists, so no
        // allocation reads the option while it is written. `set_default`
        // leaves an option its environment variable set alone.
        unsafe { libmimalloc_sys::mi_option_set_default(option, value as c_long) }
    }
}

/// `criterion_main!` for Slate's benches: a `main` that runs
/// [`tune_mimalloc`] first, as its safety contract asks, then the groups and
/// criterion's summary.
#[doc(hidden)]
#[macro_export]
macro_rules! tuned_criterion_main {
    ($($group:path),+ $(,)?) => {
        fn main() {
            // SAFETY: first in main, before any other thread exists.
            #[allow(unsafe_code)]
            unsafe {
                $crate::allocator::tune_mimalloc()
            };
            $($group();)+
            ::criterion::Criterion::default().configure_from_args().final_summary();
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(unsafe_code)]
    fn get(option: mi_option_t) -> c_long {
        // SAFETY: a read of mimalloc's option table, initialised at load.
        unsafe { libmimalloc_sys::mi_option_get(option) }
    }

    /// The positions are the options meant: mimalloc v3's defaults read back
    /// at them and beside them before the call, the new values after. (The
    /// test binary's allocator is the system one, but mimalloc is linked and
    /// its options are live.)
    #[test]
    #[allow(unsafe_code)]
    fn sets_the_options_it_names() {
        // Any mimalloc variable in the environment may move what is read.
        if std::env::vars_os().any(|(k, _)| k.to_string_lossy().to_ascii_uppercase().starts_with("MIMALLOC_"))
        {
            return;
        }
        // SAFETY: reads a constant.
        assert_eq!(unsafe { libmimalloc_sys::mi_version() } / 10_000, MIMALLOC_MAJOR);
        // The default purge delay, and `use_numa_nodes` (0) after it.
        assert_eq!(get(MI_OPTION_PURGE_DELAY), 1000);
        assert_eq!(get(MI_OPTION_PURGE_DELAY + 1), 0);
        // `generic_collect` (10,000) before reclaim on free (0), and
        // `page_full_retain` (2) after it.
        assert_eq!(get(MI_OPTION_PAGE_RECLAIM_ON_FREE - 1), 10_000);
        assert_eq!(get(MI_OPTION_PAGE_RECLAIM_ON_FREE), 0);
        assert_eq!(get(MI_OPTION_PAGE_RECLAIM_ON_FREE + 1), 2);
        // SAFETY: nothing else in this test binary uses mimalloc.
        unsafe { tune_mimalloc() };
        assert_eq!(get(MI_OPTION_PURGE_DELAY), PURGE_DELAY_MS as c_long);
        assert_eq!(get(MI_OPTION_PAGE_RECLAIM_ON_FREE), 1);
    }
}
