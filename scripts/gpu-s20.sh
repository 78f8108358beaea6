#!/usr/bin/env bash
# What session 19 left for the H200 (docs/perf-notes.md "Session 19: what the next device session
# runs"), in two device calls of under ten minutes each:
#   TESSEL_S20_STEPS=bench (default): issue 17's softmax widths and issue 4's at the default (129
#     on 4 lanes x 5 vectors, 8193 on 11 warps: timed only on H100s), the attention cases at the
#     default (D = 64 192x160 s1 persistent, the cp.async register cap), GQA causal with and
#     without kv_interleave, the skinny GEMMs;
#   TESSEL_S20_STEPS=tune: the tuner on the cases furthest below cuDNN / cuBLAS, then those cases
#     benched with the winners (this run's cache);
#   TESSEL_S20_STEPS=verify: the H100 tuner's winners on every case of their class, the defaults
#     that follow them (f16 and bf16), two skinny GEMM tiles, the attention gpu tests;
#   TESSEL_S20_STEPS=tests: the gpu suites of the new defaults and the two that ran out of their
#     limits on the H100 (split-K, past 2^31 elements), each with a limit of its own.
#   scripts/gpu-s20.sh OUTDIR   (env: TESSEL_RESULT_TAG, TESSEL_S20_STEPS)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s20 "${1:-}" s20-h200
steps=${TESSEL_S20_STEPS:-bench}
if [[ $steps == bench ]]; then
  step "bench softmax 17 (default)" 90 "$build/tessel" bench softmax --repeats 10 \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 \
    --json "$out/$day-softmax-issue17-$tag.json"
  for sc in 4194304x129:rows:t256:r32:bn192 32768x8193:rows:t256:r1:bn10240; do
    shape=${sc%%:*} cfg=${sc#*:}
    step "bench softmax $shape $cfg (the default before session 19)" 20 "$build/tessel" bench softmax \
      --repeats 10 --shapes "$shape" --config "$cfg" --json "$out/$day-softmax-$shape-${cfg//:/-}-$tag.json"
  done
  step "bench softmax issue 4 widths" 50 "$build/tessel" bench softmax --json "$out/$day-softmax-issue4-$tag.json"
  step "bench attention (bf16, default)" 60 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
    --json "$out/$day-attention-default-$tag.json"
  step "bench attention D64 192x128 s2 ring (the default before session 19)" 20 "$build/tessel" bench attention \
    --dtype bf16 --repeats 10 --config 192x128:2:384:ring --cases 8x32x32x4096x4096x64,2x32x32x16384x16384x64 \
    --json "$out/$day-attention-d64-192x128-$tag.json"
  for cfg in 128x128:2:256:ring 128x128:2:256:ring:interleave; do
    step "bench attention GQA causal $cfg" 15 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
      --config "$cfg" --cases 4x32x8x4096x4096x128:causal --json "$out/$day-attention-gqa-causal-${cfg//:/-}-$tag.json"
  done
  step "bench gemm skinny (default)" 40 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096,64x8192x8192 \
    --json "$out/$day-gemm-skinny-default-$tag.json"
elif [[ $steps == tune ]]; then
  # The tuner on the H200 for the cases furthest below their baselines (session 20's first call),
  # winners cached in this run's fresh cache; then the same cases benched (the tuned entries used,
  # baseline in the same process).
  for c in "32 16 16 1024 128 --causal" "32 32 32 1024 64" "32 32 32 1024 64 --causal" \
           "4 32 8 4096 128 --causal" "8 16 16 4096 128 --causal"; do
    read -r b h hk sq d causal <<<"$c"
    step "tune attention ${b}x${h}x${hk}x${sq} D$d ${causal:-}" 75 "$build/tessel" tune attention --batch "$b" \
      --heads "$h" --kv-heads "$hk" --seqlen-q "$sq" --dim "$d" ${causal:-} --dtype bf16 --repeats 10 \
      --json "$out/$day-tune-attention-${b}x${h}x${hk}x${sq}x$d${causal:+-causal}-$tag.json"
  done
  for g in 16x4096x4096:bf16 32x4096x14336:bf16 16x14336x4096:f16; do
    IFS=x read -r m n k <<<"${g%%:*}"
    step "tune gemm ${g}" 45 "$build/tessel" tune gemm --m "$m" --n "$n" --k "$k" --dtype "${g#*:}" \
      --json "$out/$day-tune-gemm-${g%%:*}-${g#*:}-$tag.json"
  done
  step "bench attention (the tuned cases)" 40 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
    --cases 32x16x16x1024x1024x128:causal,32x32x32x1024x1024x64,32x32x32x1024x1024x64:causal,4x32x8x4096x4096x128:causal,8x16x16x4096x4096x128:causal \
    --json "$out/$day-attention-tuned-$tag.json"
  step "bench gemm (the tuned shapes)" 25 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 16x4096x4096,32x4096x14336,16x14336x4096 --json "$out/$day-gemm-tuned-$tag.json"
elif [[ $steps == verify ]]; then
  # The tuner's winners of the H100 call, on every case of their class, and the new defaults.
  d128=32x16x16x1024x1024x128,8x16x16x4096x4096x128,2x16x16x16384x16384x128
  d64=32x32x32x1024x1024x64,8x32x32x4096x4096x64,2x32x32x16384x16384x64
  causal() { local o= c; for c in ${1//,/ }; do o+="${o:+,}$c,$c:causal"; done; echo "$o"; }
  step "bench attention D128 + GQA 128x256:1:256:pingpong:persistent" 45 "$build/tessel" bench attention \
    --dtype bf16 --repeats 10 --config 128x256:1:256:pingpong:persistent \
    --cases "$(causal $d128),4x32x8x4096x4096x128,4x32x8x4096x4096x128:causal" \
    --json "$out/$day-attention-d128-128x256-s1-pp-persistent-$tag.json"
  step "bench attention D64 64x128:1:128:ring" 35 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
    --config 64x128:1:128:ring --cases "$(causal $d64)" --json "$out/$day-attention-d64-64x128-s1-ring-$tag.json"
  step "bench attention (default, f16 and bf16)" 100 "$build/tessel" bench attention --dtype f16,bf16 --repeats 10 \
    --json "$out/$day-attention-default-$tag.json"
  skinny=1x4096x4096,16x4096x4096,8x14336x4096,16x14336x4096,32x4096x14336
  for cfg in 16x32x128:8:128 64x128x64:4:256; do
    step "bench gemm skinny $cfg" 30 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
      --shapes "$skinny" --config "$cfg" --json "$out/$day-gemm-skinny-${cfg//:/-}-$tag.json"
  done
  step "gpu tests (attention)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.*:HeadDims/FlashAttentionGpu.*'
else
  step "gpu tests (attention small, softmax widths)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.*:IssueWidths/*'
  step "gpu tests (split-K)" 150 "$build/tessel_tests_gpu" --gtest_filter='*MatmulSplitK*'
  step "gpu tests (past 2^31 elements)" 200 "$build/tessel_tests_gpu" --gtest_filter='LargeTensorGpu.*'
fi
grep "^### " "$log"
exit $status
