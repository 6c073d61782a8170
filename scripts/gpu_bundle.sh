#!/usr/bin/env bash
# Builds, on a machine without a GPU, everything the GPU machine needs to run Sinter's checks without
# compiling: a Release build with CUDA for sm_90a and one shared libsinter, packed into DIR:
#   DIR/sinter-gpu.tar.xz  the build's executables (tests, benchmarks, examples; stripped), libsinter,
#                          a relocatable CTest suite, the source tree's tracked files, the shared
#                          libraries the GPU machine may lack, and the Fashion-MNIST files
#   DIR/BUNDLE.txt         the commit, the build's settings, the archive's size and sha256
#   DIR/run                unpacks the archive once (outside DIR) and runs a command in it:
#                          DIR/run ctest -L gpu, DIR/run sinter_tests --gtest_filter='Cuda*', ...
#   DIR.data/fashion-mnist.tar.xz
#                          the Fashion-MNIST files (26 MB packed), which `run` unpacks beside the
#                          build where DIR.data travels too (the train stage needs them)
# scripts/gpu_check.sh --bundle DIR runs the staged checks from it. DIR must stay under 48 MiB, and
# DIR and DIR.data together under 58 MiB (what travels to the GPU machine, 64 MiB with the source
# tree); the script fails when they do not. --no-data writes no DIR.data.
# Env: SINTER_BUNDLE_BUILD_DIR (default build-bundle), SINTER_JOBS (default nproc),
# SINTER_CUDA_ARCHITECTURES (default 90a-real: the GPU the checks run on, machine code only, no PTX
# to compile for later GPUs, which would add about a third to the kernels' size).
# The bundle is built without oneDNN (its 40 MB library would not fit; the CPU convolutions then run
# in the library's own kernels, and the OneDnn tests say so and skip): the GPU checks are of the
# CUDA code.
set -euo pipefail

usage() { echo "usage: scripts/gpu_bundle.sh [--no-data] DIR" >&2; exit 2; }
with_data=1
dir=""
for arg in "$@"; do
  case $arg in
    --no-data) with_data=0 ;;
    -*) usage ;;
    *) [ -z "$dir" ] || usage; dir=$arg ;;
  esac
done
[ -n "$dir" ] || usage

start=$(date +%s)
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
cd "$repo"
source scripts/lib/deps.sh
sinter_install_deps

limit_bytes=$(( 48 * 1024 * 1024 ))
limit_with_data=$(( 58 * 1024 * 1024 ))
build_dir=$(mkdir -p "${SINTER_BUNDLE_BUILD_DIR:-build-bundle}" && cd "${SINTER_BUNDLE_BUILD_DIR:-build-bundle}" && pwd)
jobs=${SINTER_JOBS:-$(nproc)}
archs=${SINTER_CUDA_ARCHITECTURES:-90a-real}
fmnist=/usr/share/datasets/fashion-mnist
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
if [ "$commit" != unknown ] && ! git diff --quiet HEAD 2>/dev/null; then
  commit="$commit + uncommitted changes"
fi

# --- build: shared libsinter, executables that find it through $ORIGIN ---
generator=()
[ -f "$build_dir/CMakeCache.txt" ] || generator=(-G Ninja)
build_start=$(date +%s)
cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DSINTER_CUDA=ON \
  -DSINTER_CUDA_ARCHITECTURES="$archs" -DSINTER_DNNL=OFF -DBUILD_SHARED_LIBS=ON \
  -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DSINTER_PYTHON=OFF \
  -DSINTER_BUILD_TESTS=ON -DSINTER_BUILD_EXAMPLES=ON -DSINTER_BUILD_BENCHMARKS=ON
cmake --build "$build_dir" -j "$jobs"
build_s=$(( $(date +%s) - build_start ))

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/sinter-gpu"
mkdir -p "$root/build" "$root/lib" "$root/source"

