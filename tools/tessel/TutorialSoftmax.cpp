// Tutorial section 4: the fused softmax — one read and one write of each element, written in
// Tessel, checked against float64 and timed next to cuDNN's softmax and a device copy of the same
// bytes (the bandwidth ceiling). Without a GPU it compiles the kernels and shows what they use;
// with --cpu it runs them on the reference interpreter.
#include <cmath>
#include <iostream>
#include <random>

#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/CudnnSoftmax.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Timing.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

double softmax_error(const std::vector<double>& x, const std::vector<double>& y, long long M, long long N) {
  double num = 0, den = 0;
  for (long long r = 0; r < M; ++r) {
    double m = -INFINITY, s = 0;
    for (long long c = 0; c < N; ++c) m = std::max(m, x[r * N + c]);
    for (long long c = 0; c < N; ++c) s += std::exp(x[r * N + c] - m);
    for (long long c = 0; c < N; ++c) {
      double ref = std::exp(x[r * N + c] - m) / s, got = y[r * N + c];
      if (std::isnan(got)) return NAN;
      num += (got - ref) * (got - ref);
      den += ref * ref;
    }
  }
  return std::sqrt(num / den);
}

void show_program() {
  std::cout << "  the kernel (kernels/softmax/Softmax.cpp), one block per group of rows:\n"
               "    copy_padded(X(bx * R, 0), x, -inf);      // 16-byte loads, -inf past the row's end\n"
               "    reduce_max(x, row_max, 1);                // registers, then warp shuffles\n"
               "    Parallel(R, BN, x(i, j) = fast_exp2(x(i, j) * log2(e) - row_max(i) * log2(e)));\n"
               "    reduce_sum(x, row_sum, 1);\n"
               "    Parallel(R, row_sum(i) = 1 / row_sum(i));\n"
               "    Parallel(R, BN, x(i, j) = x(i, j) * row_sum(i));\n"
               "    copy(x, Y(bx * R, 0));                    // 16-byte stores\n"
               "  rows too long for the registers (64 K f16) keep each row as loaded, the last vectors of\n"
               "  each thread's share in shared memory: alloc_fragment({1, BN}, f16, FragmentStorage{14}).\n"
               "  fast_exp2 is one MUFU.EX2 (results below 2^-126 of the row's largest entry are 0); the\n"
               "  shared-tail form keeps exp2 where its rows are aligned.\n";
}

}  // namespace

void section_softmax(TutorialContext& ctx, bool cpu) {
  print_banner("4. Fused softmax");
  show_program();
  nlohmann::json j = {{"implemented", true}};
  const SystemInfo& s = system_info();
  if (cpu) {
    // Small shapes on the interpreter, every variant, against float64.
    nlohmann::json cases = nlohmann::json::array();
    for (auto [M, N] : {std::pair<long long, long long>{64, 1000}, {8, 4097}, {2, 40000}, {2, 65536}, {2, 130000}}) {
      auto c = kernels::default_softmax_config(M, N, DType::f16);
      auto x = interp::HostTensor::random(DType::f16, {M, N}, 7, -6, 6);
      auto y = interp::run_on_cpu(kernels::softmax_program(M, N, DType::f16, c), {x}, {-1});
      double err = softmax_error(x.to_values(), y[0].to_values(), M, N);
      bool ok = !std::isnan(err) && err <= 1e-2;
      std::cout << "  interpreter " << M << "x" << N << " f16, " << c.describe()
                << ": relative error vs float64 " << scientific(err) << (ok ? " OK" : "  NUMERICALLY WRONG")
                << "\n";
      if (!ok) ++ctx.problems;
      cases.push_back({{"M", M}, {"N", N}, {"config", c.describe()}, {"rel_error", err}, {"ok", ok}});
    }
    j["cpu_cases"] = cases;
    ctx.sections["4"] = j;
    return;
  }
  const long long N = 4096, M = (256LL << 20) / (N * 2);  // 256 MiB of f16
  auto c = kernels::default_softmax_config(M, N, DType::f16);
  JitKernel k = kernels::make_softmax(M, N, DType::f16, c);
  std::cout << "  config:  " << M << "x" << N << " f16, " << c.describe()
            << "\n  kernel:  " << describe_build(k) << "\n";
  j["config"] = c.describe();
  if (!s.gpu) {
    std::cout << "  timing needs a GPU (" << s.no_gpu_reason
              << "); `tessel tutorial --section 4 --cpu` runs the "
              << "kernel on the interpreter\n";
    ctx.sections["4"] = j;
    return;
  }
  Tensor x = Tensor::empty({M, N}, DType::f16), y = Tensor::empty({M, N}, DType::f16),
         y_cudnn = Tensor::empty({M, N}, DType::f16), y_copy = Tensor::empty({M, N}, DType::f16);
  x.fill_random(11, -6, 6);
  y.fill(std::nan(""));
  k.launch({x, y});
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  Tensor xs = x.slice(0, 0, 16), ys = y.slice(0, 0, 16);
  double err = softmax_error(xs.to_host_f64(), ys.to_host_f64(), 16, N);
  bool ok = !std::isnan(err) && err <= 1e-2;
  std::cout << "  check:   relative error vs float64 (16 rows) " << scientific(err)
            << (ok ? ": OK" : ": NUMERICALLY WRONG") << "\n";
  if (!ok) ++ctx.problems;
  CudnnSoftmax cudnn;
  auto time_ms = [&](const std::function<void()>& run) { return median_ms(run, ctx.warmup, ctx.repeats); };
  const double bytes = 2.0 * static_cast<double>(x.nbytes());
  double ours = time_ms([&] { k.launch({x, y}); });
  double copy = time_ms([&] {
    check_cu(driver().cuMemcpyDtoDAsync(y_copy.device_ptr(), x.device_ptr(), x.nbytes(), nullptr),
             "cuMemcpyDtoDAsync");
  });
  auto gbs = [&](double ms) { return bytes / (ms * 1e-3) / 1e9; };
  std::cout << "  Tessel:  " << fixed(ours, 3) << " ms -> " << fixed(gbs(ours), 0) << " GB/s ("
            << fixed(100 * copy / ours, 1) << " % of the copy)\n";
  std::cout << "  copy:    " << fixed(copy, 3) << " ms -> " << fixed(gbs(copy), 0)
            << " GB/s (cuMemcpyDtoD, the ceiling)\n";
  j.update({{"tessel_ms", ours},
            {"copy_ms", copy},
            {"tessel_gbs", gbs(ours)},
            {"copy_gbs", gbs(copy)},
            {"rel_error", err}});
  if (cudnn.available()) {
    double theirs = time_ms([&] { cudnn.run(x, y_cudnn); });
    std::cout << "  cuDNN:   " << fixed(theirs, 3) << " ms -> " << fixed(gbs(theirs), 0)
              << " GB/s (cudnnSoftmaxForward " << cudnn.version() << "); Tessel is "
              << fixed(theirs / ours, 2) << "x\n";
    j.update({{"cudnn_ms", theirs}, {"cudnn_gbs", gbs(theirs)}});
  } else {
    std::cout << "  cuDNN:   unavailable (" << cudnn.reason() << ")\n";
  }
  ctx.sections["4"] = j;
}

}  // namespace tessel::cli
