#!/usr/bin/env bash
# scripts/check_kernels.sh without cuobjdump: compiles the GEMM and convolution sources again with
# the build's nvcc, (a) checking that the sm_90a GEMM's PTX holds wgmma.mma_async and
# cp.async.bulk.tensor, (b) reading ptxas's report for every kernel: no stack frame, no spills,
# (c) and the sm_90a GEMM kernels' registers: exactly the warpgroup split's (Note [wgmma
# registers] in kernels/wgmma_ptx.cuh).
#
#   scripts/lib/check_kernels_nvcc.sh NVCC "ARCHS" SOURCE_DIR     (ARCHS as in CMake, e.g. "80;90a")
set -uo pipefail
nvcc=$1
archs=$2
src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

gencode=()
for a in ${archs//;/ }; do
  a=${a%-real}
  a=${a%-virtual}
  gencode+=("-gencode=arch=compute_$a,code=[compute_$a,sm_$a]")
done
flags=(-std=c++20 --expt-relaxed-constexpr -I"$src/include" -I"$src/src" -DSINTER_WITH_CUDA=1)

# Note [wgmma registers] in kernels/wgmma_ptx.cuh: the registers per thread the warpgroup split needs.
wgmma_registers=$(sed -n 's/^constexpr int kWgmmaRegisters = \([0-9]*\);.*/\1/p' "$src/kernels/wgmma_ptx.cuh")
[ -n "$wgmma_registers" ] || { echo "FAILED: no kWgmmaRegisters in $src/kernels/wgmma_ptx.cuh"; exit 1; }

failed=0
mapfile -t sources < <(ls "$src"/kernels/gemm*.cu "$src"/kernels/conv*.cu 2>/dev/null)
[ ${#sources[@]} -gt 0 ] || { echo "FAILED: no kernels/gemm*.cu or conv*.cu under $src"; exit 1; }

# --- (a) the sm_90a GEMM's PTX ---
if [[ ";$archs;" == *";90a;"* || ";$archs;" == *";90a-real;"* ]] && [ -f "$src/kernels/gemm_wgmma.cu" ]; then
  if ! "$nvcc" "${flags[@]}" -arch=sm_90a -ptx "$src/kernels/gemm_wgmma.cu" -o "$work/wgmma.ptx" \
    2>"$work/ptx.err"; then
    echo "FAILED (a): nvcc -ptx kernels/gemm_wgmma.cu:"
    cat "$work/ptx.err"
    failed=1
  else
    entries=$(grep -c '\.entry .*gemm_wgmma' "$work/wgmma.ptx")
    wgmma=$(grep -c 'wgmma\.mma_async' "$work/wgmma.ptx")
    tma=$(grep -c 'cp\.async\.bulk\.tensor' "$work/wgmma.ptx")
    if [ "$entries" -gt 0 ] && [ "$wgmma" -gt 0 ] && [ "$tma" -gt 0 ]; then
      echo "ok (a): $entries sm_90a GEMM kernel(s); the PTX has $wgmma wgmma.mma_async and $tma cp.async.bulk.tensor"
    else
      echo "FAILED (a): gemm_wgmma kernels $entries, wgmma.mma_async $wgmma, cp.async.bulk.tensor $tma"
      failed=1
    fi
  fi
else
  echo "skipped (a): the build's architectures ($archs) do not include 90a"
fi

# --- (b) ptxas's report: "Compiling entry function 'NAME' for 'sm_XX'" ... "N bytes stack frame,
# N bytes spill stores, N bytes spill loads" ---
checked=0
wgmma_regs=""
for f in "${sources[@]}"; do
  if ! "$nvcc" "${flags[@]}" "${gencode[@]}" -Xptxas -v -c "$f" -o "$work/k.o" 2>"$work/ptxas.log"; then
    echo "FAILED (b): nvcc -c $f:"
    cat "$work/ptxas.log"
    failed=1
    continue
  fi
  report=$(awk -v file="$(basename "$f")" '
    /Compiling entry function/ { name = $0; sub(/^[^'\'']*'\''/, "", name); sub(/'\''.*$/, "", name); next }
    /bytes stack frame/ && name != "" {
      split($0, w, /[ ,]+/)
      stack = $1; spill_st = $5; spill_ld = $9
      print (stack == 0 && spill_st == 0 && spill_ld == 0 ? "ok" : "bad"), file, stack, spill_st, spill_ld, name
      name = ""
    }' "$work/ptxas.log")
  checked=$((checked + $(grep -c . <<<"$report")))
  # (c): "Used N registers" follows each entry's "Compiling entry function 'NAME' for 'sm_XX'".
  wgmma_regs+=$(awk '
    /Compiling entry function/ {
      name = $0; sub(/^[^'\'']*'\''/, "", name); sub(/'\''.*$/, "", name)
      arch = $0; sub(/^.* for '\''/, "", arch); sub(/'\''.*$/, "", arch)
      next
    }
    /Used [0-9]+ registers/ && name ~ /gemm_wgmma_kernel/ && arch == "sm_90a" {
      match($0, /Used [0-9]+ registers/); print substr($0, RSTART + 5, RLENGTH - 15), name; name = ""
    }' "$work/ptxas.log")
  wgmma_regs+=$'\n'

  bad=$(grep '^bad' <<<"$report")
  if [ -n "$bad" ]; then
    echo "FAILED (b): kernels with a stack frame or spills (file, stack, spill stores, spill loads, kernel):"
    sed 's/^bad /  /' <<<"$bad"
    failed=1
  fi
done
[ $failed -eq 0 ] && echo "ok (b): $checked GEMM/convolution kernel compilations, none with a stack frame or spills"

# --- (c) the sm_90a GEMM kernels' registers ---
if [[ ";$archs;" == *";90a;"* || ";$archs;" == *";90a-real;"* ]]; then
  wgmma_regs=$(grep . <<<"$wgmma_regs")
  if [ -z "$wgmma_regs" ]; then
    echo "FAILED (c): no register count read for any sm_90a gemm_wgmma kernel"
    failed=1
  elif off=$(awk -v want="$wgmma_registers" '$1 != want' <<<"$wgmma_regs") && [ -n "$off" ]; then
    echo "FAILED (c): sm_90a GEMM kernels without exactly $wgmma_registers registers (registers, kernel):"
    sed 's/^/  /' <<<"$off"
    failed=1
  else
    echo "ok (c): $(grep -c . <<<"$wgmma_regs") sm_90a GEMM kernel(s), each with $wgmma_registers registers"
  fi
fi
echo "check_kernels (nvcc): ${#sources[@]} source(s), $([ $failed -eq 0 ] && echo passed || echo FAILED)"
exit $failed
