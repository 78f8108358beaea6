#!/usr/bin/env bash
# What sessions 20 and 21 leave for the H200 (docs/perf-notes.md "Session 20: what the next device
# session runs" and "Session 21: what the next device session runs"), in two device calls of under
# ten minutes each:
#   TESSEL_S21_STEPS=softmax: every softmax gpu suite (the per-warp span forms, the flat-rows
#     tiles), 400 fuzzed softmax programs on the GPU, then issue 17's softmax widths, and at
#     127 / 129 / 1023 the flat-rows tiles beside the default's (one process each, with cuDNN and
#     the copy);
#   TESSEL_S21_STEPS=bench (default): the attention defaults of session 20 (timed only on H100s)
#     beside session 19's choices for the same cases, each in one process with cuDNN; the skinny
#     GEMMs at the default (M <= 16 at N ~ 4096 on one wave of 16x32 tiles) beside split-K forced
#     to the model's old counts;
#   TESSEL_S21_STEPS=tests: the attention gpu suites (the new defaults' tails, padded head dims,
#     every D and dtype) and split-K / skinny GEMMs, each with a limit of its own.
#   TESSEL_S21_STEPS=tune (session 23): `tessel tune softmax` at issue 17's widths (f16), then the
#     widths benched again with the run's tuning cache (the winners) beside cuDNN and the copy;
#   TESSEL_S21_STEPS=ncu (session 23): ncu's issue, memory and warp-state sections on the windowed
#     50257, the 11-warp 8193 and the realigned 8191 beside the aligned 65536 (clocks left alone);
#   TESSEL_S21_STEPS=first (session 23): one call's worth, most valuable first: issue 17's softmax
#     widths and windows on 11 warps, the softmax gpu suites and fuzz, the attention and skinny
#     GEMM defaults, (session 24) the skinny GEMMs on one accumulator chain and the chains' gpu
#     tests, issue 4's widths;
#   TESSEL_S21_STEPS=h200 (sessions 24-25): the bars' figures alone (softmax 17, attention defaults,
#     issue 17's GEMM table, issue 5's shapes, issue 4's widths), then the softmax gpu suites;
#   TESSEL_S21_STEPS=s24: the 176-key and 192x128 attention tiles beside the defaults, their gpu
#     tests and the skinny GEMMs', the skinny GEMMs;
#   TESSEL_S21_STEPS=s25: the attention gpu suites and the passes' GEMM's, attention beside
#     TESSEL_DISABLE=tile_loads, the passes' GEMM beside the template;
#   TESSEL_S21_STEPS=s26: wgmma over several m64 blocks a warpgroup (gemm_from_passes' 128-row
#     tiles on one consumer warpgroup): its gpu tests, racecheck and GPU fuzz, then the passes' kernel beside
#     the template at 128x128x64:5:128 (forced, and the default table's few-tiles-long-K shapes,
#     where the template splits K over 2-CTA clusters);
#   TESSEL_S21_STEPS=s27: split_k_clusters (the template's split-K as a pass, over clusters of 2,
#     4 or 8 CTAs, under gemm_from_passes): its gpu tests, racecheck / synccheck on clusters of 2,
#     4 and 8, GPU fuzz, then the passes' kernel beside the template on the few-tiles-long-K
#     shapes and issue 5's;
#   TESSEL_S21_STEPS=s28: multicast_cluster_loads (use_cluster's multicast as a pass, under
#     gemm_from_passes) and s27's split tests: gpu tests, racecheck / synccheck on both kinds of
#     cluster, the passes' clustered kernels beside the template's (session 6's clustered
#     configs, the few-tiles shapes);
#   TESSEL_S21_STEPS=s29: WarpgroupGemm's descriptors built once a call (session 29): the wgmma
#     gpu suites (both operand orders, A from registers, attention, the passes' GEMM, multicast
#     and split clusters), then the passes' GEMM beside the template and attention beside cuDNN,
#     each with this build and with the previous one (build-gpu/old/tessel, when carried);
#   TESSEL_S21_STEPS=s29b: issue 5's shapes with both builds again, then racecheck on the
#     clusters from the passes (multicast along y and x, splits over 4 and 8);
#   TESSEL_S21_STEPS=s29d / s29e: the flip (gemm_from_passes on by default): the GEMM gpu suites,
#     issue 5's shapes beside the template (--compare-template); issue 17's table with and
#     without TESSEL_DISABLE=gemm_from_passes, GPU fuzz;
#   TESSEL_S21_STEPS=s29f: the flip in one short call: the gpu suites of the kernels it changed,
#     issue 17's changed shapes with and without TESSEL_DISABLE=gemm_from_passes;
#   TESSEL_S21_STEPS=s29h: the gpu tests session 29 edited but could not run (then `h200`);
#   TESSEL_S21_STEPS=s30: s29h's tests and poly_exp2's, then the D = 64 attention cases with a
#     share of the exponentials on the FMA pipe (poly16 / poly8 / poly4) beside the default;
#   TESSEL_S21_STEPS=s30u: uniform_roles beside the default after session 29's descriptors
#     (attention's 16 cases, issue 5's shapes in bf16), its gpu tests;
#   (s31 and s31b were written for builds a8a0067 / e366bdd, when the skips were on by default and
#   TESSEL_DISABLE named them; since 313b4b9 TESSEL_DISABLE rejects that name and s31's steps with
#   it fail -- s31c is the set for later builds.)
#   TESSEL_S21_STEPS=s31: skip_unit_scales, row reductions as trees, AttentionConfig::lazy_rescale:
#     their gpu tests, the 16 default cases with this build and the carried one (build-gpu/old),
#     each with and without the skips; s31b: each default config beside its `:lazy` form, the
#     skinny GEMMs unsplit beside split-K; s31c: the same configs as they are, with the skips
#     (TESSEL_ENABLE=unit_scale_skips), lazy, lazy with the skips;
#   TESSEL_S21_STEPS=s32: lazy rescaling with its skips as the default on two kernels: the
#     attention gpu tests, then the 16 default cases bf16 with this build and the carried one
#     (build-gpu/old), alternating, twice each;
#   TESSEL_S21_STEPS=lmhead: aligned LM-head GEMMs with the default, rasterization panels 2 / 4
#     and 2-CTA multicast clusters (session 32's lead: 0.77-0.80x cuBLAS at 8192x50256x4096);
#   TESSEL_S21_STEPS=s33: staged rows of whole 128-byte lines: issue 17's unaligned shapes with
#     this build and build-gpu/old, twice; the N = 50256 LM heads with the multicast clusters;
#   TESSEL_S21_STEPS=s34: the staging copies as Tessel kernels and the mma.sync path's realigned
#     chunks: their gpu tests, then issue 17's unaligned shapes with this build, build-gpu/mid and
#     build-gpu/old (when carried), twice; skinny GEMMs with an unaligned N or K, staged and
#     direct (this build beside build-gpu/mid);
#   TESSEL_S21_STEPS=s35: realigned rings on the skinny unaligned direct kernels: their gpu tests,
#     then 16/32-row direct configs with the rings and without, beside the staged plan;
#   TESSEL_S21_STEPS=s37: skinny unaligned shapes' defaults (direct on realigned rings): the
#     library Matmul's gpu tests, then the defaults beside --staging always, twice; s37b: split-K
#     forced on the exact unaligned shapes (and the split-K gpu tests) beside the defaults; s37c:
#     the automatic splits on rings, their gpu tests and timings beside --split-k 1; h200a: issue
#     15's bar alone (attention defaults and issue 5's shapes), for a call of under four minutes;
#   TESSEL_S21_STEPS=splitk: the split-K model's unsplit grid as split_k_clusters builds it
#     (session 33): M = 64 shapes it now keeps in one kernel, unsplit / auto / the old share counts;
#   TESSEL_S21_STEPS=uniform: JitOptions::uniform_roles beside the default (the passes' GEMM
#     against the template on issue 5's shapes, attention's default cases), its gpu tests;
#   TESSEL_S21_STEPS="softmax bench" (a list): those sets in that order, in one call.
#   scripts/gpu-s21.sh OUTDIR   (env: TESSEL_RESULT_TAG, TESSEL_S21_STEPS); leaves OUTDIR.tgz
# The step sets before s29d were written while select_hopper_gemm's template was the default:
# there `--compare-passes` timed the passes' kernel in the extra columns and TESSEL_ENABLE=
# gemm_from_passes turned it on. Since the flip (session 29) the passes' kernel is the default,
# `--compare-passes` / `--compare-template` put the template in the extra columns, and naming
# gemm_from_passes in TESSEL_ENABLE changes nothing (rerun an old set knowing that).
set -uo pipefail
source "$(dirname "$0")/gpu-steps.sh" gpu-s21 "${1:-}" s21-h200
# The passes' GEMM tests (split over clusters among them), in four shards at once.
split_cluster_tests() {
  step "gpu tests (passes' GEMM, split over clusters; 4 shards)" 200 bash -c 'fail=0; for i in 0 1 2 3; do
      GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i "$0" --gtest_brief=1 \
        --gtest_filter="*GemmFromPassesShapes*:GemmFromPassesPersistent.*:*EpilogueShapes*passes*:GemmRowMaxGpu.*" & done
    for i in 0 1 2 3; do wait -n || fail=1; done; exit $fail' "$build/tessel_tests_gpu"
}
# Session 31: issue 15's 12 cases by the config the built-in choice gives them on sm_90a
# ("CONFIG CASES"), for step sets that time each config beside a variant of it.
attention_default_groups=("192x128:2:384:ring:persistent 8x32x32x4096x4096x64,2x32x32x16384x16384x64"
  "64x128:1:128:ring 32x32x32x1024x1024x64,32x32x32x1024x1024x64:causal,8x32x32x4096x4096x64:causal,2x32x32x16384x16384x64:causal"
  "128x128:2:256:pingpong:persistent 32x16x16x1024x1024x128,32x16x16x1024x1024x128:causal,8x16x16x4096x4096x128,2x16x16x16384x16384x128"
  "128x256:1:256:pingpong:persistent 8x16x16x4096x4096x128:causal,2x16x16x16384x16384x128:causal")
