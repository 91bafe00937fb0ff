//! The `slate` command line: load, find, count (and search, serve, bench).

mod cli;

fn main() {
    std::process::exit(cli::run());
}
