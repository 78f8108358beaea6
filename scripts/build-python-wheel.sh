#!/usr/bin/env bash
# On the CPU machine: a wheel of the Python package for another CPython (default 3.12, the GPU
# machine's), in .whl/ (git-ignored; the device tool's `carry` takes it there, where
# scripts/gpu-python.sh installs it). Uses pyenv's interpreter of that version, or PYTHON.
#
#   scripts/build-python-wheel.sh [3.12]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-3.12}
py=${PYTHON:-}
if [[ -z "$py" ]]; then
  py=$(command -v "python$version" || true)
  # A pyenv shim for a version that is not selected fails when run: use the version's own binary.
  if [[ -n "$py" ]] && ! "$py" -c "" 2>/dev/null; then py=""; fi
  if [[ -z "$py" ]] && command -v pyenv >/dev/null; then
    py=$(ls -d "$(pyenv root)/versions/$version".*/bin/python"$version" 2>/dev/null | tail -1)
  fi
fi
if [[ -z "$py" || ! -x "$py" ]]; then
  echo "build-python-wheel.sh: no python$version found (set PYTHON=/path/to/python$version)" >&2
  exit 1
fi
if ! command -v nvcc >/dev/null && [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
"$py" -m pip install -q --disable-pip-version-check nanobind scikit-build-core
mkdir -p .whl
rm -f .whl/tessel-*-cp${version/./}-*.whl
"$py" -m pip wheel -q --no-build-isolation --no-deps -w .whl .
ls -la .whl/tessel-*-cp${version/./}-*.whl
