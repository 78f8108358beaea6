// The cuBLAS and cuBLASLt entry points the CLI calls, for a CLI built without the benchmarks'
// baselines (TESSEL_BENCH_BASELINES=OFF): nothing is linked, every call fails with
// CUBLAS_STATUS_NOT_SUPPORTED, and the status text says why. The declarations come from the
// toolkit's headers, so a signature that drifts is a compile error here; a cuBLAS function the
// CLI starts to call is a link error of that configuration until it is added below.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstdio>

namespace {

constexpr const char* kWhy =
    "this tessel was built without the benchmarks' cuBLAS baselines (TESSEL_BENCH_BASELINES=OFF); "
    "reconfigure with -DTESSEL_BENCH_BASELINES=ON to compare against cuBLAS";

cublasStatus_t unavailable() {
  static const bool said = [] {
    std::fprintf(stderr, "tessel: %s\n", kWhy);
    return true;
  }();
  (void)said;
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

}  // namespace

extern "C" {

const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED" : "CUBLAS_STATUS_UNKNOWN";
}
const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t) {
  return kWhy;
}
cublasStatus_t CUBLASWINAPI cublasGetProperty(libraryPropertyType, int*) {
  return CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t*) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t, cudaStream_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasSetPointerMode_v2(cublasHandle_t, cublasPointerMode_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasSasum_v2(cublasHandle_t, int, const float*, int, float*) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                         const void*, const void*, cudaDataType, int, const void*,
                                         cudaDataType, int, const void*, void*, cudaDataType, int,
                                         cublasComputeType_t, cublasGemmAlgo_t) {
  return unavailable();
}

cublasStatus_t CUBLASWINAPI cublasLtCreate(cublasLtHandle_t*) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtDestroy(cublasLtHandle_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*, const void*,
                                           cublasLtMatrixLayout_t, const void*, cublasLtMatrixLayout_t,
                                           const void*, const void*, cublasLtMatrixLayout_t, void*,
                                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t*, void*, size_t,
                                           cudaStream_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                                           cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                           cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                                           cublasLtMatmulPreference_t, int,
                                                           cublasLtMatmulHeuristicResult_t[], int*) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescCreate(cublasLtMatmulDesc_t*, cublasComputeType_t,
                                                     cudaDataType_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t,
                                                           cublasLtMatmulDescAttributes_t, const void*,
                                                           size_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t*) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                                                 cublasLtMatmulPreferenceAttributes_t,
                                                                 const void*, size_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t*, cudaDataType, uint64_t,
                                                       uint64_t, int64_t) {
  return unavailable();
}
cublasStatus_t CUBLASWINAPI cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t) {
  return unavailable();
}

}  // extern "C"
