// tessel bench attention: multi-head attention's forward pass, O, LSE = attention(Q, K, V)
// (kernels/attention/FlashAttention.hpp), Tessel against cuDNN's fused SDPA (CudnnAttention) on
// the same inputs in one process: multi-head, grouped-query and decode-like shapes, causal or
// not, f16 and bf16. Each side's O and LSE are checked against float64 on sampled rows and
// against each other; both are timed interleaved with CUDA events, the L2 flushed before every
// timed run. FLOPs: 4 B H Sq Sk D, halved when causal with Sq = Sk; for causal with Sq != Sk the
// visible (query, key) pairs are counted exactly.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "tessel/kernels/attention/AttentionReference.hpp"
#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tools/tessel/AttentionConfigs.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/CudnnAttention.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/System.hpp"
#include "tools/tessel/Timing.hpp"

namespace tessel::cli {

namespace {

constexpr const char* kCaseForm = "BxHxHKVxSQxSKxD[:causal]";

struct BenchAttentionOptions {
  // One case from the single-case flags (used when any of them is given).
  std::int64_t batch = 1, heads = 16, kv_heads = 0, seqlen_q = 1024, seqlen_k = 0, dim = 128;
  bool causal = false;
  std::vector<std::string> cases;
  std::vector<std::string> dtypes = {"f16", "bf16"};
  std::string config;
  std::string layout = "bshd";
  int repeats = 20;
  int warmup = 3;
  std::uint64_t seed = 1;
  std::string json_file;
  std::vector<CLI::Option*> single_case_flags;  // to tell whether one was given
};

struct AttentionCase {
  kernels::AttentionShape shape;  // strides left empty: the layout option sets them per run
  bool causal = false;
};

std::string case_text(const AttentionCase& c) {
  const auto& s = c.shape;
  std::ostringstream os;
  os << s.batch << "x" << s.heads << "x" << s.kv_heads << "x" << s.seqlen_q << "x" << s.seqlen_k << "x"
     << s.dim << (c.causal ? ":causal" : "");
  return os.str();
}

AttentionCase make_case(std::int64_t B, std::int64_t H, std::int64_t Hkv, std::int64_t Sq, std::int64_t Sk,
                        std::int64_t D, bool causal, const std::string& flag, const std::string& text) {
  if (B < 1 || H < 1 || Hkv < 1 || Sq < 1 || Sk < 1 || D < 1)
    throw std::invalid_argument(flag + ": '" + text + "' needs positive sizes (" + kCaseForm + ")");
  if (H % Hkv != 0)
    throw std::invalid_argument(flag + ": '" + text + "': " + std::to_string(Hkv) +
                                " K/V heads do not divide " + std::to_string(H) + " heads");
  AttentionCase c;
  c.shape.batch = B, c.shape.heads = H, c.shape.kv_heads = Hkv;
  c.shape.seqlen_q = Sq, c.shape.seqlen_k = Sk, c.shape.dim = D;
  c.causal = causal;
  return c;
}

// "2x16x16x1024x1024x128" or "...:causal", nothing else: six integers from 1 to kMaxDimension
// joined by 'x' (parse_integer: no sign, exponent or trailing text), then nothing or ":causal".
AttentionCase parse_case(const std::string& text) {
  constexpr std::string_view kCausal = ":causal";
  const bool causal = text.ends_with(kCausal);
  const std::string_view body = std::string_view(text).substr(0, text.size() - (causal ? kCausal.size() : 0));
  const std::optional<std::vector<long long>> n = shape_values(body, 6);
  if (!n)
    throw std::invalid_argument("--cases: '" + text + "' is not " + kCaseForm +
                                " (batch x heads x K/V heads x query length x key length x head dim, each "
                                "an integer from 1 to " +
                                std::to_string(kMaxDimension) + ", e.g. 2x16x16x1024x1024x128:causal)");
  const std::vector<long long>& v = *n;
  return make_case(v[0], v[1], v[2], v[3], v[4], v[5], causal, "--cases", text);
}

// The list: D 64 and 128; S = Sq = Sk 1024, 4096, 16384 with B = 2 * 16384 / S and
// H = 2048 / D (every case the same 32 M query elements); causal and not. Then grouped-query
// attention (32 heads over 8), and decode-like shapes (1 and 128 new queries against 8 K keys,
// causal: the new queries are the last positions).
std::vector<AttentionCase> default_cases() {
  std::vector<AttentionCase> cases;
  for (std::int64_t D : {64, 128})
    for (std::int64_t S : {1024, 4096, 16384})
      for (bool causal : {false, true})
        cases.push_back(make_case(2 * 16384 / S, 2048 / D, 2048 / D, S, S, D, causal, "default", ""));
  for (bool causal : {false, true})
    cases.push_back(make_case(4, 32, 8, 4096, 4096, 128, causal, "default", ""));
  for (std::int64_t Sq : {1, 128}) cases.push_back(make_case(8, 32, 32, Sq, 8192, 128, true, "default", ""));
  return cases;
}

// kernels::attention_flops, and how it counted.
double attention_flops(const AttentionCase& c, std::string& counting) {
  const auto& s = c.shape;
  counting = !c.causal                  ? "4 B H Sq Sk D"
             : s.seqlen_q == s.seqlen_k ? "4 B H Sq Sk D / 2 (causal)"
                                        : "4 B H D x visible pairs (causal, Sq != Sk: counted exactly)";
  return kernels::attention_flops(s, c.causal);
}

// One of Q, K, V: [B, S, H, D] as the kernels see it, stored that way (bshd) or as [B, H, S, D]
// (bhsd, the permuted view sharing the allocation).
Tensor make_input(std::int64_t B, std::int64_t S, std::int64_t H, std::int64_t D, DType t, bool bhsd) {
  return bhsd ? Tensor::empty({B, H, S, D}, t).permute({0, 2, 1, 3}) : Tensor::empty({B, S, H, D}, t);
}

// Uniform values in [-1, 1) rounded to t's dtype, uploaded into t, and returned as doubles in
// logical row-major order (what the reference reads). Generated on every host core in fixed
// blocks, each seeded from (seed, block), so the values do not depend on the core count;
// Tensor::fill_random's one thread plus reading the tensors back took seconds per case at 64 M
// elements per tensor.
std::vector<double> fill_uniform(Tensor& t, std::uint64_t seed) {
  constexpr std::size_t kBlock = 1 << 16;
  const std::size_t n = static_cast<std::size_t>(t.numel()),
                    eb = static_cast<std::size_t>(dtype_bytes(t.dtype()));
  std::vector<unsigned char> bytes(n * eb);
  std::vector<double> values(n);
  const std::size_t blocks = (n + kBlock - 1) / kBlock;
  std::atomic<std::size_t> next_block{0};
  auto work = [&] {
    for (std::size_t b = next_block++; b < blocks; b = next_block++) {
      std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + b;  // SplitMix64 over this block
      for (std::size_t i = b * kBlock; i < std::min(n, (b + 1) * kBlock); ++i) {
        std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        store_host_element(-1.0 + 2.0 * static_cast<double>(z >> 11) * 0x1.0p-53, t.dtype(), &bytes[i * eb]);
        values[i] = load_host_element(&bytes[i * eb], t.dtype());
      }
    }
  };
  std::vector<std::thread> threads(std::clamp(std::thread::hardware_concurrency(), 1u, 32u) - 1);
  for (auto& th : threads) th = std::thread(work);
  work();
  for (auto& th : threads) th.join();
  t.copy_from_host(bytes.data());
  return values;
}

// The sampled rows of O [B, Sq, H, D] and LSE [B, H, Sq], as the reference lays them out.
kernels::AttentionRows gather_rows(const Tensor& o, const Tensor& lse,
                                   const std::vector<kernels::AttentionSample>& samples) {
  kernels::AttentionRows r;
  const std::vector<double> lse_host = lse.to_host_f64();
  const std::int64_t H = o.size(2), Sq = o.size(1);
  for (const auto& x : samples) {
    const std::vector<double> row = o.slice(0, x.batch, x.batch + 1)
                                        .slice(1, x.row, x.row + 1)
                                        .slice(2, x.head, x.head + 1)
                                        .to_host_f64();
    r.O.insert(r.O.end(), row.begin(), row.end());
    r.LSE.push_back(lse_host[static_cast<std::size_t>((x.batch * H + x.head) * Sq + x.row)]);
  }
  return r;
}

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

struct Tolerance {
  double O, LSE;
};
// Against float64: P is rounded to the 16-bit type before P V (as FlashAttention does), which
// dominates O's error; LSE stays in f32 throughout. Tessel against cuDNN: both errors at once.
Tolerance f64_tolerance(DType t) {
  return {t == DType::f16 ? 5e-3 : 2e-2, 1e-4};
}
Tolerance agreement_tolerance(DType t) {
  return {2 * f64_tolerance(t).O, 2 * f64_tolerance(t).LSE};
}
bool within(const kernels::AttentionError& e, Tolerance tol) {
  return e.O <= tol.O && e.LSE <= tol.LSE;  // false for NaN and infinity
}

// One line of the closing table.
struct TableRow {
  std::string text, dtype, config, tessel_ms, tessel_tflops, cudnn_ms, cudnn_tflops, ratio, err_t, err_c,
      err_tc, status;
};

std::string error_pair(const kernels::AttentionError& e) {
  return scientific(e.O) + "/" + scientific(e.LSE);
}

class AttentionBench {
 public:
  AttentionBench(const BenchAttentionOptions& o, std::optional<kernels::AttentionConfig> config, bool bhsd)
      : o_(o), config_(config), bhsd_(bhsd), flush_(Tensor::empty({256LL << 20}, DType::u8)) {}

