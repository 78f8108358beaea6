#!/usr/bin/env bash
# On the GPU machine, from the repository root: runs what build-gpu/ holds (built on the CPU
# machine by scripts/build-gpu.sh; nothing is rebuilt here) and collects the results:
#   the gpu test tier, `tessel_fuzz --gpu` over 10^4 programs, `tessel tutorial --section 1,2,3,5,6`, `tessel bench gemm` over issue 5's
#   seven shapes in f16 and bf16, `tessel bench compile`, `tessel bench attention` and `tessel
#   bench softmax` when the build has them, compute-sanitizer racecheck/synccheck on small sm_90a GEMMs and
#   memcheck/initcheck on small instances of every library kernel family when the tool is there,
#   the cluster softmax probe (tools/probes) when build-gpu/ holds it, and the Python package's tier
#   and benchmarks (scripts/gpu-python.sh; TESSEL_PYTHON=0 skips them).
# Writes at most 8 files into OUTDIR (the transfer limit) — gpu-check.log (everything
# printed), gpu-tests.json and up to six result JSONs named <date>-<what>-<tag>.json as
# bench/results/ wants them; the fuzzer's report is a seventh when the softmax probe does not run,
# and goes into the log when it does — and prints a summary table last. Exit status: 0 when every step
# succeeded.
#
#   scripts/gpu-check.sh OUTDIR   (env: TESSEL_BUILD_DIR=build-gpu, TESSEL_GIT_COMMIT, TESSEL_RESULT_TAG=h200,
#                                  TESSEL_FUZZ_COUNT=10000, TESSEL_FUZZ_SEED=20261204,
#                                  TESSEL_GPU_STEPS=all or a comma list of: tests, fuzz, tutorial, gemm,
#                                  gemm17, compile, attention, softmax, softmax17, sanitizers, probe, python)
# The whole run takes longer than one 10-minute device call: name the steps for each call, e.g.
#   TESSEL_GPU_STEPS=tests bash scripts/gpu-check.sh $OUT            (~330 s)
#   TESSEL_GPU_STEPS=fuzz bash scripts/gpu-check.sh $OUT             (~520 s)
#   TESSEL_GPU_STEPS=gemm,gemm17,softmax,softmax17 bash scripts/gpu-check.sh $OUT
set -uo pipefail

out=${1:?usage: scripts/gpu-check.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
build=${TESSEL_BUILD_DIR:-build-gpu}
log="$out/gpu-check.log"
: >"$log"
day=$(date -u +%Y-%m-%d)
tag=${TESSEL_RESULT_TAG:-h200}  # names the machine in the result files
tutorial_json="$out/$day-tutorial-$tag.json"
gemm_json="$out/$day-gemm-$tag.json"
compile_json="$out/$day-compile-$tag.json"
softmax_json="$out/$day-softmax-$tag.json"
attention_json="$out/$day-attention-$tag.json"
fuzz_json="$out/$day-fuzz-$tag.json"
fuzz_json_in_log=0
if [[ -x "$build/softmax_cluster_probe" ]]; then  # its result is the eighth file
  fuzz_json=$(mktemp /tmp/tessel-gpu-check-fuzz-XXXXXX.json)
  fuzz_json_in_log=1
fi

if [[ -z "${TESSEL_GIT_COMMIT:-}" ]]; then
  # One line, whatever the file's layout ("<sha>" or "<sha>-dirty" or "<sha>\ndirty").
  TESSEL_GIT_COMMIT=$( (cat "$build/git-commit.txt" 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown) |
    tr -s ' \n\t' '-' | sed 's/-$//')
fi
export TESSEL_GIT_COMMIT
export TESSEL_NO_PROGRESS=1
# A private kernel cache: nothing left in the machine's home, nothing extra in OUTDIR.
TESSEL_CACHE_DIR=$(mktemp -d /tmp/tessel-gpu-check-cache-XXXXXX)
export TESSEL_CACHE_DIR
trap 'rm -rf "$TESSEL_CACHE_DIR"; [[ $fuzz_json_in_log == 1 ]] && rm -f "$fuzz_json"' EXIT

steps=",${TESSEL_GPU_STEPS:-all},"
want() {  # want STEP: whether TESSEL_GPU_STEPS names it (or is all)
  [[ $steps == *",all,"* || $steps == *",$1,"* ]]
}
for s in ${TESSEL_GPU_STEPS//,/ }; do
  case $s in
    all | tests | fuzz | tutorial | gemm | gemm17 | compile | attention | softmax | softmax17 | sanitizers | probe | python) ;;
    *)
      echo "gpu-check: TESSEL_GPU_STEPS names '$s'; legal: all, tests, fuzz, tutorial, gemm, gemm17, compile, attention, softmax, softmax17, sanitizers, probe, python" >&2
      exit 2
      ;;
  esac
