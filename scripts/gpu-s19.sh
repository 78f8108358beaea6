#!/usr/bin/env bash
# The first device call of session 19: the two defaults of session 18 that the H200 has not
# timed as defaults (causal D = 128 rings persistent up to 768 keys a row; split-K 2 for M <= 16
# over 14336x4096), the gpu suites that ran only on an H100, ncu's memory and warp-state
# sections on the odd-width softmax beside the aligned one (where the 20 points go), and the
# tuner over D = 64 attention (is there a config the built-in choice misses), and FA3's
# intra-warpgroup overlap (rotate_gemm_loops) on the D = 64 and D = 128 rings.
#   scripts/gpu-s19.sh OUTDIR   (env: TESSEL_RESULT_TAG)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s19 "${1:-}" s19-h200
step "gpu tests (H100-only suites of s18)" 130 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='RowWindows.*:NegativeStartsGpu.*:*Softmax*:LargeTensorGpu.*:*MatmulSplitK*:FlashAttentionGpuSmall.PersistentConfig'
step "bench attention (bf16, default)" 80 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --json "$out/$day-attention-default-$tag.json"
# FA3's intra-warpgroup overlap (rotate_async_gemms, opt-in): the 192-row D = 64 ring has no
# branch left in its loop once fold_proven_branches drops the never-taken "past SK" test; causal
# loops split at the mask. Beside the default in the same process order, then D = 128 on the
# plain ring (no turns) rotated against not.
d64=8x32x32x4096x4096x64,2x32x32x16384x16384x64,8x32x32x4096x4096x64:causal,2x32x32x16384x16384x64:causal
step "bench attention D64 ring (default)" 30 "$build/tessel" bench attention --dtype bf16 --repeats 10 --cases "$d64" \
  --json "$out/$day-attention-d64-default-$tag.json"
step "bench attention D64 ring rotated" 30 env TESSEL_ENABLE=rotate_gemm_loops "$build/tessel" bench attention --dtype bf16 \
  --repeats 10 --cases "$d64" --json "$out/$day-attention-d64-rotated-$tag.json"
d128=8x16x16x4096x4096x128,2x16x16x16384x16384x128,8x16x16x4096x4096x128:causal
step "bench attention D128 ring:persistent" 30 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --config 128x128:2:256:ring:persistent --cases "$d128" --json "$out/$day-attention-d128-ring-$tag.json"
step "bench attention D128 ring:persistent rotated" 30 env TESSEL_ENABLE=rotate_gemm_loops "$build/tessel" bench attention \
  --dtype bf16 --repeats 10 --config 128x128:2:256:ring:persistent --cases "$d128" \
  --json "$out/$day-attention-d128-ring-rotated-$tag.json"
step "gpu tests rotated (attention schedules, long-loop defaults)" 60 env TESSEL_ENABLE=rotate_gemm_loops \
  "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='FlashAttentionGpuSmall.AsyncGemmSchedules:FlashAttentionGpuSmall.DefaultConfigsOfLongLoops'
step "bench gemm skinny (default)" 50 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
  --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096,64x8192x8192 \
  --json "$out/$day-gemm-skinny-default-$tag.json"
if command -v ncu >/dev/null; then
  for shape in 65536x8191 65536x8192 4194304x129; do
    step "ncu softmax $shape" 30 ncu --clock-control none -k regex:softmax_kernel -c 1 --section SpeedOfLight \
      --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section SchedulerStats "$build/tessel" bench softmax --repeats 1 --warmup 0 --shapes "$shape"
  done
fi
step "tune attention D64 S4096 bf16" 110 "$build/tessel" tune attention --batch 8 --heads 32 --seqlen-q 4096 \
  --dim 64 --dtype bf16 --budget 60 --repeats 10 --no-cache --json "$out/$day-tune-attention-d64-s4096-$tag.json"
grep "^### " "$log"
exit $status
