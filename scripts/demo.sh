#!/usr/bin/env bash
# The main job: Slate's demo on generated data, on the embedded default store.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
cargo run --example demo -- "$@"
