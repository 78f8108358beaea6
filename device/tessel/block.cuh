// Block-level scheduling helpers: block-index rasterization and the block barrier.
#pragma once

#include "smem.cuh"

namespace tessel {

// v as lane 0 of the calling warp holds it: the same value in every lane, and one ptxas knows to
// be warp-uniform (it may then keep what is computed from it in uniform registers). Every lane
// of the warp must call it. Warp-specialized kernels test their roles with it
// (JitOptions::uniform_roles).
__device__ __forceinline__ int warp_uniform(int v) {
  return __shfl_sync(0xffffffffu, v, 0);
}

// Remaps the launch-order block index (bx, by) of a grid_x x grid_y grid to the tile
// (out_x, out_y) it computes, so that blocks running at the same time share operand tiles
// in L2. The grid's columns are cut into panels of `panel` columns (the last one may be
// narrower); blocks are handed out panel by panel, row-major inside a panel. In a GEMM,
// x indexes N tiles and y indexes M tiles, so a wave of blocks reads a few B column panels
// and a tall strip of A instead of all of B.
// A bijection on the grid for every panel >= 1 and every grid size; panel <= 0 is the
// identity. constexpr so that tests can check the bijection at compile time.
__host__ __device__ constexpr void rasterize(int panel, int bx, int by, int grid_x, int grid_y, int& out_x,
                                             int& out_y) {
  if (panel <= 0 || panel >= grid_x) {
    out_x = bx;
    out_y = by;
    return;
  }
  const int linear = by * grid_x + bx;
  const int panel_blocks = panel * grid_y;
  const int first_col = (linear / panel_blocks) * panel;
  const int in_panel = linear % panel_blocks;
  const int width = grid_x - first_col < panel ? grid_x - first_col : panel;
  out_x = first_col + in_panel % width;
  out_y = in_panel / width;
}

// Tile t of a grid_x x grid_y grid in launch order (x fastest), as rasterize(panel) remaps it:
// its x and its y. A persistent kernel's loop over tiles (persist_tiles) visits them so.
__host__ __device__ constexpr int raster_x(int panel, int t, int grid_x, int grid_y) {
  int x = 0, y = 0;
  rasterize(panel, t % grid_x, t / grid_x, grid_x, grid_y, x, y);
  return x;
}
__host__ __device__ constexpr int raster_y(int panel, int t, int grid_x, int grid_y) {
  int x = 0, y = 0;
  rasterize(panel, t % grid_x, t / grid_x, grid_x, grid_y, x, y);
  return y;
}

// __syncthreads under the name generated code uses.
__device__ inline void barrier() {
  block_sync();
}

// Hopper's programmatic dependent launch (the JIT's JitOptions::programmatic_launch): a kernel
// launched with the programmatic-stream-serialization attribute may start while the previous
// grid on its stream still runs. grid_dependency_wait() returns once that grid has completed and
// its memory operations are visible (at once when there is none in flight); launch_dependents()
// lets the next such grid start once every CTA of this one has called it or exited. No-ops
// before sm_90.
__device__ inline void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ inline void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace tessel
