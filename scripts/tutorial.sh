#!/usr/bin/env bash
# Sets up, builds and runs the tutorial: scripts/tutorial.sh [--section N[,N...]] [--json FILE]
# Without a GPU the GEMM sections compile their kernels and report what the compiler produced.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if ! command -v nvcc >/dev/null && [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"

if [[ ! -f build/CMakeCache.txt ]]; then
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build build --target tessel_cli -j "$CMAKE_BUILD_PARALLEL_LEVEL"
exec build/tessel tutorial "$@"
