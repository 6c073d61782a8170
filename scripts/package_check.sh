#!/usr/bin/env bash
# The installed package as its users see it, for a shared library: Sinter built with
# BUILD_SHARED_LIBS=ON (CUDA, NCCL, MPI and ONNX as this machine has them), installed into a prefix
# under the build folder, then tests/package configured against it with none of those packages
# findable (a shared libsinter's private dependencies must not reach its consumer), built and run.
# The static library's consumer is the PackageConsumer test of scripts/test.sh. CI runs this.
#   SINTER_PACKAGE_BUILD_DIR (default build-shared); any arguments go to the CMake configure step.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/deps.sh
sinter_install_deps

build_dir=${SINTER_PACKAGE_BUILD_DIR:-build-shared}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DSINTER_BUILD_TESTS=OFF -DSINTER_BUILD_EXAMPLES=OFF -DSINTER_BUILD_BENCHMARKS=OFF \
  -DSINTER_PYTHON=OFF "$@"
cmake --build "$build_dir" -j "${SINTER_JOBS:-$(nproc)}"
cmake -D SINTER_BUILD_DIR="$PWD/$build_dir" -D CONSUMER_SOURCE_DIR="$PWD/tests/package" \
  -D WORK_DIR="$PWD/$build_dir/package" -D CONFIG=Release -D LIBRARY_TYPE=SHARED_LIBRARY \
  -D GENERATOR=Ninja -D CXX_COMPILER="$(command -v c++)" -P tests/package/RunConsumer.cmake
