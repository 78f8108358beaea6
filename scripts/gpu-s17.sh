#!/usr/bin/env bash
# Session 17's one device call (docs/perf-notes.md "Session 17"), most valuable first so that the
# call's 600 s cut the least: the skinny GEMMs at the new default (one wave of 16x32 tiles at
# M <= 16) beside the split-K it replaced, the issue's attention cases at the default (non-causal
# D = 128 persistent since session 17) and those whose default changed as before, issue 17's
# odd-width softmax, then the gpu tests
# of what sessions 15-17 changed (new ones first), the rest of the attention tests last.
#   scripts/gpu-s17.sh OUTDIR   (env: TESSEL_RESULT_TAG)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s17 "${1:-}"
tag=${TESSEL_RESULT_TAG:-h200}
day=$(date -u +%F)
step "bench gemm skinny (default)" 70 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
  --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,64x8192x8192 --json "$out/$day-gemm-skinny-default-$tag.json"
step "bench gemm 1x4096x4096 split-K 8 (the default before session 17)" 30 "$build/tessel" bench gemm --repeats 20 \
  --warmup 5 --dtype f16,bf16 --shapes 1x4096x4096 --split-k 8
step "bench gemm 16x4096x4096 split-K 5 (the default before session 17)" 30 "$build/tessel" bench gemm --repeats 20 \
  --warmup 5 --dtype f16,bf16 --shapes 16x4096x4096 --split-k 5
step "bench attention (bf16, default)" 75 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --json "$out/$day-attention-default-$tag.json"
# The default before session 17 on the cases whose default changed (non-causal D = 128 rings, now
# persistent): one block per tile, O by register stores.
step "bench attention (bf16, D = 128 non-causal, one block per tile: the default before session 17)" 50 \
  "$build/tessel" bench attention --dtype bf16 --repeats 10 --config 128x128:2:256:pingpong \
  --cases 32x16x16x1024x1024x128,8x16x16x4096x4096x128,2x16x16x16384x16384x128,4x32x8x4096x4096x128 \
  --json "$out/$day-attention-d128-one-block-per-tile-$tag.json"
step "bench softmax 17 (default)" 60 "$build/tessel" bench softmax --repeats 10 \
  --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 --json "$out/$day-softmax-issue17-$tag.json"
step "gpu tests (new in sessions 15-17)" 100 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='*MatmulSplitK*:*OddColumn*:*SoftmaxStagedRows*:FlashAttentionGpuSmall.*:FastExp2Gpu.*:RaggedRingGpu.*'
step "gpu tests (the other attention and softmax suites)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='FlashAttention*:*Softmax*:FuzzGpu.*-FlashAttentionGpuSmall.*:*SoftmaxStagedRows*'
grep "^### " "$log"
exit $status
