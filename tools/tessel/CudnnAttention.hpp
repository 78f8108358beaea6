// cuDNN's fused attention forward pass (SDPA, its flash-attention engines) as the baseline of
// `tessel bench attention`, driven through the cuDNN frontend's graph API.
//
// The frontend is header-only and is compiled into this one file (it is heavy: every other file
// stays free of it). libcudnn.so.9 is loaded at run time (the frontend's dynamic-loading mode),
// never linked, so tessel starts where cuDNN is absent and says why the baseline is missing. When
// the frontend headers were not found at build time (scripts/setup.sh fetches them), the class
// still exists and reports "not built" — the build never fails for want of them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tessel/runtime/Tensor.hpp"

namespace tessel::cli {

class CudnnAttention {
 public:
  // Loads cuDNN and creates a handle; available() is false, with reason(), when the frontend was
  // not built in, there is no GPU, or libcudnn.so.9 (or the CUDA runtime the frontend calls)
  // cannot be loaded.
  CudnnAttention();
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether this binary has the baseline at all (the frontend headers were found at build time).
  static bool built();
  // The frontend's version compiled in ("1.32.0"), or "not built".
  static std::string frontend_version();

  bool available() const { return impl_ != nullptr; }
  const std::string& reason() const { return reason_; }
  std::string version() const;  // the loaded libcudnn's, "9.14.0"; "unavailable"

  // O, stats = attention(q, k, v) on the legacy default stream, asynchronously.
  //   q [B, Sq, H, D], k and v [B, Sk, H_kv, D] (H_kv divides H), f16 or bf16, any strides in the
  //   B, S and H dimensions and a contiguous D; o [B, Sq, H, D] in the inputs' dtype, any such
  //   strides; stats f32, [B, H, Sq] or [B, H, Sq, 1]: the natural-log log-sum-exp of each row's
  //   scaled scores. Causal: query i sees keys j <= i + Sk - Sq (bottom-right aligned, Tessel's
  //   rule); rows that see no key (Sq > Sk) get O = 0 and stats = -inf, written here since cuDNN
  //   only takes bottom-right masks with Sq <= Sk. scale: of Q K^T; 0 means 1/sqrt(D).
  // The graph is built on the first call for each shape, strides, dtype, causal and scale, and
  // kept with its workspace. Throws RuntimeError when cuDNN refuses the problem or fails.
  void run(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o, const Tensor& stats,
           bool causal, float scale = 0.0f);

  // Graphs built so far (for tests of the cache).
  std::size_t cached_graphs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string reason_;
};

}  // namespace tessel::cli
