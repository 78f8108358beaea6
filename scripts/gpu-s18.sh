#!/usr/bin/env bash
# The device call of session 18 (it measured row windows as the softmax default everywhere; since
# then they are the default only for rows with a shared tail and the online chunks -- docs/
# perf-notes.md "Session 18") -- rows whose starts are not 16-byte aligned read and
# written through windows from the aligned word before each row (src/ops/Copy.cpp window_copy),
# most valuable first: its gpu tests, issue
# 17's odd widths beside the paths they replaced (tiles no wider than the rows), issue 4's
# widths (unchanged code, a regression check); then session 17's open list: the attention
# default, the D = 64 long-loop test, decode and causal candidates, the skinny GEMMs.
#   scripts/gpu-s18.sh OUTDIR   (env: TESSEL_RESULT_TAG)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s18 "${1:-}"
tag=${TESSEL_RESULT_TAG:-h200}
day=$(date -u +%F)
step "gpu tests (row windows, every softmax suite)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='RowWindows.*:NegativeStartsGpu.*:*Softmax*'
step "bench softmax 17 (default: row windows)" 70 "$build/tessel" bench softmax --repeats 10 \
  --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 --json "$out/$day-softmax-issue17-$tag.json"
# The paths the windows replaced, in the same call: tiles without room for a row's shift.
for sc in 4194304x127:rows:t256:r64:bn128 524288x1023:rows:t256:r8:bn1024 65536x8191:rows:t256:r1:bn8192 \
  10000x50257:online:t256:bn4096; do
  shape=${sc%%:*}
  step "bench softmax $shape ${sc#*:} (the path before the window; 50257: the online variant, windowed)" 25 \
    "$build/tessel" bench softmax --repeats 10 --shapes "$shape" --config "${sc#*:}" \
    --json "$out/$day-softmax-$shape-${sc#*:}-$tag.json"
done
step "bench softmax issue 4 widths" 50 "$build/tessel" bench softmax --json "$out/$day-softmax-issue4-$tag.json"
step "bench attention (bf16, default)" 75 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --json "$out/$day-attention-default-$tag.json"
step "gpu test (D = 64 long loops default, persistent D = 128)" 60 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='FlashAttentionGpuSmall.DefaultConfigsOfLongLoops'
step "bench attention decode 64x64 ring" 25 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --config 64x64:2:128:ring --cases 8x32x32x1x8192x128:causal,8x32x32x128x8192x128:causal \
  --json "$out/$day-attention-decode-64x64-$tag.json"
step "bench attention causal D128 S1024 persistent" 25 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --config 128x128:2:256:ring:persistent --cases 32x16x16x1024x1024x128:causal \
  --json "$out/$day-attention-causal1024-persistent-$tag.json"
step "bench gemm skinny (default)" 40 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
  --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,64x8192x8192 --json "$out/$day-gemm-skinny-default-$tag.json"
for s in 2 4; do
  step "bench gemm 8x14336x4096 split-K $s" 15 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 8x14336x4096 --split-k $s
done
step "bench gemm 32x4096x14336 split-K 8" 15 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
  --shapes 32x4096x14336 --split-k 8
step "gpu tests (fuzz)" 90 "$build/tessel_tests_gpu" --gtest_brief=1 --gtest_filter='FuzzGpu.*'
grep "^### " "$log"
exit $status