# Session 29: this build's CLI and, when carried, the previous build's (build-gpu/old/tessel), whose
# JSON names its own commit (gpu-steps.sh exports this build's).
old_build_bins() {
  bins=("$build/tessel")
  if [[ -x "$build/old/tessel" ]]; then bins+=("$build/old/tessel"); fi
  old_commit=$(cat "$build/old/git-commit.txt" 2>/dev/null || echo unknown)
}
# Issue 5's shapes, the passes beside the template, with each build; the shapes where the passes
# trailed first (the big ones, checked in float64 on sampled entries, take the longest).
gemm5_new_and_old() {
  for bin in "${bins[@]}"; do
    which=new commit=$TESSEL_GIT_COMMIT; [[ $bin == "$build/tessel" ]] || which=old commit=$old_commit
    step "bench gemm 5 --compare-passes (f16, bf16; $which build)" 150 env TESSEL_GIT_COMMIT="$commit" "$bin" bench gemm \
      --compare-passes --repeats 20 --warmup 5 \
      --shapes 128x8192x8192,1024x1024x1024,2048x2048x2048,4096x4096x4096,16384x4096x1024,8192x8192x8192,8192x28672x8192 \
      --dtype f16,bf16 --json "$out/$day-gemm-compare-passes-issue5-$which-$tag.json"
  done
}
for steps in ${TESSEL_S21_STEPS:-bench}; do
if [[ $steps == bench ]]; then
  step "bench attention (default, f16 and bf16)" 110 "$build/tessel" bench attention --dtype f16,bf16 --repeats 10 \
    --json "$out/$day-attention-default-$tag.json"
  # Session 19's choices for the cases whose default moved, in their own processes beside cuDNN.
  for cc in "128x128:2:256:ring:persistent 32x16x16x1024x1024x128:causal" \
            "128x128:2:256:ring 8x16x16x4096x4096x128:causal,2x16x16x16384x16384x128:causal,4x32x8x4096x4096x128:causal" \
            "128x128:2:256:cpasync 32x32x32x1024x1024x64,32x32x32x1024x1024x64:causal,8x32x32x4096x4096x64:causal" \
            "192x128:2:384:ring 2x32x32x16384x16384x64:causal"; do
    read -r cfg cases <<<"$cc"
    step "bench attention $cfg (session 19's choice)" 40 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
      --config "$cfg" --cases "$cases" --json "$out/$day-attention-s19-choice-${cfg//:/-}-$tag.json"
  done
  # Session 24: FlashAttention 3's key block at D = 128 without a mask (176 keys, wgmma m64n176)
  # beside the default's 128, each in one process with cuDNN, and its correctness.
  for cfg in 128x176:2:256:pingpong:persistent 128x176:2:256:ring:persistent; do
    step "bench attention D=128 non-causal $cfg" 40 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
      --config "$cfg" --cases 32x16x16x1024x1024x128,8x16x16x4096x4096x128,2x16x16x16384x16384x128,4x32x8x4096x4096x128 \
      --json "$out/$day-attention-bn176-${cfg//:/-}-$tag.json"
  done
  step "gpu tests (attention key blocks of 16s)" 40 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.KeyBlocksOfSixteens'
  step "bench gemm skinny (default)" 40 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096,64x8192x8192 \
    --json "$out/$day-gemm-skinny-default-$tag.json"
  for sk in 1x4096x4096:8 16x4096x4096:5; do
    step "bench gemm ${sk%%:*} split-K ${sk#*:} (session 19's choice)" 20 "$build/tessel" bench gemm --repeats 20 \
      --warmup 5 --dtype f16,bf16 --shapes "${sk%%:*}" --split-k "${sk#*:}" \
      --json "$out/$day-gemm-${sk%%:*}-split${sk#*:}-$tag.json"
  done
elif [[ $steps == softmax ]]; then
  step "gpu tests (softmax: span forms, flat rows)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*Softmax*:IssueWidths/*:RowWindows*:NegativeStartsGpu*:*FlatRows*'
  # Session 21: softmax programs with flat-rows tiles among them (a fifth of the whole-row ones).
  step "fuzz softmax on the GPU" 150 env TESSEL_CACHE=0 "$build/tessel_fuzz" --gpu --arch none --family softmax \
    --count 400 --seed 20261221 --out "$out/fuzz-softmax"
  step "bench softmax 17 (default)" 90 "$build/tessel" bench softmax --repeats 10 \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 \
    --json "$out/$day-softmax-issue17-$tag.json"
  step "bench softmax issue 4 widths" 60 "$build/tessel" bench softmax --json "$out/$day-softmax-issue4-$tag.json"
  # Session 23: windows (every vector an aligned word, the row's head and tail selected) on the
  # 11-warp tile beside the default's realigned loads and span stores.
  for sc in 65536x8191:rows:t256:r1:bn8192,rows:t352:r1:bn8448:w 32768x8193:rows:t352:r1:bn8448,rows:t352:r1:bn8448:w; do
    step "bench softmax ${sc%%:*} windows on 11 warps beside the default" 40 "$build/tessel" bench softmax --repeats 10 \
      --shapes "${sc%%:*}" --config "${sc#*:}" --json "$out/$day-softmax-window11-${sc%%:*}-$tag.json"
  done
  # Session 21: tiles exactly as wide as the odd rows (the flat-rows layout) beside the default's
  # tile, in one process with cuDNN and the copy.
  for sc in 4194304x127:rows:t256:r64:bn128,rows:t256:r64:bn127 \
            4194304x129:rows:t256:r64:bn160,rows:t256:r64:bn129 \
            524288x1023:rows:t256:r8:bn1024,rows:t256:r8:bn1023; do
    step "bench softmax ${sc%%:*} flat rows beside the default" 40 "$build/tessel" bench softmax --repeats 10 \
      --shapes "${sc%%:*}" --config "${sc#*:}" --json "$out/$day-softmax-flat-${sc%%:*}-$tag.json"
  done
elif [[ $steps == tests ]]; then
  step "gpu tests (session 24: key blocks of 16s, accumulator chains)" 60 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.KeyBlocksOfSixteens:*AccumulatorChains*'
  step "gpu tests (attention, session 20's defaults)" 180 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.DefaultConfigs*:FlashAttentionGpuSmall.SessionTwentyTilesSmall:FlashAttentionGpuSmall.KvInterleavedHeads'
  step "gpu tests (attention, every D)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='HeadDims/FlashAttentionGpu.*'
  step "gpu tests (split-K and skinny)" 140 "$build/tessel_tests_gpu" --gtest_brief=1 --gtest_filter='*MatmulSplitK*'
