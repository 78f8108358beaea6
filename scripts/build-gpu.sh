#!/usr/bin/env bash
# On the CPU machine: a Release build whose runnable files are gathered into build-gpu/ (the
# executables and the commit they came from, a few MB — no object files), ready to be carried to
# the GPU machine and run there by scripts/gpu-check.sh. The full build tree stays in build/.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nvcc >/dev/null && [[ -d /usr/local/cuda/bin ]]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
if [[ ! -f build/CMakeCache.txt ]]; then
  generator=()
  if command -v ninja >/dev/null; then generator=(-G Ninja); fi
  cmake -S . -B build "${generator[@]}" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build build -j "$CMAKE_BUILD_PARALLEL_LEVEL"

if [[ -f build-gpu/CMakeCache.txt ]]; then
  echo "build-gpu.sh: build-gpu/ is a CMake build tree; not replacing it (run gpu-check.sh on it as it is)" >&2
  exit 1
fi
rm -rf build-gpu
mkdir -p build-gpu
for exe in tessel tessel_fuzz tessel_tests_cpu tessel_tests_nvrtc tessel_tests_gpu; do
  if [[ -x "build/$exe" ]]; then cp "build/$exe" build-gpu/; fi
done
# The cluster softmax probe (tools/probes/softmax_cluster_probe.cu), for gpu-check.sh; optional.
if CARRY_DIR=build-gpu bash tools/probes/build_softmax_cluster.sh >/dev/null 2>&1; then
  rm -f build-gpu/softmax_cluster_probe.ptxas.txt
else
  echo "build-gpu.sh: the cluster softmax probe did not build (gpu-check.sh skips it)" >&2
fi
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]]; then commit="$commit-dirty"; fi
echo "$commit" >build-gpu/git-commit.txt
du -sh build-gpu
ls build-gpu