  CudnnAttention& cudnn() { return cudnn_; }

  // Runs, checks and times one case in one dtype; returns its JSON and adds its table row.
  nlohmann::json run(const AttentionCase& c, DType t, std::uint64_t seed, std::vector<TableRow>& table) {
    const auto& s = c.shape;
    TableRow row{case_text(c), std::string(dtype_name(t)), "-", "-", "-", "-", "-", "-", "-", "-", "-", ""};
    nlohmann::json r = {{"case", row.text},       {"batch", s.batch},
                        {"heads", s.heads},       {"kv_heads", s.kv_heads},
                        {"seqlen_q", s.seqlen_q}, {"seqlen_k", s.seqlen_k},
                        {"dim", s.dim},           {"causal", c.causal},
                        {"dtype", row.dtype},     {"layout", bhsd_ ? "bhsd" : "bshd"}};
    std::string counting;
    const double flops = attention_flops(c, counting);
    r["flops"] = flops;
    r["flops_counted_as"] = counting;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.dim)));
    r["scale"] = scale;
    const SystemInfo& sys = system_info();

    // Inputs and outputs. Each side's outputs are poisoned with NaN before its checked run, so
    // that a row it never wrote cannot pass.
    struct {
      Tensor q, k, v;
    } in{make_input(s.batch, s.seqlen_q, s.heads, s.dim, t, bhsd_),
         make_input(s.batch, s.seqlen_k, s.kv_heads, s.dim, t, bhsd_),
         make_input(s.batch, s.seqlen_k, s.kv_heads, s.dim, t, bhsd_)};
    kernels::AttentionShape shape = s;
    shape.q_strides = in.q.strides(), shape.k_strides = in.k.strides(), shape.v_strides = in.v.strides();
    const std::vector<kernels::AttentionSample> samples = kernels::choose_attention_samples(shape);
    const kernels::AttentionRows ref =
        kernels::attention_reference(fill_uniform(in.q, seed), fill_uniform(in.k, seed + 1),
                                     fill_uniform(in.v, seed + 2), shape, c.causal, scale, samples);
    r["check"] = {{"sampled_rows", samples.size()}};