done

declare -a step_names step_codes step_secs
run_step() {  # run_step NAME TIMEOUT_S COMMAND...
  local name=$1 limit=$2
  shift 2
  echo "" | tee -a "$log"
  echo "### $name: $*" | tee -a "$log"
  local start=$SECONDS
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  local code=${PIPESTATUS[0]}
  echo "### $name: exit $code after $((SECONDS - start)) s" | tee -a "$log"
  step_names+=("$name")
  step_codes+=("$code")
  step_secs+=($((SECONDS - start)))
}

for exe in tessel tessel_tests_gpu; do
  if [[ ! -x "$build/$exe" ]]; then
    echo "gpu-check: $build/$exe is missing; build it on the CPU machine with scripts/build-gpu.sh" | tee -a "$log"
    exit 2
  fi
done

echo "gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $TESSEL_GIT_COMMIT, binaries from $build/" | tee -a "$log"
command -v nvidia-smi >/dev/null &&
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv 2>&1 | tee -a "$log"

run_step "info" 60 "$build/tessel" info
want tests && run_step "gpu tests" 600 "$build/tessel_tests_gpu" --gtest_output="json:$out/gpu-tests.json"
# The fuzzer (docs/fuzzing.md): 10^4 generated programs compiled for the device's arch (on every
# core) and run on it, outputs NaN-poisoned, against float64 and the interpreter; failures are
# minimized and printed into the log. About 7 minutes on the H200 host's 16 cores.
if want fuzz && [[ -x "$build/tessel_fuzz" ]]; then
  # (TESSEL_CACHE=0: 10^4 distinct kernels would only fill the cache folder.)
  # (TESSEL_FUZZ_COUNT: 10^4 took 417 s in session 11 and more than 450 s in session 12 -- near a
  # device call's 600 s; two calls of 5000 with two seeds make the same count.)
  TESSEL_CACHE=0 run_step "fuzz" 900 "$build/tessel_fuzz" --gpu --arch none --count "${TESSEL_FUZZ_COUNT:-10000}" \
    --seed "${TESSEL_FUZZ_SEED:-20261204}" \
    --json "$fuzz_json"
  if [[ $fuzz_json_in_log == 1 ]]; then
    echo "### fuzz report ($day-fuzz-$tag.json):" >>"$log"
    cat "$fuzz_json" >>"$log" 2>/dev/null
  fi
fi
want tutorial && run_step "tutorial 1-3,5,6" 600 "$build/tessel" tutorial --section 1,2,3,5,6 --json "$tutorial_json"
# The seven shapes of issue 5's bar, f16 and bf16, cuBLAS in the same process.
want gemm && run_step "bench gemm" 600 "$build/tessel" bench gemm \
  --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024 \
  --dtype f16,bf16 --json "$gemm_json"
