#!/usr/bin/env bash
# On the GPU machine, from the repository root: attention's schedules side by side in one
# session (each `tessel bench attention` run has cuDNN's fused SDPA in its own process beside
# Tessel): the built-in choice over the issue's 12 cases, then the same with the asynchronous
# wgmma passes off (TESSEL_DISABLE=async_gemm), then each schedule forced over the four
# B x H x 4096^2 cases, then 192-row tiles (three consumer warpgroups) at D = 64, then 64-row
# tiles on the decode-like cases. Writes <date>-attention-<what>-<tag>.json files and ab.log into OUTDIR.
#
#   scripts/gpu-attention-ab.sh OUTDIR   (env: TESSEL_BUILD_DIR=build-gpu, TESSEL_RESULT_TAG=h200,
#                                          AB_DTYPE=bf16, AB_REPEATS=10,
#                                          AB_SCHEDULES="pingpong ring cpasync",
#                                          AB_D64_CONFIGS="192x128:2:384:ring ...",
#                                          AB_DECODE_CONFIGS="64x64:2:128:ring ...",
#                                          AB_STEPS="default no-async schedules d64 decode": the
#                                          whole set is past one device call's 600 s; e.g.
#                                          "schedules d64" in one call, "decode default" in the next)
set -uo pipefail
out=${1:?usage: scripts/gpu-attention-ab.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=${TESSEL_BUILD_DIR:-build-gpu}
tag=${TESSEL_RESULT_TAG:-h200}
dtype=${AB_DTYPE:-bf16}
repeats=${AB_REPEATS:-10}
day=$(date -u +%Y-%m-%d)
log="$out/ab.log"
export TESSEL_NO_PROGRESS=1
if [[ -z "${TESSEL_GIT_COMMIT:-}" ]]; then
  TESSEL_GIT_COMMIT=$( (cat "$build/git-commit.txt" 2>/dev/null || echo unknown) | tr -s ' \n\t' '-' | sed 's/-$//')
fi
export TESSEL_GIT_COMMIT
TESSEL_CACHE_DIR=$(mktemp -d /tmp/tessel-ab-cache-XXXXXX)
export TESSEL_CACHE_DIR
trap 'rm -rf "$TESSEL_CACHE_DIR"' EXIT
four=8x32x32x4096x4096x64,8x32x32x4096x4096x64:causal,8x16x16x4096x4096x128,8x16x16x4096x4096x128:causal

bench() {  # bench NAME [ENV=VALUE ...] -- ARGS...
  local name=$1
  shift
  local envs=()
  while [[ $# -gt 0 && $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  echo "### $name: ${envs[*]} tessel bench attention $*" | tee -a "$log"
  env "${envs[@]}" timeout 240 "$build/tessel" bench attention --dtype "$dtype" --repeats "$repeats" "$@" \
    --json "$out/$day-attention-$name-$tag.json" 2>&1 | tee -a "$log"
  echo "### $name: exit ${PIPESTATUS[0]}" | tee -a "$log"
}

steps=" ${AB_STEPS:-default no-async schedules d64 decode} "
want() { [[ "$steps" == *" $1 "* ]]; }
want default && bench default --
want no-async && bench no-async-gemm TESSEL_DISABLE=async_gemm --
want schedules && for schedule in ${AB_SCHEDULES-pingpong ring cpasync}; do
  bench "$schedule" -- --cases "$four" --config "128x128:2:256:$schedule"
done
# D = 64 on three consumer warpgroups (192 query rows, FlashAttention 3's tile there): the ring and
# cp.async, 128 and 192 keys a block, over the issue's D = 64 cases at S = 4096 and 16384.
d64=8x32x32x4096x4096x64,8x32x32x4096x4096x64:causal,2x32x32x16384x16384x64,2x32x32x16384x16384x64:causal
want d64 && for config in ${AB_D64_CONFIGS-192x128:2:384:ring 192x192:2:384:ring 192x128:2:384:cpasync}; do
  bench "d64-${config//:/-}" -- --cases "$d64" --config "$config"
done
# Decode-like (one query row, or 128, against 8192 keys): 64-row tiles on one consumer warpgroup
# (a producer warp beside it; with 64 keys a block two CTAs fit an SM) against the built-in 128
# rows, whose 256 CTAs make
# two waves of one CTA an SM.
decode=8x32x32x1x8192x128:causal,8x32x32x128x8192x128:causal
want decode && for config in ${AB_DECODE_CONFIGS-64x64:2:128:ring 64x64:3:128:ring 64x128:2:128:ring}; do
  bench "decode-${config//:/-}" -- --cases "$decode" --config "$config"
done