    int problems = 0;
    std::vector<std::function<void()>> sides;
    std::vector<std::string> side_names;
    std::optional<kernels::AttentionRows> ours_rows, cudnn_rows;
    const Tolerance tol = f64_tolerance(t), agree = agreement_tolerance(t);
    r["tolerances"] = {{"vs_float64", {{"O", tol.O}, {"LSE", tol.LSE}}},
                       {"tessel_vs_cudnn", {{"O", agree.O}, {"LSE", agree.LSE}}}};

    // Tessel: the compiled kernel launched into preallocated outputs (what is timed).
    JitKernel ours;
    Tensor o_t = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, t),
           lse_t = Tensor::empty({s.batch, s.heads, s.seqlen_q}, DType::f32);
    try {
      kernels::AttentionOptions opts;
      opts.causal = c.causal;
      opts.scale = scale;
      const kernels::AttentionChoice choice =
          config_ ? kernels::AttentionChoice{*config_, false}
                  : kernels::choose_attention_config(shape, t, c.causal, sys.arch());
      const kernels::AttentionConfig& used = choice.config;
      opts.config = used;
      row.config = used.describe() + (choice.tuned ? " (tuned)" : "");
      r["config"] = {{"text", used.describe()}, {"block_M", used.block_M},
                     {"block_N", used.block_N}, {"num_stages", used.num_stages},
                     {"threads", used.threads}, {"given", config_.has_value()},
                     {"tuned", choice.tuned}};
      ours = kernels::make_flash_attention(shape, t, opts);
      r["tessel_path"] = ours.info().path;
      r["tessel_registers"] = ours.resources().registers;
      o_t.fill(std::nan(""));
      lse_t.fill(std::nan(""));
      ours.launch({in.q, in.k, in.v, o_t, lse_t});
      check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize (Tessel)");
      ours_rows = gather_rows(o_t, lse_t, samples);
      const kernels::AttentionError e = kernels::attention_error(ref, *ours_rows);
      const bool ok = within(e, tol);
      r["tessel_error_vs_float64"] = {
          {"O", number_or_null(e.O)}, {"LSE", number_or_null(e.LSE)}, {"passed", ok}};
      row.err_t = error_pair(e) + (ok ? "" : "!");
      if (!ok) ++problems;
      sides.push_back([&] { ours.launch({in.q, in.k, in.v, o_t, lse_t}); });
      side_names.push_back("tessel");
    } catch (const std::exception& e) {
      r["tessel_error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
      row.status = "Tessel failed: " + error_kind(e) + " (" + error_summary(e, 100) + ")";
      ++problems;
    }

    // cuDNN: a problem it does not support is reported, not counted as a failed check.
    Tensor o_c = Tensor::empty({s.batch, s.seqlen_q, s.heads, s.dim}, t),
           lse_c = Tensor::empty({s.batch, s.heads, s.seqlen_q}, DType::f32);
    if (cudnn_.available()) {
      try {
        o_c.fill(std::nan(""));
        lse_c.fill(std::nan(""));
        cudnn_.run(in.q, in.k, in.v, o_c, lse_c, c.causal, scale);
        check_cu(driver().cuCtxSynchronize(), "cuCtxSynchronize (cuDNN)");
        cudnn_rows = gather_rows(o_c, lse_c, samples);
        const kernels::AttentionError e = kernels::attention_error(ref, *cudnn_rows);
        const bool ok = within(e, tol);
        r["cudnn_error_vs_float64"] = {
            {"O", number_or_null(e.O)}, {"LSE", number_or_null(e.LSE)}, {"passed", ok}};
        row.err_c = error_pair(e) + (ok ? "" : "!");
        if (!ok) ++problems;
        sides.push_back([&] { cudnn_.run(in.q, in.k, in.v, o_c, lse_c, c.causal, scale); });
        side_names.push_back("cudnn");
      } catch (const std::exception& e) {
        r["cudnn_error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
        row.status += std::string(row.status.empty() ? "" : "; ") + "cuDNN: " + error_summary(e, 100);
      }
    }
    if (ours_rows && cudnn_rows) {
      // cuDNN's rows as the reference: how far apart the two kernels are.
      const kernels::AttentionError e = kernels::attention_error(*cudnn_rows, *ours_rows);
      const bool ok = within(e, agree);
      r["tessel_vs_cudnn"] = {{"O", number_or_null(e.O)}, {"LSE", number_or_null(e.LSE)}, {"passed", ok}};
      row.err_tc = error_pair(e) + (ok ? "" : "!");
      if (!ok) ++problems;
    }

    // Timing: the sides that ran, interleaved, L2 flushed before each timed run.
    if (!sides.empty()) {
      const std::vector<double> ms = interleaved_median_ms(sides, o_.warmup, o_.repeats, [&] {
        check_cu(driver().cuMemsetD8Async(flush_.device_ptr(), ++flush_value_, flush_.nbytes(), nullptr),
                 "cuMemsetD8Async (L2 flush)");
      });
      auto tflops = [&](double msec) { return flops / (msec * 1e-3) / 1e12; };
      for (std::size_t i = 0; i < sides.size(); ++i) {
        r[side_names[i] + "_ms"] = ms[i];
        r[side_names[i] + "_tflops"] = tflops(ms[i]);
        (side_names[i] == "tessel" ? row.tessel_ms : row.cudnn_ms) = fixed(ms[i], 3);
        (side_names[i] == "tessel" ? row.tessel_tflops : row.cudnn_tflops) = fixed(tflops(ms[i]), 1);
      }
      if (sides.size() == 2) {
        r["tessel_over_cudnn"] = ms[1] / ms[0];  // speed: > 1 when Tessel is faster
        row.ratio = fixed(ms[1] / ms[0], 2) + "x";
      }
    }
    r["status"] = problems == 0 ? "ok" : (r.contains("tessel_error") ? "failed" : "wrong");
    if (problems && row.status.empty()) row.status = "CHECK FAILED";
    r["problems"] = problems;
    table.push_back(row);
    return r;
  }

 private:
  const BenchAttentionOptions& o_;
  std::optional<kernels::AttentionConfig> config_;
  bool bhsd_;
  CudnnAttention cudnn_;
  Tensor flush_;
  unsigned char flush_value_ = 0;
};

