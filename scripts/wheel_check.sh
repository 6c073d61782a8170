#!/usr/bin/env bash
# The wheel as `pip install .` builds it: scikit-build-core (pyproject.toml) builds the library and
# the extension from this tree, without build isolation (the build tools come from PyPI, installed
# here when missing); the wheel is installed into a folder of its own, and the Python suite's
# package, tensor, autograd and module tests run against that installed copy. CI runs this. CUDA
# is off unless SINTER_WHEEL_CUDA=ON (the CUDA wheel is the same build with nvcc, and the test
# build already compiles every kernel).
#   SINTER_WHEEL_DIR (default build-wheel): the wheel in dist/, its build in build/, the install in
#   site/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PIP_ROOT_USER_ACTION=ignore
source scripts/lib/deps.sh
sinter_install_deps
sinter_install_python_deps
if ! python3 -c "import scikit_build_core" >/dev/null 2>&1; then
  python3 -m pip install --quiet --disable-pip-version-check "scikit-build-core>=0.10"
fi

out=${SINTER_WHEEL_DIR:-build-wheel}
rm -rf "$out/dist" "$out/site"
python3 -m pip wheel . --no-deps --no-build-isolation --disable-pip-version-check \
  -w "$out/dist" -C build-dir="$out/build" \
  -C cmake.define.SINTER_CUDA="${SINTER_WHEEL_CUDA:-OFF}"
python3 -m pip install --quiet --no-deps --disable-pip-version-check --target "$out/site" \
  "$out"/dist/sinter-*.whl
# The installed copy, not the tree's python/sinter: the tests import sinter from site/.
PYTHONPATH="$PWD/$out/site" python3 - <<'PY'
import pathlib, sinter
where = pathlib.Path(sinter.__file__).resolve()
assert "site" in where.parts, f"sinter imported from {where}, not the installed wheel"
print(f"wheel: sinter {sinter.__version__} from {where.parent}")
PY
PYTHONPATH="$PWD/$out/site" python3 -m pytest -q -p no:cacheprovider tests/python/test_package.py \
  tests/python/test_tensor.py tests/python/test_autograd.py tests/python/test_nn.py \
  tests/python/test_ops.py
