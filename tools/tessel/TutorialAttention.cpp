// Tutorial section 5: FlashAttention's forward pass — O = softmax(scale Q K^T) V without ever
// writing S to memory — written in Tessel (kernels/attention/GemmChain.cpp), checked against a
// float64 softmax attention and timed next to the same program on mma.sync. Without a GPU it
// compiles the kernel and shows what it uses; with --cpu it runs it on the reference interpreter.
// `tessel bench attention` times it against unfused cuBLAS + cuDNN softmax + cuBLAS.
#include <cmath>
#include <iostream>

#include "tessel/interp/Interpreter.hpp"
#include "tessel/kernels/attention/GemmChain.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/AttentionCheck.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Timing.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

void show_program() {
  std::cout
      << "  the kernel (kernels/attention/GemmChain.cpp), one block per block_M query rows:\n"
         "    copy(Q(bx * BM, 0), Q_shared); clear(O); fill(m, -inf); clear(l);\n"
         "    Pipelined(ceildiv(N, BN), 2, j):\n"
         "      copy(K(j * BN, 0), K_shared); copy(V(j * BN, 0), V_shared);\n"
         "      clear(S); gemm(Q_shared, K_shared, S, transpose_B);      // S = Q K^T\n"
         "      Parallel(BM, BN, S(r, c) = key < N ? S(r, c) * scale : -inf);\n"
         "      copy(m, m_prev); reduce_max(S, m, 1, clear=false);        // rows in registers\n"
         "      Parallel(BM, rescale(r) = exp(m_prev(r) - m(r)));\n"
         "      Parallel(BM, BN, S(r, c) = exp(S(r, c) - m(r)));  reduce_sum(S, row_sum, 1);\n"
         "      Parallel(BM, l(r) = l(r) * rescale(r) + row_sum(r));\n"
         "      Parallel(BM, D, O(r, d) = O(r, d) * rescale(r));\n"
         "      copy(S, P); gemm(P, V_shared, O);                         // P from registers\n"
         "    Parallel(BM, D, O(r, d) = O(r, d) / l(r)); copy(O, Out(bx * BM, 0));\n";
}

}  // namespace

void section_attention(TutorialContext& ctx, bool cpu) {
  print_banner("5. FlashAttention");
  show_program();
  nlohmann::json j = {{"implemented", true}};
  const float scale = 0.125f;  // 1 / sqrt(64)
  const kernels::GemmChainConfig c{64, 128, 128, 2};
  if (cpu) {
    const long long M = 48, N = 200, D = 64;
    auto q = interp::HostTensor::random(DType::f16, {M, D}, 5), k = interp::HostTensor::random(DType::f16, {N, D}, 6),
         v = interp::HostTensor::random(DType::f16, {N, D}, 7);
    auto o = interp::run_on_cpu(kernels::attention_program(M, N, D, DType::f16, scale, c), {q, k, v}, {-1});
    const double err = attention_error(q.to_values(), k.to_values(), v.to_values(), o[0].to_values(),
                                       spread_rows(M, M), N, D, scale, DType::f16, /*softmax=*/true);
    const bool ok = std::isfinite(err) && err <= 5e-3;
    std::cout << "  interpreter " << M << "x" << N << "x" << D << " f16, " << c.describe()
              << ": relative error vs float64 " << scientific(err) << (ok ? " OK" : "  NUMERICALLY WRONG") << "\n";
    if (!ok) ++ctx.problems;
    j["cpu_case"] = {{"M", M}, {"N", N}, {"D", D}, {"rel_error", err}, {"ok", ok}};
    ctx.sections["5"] = j;
    return;
  }
  const long long M = 16384, N = 16384, D = 64;
  JitKernel kern = kernels::make_attention(M, N, D, DType::f16, scale, c);
  std::cout << "  config:  " << M << "x" << N << "x" << D << " f16 (queries x keys x head dim), " << c.describe()
            << "\n  kernel:  " << describe_build(kern) << "\n  path:    " << kern.info().path << "\n";
  j["config"] = c.describe();
  j["path"] = kern.info().path;
  const SystemInfo& s = system_info();
  if (!s.gpu) {
    std::cout << "  emitted: " << describe_instructions(kern) << "\n  timing needs a GPU (" << s.no_gpu_reason
              << "); `tessel tutorial --section 5 --cpu` runs the kernel on the interpreter\n";
    ctx.sections["5"] = j;
    return;
  }
  JitOptions off;
  off.disable_wgmma = true;
  JitKernel sync = kernels::make_attention(M, N, D, DType::f16, scale, c, off);
  Tensor q = Tensor::empty({M, D}, DType::f16), k = Tensor::empty({N, D}, DType::f16),
         v = Tensor::empty({N, D}, DType::f16), o = Tensor::empty({M, D}, DType::f32),
         o2 = Tensor::empty({M, D}, DType::f32);
  q.fill_random(21);
  k.fill_random(22);
  v.fill_random(23);
  o.fill(std::nan(""));
  kern.launch({q, k, v, o});
  check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
  const double err = attention_error(q.to_host_f64(), k.to_host_f64(), v.to_host_f64(), o.to_host_f64(),
                                     spread_rows(M, 8), N, D, scale, DType::f16, /*softmax=*/true);
  const bool ok = std::isfinite(err) && err <= 5e-3;
  std::cout << "  check:   relative error vs float64 (8 rows spread over O) " << scientific(err)
            << (ok ? ": OK" : ": NUMERICALLY WRONG") << "\n";
  if (!ok) ++ctx.problems;
  auto time_ms = [&](const std::function<void()>& run) { return median_ms(run, ctx.warmup, ctx.repeats); };
  const double flops = 4.0 * double(M) * double(N) * double(D);
  const double ours = time_ms([&] { kern.launch({q, k, v, o}); });
  const double theirs = time_ms([&] { sync.launch({q, k, v, o2}); });
  auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
  std::cout << "  Tessel:  " << fixed(ours, 3) << " ms -> " << fixed(tflops(ours), 1) << " TFLOP/s\n"
            << "  mma.sync form of the same program: " << fixed(theirs, 3) << " ms -> " << fixed(tflops(theirs), 1)
            << " TFLOP/s (Tessel is " << fixed(theirs / ours, 2) << "x)\n"
            << "  emitted: " << describe_instructions(kern)
            << "\n  against unfused cuBLAS + cuDNN softmax + cuBLAS: `tessel bench attention`\n";
  j.update({{"tessel_ms", ours},
            {"mma_sync_ms", theirs},
            {"tessel_tflops", tflops(ours)},
            {"mma_sync_tflops", tflops(theirs)},
            {"rel_error", err}});
  ctx.sections["5"] = j;
}

}  // namespace tessel::cli
