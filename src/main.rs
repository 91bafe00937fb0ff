//! The `slate` command line: load, find, count (and search, serve, bench).

mod cli;

// Slate allocates small buffers per document and per index key; glibc's
// malloc slows down on them once a bulk load has fragmented the heap (a third
// of a selective search's time at 100k documents), mimalloc does not.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // SAFETY: first in main, before any other thread exists.
    #[allow(unsafe_code)]
    unsafe {
        slate::allocator::tune_mimalloc()
    };
    std::process::exit(cli::run());
}
