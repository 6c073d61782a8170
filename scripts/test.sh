#!/usr/bin/env bash
# Builds Sinter and runs its whole test suite: the README's test command, and what CI runs. Installs
# missing Debian packages first, and the Python packages of the interop tests. The CUDA code is
# compiled whenever nvcc exists, GPU or not.
#   SINTER_BUILD_DIR (default build), SINTER_BUILD_TYPE (default Release), SINTER_JOBS (default nproc);
#   any arguments go to the CMake configure step, e.g. scripts/test.sh -DSINTER_CUDA=OFF
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib/exit_time.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/deps.sh
sinter_install_deps
sinter_install_python_deps

build_dir=${SINTER_BUILD_DIR:-build}
jobs=${SINTER_JOBS:-$(nproc)}
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  generator=(-G Ninja)
fi

cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE="${SINTER_BUILD_TYPE:-Release}" \
  -DSINTER_BUILD_TESTS=ON "$@"
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$jobs"
