#!/usr/bin/env bash
# The GPU bundle's runner (copied to the bundle as `run` by scripts/gpu_bundle.sh): runs a command
# with the bundle's library path, its source tree and the Fashion-MNIST folder set, so that nothing
# is compiled on the GPU machine.
#   run sinter_tests --gtest_filter='Cuda*'   a bundled executable, by name
#   run ctest -L gpu -j 16                    ctest over the bundled suite (build/CTestTestfile.cmake)
#   run --root                                prints the unpacked bundle's folder
#   run CMD ARGS...                           any other command, in the same environment
# Each bundled library in lib/ is used only where the machine lacks a library of its name: the
# machine's own OpenMPI, OpenBLAS, ... stay in charge where it has them.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -eq 0 ]; then
  sed -n '2,9s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2
  exit 2
fi
if [ "$1" = --root ]; then
  echo "$root"
  exit 0
fi

cuda_dirs=()
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
           /usr/local/cuda-13.0/targets/x86_64-linux/lib; do
  [ -d "$dir" ] && cuda_dirs+=("$dir")
done

# The sonames the machine's loader finds by itself, or in the CUDA folders.
ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
have=$( { "$ldconfig" -p 2>/dev/null | awk '{print $1}'; for d in "${cuda_dirs[@]}"; do ls "$d"; done; } |
  sort -u)
missing_dir="$root/lib-missing"
rm -rf "$missing_dir"
mkdir -p "$missing_dir"
shopt -s nullglob
for lib in "$root"/lib/*; do
  name=$(basename "$lib")
  if ! grep -qxF "$name" <<<"$have"; then
    ln -s "$lib" "$missing_dir/$name"
  fi
done
shopt -u nullglob

path="$missing_dir:$root/build"
for dir in "${cuda_dirs[@]}"; do path="$path:$dir"; done
export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="/usr/local/cuda/bin:$PATH"
export SINTER_SOURCE_DIR="$root/source"
if [ -z "${SINTER_FMNIST_DIR:-}" ]; then
  if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
     [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ]; then
    export SINTER_FMNIST_DIR=/usr/share/datasets/fashion-mnist
  else
    export SINTER_FMNIST_DIR="$root/data/fashion-mnist"
  fi
fi
# OpenMPI refuses to start as root without these (the GPU machine runs commands as root).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

cmd=$1
shift
if [ "$cmd" = ctest ]; then
  exec ctest --test-dir "$root/build" "$@"
fi
for exe in "$root/build/$cmd" "$root"/build/*/"$cmd" "$root"/build/*/*/"$cmd"; do
  if [ -f "$exe" ] && [ -x "$exe" ]; then
    exec "$exe" "$@"
  fi
done
exec "$cmd" "$@"
