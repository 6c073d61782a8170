#!/usr/bin/env bash
# From a fresh clone to a trained model: installs missing Debian packages (the Fashion-MNIST data set
# included), builds in Release, runs the README's API tour (examples/tour.cpp), and trains the
# reference cnn on Fashion-MNIST: on the GPU when there is one, otherwise on the CPU with a setting
# that ends in about 10 minutes on 2 cores. Prints the build and training times, the test accuracy,
# and where the checkpoint, the metrics, the plot and the TensorBoard logs are.
# Without a GPU it builds the library without CUDA (no kernels compiled that would never run), in
# build-cpu so that scripts/test.sh's build keeps its CUDA setting; SINTER_CUDA=ON asks for CUDA anyway.
# Env: SINTER_BUILD_DIR (default build, or build-cpu without CUDA), SINTER_JOBS (default nproc),
# SINTER_OUT (default quickstart_out), SINTER_CUDA (AUTO: on with a GPU; ON; OFF). Extra arguments
# go to examples/fashion_mnist (e.g. --epochs 3).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/lib/deps.sh
sinter_install_deps

has_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  has_gpu=1
fi
cuda=${SINTER_CUDA:-AUTO}
case ${cuda^^} in
  AUTO) [ "$has_gpu" = 1 ] && cuda=ON || cuda=OFF ;;
  ON|1|YES|TRUE) cuda=ON ;;
  *) cuda=OFF ;;
esac
if [ "$cuda" = ON ]; then default_dir=build; else default_dir=build-cpu; fi
build_dir=${SINTER_BUILD_DIR:-$default_dir}
jobs=${SINTER_JOBS:-$(nproc)}
out=${SINTER_OUT:-quickstart_out}
generator=()
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  generator=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
fi

build_start=$(date +%s)
cmake -S . -B "$build_dir" "${generator[@]}" -DSINTER_CUDA="$cuda"
cmake --build "$build_dir" --target fashion_mnist tour -j "$jobs"
build_s=$(( $(date +%s) - build_start ))
echo "quickstart: built in ${build_s}s (CUDA $cuda, $build_dir)"

echo "quickstart: the API tour of the README (examples/tour.cpp)"
"$build_dir/examples/tour"

if [ "$has_gpu" = 1 ] && [ "$cuda" = ON ]; then
  args=(--model cnn --device cuda --epochs 10)
else
  # On 2 CPU cores one cnn epoch over the 60000 training images takes about 15 s (test accuracy
  # 0.87 after the first).
  args=(--model cnn --device cpu --epochs 5)
fi
mkdir -p "$out"
train_start=$(date +%s)
"$build_dir/examples/fashion_mnist" "${args[@]}" --save "$out/cnn.safetensors" --out "$out" \
  --tensorboard "$out/tensorboard" "$@"
echo "quickstart: built in ${build_s}s, trained in $(( $(date +%s) - train_start ))s"
