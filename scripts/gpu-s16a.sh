#!/usr/bin/env bash
# Session 16's first device call (see docs/perf-notes.md "Session 16: what the next device session
# runs"): the gpu tests of what sessions 15-16 changed, then the issue's attention cases beside
# cuDNN at the default and under TESSEL_ENABLE=persistent_rings, in one call.
#   scripts/gpu-s16a.sh OUTDIR   (env: TESSEL_RESULT_TAG)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s16a "${1:-}"
tag=${TESSEL_RESULT_TAG:-h200}
day=$(date -u +%F)
step "gpu tests (attention, fast_exp2, ragged ring, split-K)" 230 "$build/tessel_tests_gpu" \
  --gtest_filter='FlashAttention*:FastExp2Gpu.*:RaggedRingGpu.*:*SplitK*' --gtest_brief=1
step "bench attention (bf16, default)" 170 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --json "$out/$day-attention-default-$tag.json"
step "bench attention (bf16, TESSEL_ENABLE=persistent_rings)" 170 env TESSEL_ENABLE=persistent_rings \
  "$build/tessel" bench attention --dtype bf16 --repeats 10 --json "$out/$day-attention-persistent-rings-$tag.json"
grep "^### " "$log"
exit $status
