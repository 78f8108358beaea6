// cuDNN's softmax as a baseline, loaded at run time (dlopen of libcudnn.so.9) so that tessel
// runs where cuDNN is absent and says so plainly.
#pragma once

#include <memory>
#include <string>

#include "tessel/runtime/Tensor.hpp"

namespace tessel::cli {

class CudnnSoftmax {
 public:
  // Loads cuDNN and creates a handle; available() is false (with reason()) when it cannot.
  CudnnSoftmax();
  ~CudnnSoftmax();
  CudnnSoftmax(const CudnnSoftmax&) = delete;
  CudnnSoftmax& operator=(const CudnnSoftmax&) = delete;

  bool available() const { return impl_ != nullptr; }
  const std::string& reason() const { return reason_; }
  std::string version() const;

  // y = softmax(x) over the last dimension of a 2-D tensor (CUDNN_SOFTMAX_ACCURATE, channel
  // mode on an [M, N, 1, 1] descriptor).
  void run(const Tensor& x, const Tensor& y);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string reason_;
};

}  // namespace tessel::cli
