#!/usr/bin/env bash
# The python test tier (tests/python, pytest), as CI runs it (scripts/test.sh):
#   1. a virtual environment in build-python/venv with pytest, nanobind and scikit-build-core;
#   2. torch for its CPU side: PyPI's torch wheel without its dependencies (the CUDA libraries it
#      names are multi-GB), plus the three small CUDA libraries this machine's toolkit lacks
#      (cuFile, cuSPARSELt, NVSHMEM: libtorch_cuda.so links them) and torch's pure-Python needs;
#      docs/python.md has the measurements behind this choice. TESSEL_PYTHON_TORCH=0 skips it (the
#      torch tests then report SKIPPED);
#   3. `pip install .` — the README's command — building only the extension against an installed
#      Tessel when PREFIX is given (scripts/test.sh passes the prefix it installed build/ into), so
#      that CI compiles the library once; without PREFIX, the whole library too (build-python/);
#   4. pytest tests/python (GPU tests report SKIPPED with the reason where there is no GPU).
#
#   scripts/test-python.sh [PREFIX]
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-}
if ! command -v nvcc >/dev/null && [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

# torch 2.11 for CUDA 13 (what the H200 machine runs); the CUDA libraries it needs beyond the
# toolkit installed here, pinned to the versions torch 2.11.0 names.
torch_pins=(torch==2.11.0)
torch_cuda_extras=(nvidia-cufile==1.20.0.107 nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5)
torch_python_deps=(filelock "typing-extensions>=4.10" "sympy>=1.13.3" "networkx>=2.5.1" jinja2 "fsspec>=0.8.5"
                   "setuptools<82")

venv=build-python/venv
if [[ ! -x "$venv/bin/python" ]]; then
  if ! python3 -m venv "$venv"; then
    echo "test-python: python3 -m venv failed; install Python's venv module (Debian: apt-get install python3-venv)" >&2
    exit 1
  fi
fi
if [[ ! -f "$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")/Python.h" ]]; then
  echo "test-python: Python's headers are missing (Debian: apt-get install python3-dev); the extension needs them" >&2
  exit 1
fi
py="$venv/bin/python"
pipq() { "$py" -m pip install -q --disable-pip-version-check --no-compile "$@"; }
start=$SECONDS
pipq pytest nanobind scikit-build-core
if [[ "${TESSEL_PYTHON_TORCH:-1}" != 0 ]]; then
  if ! "$py" -c "import torch" 2>/dev/null; then
    t0=$SECONDS
    pipq "${torch_python_deps[@]}"
    pipq --no-deps "${torch_pins[@]}" "${torch_cuda_extras[@]}"
    echo "torch installed (no CUDA dependencies) in $((SECONDS - t0)) s: $(du -sh "$venv" | cut -f1) in the venv"
  fi
  site=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  # libtorch_cuda.so's three libraries that the toolkit here lacks; the others (cuBLAS, cuDNN,
  # NCCL, ...) come from the toolkit's folder through the loader's path.
  export LD_LIBRARY_PATH="$site/nvidia/cu13/lib:$site/nvidia/cusparselt/lib:$site/nvidia/nvshmem/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

t0=$SECONDS
install_args=(--no-build-isolation --no-deps .)
if [[ -n "$prefix" ]]; then
  install_args+=(--config-settings=build-dir=build-python/against-prefix
                 --config-settings=cmake.define.TESSEL_PYTHON_USE_INSTALLED=ON
                 "--config-settings=cmake.define.CMAKE_PREFIX_PATH=$prefix"
                 "--config-settings=cmake.define.tessel_DIR=$prefix/lib/cmake/tessel")
fi
pipq "${install_args[@]}"
echo "pip install . in $((SECONDS - t0)) s"

# Run from tests/python so that `import tessel` is the installed package, not python/tessel.
(cd tests/python && "$OLDPWD/$py" -m pytest -q -p no:cacheprovider -rs .)
echo "python tier: $((SECONDS - start)) s in all"
