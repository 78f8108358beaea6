#!/usr/bin/env bash
# Builds the sm_90a wgmma/TMA GEMM probe (tools/probes/wgmma_probe.cu) into ${CARRY_DIR:-.carry-hopper2}/
# (git-ignored; carried to the GPU machine). Extra arguments go to nvcc (e.g. -DTESSEL_...).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${CARRY_DIR:-.carry-hopper2}
mkdir -p "$dir"
out=${OUT_NAME:-wgmma_probe}
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I device -Xptxas -v \
  tools/probes/wgmma_probe.cu -lcublas -lcuda -o "$dir/$out" "$@" 2>"$dir/$out.ptxas.txt"
grep -E "spill|Used|warning" "$dir/$out.ptxas.txt" | sort | uniq -c || true
