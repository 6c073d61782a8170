#!/usr/bin/env bash
# Build-time checks of the CUDA kernels in a build folder, from what cuobjdump reads in the compiled
# objects: (a) every sm_90a GEMM kernel (mangled name containing "gemm_wgmma") issues wgmma
# (wgmma.mma_async) and TMA loads (cp.async.bulk.tensor); (b) no GEMM or convolution kernel uses
# local memory (LOCAL:0 and STACK:0 in its resource usage: no register spills, no stack arrays);
# (c) every sm_90a GEMM kernel has exactly the registers its warpgroup split needs (Note [wgmma
# registers] and kWgmmaRegisters in kernels/wgmma_ptx.cuh).
#
#   scripts/check_kernels.sh [--skip-code N] BUILD_DIR
#
# Prints a short report. Exits 0 when both checks pass, 1 when one fails, 2 on a usage error, and 0
# (or N with --skip-code, for CTest's SKIP_RETURN_CODE) with "skipped" when the build has no CUDA
# objects or no cuobjdump is found. Env: CUOBJDUMP (the cuobjdump to use).
set -uo pipefail

skip_code=0
if [ "${1:-}" = "--skip-code" ]; then
  skip_code=${2:?--skip-code needs a value}
  shift 2
fi
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: scripts/check_kernels.sh [--skip-code N] BUILD_DIR" >&2
  exit 2
fi
build_dir=$1

skip() {
  echo "check_kernels: skipped ($1)"
  exit "$skip_code"
}

# The library's CUDA objects (CMake names them <file>.cu.o); a build without CUDA has none.
mapfile -t objects < <(find "$build_dir" -path '*sinter.dir*' -name '*.cu.o' -type f | sort)
[ ${#objects[@]} -gt 0 ] || skip "no CUDA objects in $build_dir: built without CUDA"

cuobjdump=${CUOBJDUMP:-}
if [ -z "$cuobjdump" ]; then
  cuda_compiler=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)
  for candidate in "$(command -v cuobjdump 2>/dev/null)" "${cuda_compiler:+$(dirname "$cuda_compiler")/cuobjdump}" \
    /usr/local/cuda/bin/cuobjdump; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
      cuobjdump=$candidate
      break
    fi
  done
fi
if [ -z "$cuobjdump" ] || [ ! -x "$cuobjdump" ]; then
  # No cuobjdump (it is not part of every CUDA install): compile the GEMM and convolution sources
  # again with the build's nvcc and architectures, keeping the PTX and reading ptxas's report.
  cuda_compiler=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)
  archs=$(sed -n 's/^SINTER_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)
  source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)
  [ -x "$cuda_compiler" ] && [ -n "$archs" ] && [ -d "$source_dir/kernels" ] ||
    skip "cuobjdump not found and no nvcc in $build_dir/CMakeCache.txt; set CUOBJDUMP"
  exec bash "$(dirname "$0")/lib/check_kernels_nvcc.sh" "$cuda_compiler" "$archs" "$source_dir"
fi

demangle() {
  if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi
}

# The per-file anonymous namespace in a mangled name, which spells the file's name (gemm_cu): names
# are matched without it, or every kernel of gemm.cu would count as a GEMM.
anon_ns='_GLOBAL__N__[0-9a-f]+_[0-9]+_[A-Za-z0-9_]*_cu_'
for _ in 1 2 3 4 5 6 7 8; do anon_ns+='[0-9a-f]'; done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# --- (a) wgmma and TMA in the sm_90a GEMM kernels ---
# PTX entries: ".visible .entry NAME(" up to the "}" that closes the body at column 0. For each
# entry whose name contains gemm_wgmma, prints "NAME has_wgmma has_tma" (1 or 0).
for obj in "${objects[@]}"; do "$cuobjdump" -ptx "$obj" 2>/dev/null; done >"$work/ptx"
awk -v ns="$anon_ns" '
  /^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]/ {
    name = $0
    sub(/^.*\.entry[ \t]+/, "", name)
    sub(/[ \t(].*$/, "", name)
    bare = name
    gsub(ns, "", bare)
    inside = bare ~ /gemm_wgmma/
    wgmma = 0; tma = 0
    next
  }
  inside && /wgmma\.mma_async/ { wgmma = 1 }
  inside && /cp\.async\.bulk\.tensor/ { tma = 1 }
  inside && /^}/ { print name, wgmma, tma; inside = 0 }
' "$work/ptx" | sort -u >"$work/wgmma"

wgmma_kernels=$(wc -l <"$work/wgmma")
if [ "$wgmma_kernels" -eq 0 ]; then
  if [ ! -s "$work/ptx" ]; then
    echo "FAILED (a): no PTX in the objects (CUDA_ARCHITECTURES with only real architectures?), so"
    echo "            the wgmma GEMM kernels cannot be checked"
  else
    echo "FAILED (a): no kernel whose name contains gemm_wgmma (the sm_90a GEMM is missing; the"
    echo "            library must be built for the 90a architecture)"
  fi
  failed=1
