//! mimalloc's settings for Slate's binaries and benches (README, "Allocator").

use std::ffi::c_long;

/// How long mimalloc keeps freed memory before returning it to the OS, in
/// milliseconds, once [`tune_mimalloc`] has run.
pub const PURGE_DELAY_MS: i64 = 10_000;

/// `mi_option_purge_delay` in mimalloc.h's `mi_option_t` (the Rust bindings
/// name no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps memory mimalloc has freed for [`PURGE_DELAY_MS`] (its default is one
/// second) before handing it back to the OS, unless `MIMALLOC_PURGE_DELAY`
/// is set in the environment, which then wins.
///
/// A query that materialises 100,000 documents frees them all at its end;
/// with the default delay, the next query's allocations often land on pages
/// the OS has zeroed again, and the page faults cost 5–20% of a scan or a
/// bulk insert here (BENCHMARKS.md). Affects only a program whose global
/// allocator is mimalloc.
///
/// # Safety
///
/// mimalloc's option setter is not thread-safe: call this first in `main`,
/// before any other thread exists (no thread pool, no open `Db`).
#[allow(unsafe_code)]
pub unsafe fn tune_mimalloc() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: the caller runs this before any other thread exists, so no
    // allocation reads the option while it is written.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS as c_long) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The option index is mimalloc's purge delay: its default reads back
    /// before the call (the test binary's allocator is the system one, but
    /// the library is linked and its options are live), the new value after.
    #[test]
    #[allow(unsafe_code)]
    fn sets_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        // SAFETY: reads of an initialised option table.
        let before = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(before, 1000, "mimalloc v3's default purge delay");
        // SAFETY: the test touches no other mimalloc state; the libtest
        // threads allocate through the system allocator, not mimalloc.
        unsafe { tune_mimalloc() };
        let after = unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        assert_eq!(after as i64, PURGE_DELAY_MS);
    }
}
