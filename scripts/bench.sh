#!/usr/bin/env bash
# Runs the criterion benches in the shared (optimised dev) profile, so they
# reuse the test build instead of compiling RocksDB a second time.
# Usage: bash scripts/bench.sh [BENCH] [criterion args...]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
if [ $# -gt 0 ]; then
    bench="$1"; shift
    cargo bench --profile dev --workspace --bench "$bench" -- "$@"
else
    cargo bench --profile dev
fi