elif [[ $steps == first ]]; then
  # Session 23: the H200 came rarely; one call's worth, most valuable first (issue 17's softmax
  # bar, then correctness of the softmax changes never run on a GPU, then the attention and
  # skinny-GEMM defaults), so that a call cut short still returns the figures that matter.
  step "bench softmax 17 (default)" 90 "$build/tessel" bench softmax --repeats 10 \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 \
    --json "$out/$day-softmax-issue17-$tag.json"
  for sc in 65536x8191:rows:t256:r1:bn8192,rows:t352:r1:bn8448:w 32768x8193:rows:t352:r1:bn8448,rows:t352:r1:bn8448:w; do
    step "bench softmax ${sc%%:*} windows on 11 warps beside the default" 40 "$build/tessel" bench softmax --repeats 10 \
      --shapes "${sc%%:*}" --config "${sc#*:}" --json "$out/$day-softmax-window11-${sc%%:*}-$tag.json"
  done
  step "gpu tests (softmax)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*Softmax*:IssueWidths/*:RowWindows*:NegativeStartsGpu*:*FlatRows*:-Shapes/Attention.*'
  step "fuzz softmax on the GPU" 90 env TESSEL_CACHE=0 "$build/tessel_fuzz" --gpu --arch none --family softmax \
    --count 400 --seed 20261223 --out "$out/fuzz-softmax"
  step "bench attention (default, f16 and bf16)" 110 "$build/tessel" bench attention --dtype f16,bf16 --repeats 10 \
    --json "$out/$day-attention-default-$tag.json"
  step "bench gemm skinny (default)" 40 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096,64x8192x8192 \
    --json "$out/$day-gemm-skinny-default-$tag.json"
  # Session 24: the 16x32 tiles' accumulator chains (the default above) against one chain, and
  # their correctness (M below the tile, N and K tails, chains on and off).
  step "bench gemm skinny (one accumulator chain)" 30 env TESSEL_DISABLE=gemm_chains "$build/tessel" bench gemm \
    --repeats 20 --warmup 5 --dtype f16,bf16 --shapes 1x4096x4096,16x4096x4096 \
    --json "$out/$day-gemm-skinny-one-chain-$tag.json"
  step "bench gemm skinny 16x32x256:4:128 (half the K tiles, 4 chains of 4)" 30 "$build/tessel" bench gemm \
    --repeats 20 --warmup 5 --dtype f16,bf16 --shapes 1x4096x4096,16x4096x4096 --config 16x32x256:4:128 \
    --json "$out/$day-gemm-skinny-16x32x256-$tag.json"
  step "gpu tests (accumulator chains)" 60 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*AccumulatorChains*:SkinnyAndRagged/MatmulSplitKShapes.*1x4096x4096*:SkinnyAndRagged/MatmulSplitKShapes.*16x4000x3000*:SkinnyAndRagged/MatmulSplitKShapes.*9x3968x4104*'
  step "bench softmax issue 4 widths" 60 "$build/tessel" bench softmax --json "$out/$day-softmax-issue4-$tag.json"
elif [[ $steps == h200 ]]; then
  # Sessions 24-25: the bars' figures only, for one call of under ten minutes on the H200: issue
  # 17's softmax widths, the attention defaults (issue 15's cases), issue 17's GEMM table and issue
  # 5's shapes (f16 and bf16), issue 4's widths; then the softmax gpu suites while time lasts.
  step "bench softmax 17 (default)" 90 "$build/tessel" bench softmax --repeats 10 \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 \
    --json "$out/$day-softmax-issue17-$tag.json"
  step "bench attention (default, f16 and bf16)" 110 "$build/tessel" bench attention --dtype f16,bf16 --repeats 10 \
    --json "$out/$day-attention-default-$tag.json"
  step "bench gemm 17" 110 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 4095x4095x4095,2047x2047x2047,3072x3072x3073,12345x6789x1011,6144x6143x6144,8192x50257x4096,1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,64x8192x8192,16x14336x4096 \
    --json "$out/$day-gemm-issue17-$tag.json"
  step "bench gemm 5" 90 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024 \
    --json "$out/$day-gemm-issue5-$tag.json"
  step "bench softmax issue 4 widths" 60 "$build/tessel" bench softmax --json "$out/$day-softmax-issue4-$tag.json"
  step "gpu tests (softmax)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*Softmax*:IssueWidths/*:RowWindows*:NegativeStartsGpu*:*FlatRows*:-Shapes/Attention.*'
elif [[ $steps == s24 ]]; then
  # Session 24, a short call: the 176-key tile beside the default on the non-causal D = 128 cases
  # (each its own process with cuDNN), 192x128 s2 rotated beside the default at D = 64, the new
  # tiles' and the skinny GEMMs' gpu tests, the skinny GEMMs.
  d128=32x16x16x1024x1024x128,8x16x16x4096x4096x128,2x16x16x16384x16384x128,4x32x8x4096x4096x128
  step "bench attention D=128 non-causal (default)" 40 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
    --cases "$d128" --json "$out/$day-attention-d128nc-default-$tag.json"
  for cfg in 128x176:2:256:pingpong:persistent 128x176:2:256:ring:persistent; do
    step "bench attention D=128 non-causal $cfg" 40 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
      --config "$cfg" --cases "$d128" --json "$out/$day-attention-d128nc-${cfg//:/-}-$tag.json"
  done
  d64=8x32x32x4096x4096x64,2x32x32x16384x16384x64
  step "bench attention D=64 non-causal (default)" 30 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
    --cases "$d64" --json "$out/$day-attention-d64nc-default-$tag.json"
  step "bench attention D=64 non-causal 192x128:2:384:ring:persistent" 30 "$build/tessel" bench attention \
    --dtype bf16 --repeats 10 --config 192x128:2:384:ring:persistent --cases "$d64" \
    --json "$out/$day-attention-d64nc-192x128-s2-$tag.json"
  step "gpu tests (key blocks of 16s, chains, skinny split-K)" 90 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.KeyBlocksOfSixteens:*AccumulatorChains*:SkinnyAndRagged/MatmulSplitKShapes.*'
  step "bench gemm skinny (default)" 40 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096,64x8192x8192 \
    --json "$out/$day-gemm-skinny-default-$tag.json"
  # The tutorial GEMM from the passes beside the template (issue 15) on issue 5's shapes, f16.
  step "bench gemm 5 --compare-passes (f16)" 60 "$build/tessel" bench gemm --compare-passes --repeats 20 --warmup 5 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024 \
    --dtype f16 --json "$out/$day-gemm-compare-passes-$tag.json"
  # Programmatic dependent launch of the split-K pairs (never timed before): the reduction's CTAs
  # resident while the partial GEMM drains.
  step "bench gemm skinny split-K (programmatic launch)" 30 env TESSEL_ENABLE=programmatic_launch "$build/tessel" \
    bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 --shapes 32x4096x14336,8x14336x4096,16x14336x4096 \
    --json "$out/$day-gemm-skinny-pdl-$tag.json"
elif [[ $steps == uniform ]]; then
  # Session 24: JitOptions::uniform_roles (roles and warpgroup indices broadcast from lane 0, the
  # wgmma descriptors in uniform registers) beside the default, each process with its baseline:
  # the passes' GEMM against the template on issue 5's shapes, then attention's default cases.
  issue5=2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024
  for e in none uniform_roles; do
    step "bench gemm 5 --compare-passes (f16, TESSEL_ENABLE=$e)" 60 env TESSEL_ENABLE="${e/none/}" "$build/tessel" \
      bench gemm --compare-passes --repeats 20 --warmup 5 --shapes "$issue5" --dtype f16 \
      --json "$out/$day-gemm-compare-passes-$e-$tag.json"
    step "bench attention bf16 (TESSEL_ENABLE=$e)" 70 env TESSEL_ENABLE="${e/none/}" "$build/tessel" bench attention \
      --dtype bf16 --repeats 10 --json "$out/$day-attention-default-$e-$tag.json"
  done
  step "gpu tests (uniform roles)" 90 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.SwitchesGiveTheSameResults:*GemmFromPassesShapes*'
