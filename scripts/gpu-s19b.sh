#!/usr/bin/env bash
# The second device call of session 19: the gpu suites the first call's step ran out of time in
# (split so that each has its own limit), then the new defaults beside what they replaced --
# attention (the cp.async kernel capped at 128 registers, the 192-row ring rotated), 8193-wide
# softmax on 11 warps (padding 20 % -> 3 %) beside the 8-warp tile, 129 on 4 lanes x 5 vectors
# beside 8 x 3 -- the tuner's D = 64 candidates, and the skinny GEMMs.
#   scripts/gpu-s19b.sh OUTDIR   (env: TESSEL_RESULT_TAG)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s19b "${1:-}" s19b-h200
step "gpu tests (windows, negative starts, softmax, attention defaults)" 110 "$build/tessel_tests_gpu" \
  --gtest_filter='RowWindows.*:NegativeStartsGpu.*:*Softmax*:FlashAttentionGpuSmall.PersistentConfig:FlashAttentionGpuSmall.DefaultConfigsOfLongLoops:FlashAttentionGpuSmall.AsyncGemmSchedules'
step "bench attention (bf16, default)" 60 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --json "$out/$day-attention-default-$tag.json"
d64=8x32x32x4096x4096x64,2x32x32x16384x16384x64
for cfg in 192x160:1:384:ring:persistent 64x128:1:128:ring 192x128:2:384:ring; do
  step "bench attention D64 $cfg" 25 "$build/tessel" bench attention --dtype bf16 --repeats 10 --config "$cfg" \
    --cases "$d64" --json "$out/$day-attention-d64-${cfg//:/-}-$tag.json"
done
step "bench softmax 17 (default: 8193 on 11 warps)" 60 "$build/tessel" bench softmax --repeats 10 \
  --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 --json "$out/$day-softmax-issue17-$tag.json"
for sc in 32768x8193:rows:t256:r1:bn10240 4194304x129:rows:t256:r64:bn160 4194304x129:rows:t256:r32:bn192; do
  shape=${sc%%:*} cfg=${sc#*:}
  step "bench softmax $shape $cfg" 20 "$build/tessel" bench softmax --repeats 10 --shapes "$shape" --config "$cfg" \
    --json "$out/$day-softmax-$shape-${cfg//:/-}-$tag.json"
done
step "bench gemm skinny (default)" 40 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
  --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096,64x8192x8192 \
  --json "$out/$day-gemm-skinny-default-$tag.json"
step "gpu tests (split-K)" 60 "$build/tessel_tests_gpu" --gtest_brief=1 --gtest_filter='*MatmulSplitK*'
step "gpu tests (past 2^31 elements)" 90 "$build/tessel_tests_gpu" --gtest_filter='LargeTensorGpu.*'
grep "^### " "$log"
exit $status