# Issue 17's GEMM table (unaligned rows staged by kernels::Matmul, skinny shapes), f16 and bf16.
if want gemm17; then
  # Its own file when the steps are named; with all of them the file count is at its limit and
  # the JSON goes into the log.
  gemm17_json="$out/$day-gemm-issue17-$tag.json"
  [[ $steps == *",all,"* ]] && gemm17_json=$(mktemp /tmp/tessel-gpu-check-gemm17-XXXXXX.json)
  run_step "bench gemm 17" 600 "$build/tessel" bench gemm --staging auto --repeats 20 --warmup 5 \
    --shapes 4095x4095x4095,2047x2047x2047,3072x3072x3073,12345x6789x1011,6144x6143x6144,8192x50257x4096,1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,64x8192x8192 \
    --dtype f16,bf16 --json "$gemm17_json"
  if [[ $steps == *",all,"* ]]; then
    echo "### bench gemm 17 report:" >>"$log"
    cat "$gemm17_json" >>"$log" 2>/dev/null
    rm -f "$gemm17_json"
  fi
  # The skinny shapes three ways, into the log (docs/perf-notes.md, session 11's predictions):
  # Matmul's split-K model (off by default until this is measured), 64x64 tiles on the sm_90a
  # template (one kernel, 64 tiles x its 2-CTA split), and the old write-only L2 flush.
  skinny=1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,64x8192x8192
  run_step "bench gemm 17 split-K auto" 300 "$build/tessel" bench gemm --split-k auto --repeats 20 --warmup 5 \
    --shapes "$skinny" --dtype f16,bf16
  run_step "bench gemm 17 64x64 tiles" 300 "$build/tessel" bench gemm --config 64x64x64:8:128 --repeats 20 \
    --warmup 5 --shapes "$skinny" --dtype f16
  run_step "bench gemm 17 write flush" 300 "$build/tessel" bench gemm --l2-flush write --repeats 20 --warmup 5 \
    --shapes "$skinny" --dtype f16
fi
want compile && run_step "bench compile" 300 "$build/tessel" bench compile --json "$compile_json"
if want attention && "$build/tessel" bench attention --help >/dev/null 2>&1; then
  run_step "bench attention" 300 "$build/tessel" bench attention --dtype f16,bf16 --json "$attention_json"
fi
if want softmax && "$build/tessel" bench softmax --help >/dev/null 2>&1; then
  run_step "bench softmax" 600 "$build/tessel" bench softmax --json "$softmax_json"
fi
# Issue 17's softmax widths (f16), into the log (the file count is at its limit).
if want softmax17 && "$build/tessel" bench softmax --help >/dev/null 2>&1; then
  run_step "bench softmax 17" 300 "$build/tessel" bench softmax \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257
  # The same with the span moved by a load-then-store loop instead of cp.async
  # (TESSEL_DISABLE=async_span_copy), with its rows read out of the scratch realigned instead of
  # element by element (opt-in, unmeasured: TESSEL_ENABLE=realigned_span_reads), loaded straight
  # from global memory as realigned words (opt-in, unmeasured: TESSEL_ENABLE=realigned_global_loads), and without the span staging of unaligned rows
  # (TESSEL_DISABLE=row_staging), the element-wise path it replaced, in the same session.
  TESSEL_DISABLE=async_span_copy run_step "bench softmax 17 loop span" 300 "$build/tessel" bench softmax \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257
  TESSEL_ENABLE=realigned_span_reads run_step "bench softmax 17 realigned span reads" 300 "$build/tessel" bench softmax \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257
  TESSEL_ENABLE=realigned_global_loads run_step "bench softmax 17 realigned global loads" 300 "$build/tessel" bench softmax \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257
  TESSEL_DISABLE=row_staging run_step "bench softmax 17 unstaged" 300 "$build/tessel" bench softmax \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257
