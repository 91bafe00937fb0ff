#!/usr/bin/env bash
# Runs Slate's test suite: unit, integration and doc tests of every crate.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
cargo test --workspace --all-targets
cargo test --workspace --doc