else
  missing=$(awk '$2 == 0 || $3 == 0' "$work/wgmma")
  if [ -n "$missing" ]; then
    echo "FAILED (a): sm_90a GEMM kernels without wgmma.mma_async or cp.async.bulk.tensor:"
    while read -r name wg tma; do
      printf '  %s%s%s\n' "$(demangle <<<"$name")" "$([ "$wg" = 0 ] && echo '  [no wgmma.mma_async]')" \
        "$([ "$tma" = 0 ] && echo '  [no cp.async.bulk.tensor]')"
    done <<<"$missing"
    failed=1
  else
    echo "ok (a): $wgmma_kernels sm_90a GEMM kernel(s), each with wgmma.mma_async and cp.async.bulk.tensor"
  fi
fi

# --- (b) no local memory in the GEMM and convolution kernels ---
# Resource-usage lines: " Function NAME: REG:n STACK:n SHARED:n LOCAL:n ...", one per kernel and
# real architecture. Current toolchains count register spills and local arrays in the kernel's stack
# frame (STACK) and report LOCAL:0 regardless, so both must be 0. Names are matched without the anonymous namespace that spells the file name
# (every kernel of gemm.cu would match "gemm"), and "convert" (dtype conversions) is no convolution.
for obj in "${objects[@]}"; do "$cuobjdump" -res-usage "$obj" 2>/dev/null; done >"$work/res"
awk -v ns="$anon_ns" '
  function bare(n) {
    gsub(ns, "", n)
    gsub(/convert/, "", n)
    return n
  }
  function flush() {
    if (name != "" && bare(name) ~ /gemm|conv/) print name, arch, local, stack
    name = ""
  }
  /^ *arch *= / { flush(); arch = $3 }
  /Function [^ ]+:/ {
    flush()
    name = $0
    sub(/^.*Function /, "", name)
    sub(/:.*$/, "", name)
    local = "?"
    stack = "?"
  }
  # Older cuobjdump prints the figures on the Function line, newer ones on the next.
  name != "" && match($0, /LOCAL:[0-9]+/) { local = substr($0, RSTART + 6, RLENGTH - 6) }
  name != "" && match($0, /STACK:[0-9]+/) { stack = substr($0, RSTART + 6, RLENGTH - 6) }
  END { flush() }
' "$work/res" | sort -u >"$work/local"

checked=$(wc -l <"$work/local")
offenders=$(awk '$3 != "0" || $4 != "0"' "$work/local")
if [ "$checked" -eq 0 ]; then
  echo "FAILED (b): no GEMM or convolution kernel in the resource usage of ${#objects[@]} object(s)"
  failed=1
elif [ -n "$offenders" ]; then
  echo "FAILED (b): GEMM/convolution kernels with local memory (spills or stack arrays), of $checked:"
  while read -r name arch local stack; do
    printf '  LOCAL:%s STACK:%s  %s  %s\n' "$local" "$stack" "$arch" "$(demangle <<<"$name")"
  done <<<"$offenders"
  failed=1
else
  echo "ok (b): $checked GEMM/convolution kernel(s) (per architecture), none with local memory or stack"
fi

# --- (c) the sm_90a GEMM kernels' registers (REG:n of their resource usage) ---
source_dir=$(sed -n 's/^CMAKE_HOME_DIRECTORY:[A-Z]*=//p' "$build_dir/CMakeCache.txt" 2>/dev/null)
want=$(sed -n 's/^constexpr int kWgmmaRegisters = \([0-9]*\);.*/\1/p' "$source_dir/kernels/wgmma_ptx.cuh" 2>/dev/null)
awk -v ns="$anon_ns" '
  /^ *arch *= / { arch = $3 }
  /Function [^ ]+:/ { name = $0; sub(/^.*Function /, "", name); sub(/:.*$/, "", name); bare = name; gsub(ns, "", bare) }
  bare ~ /gemm_wgmma_kernel/ && arch ~ /sm_90a/ && match($0, /REG:[0-9]+/) {
    print substr($0, RSTART + 4, RLENGTH - 4), name; bare = ""
  }
' "$work/res" | sort -u >"$work/regs"
if [ -z "$want" ]; then
  echo "FAILED (c): no kWgmmaRegisters in $source_dir/kernels/wgmma_ptx.cuh"
  failed=1
elif [ ! -s "$work/regs" ]; then
  echo "FAILED (c): no register count of an sm_90a gemm_wgmma kernel in the resource usage"
  failed=1
elif off=$(awk -v want="$want" '$1 != want' "$work/regs") && [ -n "$off" ]; then
  echo "FAILED (c): sm_90a GEMM kernels without exactly $want registers (registers, kernel):"
  while read -r regs name; do printf '  %s  %s\n' "$regs" "$(demangle <<<"$name")"; done <<<"$off"
  failed=1
else
  echo "ok (c): $(wc -l <"$work/regs") sm_90a GEMM kernel(s), each with $want registers"
fi

echo "check_kernels: ${#objects[@]} object(s) under $build_dir, $( [ $failed -eq 0 ] && echo passed || echo FAILED)"
exit $failed
