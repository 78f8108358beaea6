#!/usr/bin/env bash
# On the GPU machine: installs the Python package and runs the python tier and tessel.bench
# (issue 16), writing into OUTDIR <date>-python-bench-<tag>.json (gemm, softmax, attention and the call overhead, Tessel beside
# torch in one process), and python-tests.xml (pytest's report) with TESSEL_PYTHON_JUNIT=1;
# everything printed goes to stdout (gpu-check.sh logs it).
#
# The package comes from a wheel for this Python carried in .whl/ (scripts/build-python-wheel.sh
# on the CPU machine: no compiler work here), else it is built from the tree with
# `pip install --no-build-isolation --no-deps` (the machine has no registry; the build needs
# nanobind, scikit-build-core, CMake, the CUDA toolkit and the nlohmann-json and DLPack headers).
# It is installed into a scratch folder put on PYTHONPATH: the machine's environment stays as it is.
#
#   scripts/gpu-python.sh OUTDIR   (env: TESSEL_RESULT_TAG=h200; TESSEL_PYTEST_ARGS: extra pytest
#                                   arguments, e.g. "-k matmul"; TESSEL_PYTHON_BENCH: the benchmarks,
#                                   default "gemm softmax attention overhead")
set -uo pipefail
out=${1:?usage: scripts/gpu-python.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
tag=${TESSEL_RESULT_TAG:-h200}
day=$(date -u +%Y-%m-%d)
status=0
site=$(mktemp -d /tmp/tessel-python-XXXXXX)
export PYTHONUNBUFFERED=1

pytag=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
wheel=$(ls .whl/tessel-*-"$pytag"-*.whl 2>/dev/null | tail -1)
start=$SECONDS
if [[ -n "$wheel" ]]; then
  echo "gpu-python: installing $wheel"
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheel" || exit 3
else
  echo "gpu-python: no .whl/tessel-*-$pytag-*.whl; building from the tree (pip install --no-build-isolation)"
  if ! command -v nvcc >/dev/null && [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q --no-index --no-build-isolation --no-deps \
    --target "$site" . || exit 3
fi
echo "gpu-python: installed in $((SECONDS - start)) s"
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
# The extension finds NVRTC through an rpath to the toolkit it was built with; torch's own copy of
# the CUDA 13 libraries (nvidia/cu13/lib) is a fallback, last on the loader's path.
nvidia_lib=$(python3 -c "import os, sysconfig; print(os.path.join(sysconfig.get_paths()['purelib'], 'nvidia', 'cu13', 'lib'))")
if [[ -d "$nvidia_lib" ]]; then export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$nvidia_lib"; fi

# The issue's first check, verbatim.
python3 -c "import tessel, torch; print(tessel.ops.matmul(torch.randn(64, 64).half().cuda(), torch.randn(64, 64).half().cuda()))" ||
  status=1
python3 -c "import tessel, json; print(json.dumps(tessel.info(), indent=1))" || status=1

junit=()
if [[ "${TESSEL_PYTHON_JUNIT:-0}" == 1 ]]; then junit=(--junitxml="$out/python-tests.xml"); fi
read -r -a pytest_args <<<"${TESSEL_PYTEST_ARGS:-}"
(cd tests/python && python3 -m pytest -q -rs -p no:cacheprovider "${junit[@]}" "${pytest_args[@]}" .) || status=1

read -r -a benches <<<"${TESSEL_PYTHON_BENCH:-gemm softmax attention overhead}"
python3 -m tessel.bench "${benches[@]}" --json "$out/$day-python-bench-$tag.json" || status=1
exit $status
