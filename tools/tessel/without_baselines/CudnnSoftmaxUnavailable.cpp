// CudnnSoftmax for a CLI built without the benchmarks' baselines (TESSEL_BENCH_BASELINES=OFF):
// never available, with the reason; nothing of cuDNN is included or loaded.
#include "tessel/Error.hpp"
#include "tools/tessel/CudnnSoftmax.hpp"

namespace tessel::cli {

struct CudnnSoftmax::Impl {};

CudnnSoftmax::CudnnSoftmax()
    : reason_(
          "cuDNN softmax baseline not built: this tessel was built without the benchmarks' baselines "
          "(TESSEL_BENCH_BASELINES=OFF)") {}

CudnnSoftmax::~CudnnSoftmax() = default;

std::string CudnnSoftmax::version() const {
  return "unavailable";
}

void CudnnSoftmax::run(const Tensor&, const Tensor&) {
  throw RuntimeError("cuDNN softmax unavailable: " + reason_);
}

}  // namespace tessel::cli