fi
# compute-sanitizer's racecheck and synccheck on small sm_90a GEMMs — a multicast pair of each kind,
# the TMA-store (stmatrix) epilogue, the GEMM from the generic passes (persistent on few blocks,
# its staging tile reused tile after tile), wgmma with A from registers (the device function, and the
# compiler's WarpgroupGemm in the gemm chain and the plain register-A gemm) — when the tool is installed
# session 20's attention tiles, the 16x32 GEMV tiles and the flat-rows softmax (its reductions' barriers) (small shapes: their references are computed on
# the CPU, so no cuBLAS kernel is checked).
if want sanitizers && command -v compute-sanitizer >/dev/null; then
  filter='Multicast/MulticastShapes.MatchesReference/300x*_f16_off0:Hopper/HopperShapes.MatchesReference/300x200x1000*_f16_off0:Wgmma/WgmmaShapes.*/rs_f16_n128*:Shapes/GemmChain.*/200x300xd64_64x64t128_f16:Shapes/GemmChain.*/256x256xd128_128x64t256_bf16_copy:Shapes/RegisterAGemm.*/100x72x40_64x64x16t128_f16:Shapes/Attention.*/200x300xd64_64x64_f16:FlashAttentionGpuSmall.RingsAndRoles:FromPasses/GemmFromPassesShapes.MatchesReference/300x200x1000*_f16:GemmFromPassesPersistent.*:FlashAttentionGpuSmall.PersistentFromThePasses:FlashAttentionGpuSmall.SessionTwentyTilesSmall:FlatRows/SoftmaxVariants.MatchesFloat64/rows_t256_r64_bn127_N127_f16:FlatRows/SoftmaxVariants.MatchesFloat64/rows_t256_r224_bn9_N9_f16:SkinnyAndRagged/MatmulSplitKShapes.MatchesFloat64/16x4064x2048_splitauto_f16'
  for tool in racecheck synccheck; do
    run_step "$tool" 240 compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tessel_tests_gpu" --gtest_filter="$filter"
  done
  # Every library kernel family on small instances under memcheck and initcheck (issue 18): the
  # GEMM paths above, the staged Matmul, softmax's variants and odd widths, attention, and every
  # fuzz regression case (generated kernels of each family).
  lib_filter="$filter"':Unaligned/MatmulStagingShapes.MatchesReference/65x63x9_always_f16:Unaligned/MatmulStagingShapes.MatchesReference/1x1023x1025_always_bf16:Shapes/MatmulShapes.MatchesReference/17x33x65_*:IssueWidths/SoftmaxWidths.MatchesFloat64/N127_f16:IssueWidths/SoftmaxWidths.MatchesFloat64/N1023_bf16:IssueWidths/SoftmaxWidths.MatchesFloat64/N4097_f32:Explicit/SoftmaxVariants.MatchesFloat64/rows_t256_r8_bn1024_N999_f16:Explicit/SoftmaxVariants.MatchesFloat64/online_t512_bn8192_N100003_f32:Explicit/SoftmaxVariants.MatchesFloat64/rows_t256_r1_bn20480_s7_N20001_f16:OddWidths/SoftmaxStagedRows.MatchesFloat64/N127_f16:OddWidths/SoftmaxStagedRows.MatchesFloat64/N8191_bf16:OddWidths/SoftmaxStagedRows.LoopSpanMatchesFloat64/N127_f16:OddWidths/SoftmaxStagedRows.RealignedReadsMatchFloat64/N8191_f16:OddWidths/SoftmaxStagedRows.RealignedGlobalLoadsMatchFloat64/N127_f16:OddWidths/SoftmaxStagedRows.RealignedGlobalLoadsMatchFloat64/N8193_bf16:Shapes/OddColumnStores.*:SoftmaxNaN.*:FuzzGpu.RegressionCasesMatchOnTheDevice:SkinnyAndRagged/MatmulSplitKShapes.MatchesFloat64/7x63x1025_split3_f16:SkinnyAndRagged/MatmulSplitKShapes.MatchesFloat64/1x1023x65_split2_bf16'
  for tool in memcheck initcheck; do
    run_step "$tool" 300 compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tessel_tests_gpu" --gtest_filter="$lib_filter"
  done
fi
# The cluster softmax probe (issue 4's next design), when build-gpu.sh could build it.
if want probe && [[ -x "$build/softmax_cluster_probe" ]]; then
  run_step "softmax probe" 300 "$build/softmax_cluster_probe" "$out/$day-softmax-cluster-probe-$tag.json"
fi

# The Python package (issue 16): installed from a carried wheel for this Python (.whl/, made by
# scripts/build-python-wheel.sh) or built from the tree; the python tier, and tessel.bench with
# Tessel beside torch in one process (<date>-python-bench-<tag>.json; the log has pytest's summary).
if want python && [[ "${TESSEL_PYTHON:-1}" != 0 ]] && python3 -c "import torch" 2>/dev/null; then
  run_step "python" 600 bash scripts/gpu-python.sh "$out"
fi

