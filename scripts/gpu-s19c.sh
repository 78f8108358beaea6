#!/usr/bin/env bash
# The third device call of session 19: the defaults its second call chose (129-wide rows on 4
# lanes x 5 vectors, D = 64 over long loops on 192x160 s1 persistent), their gpu tests, the
# issue's tables at the default (softmax 17 with the time it needs, issue 4's widths, attention),
# and 192x160 on a two-stage ring (rotated) beside the one-stage default.
#   scripts/gpu-s19c.sh OUTDIR   (env: TESSEL_RESULT_TAG)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s19c "${1:-}" s19c-h200
step "gpu tests (softmax, attention defaults)" 100 "$build/tessel_tests_gpu" --gtest_brief=1 \
  --gtest_filter='*Softmax*:FlashAttentionGpuSmall.DefaultConfigsOfLongLoops:FlashAttentionGpuSmall.AsyncGemmSchedules'
step "bench softmax 17 (default)" 80 "$build/tessel" bench softmax --repeats 10 \
  --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 --json "$out/$day-softmax-issue17-$tag.json"
step "bench attention (bf16, default)" 55 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
  --json "$out/$day-attention-default-$tag.json"
step "bench attention D64 192x160:2:384:ring:persistent (rotated)" 20 "$build/tessel" bench attention --dtype bf16 \
  --repeats 10 --config 192x160:2:384:ring:persistent --cases 8x32x32x4096x4096x64,2x32x32x16384x16384x64 \
  --json "$out/$day-attention-d64-192x160-2-384-ring-persistent-$tag.json"
step "bench softmax issue 4 widths" 45 "$build/tessel" bench softmax --json "$out/$day-softmax-issue4-$tag.json"
grep "^### " "$log"
exit $status
