# Sourced by scripts/test.sh and scripts/quickstart.sh: the Debian packages Sinter builds, tests and
# trains with, and a function that installs whichever are missing (apt-get only runs when one is).
# shellcheck shell=bash

SINTER_DEBIAN_PACKAGES=(
  cmake ninja-build g++ ccache pkg-config
  libopenblas-dev zlib1g-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libbenchmark-dev libopenmpi-dev openmpi-bin
  dataset-fashion-mnist  # the end-to-end training tests and examples read /usr/share/datasets/fashion-mnist
  gnuplot-nox            # the training examples plot their curves to PNG
  fortunes               # the text tests and language-model examples read /usr/share/games/fortunes
)

sinter_install_deps() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: not a Debian system; install these yourself: ${SINTER_DEBIAN_PACKAGES[*]}" >&2
    return 0
  fi
  local missing=() pkg
  for pkg in "${SINTER_DEBIAN_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "deps: missing ${missing[*]}, and installing needs root (no sudo here)" >&2
      return 1
    fi
    sudo=(sudo)
  fi
  echo "deps: installing ${missing[*]}"
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}
