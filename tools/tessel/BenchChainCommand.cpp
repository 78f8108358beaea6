// tessel bench chain: attention's two GEMMs without the softmax, O = f16(scale * Q K^T) V
// (kernels/attention/GemmChain), three ways in one process on the same inputs: Tessel's kernel
// as compiled for the GPU (on sm_90a both gemms wgmma, the second with A from registers), the
// same program with disable_wgmma (mma.sync), and cuBLAS as two GEMMs with S in memory (the
// unfused baseline). FLOPs: 4 M N D. (Multi-head attention with its softmax is `tessel bench
// attention`, BenchAttentionCommand.cpp.)
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>

#include "tessel/kernels/attention/GemmChain.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/AttentionCheck.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Timing.hpp"

namespace tessel::cli {

namespace {

struct BenchChainOptions {
  std::vector<std::string> shapes = {"4096x4096x64", "4096x4096x128", "16384x16384x64"};
  std::vector<std::string> dtypes = {"f16"};
  std::vector<std::string> configs;  // BMxBN:tT[:sS]; empty: 64x128 t128 for D <= 64, else 128x64 t256
  int repeats = 20;
  int warmup = 3;
  std::uint64_t seed = 1;
  std::string json_file;
};

struct Shape {
  long long M, N, D;
};

Shape parse_shape(const std::string& s) {
  const std::vector<long long> v = cli::parse_shape(s, 3, "--shapes", "MxNxD", "4096x4096x64");
  return {v[0], v[1], v[2]};
}

// BMxBN:tTHREADS[:sSTAGES], every number strict (Parse.hpp).
kernels::GemmChainConfig parse_config(const std::string& s) {
  const auto bad = [&] {
    return std::invalid_argument(
        "--config: '" + s + "' is not BMxBN:tTHREADS[:sSTAGES] with positive integers, e.g. 64x64:t128:s2");
  };
  std::vector<std::string> fields;
  for (std::size_t begin = 0;;) {
    const std::size_t end = s.find(':', begin);
    fields.push_back(s.substr(begin, end == std::string::npos ? end : end - begin));
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  if (fields.size() < 2 || fields.size() > 3 || fields[1].rfind('t', 0) != 0 ||
      (fields.size() == 3 && fields[2].rfind('s', 0) != 0))
    throw bad();
  const auto positive = [&](const std::string& text) {
    const auto v = parse_integer(text);
    if (!v || *v < 1 || *v > INT_MAX) throw bad();
    return static_cast<int>(*v);
  };
  const std::size_t x = fields[0].find('x');
  if (x == std::string::npos) throw bad();
  kernels::GemmChainConfig c;
  c.block_M = positive(fields[0].substr(0, x));
  c.block_N = positive(fields[0].substr(x + 1));
  c.threads = positive(fields[1].substr(1));
  if (fields.size() == 3) c.num_stages = positive(fields[2].substr(1));
  return c;
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + " failed with cuBLAS status " + std::to_string(int(status)));
}

int run_bench_chain(const BenchChainOptions& o) {
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<kernels::GemmChainConfig> configs;
  try {
    for (const std::string& d : o.dtypes) {
      auto t = parse_dtype(d);
      if (!t || (*t != DType::f16 && *t != DType::bf16))
        throw std::invalid_argument("--dtype takes f16 and bf16, not '" + d + "'");
      dtypes.push_back(*t);
    }
    for (const std::string& s : o.shapes) shapes.push_back(parse_shape(s));
    for (const std::string& c : o.configs) configs.push_back(parse_config(c));
  } catch (const std::exception& e) {
    std::cerr << "tessel bench chain: " << e.what() << "\n";
    return kExitUsage;
  }
  const SystemInfo& sys = system_info();
  if (!sys.gpu) {
    std::cerr << "tessel bench chain needs a GPU, and there is none: " << sys.no_gpu_reason << "\n";
    return kExitNoGpu;
  }
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  std::unique_ptr<cublasContext, void (*)(cublasHandle_t)> guard(handle,
                                                                 [](cublasHandle_t h) { cublasDestroy(h); });
  Tensor flush = Tensor::empty({256LL << 20}, DType::u8);
  unsigned char flush_value = 0;
  std::cout << "O = f16(scale Q K^T) V: Tessel (as compiled for " << sys.device.arch()
            << ") vs the same program on mma.sync vs cuBLAS (two GEMMs, S in memory), " << sys.device.name
            << "; medians of " << o.repeats << " interleaved runs, L2 flushed; TFLOP/s = 4 M N D / time\n";
  std::cout << "  " << left("shape MxNxD", 18) << left("dtype", 6) << left("config", 14) << left("path", 40)
            << right("Tessel", 8) << right("mma.sync", 9) << right("cuBLAS", 8) << right("vs mma", 8)
            << right("vs cuBLAS", 10) << right("rel.err", 9) << "\n";
  nlohmann::json results = nlohmann::json::array();
  int problems = 0;
  const float scale = 0.125f;
  auto make = [&](Shape s, DType t, const kernels::GemmChainConfig& c, const JitOptions& jo) {
    return kernels::make_gemm_chain(s.M, s.N, s.D, t, scale, c, jo);
  };
  for (DType t : dtypes)
    for (Shape s : shapes) {
      std::vector<kernels::GemmChainConfig> cs = configs;
      // The best of those tried on the H200 (bench/results/2026-12-03-chain-s7-runG-*-h200.json).
      if (cs.empty())
        cs.push_back(s.D <= 64 ? kernels::GemmChainConfig{64, 128, 128, 2}
                               : kernels::GemmChainConfig{128, 64, 256, 2});
      for (const kernels::GemmChainConfig& c : cs) {
        const std::string shape_text =
            std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.D);
        nlohmann::json r = {{"M", s.M},
                            {"N", s.N},
                            {"D", s.D},
                            {"dtype", std::string(dtype_name(t))},
                            {"config", c.describe()}};
        try {
          JitKernel ours = make(s, t, c, JitOptions{});
          JitOptions off;
          off.disable_wgmma = true;
          JitKernel sync = make(s, t, c, off);
          Tensor q = Tensor::empty({s.M, s.D}, t), k = Tensor::empty({s.N, s.D}, t),
                 v = Tensor::empty({s.N, s.D}, t);
          q.fill_random(o.seed);
          k.fill_random(o.seed + 1);
          v.fill_random(o.seed + 2);
          Tensor o1 = Tensor::empty({s.M, s.D}, DType::f32), o2 = Tensor::empty({s.M, s.D}, DType::f32),
                 o3 = Tensor::empty({s.M, s.D}, DType::f32), sc = Tensor::empty({s.M, s.N}, t);
          for (Tensor* x : {&o1, &o2, &o3}) x->fill(std::nan(""));
          const cudaDataType ct = t == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
          auto cublas_chain = [&] {
            const float alpha = scale, one = 1, zero = 0;
            // Row-major S[M, N] = scale Q K^T is column-major S^T = K Q^T; O = S V likewise.
            check_cublas(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(s.N), int(s.M), int(s.D), &alpha,
                                      k.data_ptr(), ct, int(s.D), q.data_ptr(), ct, int(s.D), &zero,
                                      sc.data_ptr(), ct, int(s.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                         "cublasGemmEx (S)");
            check_cublas(
                cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(s.D), int(s.M), int(s.N), &one,
                             v.data_ptr(), ct, int(s.D), sc.data_ptr(), ct, int(s.N), &zero, o3.data_ptr(),
                             CUDA_R_32F, int(s.D), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx (O)");
          };
          std::vector<std::function<void()>> runs = {[&] {
                                                       ours.launch({q, k, v, o1});
                                                     },
                                                     [&] {
                                                       sync.launch({q, k, v, o2});
                                                     },
                                                     cublas_chain};
          for (auto& run : runs) run();
          check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
          const std::vector<double> qh = q.to_host_f64(), kh = k.to_host_f64(), vh = v.to_host_f64();
          const std::vector<long long> rows = spread_rows(s.M, 16);
          const double err = attention_error(qh, kh, vh, o1.to_host_f64(), rows, s.N, s.D, scale, t, false);
          const double err_sync =
              attention_error(qh, kh, vh, o2.to_host_f64(), rows, s.N, s.D, scale, t, false);
          const double tol = t == DType::f16 ? 2e-3 : 1e-2;
          const bool ok = std::isfinite(err) && err <= tol && std::isfinite(err_sync) && err_sync <= tol;
          const std::vector<double> ms = interleaved_median_ms(runs, o.warmup, o.repeats, [&] {
            check_cu(driver().cuMemsetD8Async(flush.device_ptr(), ++flush_value, flush.nbytes(), nullptr),
                     "cuMemsetD8Async (L2 flush)");
          });
          const double flops = 4.0 * double(s.M) * double(s.N) * double(s.D);
          const double t_ours = ms[0], t_sync = ms[1], t_cublas = ms[2];
          auto tflops = [&](double msec) { return flops / (msec * 1e-3) / 1e12; };
          std::cout << "  " << left(shape_text, 18) << left(std::string(dtype_name(t)), 6)
                    << left(c.describe(), 14) << left(ours.info().path, 40)
                    << right(fixed(tflops(t_ours), 1), 8) << right(fixed(tflops(t_sync), 1), 9)
                    << right(fixed(tflops(t_cublas), 1), 8) << right(fixed(t_sync / t_ours, 2) + "x", 8)
                    << right(fixed(t_cublas / t_ours, 2) + "x", 10) << right(scientific(err), 9)
                    << (ok ? "" : "  NUMERICALLY WRONG") << "\n";
          r.update(
              {{"status", ok ? "ok" : "wrong"},
               {"path", ours.info().path},
               {"tessel_ms", t_ours},
               {"mma_sync_ms", t_sync},
               {"cublas_two_gemms_ms", t_cublas},
               {"tessel_tflops", tflops(t_ours)},
               {"mma_sync_tflops", tflops(t_sync)},
               {"cublas_tflops", tflops(t_cublas)},
               {"speedup_vs_mma_sync", t_sync / t_ours},
               {"speedup_vs_cublas", t_cublas / t_ours},
               {"rel_error_sampled_rows", std::isfinite(err) ? nlohmann::json(err) : nlohmann::json(nullptr)},
               {"rel_error_sampled_rows_mma_sync",
                std::isfinite(err_sync) ? nlohmann::json(err_sync) : nlohmann::json(nullptr)},
               {"registers", ours.resources().registers},
               {"registers_mma_sync", sync.resources().registers}});
          if (!ok) ++problems;
        } catch (const std::exception& e) {
          std::cout << "  " << left(shape_text, 18) << "failed: " << error_kind(e) << " ("
                    << error_summary(e, 120) << ")\n";
          r["status"] = "failed";
          r["error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
          ++problems;
        }
        results.push_back(r);
        std::cout.flush();
      }
    }
  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = "tessel bench chain";
    j["method"] = {
        {"kernel", "kernels::make_gemm_chain: O = f16(0.125 Q K^T) V, O in f32"},
        {"baselines",
         {"the same program with JitOptions::disable_wgmma (mma.sync)",
          "cuBLAS: cublasGemmEx S = 0.125 Q K^T into a 16-bit S in memory, then O = S V (f32 out)"}},
        {"timing", "CUDA events, legacy default stream, rotating order rep by rep, 256 MiB L2 flush"},
        {"warmup", o.warmup},
        {"repeats", o.repeats},
        {"statistic", "median"},
        {"check", "16 rows spread over O against float64 with P rounded to 16 bits"}};
    j["cases"] = results;
    j["problems"] = problems;
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return problems ? kExitCheckFailed : kExitOk;
}

}  // namespace

Command add_bench_chain_command(CLI::App& bench) {
  auto o = std::make_shared<BenchChainOptions>();
  CLI::App* app =
      bench.add_subcommand("chain",
                           "Attention's two GEMMs without the softmax, O = f16(scale Q K^T) V: Tessel "
                           "(wgmma with A from registers on sm_90a) vs its mma.sync path vs cuBLAS as two "
                           "GEMMs: TFLOP/s (needs a GPU)");
  app->add_option("--shapes", o->shapes, "Shapes MxNxD (queries x keys x head dim), comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(shape(3, "MxNxD", "4096x4096x64"));
  app->add_option("--dtype", o->dtypes, "Element types, comma-separated (f16, bf16)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option(
         "--config", o->configs,
         "Tiles to run instead of the default (64x128:t128 for D <= 64, else 128x64:t256), comma-separated: "
         "BMxBN:tTHREADS[:sSTAGES]")
      ->delimiter(',')
      ->type_name("CONFIG");
  add_timing_options(*app, o->repeats, o->warmup, o->seed, o->json_file);
  return {app, [o] { return run_bench_chain(*o); }};
}

}  // namespace tessel::cli
