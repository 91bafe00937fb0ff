#!/usr/bin/env bash
# Runs the criterion benches in the shared (optimised dev) profile, so they
# reuse the test build instead of compiling RocksDB a second time.
# Usage: bash scripts/bench.sh [BENCH] [criterion args...]
#
# The workspace's own crates are built without debug assertions and overflow
# checks here, as in a release build: the tests keep both, and with them on
# every slice copy and sort in Slate's code (and in the references beside
# it) runs its checks too. Dependencies keep the dev profile's
# settings, so RocksDB is not rebuilt; switching between this and a test
# build recompiles only the workspace crates.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
release_like=()
for p in slate slate-core slate-vector slate-query slate-bench; do
    release_like+=(--config "profile.dev.package.$p.debug-assertions=false")
    release_like+=(--config "profile.dev.package.$p.overflow-checks=false")
done
if [ $# -gt 0 ]; then
    bench="$1"; shift
    cargo bench --profile dev "${release_like[@]}" --workspace --bench "$bench" -- "$@"
else
    cargo bench --profile dev "${release_like[@]}"
fi
