#!/usr/bin/env bash
# Builds the standalone GEMM probe (tools/probes/gemm_probe.cu) into build-probe/.
# Run from anywhere; the binary needs an sm_90a GPU and libcublas at run time.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build-probe
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I device tools/probes/gemm_probe.cu \
  -lcublas -o build-probe/gemm_probe "$@"
