#!/usr/bin/env bash
# Builds the sm_90a wgmma/TMA GEMM probe (tools/probes/wgmma_probe.cu) into .carry-hopper/
# (git-ignored; carried to the GPU machine). Extra arguments go to nvcc (e.g. -DTESSEL_...).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .carry-hopper
out=${OUT_NAME:-wgmma_probe}
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I device -Xptxas -v \
  tools/probes/wgmma_probe.cu -lcublas -lcuda -o ".carry-hopper/$out" "$@" 2>".carry-hopper/$out.ptxas.txt"
grep -E "spill|Used|warning" ".carry-hopper/$out.ptxas.txt" | sort | uniq -c || true