void print_table(const std::vector<TableRow>& table) {
  // Columns as wide as their longest entry and a space (a causal case of 16384 keys, a
  // persistent config).
  int case_w = 30, config_w = 16;
  for (const TableRow& r : table) {
    case_w = std::max(case_w, static_cast<int>(r.text.size()) + 1);
    config_w = std::max(config_w, static_cast<int>(r.config.size()) + 1);
  }
  std::cout << "\n  " << left("case BxHxHKVxSQxSKxD", case_w) << left("dtype", 6) << left("config", config_w)
            << right("Tessel ms", 10) << right("TFLOP/s", 9) << right("cuDNN ms", 10) << right("TFLOP/s", 9)
            << right("T/cuDNN", 9) << "  " << left("err T O/LSE", 18) << left("err cuDNN", 18)
            << left("T vs cuDNN", 18) << "\n";
  for (const TableRow& r : table)
    std::cout << "  " << left(r.text, case_w) << left(r.dtype, 6) << left(r.config, config_w) << right(r.tessel_ms, 10)
              << right(r.tessel_tflops, 9) << right(r.cudnn_ms, 10) << right(r.cudnn_tflops, 9)
              << right(r.ratio, 9) << "  " << left(r.err_t, 18) << left(r.err_c, 18) << left(r.err_tc, 18)
              << r.status << "\n";
}

