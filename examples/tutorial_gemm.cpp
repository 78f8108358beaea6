// The README's tutorial GEMM, built by a project of its own: examples/find_package links an
// installed Tessel, examples/add_subdirectory builds Tessel from its source tree.
//
// With a GPU it compiles the kernel for that GPU, runs C = A * B at 1024 x 1024 x 1024 and checks
// sampled entries of C against float64. Without one (CI) it says so, compiles the kernel for
// sm_90a all the same (NVRTC needs no GPU), shows what it compiled to, and runs the same program
// on the CPU reference interpreter at 256 x 256 x 256, checked against float64. Exit status 0 when
// the result is right.
#include <tessel/interp/HostTensor.hpp>
#include <tessel/runtime/Driver.hpp>
#include <tessel/tessel.hpp>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

namespace T = tessel;

// The README's "Twenty lines of Tessel", unchanged.
T::JitKernel make_matmul(int M, int N, int K, int block_M = 128, int block_N = 128, int block_K = 32,
                         int num_stages = 3, int threads = 128, bool use_swizzle = false,
                         T::DType dtype = T::f16, T::DType accum_dtype = T::f32) {
  T::PrimFunc f("matmul");
  auto A = f.tensor("A", {M, K}, dtype);
  auto B = f.tensor("B", {K, N}, dtype);
  auto C = f.tensor("C", {M, N}, dtype);
  f.body([&] {
    T::Kernel(T::ceildiv(N, block_N), T::ceildiv(M, block_M), threads, [&](T::Var bx, T::Var by) {
      auto A_shared = T::alloc_shared({block_M, block_K}, dtype);
      auto B_shared = T::alloc_shared({block_K, block_N}, dtype);
      auto C_local = T::alloc_fragment({block_M, block_N}, accum_dtype);
      if (use_swizzle) T::use_swizzle(10);
      T::clear(C_local);
      T::Pipelined(T::ceildiv(K, block_K), num_stages, [&](T::Var ko) {
        T::copy(A(by * block_M, ko * block_K), A_shared);
        T::copy(B(ko * block_K, bx * block_N), B_shared);
        T::gemm(A_shared, B_shared, C_local);
      });
      T::copy(C_local, C(by * block_M, bx * block_N));
    });
  });
  return T::jit(f, {.out_idx = {-1}});
}

namespace {

// Relative error of `got` against A * B in float64, over every entry (step 1) or a sample.
double relative_error(const std::vector<double>& a, const std::vector<double>& b,
                      const std::vector<double>& got, int M, int N, int K, int step) {
  double diff = 0, norm = 0;
  for (std::int64_t idx = 0; idx < std::int64_t(M) * N; idx += step) {
    const std::int64_t i = idx / N, j = idx % N;
    double want = 0;
    for (int k = 0; k < K; ++k) want += a[i * K + k] * b[std::int64_t(k) * N + j];
    diff += (got[idx] - want) * (got[idx] - want);
    norm += want * want;
  }
  return std::sqrt(diff / norm);
}

bool report(const char* where, double error) {
  const bool ok = std::isfinite(error) && error < 1e-2;
  std::cout << where << ": relative error " << error << " against float64: " << (ok ? "OK" : "WRONG") << "\n";
  return ok;
}

}  // namespace

int main() {
  try {
    std::cout << "Tessel " << T::version << "\n";
    if (T::gpu_available()) {
      const int M = 1024, N = 1024, K = 1024;
      T::JitKernel kernel = make_matmul(M, N, K);
      std::cout << "compiled for " << kernel.resources().arch << ": " << kernel.info().path << ", "
                << kernel.resources().registers << " registers\n";
      auto a = T::Tensor::empty({M, K}, T::f16), b = T::Tensor::empty({K, N}, T::f16);
      a.fill_random(1);
      b.fill_random(2);
      T::Tensor c = kernel(a, b);
      return report("GPU", relative_error(a.to_host_f64(), b.to_host_f64(), c.to_host_f64(), M, N, K, 997))
                 ? 0
                 : 1;
    }

    std::cout << "no GPU present (" << T::gpu_unavailable_reason() << ")\n"
              << "compiling for sm_90a with NVRTC and running on the CPU reference interpreter instead\n";
    const int M = 256, N = 256, K = 256;
    T::JitKernel kernel = make_matmul(M, N, K);
    const std::string& source = kernel.source();
    std::cout << "compiled for " << kernel.resources().arch << ": " << kernel.info().path << ", "
              << kernel.resources().registers << " registers, " << source.size()
              << " bytes of CUDA C++ beginning\n  " << source.substr(0, source.find('\n')) << "\n";
    const auto a = T::interp::HostTensor::random(T::f16, {M, K}, 1);
    const auto b = T::interp::HostTensor::random(T::f16, {K, N}, 2);
    const std::vector<T::interp::HostTensor> c = kernel.run_on_cpu({a, b});
    return report("CPU interpreter",
                  relative_error(a.to_values(), b.to_values(), c.at(0).to_values(), M, N, K, 1))
               ? 0
               : 1;
  } catch (const std::exception& e) {
    std::cerr << "tutorial_gemm: " << e.what() << "\n";
    return 1;
  }
}
