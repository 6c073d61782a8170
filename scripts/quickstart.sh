#!/usr/bin/env bash
# From a fresh clone to Sinter running: installs missing Debian packages, builds the `tour` example
# (examples/tour.cpp) and runs it. Env: SINTER_BUILD_DIR (default build), SINTER_JOBS (default nproc).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/deps.sh
sinter_install_deps

build_dir=${SINTER_BUILD_DIR:-build}
jobs=${SINTER_JOBS:-$(nproc)}
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  generator=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
fi

cmake -S . -B "$build_dir" "${generator[@]}"
cmake --build "$build_dir" --target tour -j "$jobs"
"$build_dir/examples/tour" "$@"
