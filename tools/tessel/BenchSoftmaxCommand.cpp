// tessel bench softmax: Tessel's softmax beside cuDNN's and a device-to-device copy of the same
// bytes, interleaved in one process on the same inputs; GB/s count one read and one write.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>

#include "tessel/kernels/softmax/Softmax.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/CudnnSoftmax.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Timing.hpp"

namespace tessel::cli {

namespace {

struct BenchSoftmaxOptions {
  std::vector<std::string> shapes;  // MxN; default: 512 MiB inputs at the widths
  std::vector<std::string> dtypes = {"f16"};
  long long input_mib = 512;
  int repeats = 20;
  int warmup = 3;
  std::uint64_t seed = 1;
  std::vector<std::string> configs;  // empty: the dispatcher's config for each shape
  std::string json_file;
};

std::pair<long long, long long> parse_softmax_shape(const std::string& s) {
  const std::vector<long long> mn = parse_shape(s, 2, "--shapes", "MxN", "65536x4096");
  return {mn[0], mn[1]};
}

// Float64 softmax of one row (PyTorch semantics) and its error against `got`.
void reference_row(const std::vector<double>& x, std::vector<double>& y) {
  double m = -INFINITY;
  for (double v : x) m = std::max(m, v);
  double s = 0;
  for (double v : x) s += std::exp(v - m);
  y.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = std::exp(x[i] - m) / s;
}

double sampled_error(const Tensor& x, const Tensor& y, long long M, long long N) {
  // Rows spread over the tensor: first, last and evenly between (the whole tensor is too big
  // to bring back for every case).
  const long long samples = std::min<long long>(M, 64);
  double num = 0, den = 0;
  for (long long k = 0; k < samples; ++k) {
    long long r = samples == 1 ? 0 : k * (M - 1) / (samples - 1);
    Tensor xr = x.slice(0, r, r + 1), yr = y.slice(0, r, r + 1);
    std::vector<double> xv = xr.to_host_f64(), yv = yr.to_host_f64(), ref;
    reference_row(xv, ref);
    for (long long c = 0; c < N; ++c) {
      if (std::isnan(yv[c])) return NAN;
      num += (yv[c] - ref[c]) * (yv[c] - ref[c]);
      den += ref[c] * ref[c];
    }
  }
  return std::sqrt(num / den);
}

int run_bench_softmax(const BenchSoftmaxOptions& o) {
  std::vector<std::pair<long long, long long>> shapes;
  std::vector<DType> dtypes;
  try {
    for (const std::string& d : o.dtypes) {
      auto t = parse_dtype(d);
      if (!t || (*t != DType::f16 && *t != DType::bf16 && *t != DType::f32))
        throw std::invalid_argument("--dtype takes f16, bf16 and f32, not '" + d + "'");
      dtypes.push_back(*t);
    }
    for (const std::string& s : o.shapes) shapes.push_back(parse_softmax_shape(s));
    for (const std::string& c : o.configs) (void)kernels::parse_softmax_config(c);
  } catch (const std::exception& e) {
    std::cerr << "tessel bench softmax: " << e.what() << "\n";
    return kExitUsage;
  }
  const SystemInfo& s = system_info();
  if (!s.gpu) {
    std::cerr << "tessel bench softmax needs a GPU, and there is none: " << s.no_gpu_reason << "\n";
    return kExitNoGpu;
  }
  CudnnSoftmax cudnn;
  std::cout << "Tessel softmax vs cuDNN ("
            << (cudnn.available() ? "cudnnSoftmaxForward " + cudnn.version()
                                  : "unavailable: " + cudnn.reason())
            << ") vs a device copy of the same bytes, " << s.device.name << "; medians of " << o.repeats
            << " interleaved runs; GB/s = (bytes read + bytes written) / time\n";
  std::cout << "  " << left("shape", 18) << left("dtype", 6) << left("config", 30) << right("Tessel GB/s", 12)
            << right("cuDNN GB/s", 11) << right("copy GB/s", 10) << right("of copy", 9)
            << right("vs cuDNN", 9) << right("rel.err", 9) << "\n";
  nlohmann::json results = nlohmann::json::array();
  int problems = 0;
  for (DType t : dtypes) {
    std::vector<std::pair<long long, long long>> cases = shapes;
    if (cases.empty())
      for (long long N : {256LL, 1000LL, 1024LL, 4096LL, 5000LL, 16384LL, 65536LL})
        cases.push_back({(o.input_mib << 20) / (N * dtype_bytes(t)), N});
    for (auto [M, N] : cases) {
      // Without --config: what make_softmax(M, N, dtype) compiles, the tuning cache's entry, else
      // the dispatcher's.
      std::vector<std::pair<kernels::SoftmaxConfig, std::string>> configs;
      if (o.configs.empty()) {
        const kernels::SoftmaxChoice choice = kernels::choose_softmax_config(M, N, t);
        configs.push_back({choice.config, choice.tuned ? "tuned" : "default"});
      }
      for (const std::string& text : o.configs)
        configs.push_back({kernels::parse_softmax_config(text), "given"});
      for (const auto& [config, source] : configs) {
        const std::string config_text = config.describe() + " " + source;
        nlohmann::json r = {{"M", M},
                            {"N", N},
                            {"dtype", std::string(dtype_name(t))},
                            {"config", config.describe()},
                            {"config_source", source == "tuned" ? "tuning cache" : source}};
        try {
          JitKernel k = kernels::make_softmax(M, N, t, config);
          Tensor x = Tensor::empty({M, N}, t), y = Tensor::empty({M, N}, t), y2 = Tensor::empty({M, N}, t),
                 y3 = Tensor::empty({M, N}, t);
          x.fill_random(o.seed + N, -6, 6);
          y.fill(std::nan(""));
          k.launch({x, y});
          check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize");
          double err = sampled_error(x, y, M, N);
          bool ok = !std::isnan(err) && err <= (t == DType::f32 ? 1e-3 : 1e-2);
          const double bytes = 2.0 * static_cast<double>(x.nbytes());
          std::vector<std::function<void()>> runs = {
              [&] {
                k.launch({x, y});
              },
              [&] {
                check_cu(driver().cuMemcpyDtoDAsync(y3.device_ptr(), x.device_ptr(), x.nbytes(), nullptr),
                         "cuMemcpyDtoDAsync");
              }};
          if (cudnn.available()) runs.push_back([&] { cudnn.run(x, y2); });
          const std::vector<double> ms = interleaved_median_ms(runs, o.warmup, o.repeats);
          double ours = ms[0], copy = ms[1], theirs = cudnn.available() ? ms[2] : NAN;
          double gbs = bytes / (ours * 1e-3) / 1e9, copy_gbs = bytes / (copy * 1e-3) / 1e9,
                 cudnn_gbs = bytes / (theirs * 1e-3) / 1e9;
          std::cout << "  " << left(std::to_string(M) + "x" + std::to_string(N), 18)
                    << left(std::string(dtype_name(t)), 6) << left(config_text, 30)
                    << right(fixed(gbs, 0), 12) << right(cudnn.available() ? fixed(cudnn_gbs, 0) : "-", 11)
                    << right(fixed(copy_gbs, 0), 10) << right(fixed(100 * gbs / copy_gbs, 1) + "%", 9)
                    << right(cudnn.available() ? fixed(theirs / ours, 2) + "x" : "-", 9)
                    << right(scientific(err), 9) << (ok ? "" : "  NUMERICALLY WRONG") << "\n";
          r.update(
              {{"status", ok ? "ok" : "wrong"},
               {"tessel_ms", ours},
               {"copy_ms", copy},
               {"tessel_gbs", gbs},
               {"copy_gbs", copy_gbs},
               {"fraction_of_copy", gbs / copy_gbs},
               {"rel_error_sampled_rows", std::isnan(err) ? nlohmann::json(nullptr) : nlohmann::json(err)},
               {"registers", k.resources().registers}});
          if (cudnn.available())
            r.update({{"cudnn_ms", theirs}, {"cudnn_gbs", cudnn_gbs}, {"speedup_vs_cudnn", theirs / ours}});
          if (!ok) ++problems;
        } catch (const std::exception& e) {
          std::cout << "  " << left(std::to_string(M) + "x" + std::to_string(N), 18)
                    << "failed: " << error_kind(e) << " (" << error_summary(e, 120) << ")\n";
          r["status"] = "failed";
          r["error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
          ++problems;
        }
        results.push_back(r);
        std::cout.flush();
      }
    }
  }
  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = "tessel bench softmax";
    j["method"] = {{"baselines",
                    {"cudnnSoftmaxForward (ACCURATE, CHANNEL mode on [M, N, 1, 1])",
                     "cuMemcpyDtoDAsync of the same bytes"}},
                   {"timing", "CUDA events, legacy default stream, rotating order rep by rep"},
                   {"warmup", o.warmup},
                   {"repeats", o.repeats},
                   {"statistic", "median"},
                   {"bytes", "one read and one write of the tensor"},
                   {"check", "64 rows spread over the tensor against float64"},
                   {"cudnn", cudnn.available() ? cudnn.version() : "unavailable: " + cudnn.reason()}};
    j["cases"] = results;
    j["problems"] = problems;
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return problems ? kExitCheckFailed : kExitOk;
}

}  // namespace

Command add_bench_softmax_command(CLI::App& bench) {
  auto o = std::make_shared<BenchSoftmaxOptions>();
  CLI::App* app = bench.add_subcommand(
      "softmax", "Tessel's softmax against cuDNN and a device copy of the same bytes: GB/s (needs a GPU)");
  app->add_option(
         "--shapes", o->shapes,
         "Shapes MxN, comma-separated (default: --input-mib inputs at N = 256, 1000, 1024, 4096, 5000, "
         "16384, 65536)")
      ->delimiter(',')
      ->check(shape(2, "MxN", "65536x4096"));
  app->add_option("--input-mib", o->input_mib, "Input size of the default shapes, MiB")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 20));
  app->add_option("--dtype", o->dtypes, "Element types, comma-separated (f16, bf16, f32)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--config", o->configs,
                  "Softmax configs to run on every shape instead of the dispatcher's, comma-separated: "
                  "VARIANT:tTHREADS[:rROWS][:bnBLOCK_N][:sVECTORS][:w], e.g. rows:t512:r1:bn16384")
      ->delimiter(',')
      ->type_name("CONFIG");
  add_timing_options(*app, o->repeats, o->warmup, o->seed, o->json_file);
  return {app, [o] { return run_bench_softmax(*o); }};
}

}  // namespace tessel::cli
