#!/usr/bin/env bash
# Installs what building Slate needs on a fresh Debian machine with rustup:
# a C++ toolchain and libclang (RocksDB's build generates bindings with it),
# fonts-dejavu-core for the benchmark report's plots, and the rustfmt and
# clippy components. Safe to run again: it skips what is there.
set -euo pipefail

need=()
command -v g++ >/dev/null 2>&1 || need+=(g++)
command -v make >/dev/null 2>&1 || need+=(make)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
# The TTF that slate-bench draws its plots' text with.
dpkg -s fonts-dejavu-core >/dev/null 2>&1 || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "setup: installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi
for component in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
        rustup component add "$component"
    fi
done
