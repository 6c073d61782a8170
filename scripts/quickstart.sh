#!/usr/bin/env bash
# From a fresh clone to a trained model: installs missing Debian packages (the Fashion-MNIST data set
# included), builds in Release, and trains the reference cnn on Fashion-MNIST: on the GPU when there
# is one, otherwise on the CPU with a setting that ends in about 10 minutes on 2 cores. Prints the
# test accuracy and where the checkpoint, the metrics and the plot are.
# Env: SINTER_BUILD_DIR (default build), SINTER_JOBS (default nproc), SINTER_OUT (default
# quickstart_out). Extra arguments go to examples/fashion_mnist (e.g. --epochs 3).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/deps.sh
sinter_install_deps

build_dir=${SINTER_BUILD_DIR:-build}
jobs=${SINTER_JOBS:-$(nproc)}
out=${SINTER_OUT:-quickstart_out}
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  generator=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
fi

cmake -S . -B "$build_dir" "${generator[@]}"
cmake --build "$build_dir" --target fashion_mnist -j "$jobs"

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  args=(--model cnn --device cuda --epochs 10)
else
  # On 2 CPU cores one cnn epoch over the 60000 training images takes about 80 s.
  args=(--model cnn --device cpu --epochs 5)
fi
mkdir -p "$out"
"$build_dir/examples/fashion_mnist" "${args[@]}" --save "$out/cnn.safetensors" --out "$out" "$@"
