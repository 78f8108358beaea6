#!/usr/bin/env bash
# Sets up, builds and runs Tessel's tests — what CI runs (.ci/run):
#   1. Release build in build/, every test tier except perf: cpu and nvrtc run for real; gpu
#      tests report SKIPPED (with the reason) on a machine without a GPU;
#   2. the cpu tier again under AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if ! command -v nvcc >/dev/null && [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
jobs="$CMAKE_BUILD_PARALLEL_LEVEL"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

configure() {  # configure BUILD_DIR [cmake args...]; keeps an existing tree's generator
  local dir=$1
  shift
  if [[ -f "$dir/CMakeCache.txt" ]]; then
    cmake -S . -B "$dir" "$@" >/dev/null
  else
    cmake -S . -B "$dir" "${generator[@]}" "$@" >/dev/null
  fi
}

echo "== Release build (build/)"
configure build -DCMAKE_BUILD_TYPE=Release -DTESSEL_SANITIZE=OFF
cmake --build build -j "$jobs"

echo "== tests: cpu, nvrtc, gpu (gpu tests are SKIPPED without a GPU)"
(cd build && ctest -LE perf --output-on-failure -j "$jobs")

echo "== cpu tier under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
configure build-asan -DCMAKE_BUILD_TYPE=Debug -DTESSEL_SANITIZE=ON
cmake --build build-asan -j "$jobs" --target tessel_tests_cpu tessel_cli
(cd build-asan && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" ctest -L cpu --output-on-failure -j "$jobs")

echo "== all tests passed"
