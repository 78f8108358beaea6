#!/usr/bin/env bash
# Builds tools/probes/softmax_harness_probe.cu for sm_90a into ${CARRY_DIR:-.carry}/: dumps the
# kernel Tessel generates for 16384x16384 f16 (rows:t512:r1) with build/tessel, then compiles it
# inside the probe's harness.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${CARRY_DIR:-.carry}
mkdir -p "$dir"
build/tessel dump softmax --m 16384 --n 16384 --dtype f16 --config rows:t512:r1:bn16384 --arch sm_90a --source \
  >"$dir/softmax_16384_t512.cu"
sed -e 's/tessel::load_row_vector_whole/alt::load_row_vector_whole/; s/softmax_kernel(/softmax_kernel_v1(/' \
  "$dir/softmax_16384_t512.cu" | grep -v "#include" >"$dir/softmax_16384_t512_v1.cu"
sed -e 's/tessel::store_row_vector_whole/alt::store_row_vector_whole/; s/softmax_kernel(/softmax_kernel_v2(/' \
  "$dir/softmax_16384_t512.cu" | grep -v "#include" >"$dir/softmax_16384_t512_v2.cu"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Idevice -Xptxas -v \
  -DTESSEL_KERNEL_FILE="\"$(pwd)/$dir/softmax_16384_t512.cu\"" \
  -DTESSEL_KERNEL_V1="\"$(pwd)/$dir/softmax_16384_t512_v1.cu\"" -DTESSEL_KERNEL_V2="\"$(pwd)/$dir/softmax_16384_t512_v2.cu\"" -diag-suppress 177 \
  tools/probes/softmax_harness_probe.cu -o "$dir/softmax_harness_probe" 2>"$dir/softmax_harness_probe.ptxas.txt"
grep -E "spill|Used" "$dir/softmax_harness_probe.ptxas.txt" | sort | uniq -c || true