elif [[ $steps == s25 ]]; then
  # Session 25: plan_tile_loads (Q by TMA from the producer into two slots in persistent
  # attention) and uniform role tests at one consumer warpgroup, both new defaults: their gpu
  # tests first, then attention beside TESSEL_DISABLE=tile_loads (each process with cuDNN) and
  # the passes' GEMM beside the template.
  # Six shards at once (NVRTC compiles dominate; one process ran past 240 s, six took 67 s).
  step "gpu tests (attention, passes' GEMM; 6 shards)" 240 bash -c 'fail=0; for i in 0 1 2 3 4 5; do
      GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i "$0" --gtest_brief=1 \
        --gtest_filter="FlashAttentionGpuSmall.*:HeadDims/FlashAttentionGpu.*:*GemmFromPassesShapes*" & done
    for i in 0 1 2 3 4 5; do wait -n || fail=1; done; exit $fail' "$build/tessel_tests_gpu"
  for e in none tile_loads; do
    step "bench attention bf16 (TESSEL_DISABLE=$e)" 70 env TESSEL_DISABLE="${e/none/}" "$build/tessel" bench attention \
      --dtype bf16 --repeats 10 --json "$out/$day-attention-default-disable-$e-$tag.json"
  done
  step "bench gemm 5 --compare-passes (f16)" 60 "$build/tessel" bench gemm --compare-passes --repeats 20 --warmup 5 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024 \
    --dtype f16 --json "$out/$day-gemm-compare-passes-$tag.json"
elif [[ $steps == s26 ]]; then
  # Session 26 (written without a GPU): the passes' wgmma over two and four m64 blocks a
  # warpgroup, interleaved accumulator strips, its epilogues (TMA store, 16-byte register
  # stores, a user's row reduction and Parallel nest). Correctness first, in four shards.
  step "gpu tests (several m64 blocks; 4 shards)" 200 bash -c 'fail=0; for i in 0 1 2 3; do
      GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i "$0" --gtest_brief=1 \
        --gtest_filter="*GemmFromPassesShapes*:GemmFromPassesPersistent.*:GemmRowMaxGpu.*:*EpilogueShapes*" & done
    for i in 0 1 2 3; do wait -n || fail=1; done; exit $fail' "$build/tessel_tests_gpu"
  if command -v compute-sanitizer >/dev/null; then
    for tool in racecheck synccheck; do
      step "$tool (a user's kernel on two m64 blocks)" 90 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$build/tessel_tests_gpu" --gtest_filter='GemmRowMaxGpu.*' --gtest_brief=1
    done
  fi
  # The fuzz's tutorial-shaped GEMMs take 128 rows on one consumer warpgroup about half the time.
  step "fuzz gemm from passes (several m64 blocks), on the GPU" 90 env TESSEL_CACHE=0 TESSEL_ENABLE=gemm_from_passes \
    "$build/tessel_fuzz" --gpu --arch none --family gemm --count 300 --seed 20261226 --json "$out/$day-fuzz-gemm-passes-$tag.json"
  step "bench gemm --compare-passes 128x128x64:5:128 (f16)" 60 "$build/tessel" bench gemm --compare-passes --repeats 20 \
    --warmup 5 --config 128x128x64:5:128 --shapes 4096x4096x4096,2048x2048x2048,1024x1024x1024 --dtype f16,bf16 \
    --json "$out/$day-gemm-compare-passes-128x128t128-$tag.json"
  step "bench gemm --compare-passes (few tiles, long K: the template's split-K clusters)" 60 "$build/tessel" bench gemm \
    --compare-passes --repeats 20 --warmup 5 --shapes 1024x896x8192,512x1024x8192,256x2048x16384 --dtype f16,bf16 \
    --json "$out/$day-gemm-compare-passes-fewtiles-$tag.json"
elif [[ $steps == s27 ]]; then
  # Session 27: split_k_clusters (few tiles over a long K split over 2-CTA clusters by a pass,
  # under gemm_from_passes): its gpu tests in four shards (the passes' GEMM shapes and epilogues,
  # split and not), racecheck and synccheck on two split shapes, GPU fuzz, then the passes'
  # kernel beside the template on the few-tiles shapes (where the template splits too) and at
  # issue 5's shapes.
  split_cluster_tests
  if command -v compute-sanitizer >/dev/null; then
    for tool in racecheck synccheck; do
      # Our kernels only: the tests' cuBLAS reference (nvjet kernels) draws racecheck reports of its own.
      step "$tool (split over clusters)" 90 env TESSEL_TEST_F64_REFERENCE=1 compute-sanitizer --tool "$tool" \
        --error-exitcode 9 "$build/tessel_tests_gpu" --gtest_brief=1 \
        --gtest_filter='FromPasses/GemmFromPassesShapes.MatchesReference/200x300x5000*:FromPasses/GemmFromPassesShapes.MatchesReference/500x1000x8200*:FromPasses/GemmFromPassesShapes.MatchesReference/128x1024x16384*'
    done
  fi
  step "bench gemm --compare-passes (few tiles, long K: both split over clusters)" 60 "$build/tessel" bench gemm \
    --compare-passes --repeats 20 --warmup 5 --shapes 1024x896x8192,512x1024x8192,256x2048x16384,128x1024x16384 \
    --dtype f16,bf16 --json "$out/$day-gemm-compare-passes-fewtiles-$tag.json"
  step "fuzz gemm from passes, on the GPU" 90 env TESSEL_CACHE=0 TESSEL_ENABLE=gemm_from_passes \
    "$build/tessel_fuzz" --gpu --arch none --family gemm --count 300 --seed 20261227 --json "$out/$day-fuzz-gemm-passes-$tag.json"
  step "bench gemm 5 --compare-passes (f16, bf16)" 80 "$build/tessel" bench gemm --compare-passes --repeats 20 --warmup 5 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024 \
    --dtype f16,bf16 --json "$out/$day-gemm-compare-passes-issue5-$tag.json"
elif [[ $steps == s28 ]]; then
  # Session 28: multicast_cluster_loads (use_cluster's multicast as a pass, under
  # gemm_from_passes) and session 27's clusters of 4 and 8 (never run before): their gpu tests,
  # racecheck and synccheck on both kinds of cluster, then the passes' clustered kernel beside the
  # template's at session 6's clustered configs and the split kernels on the few-tiles shapes.
  step "gpu tests (multicast from the passes and the template)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*MulticastShapes*:GemmFromPassesMulticast.*:HopperPersistent.*'
  split_cluster_tests
  if command -v compute-sanitizer >/dev/null; then
    for tool in racecheck synccheck; do
      step "$tool (multicast from the passes; split over 2, 4, 8)" 120 env TESSEL_TEST_F64_REFERENCE=1 \
        compute-sanitizer --tool "$tool" --error-exitcode 9 "$build/tessel_tests_gpu" --gtest_brief=1 \
        --gtest_filter='FromPasses/MulticastShapes.MatchesReference/300x136x1000*f16*:FromPasses/MulticastShapes.MatchesReference/1100x1000x1032*f16*:FromPasses/GemmFromPassesShapes.MatchesReference/200x300x5000*:FromPasses/GemmFromPassesShapes.MatchesReference/500x1000x8200*:FromPasses/GemmFromPassesShapes.MatchesReference/128x1024x16384*'
    done
  fi
  for cc in "128x64x64:8:256:swz16:c2x1 128x8192x8192" "128x256x64:3:256:swz8:c1x2 2048x2048x2048,4096x4096x4096" \
            "128x256x64:3:256:swz8:c2x1 4096x4096x4096,8192x8192x8192"; do
    read -r cfg shapes <<<"$cc"
    step "bench gemm --compare-passes $cfg" 60 "$build/tessel" bench gemm --compare-passes --repeats 20 --warmup 5 \
      --config "$cfg" --shapes "$shapes" --dtype f16,bf16 --json "$out/$day-gemm-compare-passes-${cfg//:/-}-$tag.json"
  done
  step "bench gemm --compare-passes (few tiles, long K: both split over clusters)" 60 "$build/tessel" bench gemm \
    --compare-passes --repeats 20 --warmup 5 --shapes 1024x896x8192,512x1024x8192,256x2048x16384,128x1024x16384 \
    --dtype f16,bf16 --json "$out/$day-gemm-compare-passes-fewtiles-$tag.json"