int run_bench_attention(const BenchAttentionOptions& o) {
  std::vector<AttentionCase> cases;
  std::vector<DType> dtypes;
  std::optional<kernels::AttentionConfig> config;
  const bool single = std::any_of(o.single_case_flags.begin(), o.single_case_flags.end(),
                                  [](const CLI::Option* f) { return f->count() > 0; });
  try {
    if (single && !o.cases.empty())
      throw std::invalid_argument(
          "--cases and the single-case flags (--batch, --heads, --kv-heads, --seqlen-q, --seqlen-k, --dim, "
          "--causal) exclude each other; write every case in --cases (" +
          std::string(kCaseForm) + ")");
    for (const std::string& d : o.dtypes) {
      auto t = parse_dtype(d);
      if (!t || (*t != DType::f16 && *t != DType::bf16))
        throw std::invalid_argument("--dtype takes f16 and bf16, not '" + d + "'");
      dtypes.push_back(*t);
    }
    if (!o.config.empty()) config = parse_attention_config(o.config);
    if (o.layout != "bshd" && o.layout != "bhsd")
      throw std::invalid_argument("--layout takes bshd or bhsd, not '" + o.layout + "'");
    if (single) {
      const std::int64_t hkv = o.kv_heads ? o.kv_heads : o.heads, sk = o.seqlen_k ? o.seqlen_k : o.seqlen_q;
      cases.push_back(make_case(
          o.batch, o.heads, hkv, o.seqlen_q, sk, o.dim, o.causal, "the single-case flags",
          std::to_string(o.batch) + "x" + std::to_string(o.heads) + "x" + std::to_string(hkv) + "x" +
              std::to_string(o.seqlen_q) + "x" + std::to_string(sk) + "x" + std::to_string(o.dim)));
    } else if (!o.cases.empty()) {
      for (const std::string& c : o.cases) cases.push_back(parse_case(c));
    } else {
      cases = default_cases();
    }
  } catch (const std::exception& e) {
    std::cerr << "tessel bench attention: " << e.what() << "\n";
    return kExitUsage;
  }
  const SystemInfo& sys = system_info();
  if (!sys.gpu) {
    std::cerr << "tessel bench attention needs a GPU, and there is none: " << sys.no_gpu_reason << "\n";
    return kExitNoGpu;
  }

  AttentionBench bench(o, config, o.layout == "bhsd");
  CudnnAttention& cudnn = bench.cudnn();
  std::cout << "O, LSE = softmax(Q K^T / sqrt(D)) V: Tessel (kernels::make_flash_attention, as compiled for "
            << sys.device.arch() << ") vs cuDNN's fused SDPA, " << sys.device.name << "; " << o.layout
            << " inputs; medians of " << o.repeats
            << " interleaved runs, L2 flushed; TFLOP/s = 4 B H Sq Sk D / "
            << "time, halved when causal (causal with Sq != Sk: the visible pairs counted exactly)\n";
  if (cudnn.available())
    std::cout << "cuDNN " << cudnn.version() << " (frontend " << CudnnAttention::frontend_version() << ")\n";
  else
    std::cout << "cuDNN baseline missing: " << cudnn.reason() << " (Tessel is still timed and checked)\n";

  nlohmann::json results = nlohmann::json::array();
  std::vector<TableRow> table;
  int problems = 0;
  Progress progress(static_cast<int>(cases.size() * dtypes.size()), true);
  std::uint64_t seed = o.seed;
  for (DType t : dtypes)
    for (const AttentionCase& c : cases) {
      progress.step(case_text(c) + " " + std::string(dtype_name(t)));
      nlohmann::json r;
      try {
        r = bench.run(c, t, seed, table);  // fresh inputs for every case and dtype
      } catch (const std::exception& e) {  // setup failures: allocation, the reference
        r = {{"case", case_text(c)},
             {"dtype", std::string(dtype_name(t))},
             {"status", "failed"},
             {"problems", 1}};
        r["error"] = {{"kind", error_kind(e)}, {"message", e.what()}};
        table.push_back({case_text(c), std::string(dtype_name(t)), "-", "-", "-", "-", "-", "-", "-", "-",
                         "-", "failed: " + error_summary(e, 100)});
      }
      seed += 3;
      problems += r.value("problems", 0);
      results.push_back(r);
    }
  progress.clear();
  print_table(table);
  std::cout
      << "errors: relative Frobenius over sampled rows, O/LSE ('!': over the tolerance); T/cuDNN: speed "
      << "ratio, > 1 when Tessel is faster\n";
  if (!o.json_file.empty()) {
    nlohmann::json j = provenance_json();
    j["tool"] = "tessel bench attention";
    j["method"] = {
        {"kernel", "kernels::make_flash_attention launched into preallocated O and LSE; scale 1/sqrt(D)"},
        {"baseline", cudnn.available()
                         ? "cuDNN " + cudnn.version() + " fused SDPA forward (frontend " +
                               CudnnAttention::frontend_version() + "), bottom-right causal mask, stats = LSE"
                         : "none: " + cudnn.reason()},
        {"layout", o.layout},
        {"timing", "CUDA events, legacy default stream, rotating order rep by rep, 256 MiB L2 flush"},
        {"warmup", o.warmup},
        {"repeats", o.repeats},
        {"statistic", "median"},
        {"flops",
         "4 B H Sq Sk D; halved when causal with Sq = Sk; causal with Sq != Sk: 4 B H D x visible pairs"},
        {"check",
         "O and LSE on sampled rows (first, last, spread over all batches and heads) against float64, and "
         "Tessel against cuDNN; outputs poisoned with NaN before each checked run"}};
    j["cudnn"] = {{"available", cudnn.available()},
                  {"built", CudnnAttention::built()},
                  {"version", cudnn.version()},
                  {"frontend", CudnnAttention::frontend_version()}};
    if (!cudnn.available()) j["cudnn"]["reason"] = cudnn.reason();
    j["cases"] = results;
    j["problems"] = problems;
    write_json_file(o.json_file, j);
    std::cout << "wrote " << o.json_file << "\n";
  }
  return problems ? kExitCheckFailed : kExitOk;
}

}  // namespace