# --- executables and libsinter, at their places in the build tree ---
is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
elves=()
while IFS= read -r -d '' file; do
  is_elf "$file" || continue
  rel=${file#"$build_dir"/}
  mkdir -p "$root/build/$(dirname "$rel")"
  cp "$file" "$root/build/$rel"
  strip --strip-unneeded "$root/build/$rel"
  elves+=("$file")
done < <(find "$build_dir" \( -name CMakeFiles -o -name package -o -name _deps \) -prune -o \
  -type f ! -name 'sinter_mutant_*' \( -perm -u+x -o -name 'libsinter.so*' \) -print0)
# The library's version links (libsinter.so -> libsinter.so.0 -> libsinter.so.0.1.0).
find "$build_dir" -maxdepth 1 -type l -name 'libsinter.so*' -exec cp -P {} "$root/build/" \;
[ -n "$(find "$root/build" -maxdepth 1 -name 'libsinter.so*' -print -quit)" ] ||
  { echo "gpu_bundle: no shared libsinter in $build_dir" >&2; exit 1; }

# --- the test suite, relocatable ---
mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:[A-Z]*=//p' "$build_dir/CMakeCache.txt")
ctest --test-dir "$build_dir" --show-only=json-v1 >"$stage/tests.json"
python3 scripts/lib/bundle_tests.py --build "$build_dir" --source "$repo" --data "$fmnist" \
  --exclude-label package --exclude-label build --exclude-label mutant --mpiexec "$mpiexec" \
  --out "$root/build/CTestTestfile.cmake" <"$stage/tests.json"

# --- shared libraries the GPU machine may lack ---
# Not bundled: the C/C++ runtime (the machine's is newer), the CUDA driver and toolkit libraries
# (cuBLAS, cuDNN, NCCL: the machine has them, and they are large), and OpenMPI with everything it
# loads (it must match the machine's mpirun).
skip_re='^(linux-vdso|ld-linux|libc\.|libm\.|libpthread|libdl\.|librt\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink|libsinter)'
mpi_libs=""
mpi_lib=$(ldd "$root/build/libsinter.so" | awk '/libmpi\.so/ {print $3; exit}')
if [ -n "$mpi_lib" ]; then
  mpi_libs=$(ldd "$mpi_lib" | awk '$2 == "=>" {print $1}'; basename "$mpi_lib")
fi
declare -A bundled
for elf in "${elves[@]}"; do
  while read -r name arrow path _; do
    [ "$arrow" = "=>" ] && [ -f "$path" ] || continue
    [[ $name =~ $skip_re ]] && continue
    grep -qxF "$name" <<<"$mpi_libs" && continue
    [[ $name == libmpi* || $name == libopen-* ]] && continue
    bundled[$name]=$path
  done < <(ldd "$elf")
done
for name in "${!bundled[@]}"; do
  cp -L "${bundled[$name]}" "$root/lib/$name"
done

# --- the source tree's tracked files (scripts, benchmark scripts, README, test data) ---
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$root/source"

data_dir="$dir.data"
rm -rf "$data_dir"
if [ "$with_data" = 1 ]; then
  if [ -e "$fmnist/train-images-idx3-ubyte.gz" ]; then
    # Unzipped: xz packs the raw files 15% smaller than the .gz files are. An archive of its own
    # beside DIR, so that the code's bundle keeps its room.
    mkdir -p "$stage/data/fashion-mnist" "$data_dir"
    for gz in "$fmnist"/*-ubyte.gz; do
      gzip -dc "$gz" >"$stage/data/fashion-mnist/$(basename "$gz" .gz)"
    done
    tar -C "$stage" -cf - data | xz -T0 -9 >"$data_dir/fashion-mnist.tar.xz.part"
    mv "$data_dir/fashion-mnist.tar.xz.part" "$data_dir/fashion-mnist.tar.xz"
  else
    echo "gpu_bundle: $fmnist not found: the bundle has no Fashion-MNIST files" >&2
    with_data=0
  fi
fi

cp scripts/lib/bundle_run.sh "$root/run"
chmod +x "$root/run"
{
  echo "Sinter GPU bundle"
  echo "commit: $commit"
  echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n), in ${build_s}s"
  echo "cuda architectures: $archs"
  echo "nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "compiler: $(c++ --version | head -n 1)"
  echo "tests: $(grep -c '^add_test' "$root/build/CTestTestfile.cmake")"
  echo "executables: $(cd "$root/build" && find . -type f -perm -u+x ! -name '*.so*' | sort | tr '\n' ' ')"
  echo "bundled libraries (used where the machine lacks them): ${!bundled[*]}"
  echo "fashion-mnist: $([ "$with_data" = 1 ] && echo "in $(basename "$data_dir")/fashion-mnist.tar.xz" || echo 'not included')"
} >"$root/BUNDLE.txt"

# --- pack ---
echo "gpu_bundle: packing $(du -sh "$root" | cut -f1) ..."
archive="$dir/sinter-gpu.tar.xz"
tar -C "$stage" -cf - sinter-gpu | xz -T0 -9 >"$archive.part"
mv "$archive.part" "$archive"
size=$(stat -c %s "$archive")
sha=$(sha256sum "$archive" | cut -d' ' -f1)
{
  cat "$root/BUNDLE.txt"
  echo "archive: sinter-gpu.tar.xz, $size bytes"
  echo "archive sha256: $sha"
} >"$dir/BUNDLE.txt.part"
mv "$dir/BUNDLE.txt.part" "$dir/BUNDLE.txt"
cp scripts/lib/bundle_unpack.sh "$dir/run.part"
chmod +x "$dir/run.part"
mv "$dir/run.part" "$dir/run"

total=$(du -cb "$dir/sinter-gpu.tar.xz" "$dir/BUNDLE.txt" "$dir/run" | tail -n 1 | cut -f1)
mib=$(awk -v b="$total" 'BEGIN {printf "%.1f", b / 1048576}')
echo "gpu_bundle: $dir: $mib MiB ($total bytes), commit $commit, build ${build_s}s, total $(( $(date +%s) - start ))s"
if [ "$total" -ge "$limit_bytes" ]; then
  echo "gpu_bundle: over the 48 MiB that may travel to the GPU machine" >&2
  exit 1
fi
if [ "$with_data" = 1 ]; then
  both=$(( total + $(stat -c %s "$data_dir/fashion-mnist.tar.xz") ))
  echo "gpu_bundle: $data_dir: the data set; with the bundle $(awk -v b="$both" 'BEGIN {printf "%.1f", b / 1048576}') MiB (carry both: $(basename "$dir") and $(basename "$data_dir"))"
  if [ "$both" -ge "$limit_with_data" ]; then
    echo "gpu_bundle: the bundle and its data pass 58 MiB (try --no-data)" >&2
    exit 1
  fi
fi
