#!/usr/bin/env bash
# On the GPU machine: a short device call after a change, when the full scripts/gpu-check.sh
# steps do not fit what is left of the device time. Runs what build-gpu/ (scripts/build-gpu.sh)
# and .whl/ (scripts/build-python-wheel.sh) hold, in this order, each step under its own limit:
#   1. the gpu tests of TESSEL_QUICK_TESTS (a gtest filter; default: every softmax suite, the
#      every attention suite, fast_exp2 against the interpreter and the fuzz
#      regression cases on the device);
#   2. `tessel bench softmax` over issue 17's staged widths, the default beside the same under
#      each setting of TESSEL_QUICK_AB (space-separated, e.g. TESSEL_DISABLE=realigned_global_loads;
#      default none) in the same session;
#   3. `tessel bench attention` over the issue's default cases, bf16 (cuDNN in the same process),
#      its JSON beside the log;
#   3b. (step attention-passes) the same cases under TESSEL_ENABLE=persistent_rings: persistent
#      attention with TMA-stored O (the same kernels as under gemm_from_passes), causal included
#      since session 16 (the ring's position carried from tile to tile, serpentine rounds), then
#      D = 256 (B 2, H 8, S 4096, causal and not) at the default;
#   4. `tessel bench gemm` over issue 17's skinny shapes at the default (JSON beside the log),
#      the one-wave 16x32 tile at M = 1 and 16, and split-K under
#      TESSEL_ENABLE=programmatic_launch;
#   5. the Python package: the pytest cases matching -k matmul, then `python -m tessel.bench
#      overhead` (scripts/gpu-python.sh);
#   6. ncu's launch, occupancy and warp-state sections on one staged softmax (65536x8191) and the
#      aligned one beside it (65536x8192), when ncu is there (clocks left alone);
#   7. `tessel_fuzz --gpu` over TESSEL_QUICK_FUZZ programs (default 600; seed 20261212).
# Everything printed goes to OUTDIR/gpu-quick.log; the python step's JSON beside it.
# TESSEL_QUICK_STEPS picks the steps (default "tests softmax attention", which fits one device
# call's 600 s; the others: gemm attention-passes python ncu fuzz -- "gemm attention-passes" fits
# a second call).
#
#   scripts/gpu-quick.sh OUTDIR   (env: TESSEL_RESULT_TAG, TESSEL_QUICK_STEPS, TESSEL_QUICK_TESTS,
#                                  TESSEL_QUICK_AB, TESSEL_QUICK_FUZZ)
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-quick "${1:-}"
steps=" ${TESSEL_QUICK_STEPS:-tests softmax attention} "
want() { [[ "$steps" == *" $1 "* ]]; }
tests=${TESSEL_QUICK_TESTS:-*Softmax*:*Attention*:FastExp2Gpu.*:RaggedRingGpu.*:FuzzGpu.*}
want tests && step "gpu tests ($tests)" 200 "$build/tessel_tests_gpu" --gtest_filter="$tests" --gtest_brief=1
widths=4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257
if want softmax; then
  step "bench softmax 17 (default)" 100 "$build/tessel" bench softmax --repeats 10 --shapes "$widths" \
    --json "$out/$(date -u +%F)-softmax-issue17-quick-${TESSEL_RESULT_TAG:-h200}.json"
  for ab in ${TESSEL_QUICK_AB:-}; do
    step "bench softmax 17 ($ab)" 100 env "$ab" "$build/tessel" bench softmax --repeats 10 --shapes "$widths"
  done
fi
want attention && step "bench attention (bf16, the issue's cases)" 180 "$build/tessel" bench attention --dtype bf16 \
  --json "$out/$(date -u +%F)-attention-quick-${TESSEL_RESULT_TAG:-h200}.json"
if want attention-passes; then
  step "bench attention (bf16, the issue's cases, TESSEL_ENABLE=persistent_rings)" 180 env TESSEL_ENABLE=persistent_rings \
    "$build/tessel" bench attention --dtype bf16 \
    --json "$out/$(date -u +%F)-attention-passes-quick-${TESSEL_RESULT_TAG:-h200}.json"
  step "bench attention D = 256 (bf16, f16)" 60 "$build/tessel" bench attention --dtype bf16,f16 \
    --cases 2x8x8x4096x4096x256,2x8x8x4096x4096x256:causal --json "$out/$(date -u +%F)-attention-d256-${TESSEL_RESULT_TAG:-h200}.json"
fi
# Issue 17's skinny GEMMs at the library's default (one wave of 64x64 tiles where 64-column tiles
# nearly fill the SMs; else split-K or 64x256 tiles) beside cuBLAS, then the one-wave 16x32 tile
# (a tuning candidate; session 17 made it the default at M <= 16 and reverted it on the H200's
# figures) at M = 1 and 16, and split-K under programmatic launch at 32x4096x14336.
if want gemm; then
  step "bench gemm skinny (default)" 120 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,64x8192x8192,16x7680x4096,1x8192x4096 \
    --json "$out/$(date -u +%F)-gemm-skinny-default-${TESSEL_RESULT_TAG:-h200}.json"
  step "bench gemm M <= 16 on 16x32x128:8:128 (unsplit)" 45 "$build/tessel" bench gemm --repeats 20 --warmup 5 \
    --dtype f16,bf16 --shapes 1x4096x4096,16x4096x4096 --config 16x32x128:8:128
  step "bench gemm split-K (TESSEL_ENABLE=programmatic_launch)" 45 env TESSEL_ENABLE=programmatic_launch \
    "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16 --shapes 32x4096x14336
fi
want python && step "python (pytest -k matmul, bench overhead)" 90 env TESSEL_PYTEST_ARGS="-k matmul" TESSEL_PYTHON_BENCH=overhead \
  bash scripts/gpu-python.sh "$out"
if want ncu && command -v ncu >/dev/null; then
  for shape in 65536x8191 65536x8192; do
    step "ncu softmax $shape" 45 ncu --clock-control none -k softmax_kernel -c 1 --section LaunchStats \
      --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
      "$build/tessel" bench softmax --repeats 1 --warmup 0 --shapes "$shape"
  done
fi
want fuzz && step "fuzz" 60 env TESSEL_CACHE=0 "$build/tessel_fuzz" --gpu --arch none --count "${TESSEL_QUICK_FUZZ:-600}" \
  --seed 20261212
grep "^### " "$log"
exit $status
