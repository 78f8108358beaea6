#!/usr/bin/env bash
# Builds the cluster softmax probe (tools/probes/softmax_cluster_probe.cu) for sm_90a into
# ${CARRY_DIR:-.carry}/ (git-ignored; carried to the GPU machine). Extra arguments go to nvcc.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${CARRY_DIR:-.carry}
mkdir -p "$dir"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v \
  tools/probes/softmax_cluster_probe.cu -o "$dir/softmax_cluster_probe" "$@" 2>"$dir/softmax_cluster_probe.ptxas.txt"
grep -E "spill|Used" "$dir/softmax_cluster_probe.ptxas.txt" | sort | uniq -c || true