Command add_bench_attention_command(CLI::App& bench) {
  auto o = std::make_shared<BenchAttentionOptions>();
  CLI::App* app = bench.add_subcommand(
      "attention",
      "Multi-head attention's forward pass (kernels::flash_attention: causal or not, grouped-query, "
      "decode-like) "
      "against cuDNN's fused SDPA: TFLOP/s, and O and LSE checked against float64 (needs a GPU)");
  app->footer(
      std::string("Cases: --cases takes ") + kCaseForm +
      " entries, comma-separated, e.g. 2x16x16x1024x1024x128:causal,4x32x8x4096x4096x128 (batch x heads x "
      "K/V heads x query length x key length x head dim; ':causal' masks bottom-right: query i sees keys "
      "j <= i + SK - SQ). Or describe one case with --batch ... --dim [--causal]. Without either: D 64 "
      "and 128 at S 1024, 4096 and 16384 (B = 32768 / S, H = 2048 / D), causal and not; grouped-query "
      "4x32x8x4096x4096x128 causal and not; decode-like 8x32x32x1x8192x128:causal and "
      "8x32x32x128x8192x128:causal.");
  auto flag = [&](CLI::Option* opt) {
    o->single_case_flags.push_back(opt);
    return opt;
  };
  // B and H are grid dimensions (at most 65535 each), D at most 256: as `tessel tune attention`.
  flag(app->add_option("--batch", o->batch, "One case: the batch size B")
           ->capture_default_str()
           ->check(dimension(65535)));
  flag(app->add_option("--heads", o->heads, "One case: query heads H")
           ->capture_default_str()
           ->check(dimension(65535)));
  flag(app->add_option("--kv-heads", o->kv_heads, "One case: K/V heads HKV, dividing H (default: H)")
           ->check(dimension(65535)));
  flag(app->add_option("--seqlen-q", o->seqlen_q, "One case: query length SQ")
           ->capture_default_str()
           ->check(dimension()));
  flag(app->add_option("--seqlen-k", o->seqlen_k, "One case: key length SK (default: SQ)")
           ->check(dimension()));
  flag(app->add_option("--dim", o->dim, "One case: head dim D (a multiple of 8 up to 256)")
           ->capture_default_str()
           ->check(dimension(256)));
  flag(app->add_flag("--causal", o->causal, "One case: the bottom-right causal mask"));
  app->add_option("--cases", o->cases, std::string("Cases ") + kCaseForm + ", comma-separated (see below)")
      ->delimiter(',')
      ->type_name("CASES");
  app->add_option("--dtype", o->dtypes, "Element types, comma-separated (f16, bf16)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option(
         "--config", o->config,
         std::string("Tessel's tiles for every case instead of the built-in choice: ") +
             kAttentionConfigForm +
             ", e.g. 128x128:2:256 (the schedule: a TMA ring with or without the warpgroups taking "
             "turns, or cp.async; default pingpong; ':persistent': one block per SM looping over the "
             "tiles, ring schedules only; ':interleave': GQA's query heads taken K/V head by K/V head across "
             "blockIdx.y, opt-in, a knob of tune attention; ':lazy': a row's running max kept until a key "
             "block passes it by 8 in base-2 exponent units, and the rescale of O skipped where it "
             "stayed (skip_unit_scales; TESSEL_DISABLE=unit_scale_skips keeps the multiplies), the built-in "
             "choice on the 64x128 ring and causal D = 128's 256-key tile, a knob of tune attention; "
             "':polyN': one group of 8 key columns in N "
             "with its exponentials on the FMA "
             "pipe (poly_exp2), opt-in, measured slower on an H100)")
      ->type_name("CONFIG");
  app->add_option("--layout", o->layout, "Storage of Q, K and V: bshd ([B, S, H, D]) or bhsd ([B, H, S, D])")
      ->capture_default_str();
  add_timing_options(*app, o->repeats, o->warmup, o->seed, o->json_file);
  return {app, [o] { return run_bench_attention(*o); }};
}

}  // namespace tessel::cli