summary() {
  echo ""
  echo "================================ gpu-check summary ================================"
  printf "%-16s %-6s %6s\n" "step" "exit" "secs"
  local failed=0 i
  for i in "${!step_names[@]}"; do
    printf "%-16s %-6s %6s\n" "${step_names[$i]}" "${step_codes[$i]}" "${step_secs[$i]}"
    [[ ${step_codes[$i]} -ne 0 ]] && failed=1
  done
  if command -v python3 >/dev/null; then
    python3 - "$out/gpu-tests.json" "$gemm_json" "$compile_json" "$softmax_json" "$fuzz_json" <<'PY'
import json, sys
def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
tests, gemm, comp, softmax, fuzz = (load(p) for p in sys.argv[1:6])
if tests:
    skipped = sum(1 for s in tests.get("testsuites", []) for t in s.get("testsuite", [])
                  if t.get("result") == "SKIPPED")
    print(f"\ngpu tests: {tests.get('tests', 0)} run, {tests.get('failures', 0)} failed, "
          f"{tests.get('errors', 0)} errors, {skipped} skipped")
if gemm:
    print(f"\n{'shape':<16} {'dtype':<5} {'config':<18} {'TFLOP/s:':>8} {'Tessel':>8} {'cuBLAS':>8} {'ratio':>7} "
          f"{'rel.err':>8} {'vs f64':>8}")
    for c in gemm.get("cases", []):
        shape = f"{c['M']}x{c['N']}x{c['K']}"
        cfg = c.get("config", {}).get("text", "?")
        if c.get("status") in ("ok", "wrong"):
            err = c.get("rel_error")
            err = f"{err:.1e}" if err is not None else "nan"
            f64 = c.get("rel_error_f64_sampled")
            f64 = f"{f64:.1e}" if f64 is not None else "-"
            flag = "" if c["status"] == "ok" else "  WRONG"
            print(f"{shape:<16} {c['dtype']:<5} {cfg:<18} {'':>8} {c['tessel_tflops']:8.1f} {c['cublas_tflops']:8.1f} "
                  f"{100 * c['ratio']:6.1f}% {err:>8} {f64:>8}{flag}")
        else:
            print(f"{shape:<16} {c['dtype']:<5} {cfg:<18} {c.get('status', '?')}: "
                  f"{c.get('error', {}).get('kind', '')}")
if softmax:
    print(f"\n{'softmax':<16} {'dtype':<5} {'GB/s:':>8} {'Tessel':>8} {'cuDNN':>8} {'copy':>8} {'of copy':>8}")
    for c in softmax.get("cases", []):
        shape = f"{c['M']}x{c['N']}"
        if c.get("status") in ("ok", "wrong"):
            flag = "" if c["status"] == "ok" else "  WRONG"
            print(f"{shape:<16} {c['dtype']:<5} {'':>8} {c['tessel_gbs']:8.0f} {c.get('cudnn_gbs') or float('nan'):8.0f} "
                  f"{c['copy_gbs']:8.0f} {100 * c['fraction_of_copy']:7.1f}%{flag}")
        else:
            print(f"{shape:<16} {c['dtype']:<5} {c.get('status', '?')}")
if fuzz:
    print(f"\nfuzz: seed {fuzz['seed']}, {fuzz['programs']} programs, {fuzz['gpu_runs']} run on the GPU: "
          f"{fuzz['passed']} passed, {fuzz['rejected']} rejected, {fuzz['failed']} failed in {fuzz['seconds']:.0f} s")
if comp:
    print(f"\ncompile: cold {comp['cold_median_ms']:.0f} ms (first {comp['cold_first_ms']:.0f} ms; target < 1000), "
          f"hit {comp['memory_hit_median_ms']:.2f} ms memory / {comp['disk_hit_median_ms']:.2f} ms disk (target < 10)")
PY
  else
    grep -E "^(  [0-9]+x[0-9]+x[0-9]+|  cold|  memory hit|  disk hit)" "$log" || true
  fi
  echo ""
  echo "files in $out: $(cd "$out" && ls | tr '\n' ' ')"
  return $failed
}
summary 2>&1 | tee -a "$log"
exit "${PIPESTATUS[0]}"
