// Tutorial section 5: FlashAttention's forward pass -- O = softmax(scale Q K^T) V without ever
// writing S to memory -- written in Tessel (kernels/attention/FlashAttention.cpp) for batched
// multi-head attention, causal and not, checked against float64 on sampled rows and timed next to
// cuDNN's fused attention in the same process. Without a GPU it compiles the kernels and shows
// what they use; with --cpu it runs a small grouped-query causal case on the reference
// interpreter. `tessel bench attention` runs the full list of cases.
#include <cmath>
#include <iostream>

#include "tessel/kernels/attention/AttentionReference.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/CudnnAttention.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Timing.hpp"
#include "tools/tessel/Tutorial.hpp"

namespace tessel::cli {

namespace {

void show_program() {
  std::cout
      << "  the kernel (kernels/attention/FlashAttention.cpp): one block per 128 queries of one (batch, "
         "head)\n"
         "    Kernel(ceildiv(Sq, BM), H, B) (bx, h, b):        // causal: query blocks longest first\n"
         "      copy(region(Q, {b, q0, h, 0}, {1, BM, 1, D}), Q_shared); clear(O); fill(m, -inf); "
         "clear(l)\n"
         "      Pipelined(blocks, 2, j):                     // causal: blocks past the diagonal skipped\n"
         "        copy(region(K, {b, j*BN, h / (H/H_kv), 0}, {1, BN, 1, D}), K_shared)   // GQA: K/V head\n"
         "        copy(region(V, ...), V_shared)\n"
         "        clear(S); gemm(Q_shared, K_shared, S, transpose_B)                    // S = Q K^T\n"
         "        If(masked block) Parallel: S = visible ? S : -inf                     // tail, diagonal\n"
         "        m = max(m, rowmax(S)); c = scale log2(e)   // raw scores (cp.async schedule: S c first)\n"
         "        P = fast_exp2(S c - m c); l = l * fast_exp2((m_old - m) c) + rowsum(P)  // one FFMA + EX2\n"
         "        O = O * fast_exp2((m_old - m) c); gemm(P, V_shared, O)                 // P from registers\n"
         "      O = O * (l > 0 ? 1 / l : 0); LSE = l > 0 ? (m c + log2 l) ln 2 : -inf; copy out\n";
}

kernels::AttentionShape shape_of(std::int64_t B, std::int64_t H, std::int64_t Hkv, std::int64_t Sq,
                                 std::int64_t Sk, std::int64_t D) {
  kernels::AttentionShape s;
  s.batch = B, s.heads = H, s.kv_heads = Hkv, s.seqlen_q = Sq, s.seqlen_k = Sk, s.dim = D;
  return s;
}

// Rows of o ([B, Sq, H, D]) and lse ([B, H, Sq]) at the samples, as the reference lays them out.
kernels::AttentionRows rows_of(const std::vector<double>& o, const std::vector<double>& lse,
                               const kernels::AttentionShape& s,
                               const std::vector<kernels::AttentionSample>& samples) {
  kernels::AttentionRows r;
  for (const auto& x : samples) {
    for (std::int64_t d = 0; d < s.dim; ++d)
      r.O.push_back(o[static_cast<size_t>(((x.batch * s.seqlen_q + x.row) * s.heads + x.head) * s.dim + d)]);
    r.LSE.push_back(lse[static_cast<size_t>((x.batch * s.heads + x.head) * s.seqlen_q + x.row)]);
  }
  return r;
}

void run_on_interpreter(TutorialContext& ctx, nlohmann::json& j) {
  const kernels::AttentionShape s = shape_of(2, 4, 2, 70, 150, 64);
  const DType t = DType::f16;
  auto q = interp::HostTensor::random(t, {s.batch, s.seqlen_q, s.heads, s.dim}, 5, -2, 2);
  auto k = interp::HostTensor::random(t, {s.batch, s.seqlen_k, s.kv_heads, s.dim}, 6, -2, 2);
  auto v = interp::HostTensor::random(t, {s.batch, s.seqlen_k, s.kv_heads, s.dim}, 7);
  const kernels::AttentionConfig c{64, 64, 128, 2};
  auto out =
      interp::run_on_cpu(kernels::attention_program(s, t, /*causal=*/true, 0.0f, c), {q, k, v}, {3, 4});
  const auto samples = kernels::choose_attention_samples(s, 8, 6);
  const auto ref =
      kernels::attention_reference(q.to_values(), k.to_values(), v.to_values(), s, true, 0.0, samples);
  const auto err = kernels::attention_error(ref, rows_of(out[0].to_values(), out[1].to_values(), s, samples));
  const bool ok = err.O <= 5e-3 && err.LSE <= 1e-4;
  std::cout << "  interpreter " << s.describe() << " causal f16, " << c.describe() << ": O error "
            << scientific(err.O) << ", LSE error " << scientific(err.LSE) << " vs float64"
            << (ok ? " OK" : "  NUMERICALLY WRONG") << "\n";
  if (!ok) ++ctx.problems;
  j["cpu_case"] = {{"shape", s.describe()}, {"O_error", err.O}, {"LSE_error", err.LSE}, {"ok", ok}};
}

}  // namespace

void section_attention(TutorialContext& ctx, bool cpu) {
  print_banner("5. FlashAttention");
  show_program();
  nlohmann::json j = {{"implemented", true}};
  if (cpu) {
    run_on_interpreter(ctx, j);
    ctx.sections["5"] = j;
    return;
  }
  const SystemInfo& sys = system_info();
  // A training shape: 2 x 16 heads of 4096 queries and keys, D = 128, causal and not.
  const kernels::AttentionShape s = shape_of(2, 16, 16, 4096, 4096, 128);
  const DType t = DType::bf16;
  std::unique_ptr<CudnnAttention> cudnn = sys.gpu ? std::make_unique<CudnnAttention>() : nullptr;
  for (bool causal : {false, true}) {
    kernels::AttentionOptions o;
    o.causal = causal;
    JitKernel kern = kernels::make_flash_attention(s, t, o);
    const std::string name = s.describe() + (causal ? " causal" : "") + " bf16";
    std::cout << "  " << name << ": " << describe_build(kern) << "\n    path: " << kern.info().path << "\n";
    nlohmann::json c = {
        {"case", name}, {"path", kern.info().path}, {"registers", kern.resources().registers}};
    if (!sys.gpu) {
      std::cout << "    emitted: " << describe_instructions(kern) << "\n";
      j[causal ? "causal" : "non_causal"] = c;
      continue;
    }
    Tensor q = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, t),
           k = Tensor::empty({s.batch, s.seqlen_k, s.kv_heads, s.dim}, t),
           v = Tensor::empty({s.batch, s.seqlen_k, s.kv_heads, s.dim}, t);
    q.fill_random(21, -2, 2);
    k.fill_random(22, -2, 2);
    v.fill_random(23);
    Tensor out = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, t),
           lse = Tensor::empty({s.batch, s.heads, s.seqlen_q}, DType::f32);
    out.fill(std::nan(""));
    lse.fill(std::nan(""));
    kern.launch({q, k, v, out, lse});
    check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
    const auto samples = kernels::choose_attention_samples(s, 8, 4);
    const auto ref = kernels::attention_reference(q.to_host_f64(), k.to_host_f64(), v.to_host_f64(), s,
                                                  causal, 0.0, samples);
    const auto err = kernels::attention_error(ref, rows_of(out.to_host_f64(), lse.to_host_f64(), s, samples));
    const bool ok = err.O <= 2e-2 && err.LSE <= 1e-4;
    if (!ok) ++ctx.problems;
    const double visible =
        causal ? double(s.seqlen_q) * (double(s.seqlen_q) + 1) / 2 : double(s.seqlen_q) * double(s.seqlen_k);
    const double flops = 4.0 * double(s.batch * s.heads) * visible * double(s.dim);
    auto tflops = [&](double ms) { return flops / (ms * 1e-3) / 1e12; };
    const double ours = median_ms([&] { kern.launch({q, k, v, out, lse}); }, ctx.warmup, ctx.repeats);
    std::cout << "    check: O error " << scientific(err.O) << ", LSE error " << scientific(err.LSE)
              << " vs float64 on " << samples.size() << " rows" << (ok ? ": OK" : ": NUMERICALLY WRONG")
              << "\n"
              << "    Tessel: " << fixed(ours, 3) << " ms -> " << fixed(tflops(ours), 1) << " TFLOP/s\n";
    c.update(
        {{"O_error", err.O}, {"LSE_error", err.LSE}, {"tessel_ms", ours}, {"tessel_tflops", tflops(ours)}});
    if (cudnn && cudnn->available()) {
      Tensor out2 = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, t),
             lse2 = Tensor::empty({s.batch, s.heads, s.seqlen_q}, DType::f32);
      const double theirs =
          median_ms([&] { cudnn->run(q, k, v, out2, lse2, causal); }, ctx.warmup, ctx.repeats);
      std::cout << "    cuDNN " << cudnn->version() << " fused attention: " << fixed(theirs, 3) << " ms -> "
                << fixed(tflops(theirs), 1) << " TFLOP/s (Tessel is " << fixed(theirs / ours, 2) << "x)\n";
      c.update(
          {{"cudnn_ms", theirs}, {"cudnn_tflops", tflops(theirs)}, {"tessel_over_cudnn", theirs / ours}});
    } else if (cudnn) {
      std::cout << "    cuDNN baseline unavailable: " << cudnn->reason() << "\n";
      c["cudnn"] = cudnn->reason();
    }
    j[causal ? "causal" : "non_causal"] = c;
  }
  if (!sys.gpu)
    std::cout << "  timing needs a GPU (" << sys.no_gpu_reason
              << "); `tessel tutorial --section 5 --cpu` runs a small case on the interpreter\n";
  std::cout << "  every case of the issue against cuDNN: `tessel bench attention`\n";
  ctx.sections["5"] = j;
}

}  // namespace tessel::cli