elif [[ $steps == s28b ]]; then
  # Session 28, second call, most wanted first: the racecheck fault of s28 (a y cluster from the
  # passes, 128 threads) beside the template's same cluster, each in its own process (a fault
  # poisons the rest of a process), memcheck; the split rule that keeps every cluster of 4
  # resident (tests, then passes beside the template); issue 5's shapes; racecheck on the other
  # clusters; GPU fuzz.
  mc='FromPasses/MulticastShapes.MatchesReference'
  # No cuBLAS kernel under the sanitizer (TESSEL_TEST_F64_REFERENCE): with --kernel-name kns=matmul
  # racecheck faulted inside cuBLAS's reference GEMMs on an H100 (session 28: "failed to handle
  # a hardware exception", the template's kernels alike); without the filter it reports hazards
  # inside them.
  race() { step "racecheck $1" 120 env TESSEL_TEST_F64_REFERENCE=1 compute-sanitizer --tool racecheck \
      --error-exitcode 9 "$build/tessel_tests_gpu" --gtest_brief=1 --gtest_filter="$1"; }
  race "$mc/1100x1000x1032*f16*"
  race "Multicast/MulticastShapes.MatchesReference/1100x1000x1032*f16*"
  step "memcheck $mc/1100x1000x1032 f16" 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/tessel_tests_gpu" --gtest_brief=1 --gtest_filter="$mc/1100x1000x1032*f16*"
  step "gpu tests (the split cases, clusters of 4 within the resident bound)" 120 "$build/tessel_tests_gpu" \
    --gtest_brief=1 --gtest_filter='FromPasses/GemmFromPassesShapes.*:GemmRowMaxGpu.*'
  step "bench gemm --compare-passes (few tiles: clusters of 2, 4, 8)" 60 "$build/tessel" bench gemm \
    --compare-passes --repeats 20 --warmup 5 \
    --shapes 512x1024x8192,384x1024x8192,256x1536x16384,256x2048x16384,128x1024x8192,128x1024x16384 \
    --dtype f16,bf16 --json "$out/$day-gemm-compare-passes-fewtiles-resident-$tag.json"
  step "bench gemm 5 --compare-passes (f16, bf16)" 80 "$build/tessel" bench gemm --compare-passes --repeats 20 --warmup 5 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024 \
    --dtype f16,bf16 --json "$out/$day-gemm-compare-passes-issue5-$tag.json"
  for case in "$mc/300x520x1000*f16*" "$mc/1000x1064x1032*f16*" \
              "FromPasses/GemmFromPassesShapes.MatchesReference/380x1000x8200*f16*" \
              "FromPasses/GemmFromPassesShapes.MatchesReference/128x1024x16384*f16*"; do
    race "$case"
  done
  step "fuzz gemm from passes, on the GPU" 100 env TESSEL_CACHE=0 TESSEL_ENABLE=gemm_from_passes \
    "$build/tessel_fuzz" --gpu --arch none --family gemm --count 200 --seed 20261228 --json "$out/$day-fuzz-gemm-passes-$tag.json"
elif [[ $steps == s29 ]]; then
  # Session 29: WarpgroupGemm builds each wgmma's descriptor as a base plus a constant (the
  # template's way) instead of from the stage's address each time. Correctness of every generic
  # wgmma first (six shards), then issue 5's shapes (passes beside the template) and attention's
  # defaults (beside cuDNN) with this build and the previous build's CLI, back to back.
  step "gpu tests (generic wgmma: both orders, registers, attention, the passes' GEMM; 6 shards)" 240 bash -c 'fail=0
    for i in 0 1 2 3 4 5; do GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i "$0" --gtest_brief=1 \
        --gtest_filter="Wgmma/*:*RegisterAGemm*:*GemmChain*:Shapes/Attention.*:FlashAttentionGpuSmall.*:*GemmFromPassesShapes*:GemmFromPassesMulticast.*:FromPasses/MulticastShapes.*:GemmRowMaxGpu.*:RaggedRingGpu.*" & done
    for i in 0 1 2 3 4 5; do wait -n || fail=1; done; exit $fail' "$build/tessel_tests_gpu"
  old_build_bins
  gemm5_new_and_old
  for bin in "${bins[@]}"; do
    which=new commit=$TESSEL_GIT_COMMIT; [[ $bin == "$build/tessel" ]] || which=old commit=$old_commit
    step "bench attention bf16 (default; $which build)" 70 env TESSEL_GIT_COMMIT="$commit" "$bin" bench attention \
      --dtype bf16 --repeats 10 \
      --json "$out/$day-attention-default-$which-$tag.json"
  done
  step "fuzz (every family, transposed operands among them), on the GPU" 90 env TESSEL_CACHE=0 \
    "$build/tessel_fuzz" --gpu --arch none --count 200 --seed 20261229 --json "$out/$day-fuzz-all-$tag.json"
elif [[ $steps == s29b ]]; then
  # Session 29, second call: issue 5's shapes with both builds (s29's step ran out of time), then
  # session 28's racecheck cases (never run without the fault) on the clusters from the passes.
  old_build_bins
  gemm5_new_and_old
  mc='FromPasses/MulticastShapes.MatchesReference'
  for case in "$mc/1100x1000x1032*f16*" "$mc/300x520x1000*f16*" \
              "FromPasses/GemmFromPassesShapes.MatchesReference/380x1000x8200*f16*" \
              "FromPasses/GemmFromPassesShapes.MatchesReference/128x1024x16384*f16*" \
              "GemmFromPassesMulticast.FewBlocksLoopOverManyTiles"; do
    step "racecheck $case" 90 env TESSEL_TEST_F64_REFERENCE=1 compute-sanitizer --tool racecheck \
      --error-exitcode 9 "$build/tessel_tests_gpu" --gtest_brief=1 --gtest_filter="$case"
  done
elif [[ $steps == s29d ]]; then
  # Session 29, the flip: the generic passes compile the tutorial GEMM by default (gemm_from_passes
  # on; the template only under gemm_from_passes = false). The GEMM gpu suites -- the default
  # (passes) and the template's own, explicitly -- in six shards, then issue 5's shapes with the
  # template beside the default in one process.
  step "gpu tests (GEMMs: the default from the passes, the template's suites; 6 shards)" 300 bash -c 'fail=0
    for i in 0 1 2 3 4 5; do GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i "$0" --gtest_brief=1 \
        --gtest_filter="Shapes/MatmulShapes.*:TutorialKnobs/*:FromPasses/*:*EpilogueShapes*:*MatmulSplitKShapes*:GemmRowMaxGpu.*:RaggedRingGpu.*:Hopper/HopperShapes.*:SplitK/SplitKShapes.*:HopperPersistent.*:GemmFromPasses*:*MatmulStagingShapes*" & done
    for i in 0 1 2 3 4 5; do wait -n || fail=1; done; exit $fail' "$build/tessel_tests_gpu"
  step "bench gemm 5 --compare-template (f16, bf16)" 150 "$build/tessel" bench gemm --compare-template --repeats 20 \
    --warmup 5 --shapes 128x8192x8192,1024x1024x1024,2048x2048x2048,4096x4096x4096,16384x4096x1024,8192x8192x8192,8192x28672x8192 \
    --dtype f16,bf16 --json "$out/$day-gemm-compare-template-issue5-$tag.json"
elif [[ $steps == s29e ]]; then
  # Session 29, the flip, second call: issue 17's GEMM table with the default (passes) and with
  # TESSEL_DISABLE=gemm_from_passes (the template), each process with cuBLAS; then GPU fuzz.
  for e in none gemm_from_passes; do
    step "bench gemm 17 (TESSEL_DISABLE=$e)" 150 env TESSEL_DISABLE="${e/none/}" "$build/tessel" bench gemm --repeats 20 \
      --warmup 5 --dtype f16,bf16 \
      --shapes 64x8192x8192,6144x6143x6144,8192x50257x4096,4095x4095x4095,2047x2047x2047,3072x3072x3073,12345x6789x1011,1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096 \
      --json "$out/$day-gemm-issue17-disable-$e-$tag.json"
  done
  step "fuzz (every family), on the GPU" 90 env TESSEL_CACHE=0 "$build/tessel_fuzz" --gpu --arch none --count 200 \
    --seed 20261230 --json "$out/$day-fuzz-all-$tag.json"
