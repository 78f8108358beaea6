#!/usr/bin/env bash
# One device call after session 17 (docs/perf-notes.md "Session 17: what the next device session
# runs"), most valuable first so that the call's 600 s cut the least: the issue's attention cases
# at the default (D = 64 on 192-row ring tiles over long loops, non-causal D = 128 persistent --
# both since session 17) and, beside them, the configs those defaults replaced on the cases they
# changed; the skinny GEMMs at the default; issue 17's odd-width softmax; then the gpu tests of
# what sessions 15-17 changed (new ones first), the rest of the attention tests last.
#   scripts/gpu-s17.sh OUTDIR   (env: TESSEL_RESULT_TAG)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s17 "${1:-}"
tag=${TESSEL_RESULT_TAG:-h200}
day=$(date -u +%F)
step "bench attention (bf16, default)" 75 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --json "$out/$day-attention-default-$tag.json"
# The default before session 17 on the cases whose default changed (non-causal D = 128 rings, now
# persistent): one block per tile, O by register stores.
step "bench attention (bf16, D = 128 non-causal, one block per tile: the default before session 17)" 50 \
  "$build/tessel" bench attention --dtype bf16 --repeats 10 --config 128x128:2:256:pingpong \
  --cases 32x16x16x1024x1024x128,8x16x16x4096x4096x128,2x16x16x16384x16384x128,4x32x8x4096x4096x128 \
  --json "$out/$day-attention-d128-one-block-per-tile-$tag.json"
# D = 64 before session 17: the cp.async 128-row kernel on the cases that now take 192-row rings.
step "bench attention (bf16, D = 64 long loops, 128x128 cp.async: the default before session 17)" 50 \
  "$build/tessel" bench attention --dtype bf16 --repeats 10 --config 128x128:2:256:cpasync \
  --cases 8x32x32x4096x4096x64,2x32x32x16384x16384x64,2x32x32x16384x16384x64:causal \
  --json "$out/$day-attention-d64-cp-async-$tag.json"
step "bench gemm skinny (default)" 70 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
  --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,64x8192x8192 --json "$out/$day-gemm-skinny-default-$tag.json"
step "bench softmax 17 (default)" 60 "$build/tessel" bench softmax --repeats 10 \
  --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 --json "$out/$day-softmax-issue17-$tag.json"
step "gpu tests (new in sessions 15-17)" 180 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='FlashAttentionGpuSmall.*:*MatmulSplitK*:*OddColumn*:*SoftmaxStagedRows*:FastExp2Gpu.*:RaggedRingGpu.*'
step "gpu tests (the other attention and softmax suites)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='FlashAttention*:*Softmax*:FuzzGpu.*-FlashAttentionGpuSmall.*:*SoftmaxStagedRows*'
grep "^### " "$log"
exit $status
