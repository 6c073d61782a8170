# Sourced by scripts/test.sh and scripts/quickstart.sh: the Debian packages Sinter builds, tests and
# trains with, and a function that installs whichever are missing (apt-get only runs when one is).
# shellcheck shell=bash

SINTER_DEBIAN_PACKAGES=(
  cmake ninja-build g++ ccache pkg-config
  libopenblas-dev zlib1g-dev nlohmann-json3-dev libcli11-dev
  libpng-dev             # SummaryWriter::add_image encodes PNG
  libgtest-dev libbenchmark-dev libopenmpi-dev openmpi-bin
  libonnx-dev libprotobuf-dev  # sinter::onnx::export_model: ONNX's protobuf classes and checker
  libdnnl-dev            # the CPU convolutions in oneDNN (Note [onednn convolutions])
  ocl-icd-opencl-dev     # oneDNN's CMake package looks for OpenCL (its GPU runtime), found or not
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

# The Python packages of the interop tests (tests/scripts/requirements.txt: numpy, safetensors,
# onnxruntime, tokenizers, tensorboard, torch, transformers, gguf; each imports under its package
# name), installed with pip where one is missing. Optional: where pip cannot install them (no
# network, an externally managed Python) this says so and the tests that need them skip.
sinter_install_python_deps() {
  local requirements
  requirements="$(dirname "${BASH_SOURCE[0]}")/../../tests/scripts/requirements.txt"
  if ! command -v python3 >/dev/null 2>&1; then
    echo "deps: no python3; the ONNX Runtime and safetensors interop tests will skip" >&2
    return 0
  fi
  local modules
  modules=$(grep -v '^#' "$requirements" | paste -sd, -)
  if ! python3 -c "import $modules" >/dev/null 2>&1; then
    echo "deps: pip installing the interop tests' packages ($requirements)"
    if ! python3 -m pip install --quiet --disable-pip-version-check -r "$requirements"; then
      echo "deps: pip could not install them; the interop tests that need them will skip" >&2
    fi
  fi
  sinter_install_llama_cpp
  return 0
}

# llama-cpp-python, which GgufExportReadsBack runs the exported GGUF files in: built from PyPI's
# source package (it compiles llama.cpp: about 8 CPU-minutes, once per machine), apart from the
# other packages so that a failed or overlong build skips that part of the test alone.
# SINTER_NO_LLAMA_CPP=1 leaves it out.
sinter_install_llama_cpp() {
  if [[ "${SINTER_NO_LLAMA_CPP:-0}" == 1 ]] || python3 -c "import llama_cpp" >/dev/null 2>&1; then
    return 0
  fi
  echo "deps: pip building llama-cpp-python (llama.cpp, for the GGUF test; a few minutes)"
  if ! CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" timeout 1800 python3 -m pip install --quiet \
      --disable-pip-version-check llama-cpp-python; then
    echo "deps: llama-cpp-python did not build; the GGUF test will not run llama.cpp" >&2
  fi
  return 0
}
