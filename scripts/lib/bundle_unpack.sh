#!/usr/bin/env bash
# The GPU bundle's entry point (copied beside the archive as `run` by scripts/gpu_bundle.sh):
# unpacks sinter-gpu.tar.xz once, into $SINTER_BUNDLE_ROOT or /tmp/sinter-gpu-<archive sha256>
# (outside the bundle folder, which travels as it is), and the data set from the folder beside it
# (DIR.data/fashion-mnist.tar.xz) where that came too, then hands the command to its runner.
# `run --root` prints the unpacked folder; `run` alone prints the runner's usage.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
sha=$(sed -n 's/^archive sha256: //p' "$here/BUNDLE.txt" | cut -c1-16)
if [ -z "$sha" ]; then
  echo "$here/BUNDLE.txt names no archive sha256: not a bundle made by scripts/gpu_bundle.sh" >&2
  exit 2
fi
root=${SINTER_BUNDLE_ROOT:-${TMPDIR:-/tmp}/sinter-gpu-$sha}
if [ ! -f "$root/.unpacked" ]; then
  rm -rf "$root.part"
  mkdir -p "$root.part"
  tar -xJf "$here/sinter-gpu.tar.xz" -C "$root.part" --strip-components=1
  touch "$root.part/.unpacked"
  rm -rf "$root"
  mv "$root.part" "$root"
fi
if [ -f "$here.data/fashion-mnist.tar.xz" ] && [ ! -f "$root/data/.unpacked" ]; then
  rm -rf "$root/data"
  tar -xJf "$here.data/fashion-mnist.tar.xz" -C "$root"
  touch "$root/data/.unpacked"
fi
exec "$root/run" "$@"
