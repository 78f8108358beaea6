// Everything the Tessel compiler's generated CUDA may call on the mma.sync (sm_80+) path.
#pragma once

#include "block.cuh"
#include "copy.cuh"
#include "cp_async.cuh"
#include "epilogue.cuh"
#include "gemm.cuh"
#include "layout.cuh"
#include "mainloop.cuh"
#include "mma.cuh"
#include "reduce.cuh"
#include "smem.cuh"
#include "split_regs.cuh"
#include "types.cuh"
