#!/usr/bin/env bash
# Sets up, builds and runs Tessel's tests — what CI runs (.ci/run):
#   1. Release build in build/, every test tier except perf: cpu and nvrtc run for real; gpu
#      tests report SKIPPED (with the reason) on a machine without a GPU;
#   2. build/ installed into a temporary prefix, and the examples built and run as other
#      projects would: examples/find_package against that prefix (with every public header
#      compiled alone under -Wall -Wextra -Werror -pedantic), examples/add_subdirectory from this
#      tree (its libraries unoptimized, which keeps it to about a minute on two cores);
#   3. the python tier (scripts/test-python.sh): `pip install .` building the extension against that
#      prefix, torch from PyPI without its CUDA dependencies, pytest tests/python;
#   4. the cpu tier again under AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan/.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if ! command -v nvcc >/dev/null && [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
jobs="$CMAKE_BUILD_PARALLEL_LEVEL"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi

configure() {  # configure BUILD_DIR [cmake args...]; keeps an existing tree's generator
  configure_from . "$@"
}

configure_from() {  # configure_from SOURCE_DIR BUILD_DIR [cmake args...]
  local src=$1 dir=$2
  shift 2
  if [[ -f "$dir/CMakeCache.txt" ]]; then
    cmake -S "$src" -B "$dir" "$@" >/dev/null
  else
    cmake -S "$src" -B "$dir" "${generator[@]}" "$@" >/dev/null
  fi
}

echo "== Release build (build/)"
configure build -DCMAKE_BUILD_TYPE=Release -DTESSEL_SANITIZE=OFF
cmake --build build -j "$jobs"

echo "== tests: cpu, nvrtc, gpu (gpu tests are SKIPPED without a GPU)"
(cd build && ctest -LE perf --output-on-failure -j "$jobs")

echo "== install into a temporary prefix; the examples (examples/) build against it and run"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install build --prefix "$scratch/prefix" >/dev/null
configure_from examples/find_package "$scratch/find_package" -DCMAKE_PREFIX_PATH="$scratch/prefix"
cmake --build "$scratch/find_package" -j "$jobs"
"$scratch/find_package/tutorial_gemm"
configure_from examples/add_subdirectory "$scratch/add_subdirectory"
cmake --build "$scratch/add_subdirectory" -j "$jobs"
"$scratch/add_subdirectory/tutorial_gemm"

echo "== python tier (tests/python): pip install . against that prefix, torch's CPU side, pytest"
bash scripts/test-python.sh "$scratch/prefix"

echo "== cpu tier under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)"
# Without the benchmarks' baselines: this tier times nothing, and the cuDNN frontend's file is the
# slowest of the build to compile (90 s under the sanitizers); the CLI's tests run on the stubs
# that stand in for them (tools/tessel/without_baselines/).
configure build-asan -DCMAKE_BUILD_TYPE=Debug -DTESSEL_SANITIZE=ON -DTESSEL_BENCH_BASELINES=OFF
cmake --build build-asan -j "$jobs" --target tessel_tests_cpu tessel_cli
# The sweeps -- every point of a tuning space lowered, every persistent block count verified --
# passed in the Release tier above; at -O0 under the sanitizers they take 30-40 times longer
# (1165 s of the tier's 2230 s of test time on two cores), and the code they run is reached by
# the tier's other tests on fewer points.
asan_sweeps=(AutotuneAttentionSpace.Hopper128KeepsEveryScheduleWithinSharedMemory
             RegisterBudget.NoPointOfTheGemmSpacesTripsIt
             PipelinePassVerifier.PersistentCausalAttentionIsAcceptedForEveryBlockCount)
asan_exclude="^($(IFS='|'; echo "${asan_sweeps[*]//./\\.}"))\$"
echo "   (not under the sanitizers, passed above: ${asan_sweeps[*]})"
(cd build-asan && ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" ctest -L cpu -E "$asan_exclude" --output-on-failure -j "$jobs")

echo "== all tests passed"
