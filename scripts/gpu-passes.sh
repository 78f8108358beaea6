#!/usr/bin/env bash
# On the GPU machine: the first run of the tutorial GEMM from the generic passes
# (JitOptions::gemm_from_passes: TMA ring, producer warpgroup, asynchronous wgmma, persistent
# tiles, TMA-store epilogue; session 13, written without a GPU), in one device call of about
# 5-8 minutes. Runs what build-gpu/ (scripts/build-gpu.sh) holds, each step under its own limit:
#   1. every gpu test of the passes' GEMM: its shapes (tails in every dimension, TMA-store and
#      16-byte register stores), persistence on 1, 3 and 7 blocks, fused epilogues, the split-K
#      partial GEMM on the ring; and persistent non-causal attention on 1, 3 and 5 blocks;
#   2. compute-sanitizer racecheck and synccheck on the persistent GEMM (its ring phases run on
#      across tiles, its staging tile is reused tile after tile) and attention (Q reloaded per
#      tile, the warpgroups' turns per tile), when the tool is there;
#   3. `tessel bench gemm --compare-passes` over issue 5's seven shapes, f16 and bf16: the
#      template, the passes' kernel and cuBLAS interleaved in one process, JSON beside the log;
#      then the same with TESSEL_DISABLE=persistent_tiles (the passes' kernel one block per tile);
#   4. `tessel bench attention` (cuDNN's fused SDPA in the same process) over the issue's non-causal
#      D = 128 cases, without and with TESSEL_ENABLE=persistent_rings (persistent attention);
#   5. `tessel_fuzz --gpu` over GEMM programs through the passes, persistent on 3 blocks where
#      they have more tiles (TESSEL_MAX_PERSISTENT_CTAS=3);
# Since session 29 the passes' kernel is the default and `--compare-passes` (now also called
# --compare-template) puts the template in the extra columns: the default, from the passes, in
# the main ones.
#   6. (profile) ncu's speed-of-light, launch, scheduler and warp-state sections on the passes'
#      kernel and the template's kernel of one GEMM (TESSEL_PROFILE_SHAPES, default 4096x4096x4096 and
#      1024x1024x1024, f16), when ncu is there (clocks left alone).
# Everything printed goes to OUTDIR/gpu-passes.log. The steps' limits add up to more than one
# device call allows (600 s); TESSEL_PASSES_STEPS picks some of them to split the work over two
# calls: any of tests, sanitizers, gemm, attention, fuzz, profile (default: the first five, ~6-9 min).
#
#   scripts/gpu-passes.sh OUTDIR   (env: TESSEL_RESULT_TAG, TESSEL_PASSES_STEPS, TESSEL_PROFILE_SHAPES)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-passes "${1:-}"
steps=" ${TESSEL_PASSES_STEPS:-tests sanitizers gemm attention fuzz} "
for s in $steps; do
  case $s in tests | sanitizers | gemm | attention | fuzz | profile) ;;
  *) echo "gpu-passes: TESSEL_PASSES_STEPS names '$s'; legal: tests, sanitizers, gemm, attention, fuzz, profile" >&2; exit 2 ;;
  esac
done
want() { [[ $steps == *" $1 "* ]]; }
want tests && step "gpu tests (gemm from passes)" 150 "$build/tessel_tests_gpu" --gtest_filter='*FromPasses*:*FromThePasses*:*_passes' --gtest_brief=1
if want sanitizers && command -v compute-sanitizer >/dev/null; then
  for tool in racecheck synccheck; do
    step "$tool (gemm from passes, persistent)" 90 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$build/tessel_tests_gpu" --gtest_filter='GemmFromPassesPersistent.*:FlashAttentionGpuSmall.PersistentFromThePasses' \
      --gtest_brief=1
  done
fi
issue5=2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024
tag=${TESSEL_RESULT_TAG:-passes}
want gemm && step "bench gemm 5 --compare-passes" 120 "$build/tessel" bench gemm --compare-passes --repeats 30 --warmup 5 \
  --shapes "$issue5" --dtype f16,bf16 --json "$out/gemm-compare-passes-$tag.json"
want gemm && step "bench gemm 5 --compare-passes (TESSEL_DISABLE=persistent_tiles)" 120 env TESSEL_DISABLE=persistent_tiles \
  "$build/tessel" bench gemm --compare-passes --repeats 30 --warmup 5 --shapes "$issue5" --dtype f16,bf16 \
  --json "$out/gemm-compare-passes-unpersistent-$tag.json"
att=32x16x16x1024x1024x128,8x16x16x4096x4096x128,2x16x16x16384x16384x128,4x32x8x4096x4096x128
want attention && step "bench attention d128 (default)" 120 "$build/tessel" bench attention --dtype bf16 --repeats 10 --cases "$att" \
  --json "$out/attention-d128-default-$tag.json"
want attention && step "bench attention d128 (TESSEL_ENABLE=persistent_rings)" 120 env TESSEL_ENABLE=persistent_rings \
  "$build/tessel" bench attention --dtype bf16 --repeats 10 --cases "$att" --json "$out/attention-d128-passes-$tag.json"
want fuzz && step "fuzz gemm from passes, 3 persistent blocks" 60 env TESSEL_CACHE=0 \
  TESSEL_MAX_PERSISTENT_CTAS=3 "$build/tessel_fuzz" --gpu --arch none --family gemm --count 300 --seed 20261314
if want profile && command -v ncu >/dev/null; then
  # The bench runs the default kernel (the passes', since session 29) first, then cuBLAS, then
  # the template's (each once to check it, then timed): the first two matmul_kernel launches are
  # the passes' check and the template's check.
  for shape in ${TESSEL_PROFILE_SHAPES:-4096x4096x4096 1024x1024x1024}; do
    step "ncu gemm $shape (passes, then template)" 90 ncu --clock-control none -k regex:matmul_kernel -c 2 \
      --section SpeedOfLight --section LaunchStats --section SchedulerStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis "$build/tessel" bench gemm --compare-passes --repeats 1 --warmup 0 \
      --shapes "$shape" --dtype f16
  done
fi
grep "^### " "$log"
exit $status