elif [[ $steps == s29f ]]; then
  # Session 29, the flip in one short call (little device time left): the gpu suites whose
  # kernels the flip changed (the default GEMM from the passes, fused epilogues, the library's
  # split-K partial and staged shapes, a user's gemm rings), then the issue 17 shapes whose kernel
  # changed (the split-K partial at 64 rows, the staged unaligned shapes' padded kernel) with the
  # default and with TESSEL_DISABLE=gemm_from_passes, each process with cuBLAS.
  step "gpu tests (the flip's kernels; 6 shards)" 200 bash -c 'fail=0
    for i in 0 1 2 3 4 5; do GTEST_TOTAL_SHARDS=6 GTEST_SHARD_INDEX=$i "$0" --gtest_brief=1 \
        --gtest_filter="Shapes/MatmulShapes.*:TutorialKnobs/*:*EpilogueShapes*:*MatmulSplitKShapes*:*MatmulStagingShapes*:RaggedRingGpu.*:GemmRowMaxGpu.*" & done
    for i in 0 1 2 3 4 5; do wait -n || fail=1; done; exit $fail' "$build/tessel_tests_gpu"
  for e in none gemm_from_passes; do
    step "bench gemm 17, the changed kernels (TESSEL_DISABLE=$e)" 80 env TESSEL_DISABLE="${e/none/}" "$build/tessel" \
      bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
      --shapes 64x8192x8192,4095x4095x4095,6144x6143x6144,12345x6789x1011 \
      --json "$out/$day-gemm-issue17-changed-disable-$e-$tag.json"
  done
elif [[ $steps == s29h ]]; then
  # What session 29 could not run (its device time went on starts that got no machine): the gpu
  # tests it edited or whose kernel the flip changed, not yet run on a GPU since -- the library GEMM
  # past 2^31 elements (now the passes' kernel), GemmRowMaxGpu's fixed check, persistent attention
  # and the fuzz regressions under persistent_rings (was gemm_from_passes) --, then the bars (run
  # it on an H200: TESSEL_S21_STEPS="s29h h200").
  step "gpu tests (session 29's edits and the flip's large GEMM)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='LargeTensorGpu.Gemm*:GemmRowMaxGpu.*:FlashAttentionGpuSmall.PersistentFromThePasses:FlashAttentionGpuSmall.ThreeConsumerWarpgroups:FuzzGpu.*'
elif [[ $steps == s30 ]]; then
  # Session 30: s29h's tests and poly_exp2's (the GPU's bits against the interpreter's), then the
  # D = 64 attention cases with one group of 8 key columns in 16, 8 or 4 taking its exponentials on
  # the FMA pipe (AttentionConfig::poly_exp_one_in) beside the default config, each process with
  # cuDNN (docs/perf-notes.md, "Session 30").
  step "gpu tests (session 29's edits, poly_exp2)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='LargeTensorGpu.Gemm*:GemmRowMaxGpu.*:FlashAttentionGpuSmall.PersistentFromThePasses:FlashAttentionGpuSmall.ThreeConsumerWarpgroups:FuzzGpu.*:FastExp2Gpu.*:PolyExp2Gpu.*:*PolyExp*'
  d64=8x32x32x4096x4096x64,2x32x32x16384x16384x64,32x32x32x1024x1024x64
  for cfg in default 192x128:2:384:ring:persistent:poly16 192x128:2:384:ring:persistent:poly8 \
      192x128:2:384:ring:persistent:poly4 192x128:2:384:ring:persistent; do
    args=(); [[ $cfg == default ]] || args=(--config "$cfg")
    step "bench attention D=64 non-causal ($cfg)" 40 "$build/tessel" bench attention --dtype bf16 --repeats 10 \
      "${args[@]}" --cases "$d64" --json "$out/$day-attention-d64nc-${cfg//:/-}-$tag.json"
  done
elif [[ $steps == s31 ]]; then
  # Session 31: skip_unit_scales (on by default), accumulator row reductions as trees, and
  # AttentionConfig::lazy_rescale (`:lazy`, opt-in). First the gpu tests (lazy configs against
  # float64, bit-identical with and without the skips, the row max of GEMM accumulators, three
  # consumer warpgroups), then the 16 default attention cases bf16 with this build and the carried
  # previous one (build-gpu/old: e366bdd, the skips without the trees), each with and without
  # TESSEL_DISABLE=unit_scale_skips -- the old build without the skips is session 30's code --
  # every process with cuDNN (docs/perf-notes.md, "Session 31"). s31b: the lazy configs.
  step "gpu tests (lazy rescale, unit-scale skips, row reductions)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.LazyRescaleAndUnitScaleSkips:FlashAttentionGpuSmall.SwitchesGiveTheSameResults:FastExp2Gpu.*:GemmRowMaxGpu.*:FlashAttentionGpuSmall.ThreeConsumerWarpgroups'
  old_build_bins
  for bin in "${bins[@]}"; do
    which=new commit=$TESSEL_GIT_COMMIT; [[ $bin == "$build/tessel" ]] || which=old commit=$old_commit
    for e in none unit_scale_skips; do
      step "bench attention bf16 ($which build, TESSEL_DISABLE=$e)" 75 env TESSEL_GIT_COMMIT="$commit" \
        TESSEL_DISABLE="${e/none/}" "$bin" bench attention --dtype bf16 --repeats 10 \
        --json "$out/$day-attention-default-$which-disable-$e-$tag.json"
    done
  done
