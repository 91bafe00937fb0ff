# Sourced by the scripts: keeps one cargo target directory outside the clone,
# so repeated runs on one machine do not rebuild RocksDB from scratch.
export CARGO_TARGET_DIR="${SLATE_TARGET_DIR:-$HOME/.cache/slate-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