elif [[ $steps == s31b ]]; then
  # Session 31, second call: each default config of the 12 cases beside its `:lazy` form (one
  # process each, with cuDNN), then the skinny GEMMs unsplit (the passes' kernel, each tile's K
  # loop over a 4-CTA cluster since session 29's flip) beside the library's split-K
  # (plan_matmul's model still assumes the template's 2-CTA clusters for the unsplit grid).
  for g in "${attention_default_groups[@]}"; do
    cfg=${g%% *} cases=${g#* }
    for c in "$cfg" "$cfg:lazy"; do
      step "bench attention bf16 $c" 45 "$build/tessel" bench attention --dtype bf16 --repeats 10 --config "$c" \
        --cases "$cases" --json "$out/$day-attention-${c//:/-}-$tag.json"
    done
  done
  skinny=1x4096x4096,16x4096x4096,32x4096x14336,8x14336x4096,16x14336x4096,64x8192x8192
  for sk in auto 1; do
    step "bench gemm skinny --split-k $sk" 45 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
      --split-k "$sk" --shapes "$skinny" --json "$out/$day-gemm-skinny-split-$sk-$tag.json"
  done
elif [[ $steps == s31c ]]; then
  # Session 31, third call: the trees reverted and the skips opt-in (both measured slower in s31).
  # Each default config of the 12 cases as it is, with TESSEL_ENABLE=unit_scale_skips, as `:lazy`,
  # and as `:lazy` with the skips, then as it is again (the spread), one process each with cuDNN.
  for g in "${attention_default_groups[@]}"; do
    cfg=${g%% *} cases=${g#* }
    for v in "$cfg|" "$cfg|unit_scale_skips" "$cfg:lazy|" "$cfg:lazy|unit_scale_skips" "$cfg|again"; do
      c=${v%|*} e=${v#*|}
      name=${c//:/-}${e:+-$e}
      step "bench attention bf16 $c ${e:+TESSEL_ENABLE=$e}" 45 env TESSEL_ENABLE="${e/again/}" "$build/tessel" \
        bench attention --dtype bf16 --repeats 10 --config "$c" --cases "$cases" \
        --json "$out/$day-attention-$name-$tag.json"
    done
  done
elif [[ $steps == s32 ]]; then
  # Session 32: lazy rescaling with its skips as the built-in choice on D = 64's 64x128 ring and
  # causal D = 128's 256-key tile. The attention gpu tests (every default against float64, the
  # lazy configs bit-identical with and without the skips), then the 16 default cases bf16 with
  # this build and the carried previous one (build-gpu/old: b2c96e5), alternating, twice each,
  # every process with cuDNN (docs/perf-notes.md, "Session 32").
  step "gpu tests (attention defaults, lazy rescale)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.*:HeadDims/FlashAttentionGpu.*'
  old_build_bins
  for round in 1 2; do
    for bin in "${bins[@]}"; do
      which=new commit=$TESSEL_GIT_COMMIT; [[ $bin == "$build/tessel" ]] || which=old commit=$old_commit
      step "bench attention bf16 ($which build, round $round)" 75 env TESSEL_GIT_COMMIT="$commit" "$bin" \
        bench attention --dtype bf16 --repeats 10 --json "$out/$day-attention-default-$which-r$round-$tag.json"
    done
  done
elif [[ $steps == lmhead ]]; then
  # Session 32's lead: aligned LM-head GEMMs (M tokens x a vocabulary x the hidden size), where the
  # default's 128x256 tiles in panels of 8 ran 0.77-0.80x cuBLAS on an H100 and panels of 4
  # 0.83-0.96x. The default, then rasterization panels 2 / 4 and 2-CTA multicast clusters (A or B
  # shared), each its own process with cuBLAS (docs/perf-notes.md, "Session 32").
  lm=8192x50256x4096,8192x32000x4096,8192x128256x4096,4096x50256x4096
  for cfg in default 128x256x64:3:256:swz4 128x256x64:3:256:swz2 128x256x64:3:256:swz8:c2x1 \
      128x256x64:3:256:swz8:c1x2 128x256x64:3:256:swz4:c2x1 128x256x64:3:256:swz4:c1x2 256x128x64:3:256:swz4 \
      default; do
    args=(); [[ $cfg == default ]] || args=(--config "$cfg")
    step "bench gemm LM heads ($cfg)" 150 "$build/tessel" bench gemm --repeats 10 --warmup 3 --dtype f16,bf16 \
      --shapes "$lm" "${args[@]}" --json "$out/$day-gemm-lmhead-${cfg//:/-}-$SECONDS-$tag.json"
  done
elif [[ $steps == splitk ]]; then
  # Session 33: plan_matmul's split-K model counts the unsplit grid as split_k_clusters builds it
  # (R = 2, 4 or 8 CTAs a tile), not as the template's 2-CTA clusters. Three M = 64 shapes whose
  # choice it changed (64x4096x8192 and 64x6144x8192 over 4-CTA clusters, 64x2048x16384 over 8:
  # split 5 / 4 / 10 -> one kernel) and issue 17's 32x4096x14336, each unsplit (--split-k 1), as the
  # library chooses (auto) and at the old model's share counts, each its own process with cuBLAS.
  for split in 1 auto 4 5 10; do
    step "bench gemm skinny M = 64 (--split-k $split)" 60 "$build/tessel" bench gemm --repeats 20 --warmup 5 \
      --dtype f16,bf16 --shapes 64x4096x8192,64x6144x8192,64x2048x16384,32x4096x14336 --split-k "$split" \
      --json "$out/$day-gemm-skinny64-split-$split-$tag.json"
  done
elif [[ $steps == s33 ]]; then
  # Session 33: staged rows padded to whole 128-byte lines (b4f4319): the gpu tests of the
  # library's staged and split GEMMs, then issue 17's six unaligned
  # shapes with this build and the carried one (build-gpu/old: a build before b4f4319, whose
  # staging padded to 16 bytes), alternating, twice, each its own process with cuBLAS; then the
  # N = 50256 LM heads (rows 32 bytes past a line) with the default and the multicast clusters
  # `tessel tune gemm` now searches.
  step "gpu tests (Matmul staged and split)" 150 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*MatmulStaging*:*SplitK*:*Skinny*'
  unaligned=4095x4095x4095,2047x2047x2047,3072x3072x3073,12345x6789x1011,6144x6143x6144,8192x50257x4096
  bins=("$build/tessel"); if [[ -x "$build/old/tessel" ]]; then bins+=("$build/old/tessel"); fi
  for round in 1 2; do
    for bin in "${bins[@]}"; do
      which=new; [[ $bin == "$build/old/tessel" ]] && which=old
      step "bench gemm issue 17 unaligned ($which, round $round)" 100 "$bin" bench gemm --repeats 10 --warmup 3 \
        --dtype f16,bf16 --shapes "$unaligned" --json "$out/$day-gemm-issue17-unaligned-$which-r$round-$tag.json"
    done
  done
  for cfg in default 128x256x64:3:256:swz4:c1x2 128x256x64:3:256:swz8:c1x2; do
    args=(); [[ $cfg == default ]] || args=(--config "$cfg")
    step "bench gemm LM heads off whole lines ($cfg)" 90 "$build/tessel" bench gemm --repeats 10 --warmup 3 \
      --dtype f16,bf16 --shapes 8192x50256x4096,4096x50256x4096 "${args[@]}" \
      --json "$out/$day-gemm-lmhead-pitch-${cfg//:/-}-$tag.json"
  done
elif [[ $steps == s34 ]]; then
  # Session 34: the staging copies as Tessel kernels (matmul_staging_copy_program: realigned
  # loads, span stores) in place of the driver's 2-D copies: their gpu tests and the staged
  # GEMMs', then issue 17's unaligned shapes with this build, build-gpu/mid (driver copies, rows
  # of whole lines) and build-gpu/old (driver copies, rows padded to 16 bytes), in turn, twice,
  # each its own process with cuBLAS.
  step "gpu tests (staging copies, Matmul staged and split)" 180 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='MatmulStagingCopyGpu.*:*MatmulStaging*:*SplitK*:MatmulUnalignedDirect.*:*MatmulShapes*17x33x65*'
  unaligned=4095x4095x4095,2047x2047x2047,3072x3072x3073,12345x6789x1011,6144x6143x6144,8192x50257x4096
  bins=("$build/tessel")
  for which in mid old; do [[ -x "$build/$which/tessel" ]] && bins+=("$build/$which/tessel"); done
  for round in 1 2; do
    for bin in "${bins[@]}"; do
      which=new commit=$TESSEL_GIT_COMMIT
      if [[ $bin != "$build/tessel" ]]; then
        which=$(basename "$(dirname "$bin")")
        commit=$(cat "$(dirname "$bin")/git-commit.txt" 2>/dev/null || echo unknown)
      fi
      step "bench gemm issue 17 unaligned ($which, round $round)" 100 env TESSEL_GIT_COMMIT="$commit" "$bin" bench gemm \
        --repeats 10 --warmup 3 --dtype f16,bf16 --shapes "$unaligned" \
        --json "$out/$day-gemm-issue17-unaligned-$which-r$round-$tag.json"
    done
  done
  # Skinny GEMMs with an unaligned N or K (decode against a 50257-word vocabulary): the direct
  # kernel the staging model picks for them, beside staging forced.
  for st in auto always; do
    step "bench gemm skinny unaligned (--staging $st)" 60 "$build/tessel" bench gemm --repeats 10 --warmup 3 \
      --dtype f16,bf16 --staging "$st" --shapes 1x50257x4096,16x50257x4096,64x50257x4096,1x4096x4097,16x4097x4096 \
      --json "$out/$day-gemm-skinny-unaligned-$st-$tag.json"
  done
  # The direct kernel on 16-row tiles (the default gives unaligned rows 128-row tiles at any M),
  # with this build's realigned chunks and with build-gpu/mid's element loads.
  for cfg in 16x32x128:8:128 16x64x64:4:128 128x128x32:3:128; do
    for bin in "$build/tessel" "$build/mid/tessel"; do
      [[ -x $bin ]] || continue
      which=new commit=$TESSEL_GIT_COMMIT
      [[ $bin == "$build/tessel" ]] || { which=mid; commit=$(cat "$build/mid/git-commit.txt" 2>/dev/null || echo unknown); }
      step "bench gemm skinny unaligned direct $cfg ($which)" 60 env TESSEL_GIT_COMMIT="$commit" "$bin" bench gemm \
        --repeats 10 --warmup 3 --dtype f16,bf16 --config "$cfg" \
        --shapes 1x50257x4096,16x50257x4096,1x4096x4097,16x4097x4096 \
        --json "$out/$day-gemm-skinny-unaligned-${cfg//:/-}-$which-$tag.json"
    done
  done
elif [[ $steps == s35 ]]; then
  # Session 35: realigned rings (plan_pipelines: raw aligned words by cp.async, the shift at each
  # iteration's top) on the direct kernels of skinny GEMMs whose rows start off 16 bytes. Their
  # gpu tests (every element against float64, bit-identical to the realigned chunks), then the
  # decode-like shapes on small-tile direct configs with the rings and without
  # (TESSEL_DISABLE=realigned_rings), beside the staged plan -- each its own process with cuBLAS.
  step "gpu tests (unaligned direct, chains, staging)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='MatmulUnalignedDirect.*:*AccumulatorChains*:MatmulStagingCopyGpu.*:*MatmulShapes*17x33x65*'
  # TESSEL_S35_CONFIGS / TESSEL_S35_DTYPES narrow the run for a short call.
  skinny=1x50257x4096,16x50257x4096,64x50257x4096,1x4096x4097,16x4097x4096,1x15x4095
  dtypes=${TESSEL_S35_DTYPES:-f16,bf16}
  step "bench gemm skinny unaligned (staged)" 60 "$build/tessel" bench gemm --repeats 10 --warmup 3 \
    --dtype "$dtypes" --staging always --shapes "$skinny" --json "$out/$day-gemm-skinny-unaligned-always-$tag.json"
  for cfg in ${TESSEL_S35_CONFIGS:-16x32x128:4:128 16x32x128:8:128 16x64x64:4:128 32x64x64:4:128}; do
    for e in rings chunks; do
      step "bench gemm skinny unaligned direct $cfg ($e)" 60 env TESSEL_DISABLE="$([[ $e == chunks ]] && echo realigned_rings)" \
        "$build/tessel" bench gemm --repeats 10 --warmup 3 --dtype "$dtypes" --config "$cfg" --shapes "$skinny" \
        --json "$out/$day-gemm-skinny-unaligned-${cfg//:/-}-$e-$tag.json"
    done
  done
elif [[ $steps == s37 ]]; then
  # Session 37: skinny 16-bit shapes with an unaligned row run direct on realigned rings by default
  # (default_matmul_config's small tiles, plan_matmul's ring model). The library's Matmul on them
  # (and the unaligned direct kernels) against float64 / cuBLAS, then the defaults beside the staged
  # plan, each its own process with cuBLAS, twice.
  step "gpu tests (Matmul unaligned, direct rings)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='MatmulUnalignedDirect.*:*MatmulStagingShapes*:MatmulStagingCopyGpu.*'
  skinny=1x50257x4096,16x50257x4096,64x50257x4096,1x4096x4097,16x4097x4096,1x4095x4095,64x4097x4096,1x15x4095
  for run in 1 2; do
    for staging in auto always; do
      step "bench gemm skinny unaligned --staging $staging (run $run)" 60 "$build/tessel" bench gemm --repeats 10 \
        --warmup 3 --dtype f16,bf16 --staging "$staging" --shapes "$skinny" \
        --json "$out/$day-gemm-skinny-unaligned-$staging-run$run-$tag.json"
    done
  done
elif [[ $steps == s37b ]]; then
  # Session 37: split-K on the exact shape of a skinny GEMM whose rows are unaligned (the partial
  # GEMM's 16/32/64x256 tiles on realigned rings, then the reduction; forced, the model does not
  # split unaligned rows yet) beside the direct default and the staged plan. First the split-K
  # gpu tests, whose forced ragged cases now split the exact shape where Matmul runs it direct.
  step "gpu tests (split-K shapes)" 200 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*MatmulSplitKShapes*'
  skinny=1x4095x4095,7x4095x4095,1x4096x4097,16x4097x4096,1x15x4095,64x4097x4096
  step "bench gemm skinny unaligned (default)" 60 "$build/tessel" bench gemm --repeats 10 --warmup 3 \
    --dtype bf16 --shapes "$skinny" --json "$out/$day-gemm-skinny-unaligned-auto-$tag.json"
  for split in 2 4 8; do
    step "bench gemm skinny unaligned --staging never --split-k $split" 60 "$build/tessel" bench gemm --repeats 10 \
      --warmup 3 --dtype bf16 --staging never --split-k "$split" --shapes "$skinny" \
      --json "$out/$day-gemm-skinny-unaligned-never-split$split-$tag.json"
  done
elif [[ $steps == h200a ]]; then
  # Session 37, a call of under four minutes: issue 15's bar alone -- the attention defaults
  # beside cuDNN and issue 5's GEMM shapes beside cuBLAS, in one run.
  step "bench attention (default, f16 and bf16)" 110 "$build/tessel" bench attention --dtype f16,bf16 --repeats 10 \
    --json "$out/$day-attention-default-$tag.json"
  step "bench gemm 5" 90 "$build/tessel" bench gemm --repeats 20 --warmup 5 --dtype f16,bf16 \
    --shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024 \
    --json "$out/$day-gemm-issue5-$tag.json"
elif [[ $steps == s37c ]]; then
  # Session 37, a short call: the automatic splits on realigned rings (1x4095x4095 and 7x4095x4095
  # split 8, 1x4096x4097 split 5, 16x4097x4096 split 7 -- the last unmeasured) against float64 and
  # timed beside cuBLAS, with the direct kernel (--split-k 1) in its own process.
  step "gpu tests (automatic splits on rings, skinny unaligned defaults)" 120 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='*MatmulSplitKShapes*splitauto*:*MatmulStagingShapes*auto*'
  skinny=1x4095x4095,7x4095x4095,1x4096x4097,16x4097x4096,1x50257x4096,16x50257x4096
  for split in auto 1; do
    step "bench gemm skinny unaligned --split-k $split" 60 "$build/tessel" bench gemm --repeats 10 --warmup 3 \
      --dtype f16,bf16 --split-k "$split" --shapes "$skinny" --json "$out/$day-gemm-skinny-unaligned-split-$split-$tag.json"
  done
elif [[ $steps == s30u ]]; then
  # Session 30: JitOptions::uniform_roles again, now that WarpgroupGemm builds its descriptors once
  # a call (session 29): the broadcast warpgroup index costs one shuffle a call, not one a wgmma.
  # SASS: the D = 128 attention loop 542 -> 517 instructions, the 4096^3 GEMM's 75 -> 66, D = 64's
  # 450 -> 462. Each process with its baseline (cuDNN, cuBLAS); then the switch's gpu tests.
  issue5=2048x2048x2048,4096x4096x4096,8192x8192x8192,8192x28672x8192,16384x4096x1024,128x8192x8192,1024x1024x1024
  for e in none uniform_roles; do
    step "bench attention bf16 (TESSEL_ENABLE=$e)" 70 env TESSEL_ENABLE="${e/none/}" "$build/tessel" bench attention \
      --dtype bf16 --repeats 10 --json "$out/$day-attention-default-$e-$tag.json"
    step "bench gemm 5 bf16 (TESSEL_ENABLE=$e)" 50 env TESSEL_ENABLE="${e/none/}" "$build/tessel" \
      bench gemm --repeats 20 --warmup 5 --shapes "$issue5" --dtype bf16 --json "$out/$day-gemm-issue5-$e-$tag.json"
  done
  step "gpu tests (uniform roles)" 60 "$build/tessel_tests_gpu" --gtest_brief=1 \
    --gtest_filter='FlashAttentionGpuSmall.SwitchesGiveTheSameResults:FastExp2Gpu.*:PolyExp2Gpu.*'
elif [[ $steps == ncu ]]; then
  if command -v ncu >/dev/null; then
    for shape in 10000x50257 4096x65536 32768x8193 65536x8191; do
      step "ncu softmax $shape" 40 ncu --clock-control none -k regex:softmax_kernel -c 1 --section SpeedOfLight \
        --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
        --section SchedulerStats --section ComputeWorkloadAnalysis "$build/tessel" bench softmax --repeats 1 \
        --warmup 0 --shapes "$shape"
    done
  else
    echo "gpu-s21.sh: no ncu on this machine; the ncu steps are left out" | tee -a "$log"
  fi
elif [[ $steps == tune ]]; then
  for s in 4194304x127 4194304x129 524288x1023 65536x8191 32768x8193 10000x50257; do
    step "tune softmax $s f16" 60 "$build/tessel" tune softmax --m "${s%x*}" --n "${s#*x}" --dtype f16 --repeats 10 \
      --json "$out/$day-tune-softmax-$s-f16-$tag.json"
  done
  step "bench softmax 17 (tuned)" 90 "$build/tessel" bench softmax --repeats 10 \
    --shapes 4194304x127,4194304x129,524288x1023,65536x8191,32768x8193,10000x50257 \
    --json "$out/$day-softmax-issue17-tuned-$tag.json"
else
  echo "gpu-s21.sh: unknown step set '$steps' in TESSEL_S21_STEPS (legal: first, h200, s24, s25, s26, s27, s28, s28b, s29, s29b, s29d, s29e, s29f, s29h, s30, s30u, s31, s31b, s31c, s32, s33, s34, s35, s37, s37b, s37c, h200a, lmhead, splitk, uniform, bench, softmax, ncu, tests, tune)" | tee -a "$log"
  status=1
fi
done
grep "^### " "$log"
# One archive beside OUTDIR (OUTDIR.tgz) in place of its files: the device tool returns at most
# eight files a call (session 30 lost its softmax JSON and this log that way).
(cd "$(dirname "$out")" && tar czf "$(basename "$out").tgz" "$(basename "$out")" && rm -rf "$out") ||
  echo "gpu-s21.sh: could not archive $out; its files are left as they are"
exit $status
