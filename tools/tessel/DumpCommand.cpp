// tessel dump gemm|softmax|attention: what the compiler makes of a library kernel, at each level — the
// program's IR, the lowered IR, the generated CUDA C++, the PTX, the resources — on stdout and,
// with --json FILE, as JSON. Needs no GPU.
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>

#include "tessel/kernels/attention/FlashAttention.hpp"
#include "tessel/kernels/gemm/Matmul.hpp"
#include "tessel/kernels/softmax/Softmax.hpp"
#include "tools/tessel/AttentionConfigs.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/Parse.hpp"
#include "tools/tessel/SassLoops.hpp"
#include "tools/tessel/System.hpp"

namespace tessel::cli {

namespace {

struct DumpOptions {
  std::string kernel;  // the subcommand: gemm, softmax or attention
  long long M = 2048, N = 2048, K = 2048;
  // attention: Q [B, Sq, H, D], K and V [B, Sk, H_kv, D]; 0 for H_kv and Sk: H and Sq
  long long batch = 1, heads = 16, kv_heads = 0, seqlen_q = 1024, seqlen_k = 0, dim = 128;
  bool causal = false;
  std::string layout = "bshd";
  float scale = 0.0f;
  std::string dtype = "f16";
  std::string config;
  std::string arch;
  std::string split_k = split_k_text(kernels::kMatmulDefaultSplitK);  // gemm: as bench gemm takes it
  bool ir = false, lowered = false, source = false, ptx = false, sass = false, sass_loops = false,
       resources = false;
  std::string json_file;
};

int chosen_levels(const DumpOptions& o) {
  return int(o.ir) + int(o.lowered) + int(o.source) + int(o.ptx) + int(o.sass) + int(o.sass_loops) +
         int(o.resources);
}

const char* level_name(const DumpOptions& o) {
  return o.lowered      ? "lowered"
         : o.source     ? "source"
         : o.ptx        ? "ptx"
         : o.sass       ? "sass"
         : o.sass_loops ? "sass-loops"
         : o.resources  ? "resources"
                        : "ir";
}

// `nvdisasm` is not part of every CUDA toolkit (CUDA 13's minimal one lacks it); PyPI's
// nvidia-cuda-nvdisasm has it.
struct MissingTool : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// nvdisasm: $TESSEL_NVDISASM, else the first on $PATH, else the CUDA toolkit's bin/; empty if none.
std::string find_nvdisasm() {
  namespace fs = std::filesystem;
  if (const char* e = std::getenv("TESSEL_NVDISASM"); e && *e) {
    std::error_code ec;
    if (!fs::is_regular_file(e, ec) || access(e, X_OK) != 0)
      throw MissingTool(std::string("--sass: TESSEL_NVDISASM=") + e +
                        " is not an executable file; `pip install nvidia-cuda-nvdisasm` has one");
    return e;
  }
  std::vector<fs::path> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    for (size_t start = 0; start <= p.size();) {
      const size_t end = p.find(':', start);
      dirs.emplace_back(p.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  for (const char* home : {std::getenv("CUDA_HOME"), std::getenv("CUDA_PATH")})
    if (home && *home) dirs.emplace_back(fs::path(home) / "bin");
  dirs.emplace_back("/usr/local/cuda/bin");
  for (const fs::path& d : dirs) {
    std::error_code ec;
    const fs::path candidate = d / "nvdisasm";
    if (!d.empty() && fs::is_regular_file(candidate, ec) && access(candidate.c_str(), X_OK) == 0)
      return candidate.string();
  }
  return "";
}

// The kernel's SASS: its cubin through `nvdisasm -c`.
std::string disassemble(const JitKernel& k) {
  const std::string tool = find_nvdisasm();
  if (tool.empty())
    throw MissingTool(
        "--sass needs nvdisasm, which this CUDA toolkit does not have: `pip install nvidia-cuda-nvdisasm` and put "
        "its bin/ on PATH, or set TESSEL_NVDISASM to the executable");
  if (tool.find('\'') != std::string::npos)
    throw MissingTool("--sass: the nvdisasm path '" + tool + "' holds a quote; move it or set TESSEL_NVDISASM");
  if (k.cubin().empty()) throw std::runtime_error("--sass: NVRTC returned no cubin for " + k.name());
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/tessel-dump-XXXXXX";
  if (pattern.find('\'') != std::string::npos) pattern = "/tmp/tessel-dump-XXXXXX";  // quoted for the shell below
  std::vector<char> path(pattern.begin(), pattern.end());
  path.push_back('\0');
  const int fd = mkstemp(path.data());
  if (fd < 0) throw std::runtime_error("--sass: cannot create a temporary file like " + pattern);
  const std::vector<char>& cubin = k.cubin();
  const bool written = write(fd, cubin.data(), cubin.size()) == static_cast<ssize_t>(cubin.size());
  close(fd);
  const std::string file(path.data());
  struct Remove {
    std::string f;
    ~Remove() { std::remove(f.c_str()); }
  } remove_later{file};
  if (!written) throw std::runtime_error("--sass: cannot write the cubin to " + file);
  FILE* pipe = popen(("'" + tool + "' -c '" + file + "' 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("--sass: cannot run " + tool);
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error("--sass: " + tool + " failed (status " + std::to_string(status) + "): " +
                             out.substr(0, 400));
  return out;
}

// The level the flags chose of an already compiled kernel, as text.
std::string level_text(const DumpOptions& o, const JitKernel& k, const std::string& what) {
  if (o.lowered) return k.lowered_ir();
  if (o.source) return k.source();
  if (o.ptx) return k.ptx();
  if (o.sass) return disassemble(k);
  if (o.sass_loops) return format_sass_loops(sass_loops(disassemble(k)));
  const Resources& r = k.resources();
  const KernelInfo& info = k.info();
  std::ostringstream os;
  os << "kernel:        " << info.kernel_name << " (" << what << ", " << info.arch << ")\n"
     << "path:          " << info.path << "\n"
     << "threads:       " << info.threads << "\n"
     << "registers:     " << r.registers << "\n"
     << "spills:        " << r.spill_store_bytes << " B stored, " << r.spill_load_bytes << " B loaded\n"
     << "shared memory: " << info.dynamic_smem_bytes << " B dynamic, " << r.static_smem_bytes << " B static\n"
     << "compile:       " << r.compile_ms << " ms" << (r.cache_hit ? " (cache hit)" : "") << "\n"
     << "instructions: ";
  for (const std::string& i : info.instructions) os << " " << i;
  os << "\n";
  if (!info.hopper_declined.empty()) os << "declined:      the tutorial-GEMM template (select_hopper_gemm): " << info.hopper_declined << "\n";
  for (const std::string& d : info.declined) os << "declined:      " << d << "\n";
  return os.str();
}

nlohmann::json kernel_json(const JitKernel& k) {
  const Resources& r = k.resources();
  const KernelInfo& info = k.info();
  return {{"kernel_name", info.kernel_name},
          {"arch", info.arch},
          {"path", info.path},
          {"threads", info.threads},
          {"dynamic_smem_bytes", info.dynamic_smem_bytes},
          {"instructions", info.instructions},
          {"hopper_declined", info.hopper_declined},
          {"declined", info.declined},
          {"registers", r.registers},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"static_smem_bytes", r.static_smem_bytes},
          {"compile_ms", r.compile_ms},
          {"cache_hit", r.cache_hit}};
}

// Prints `text` and, with --json, writes it with what it is of: the kernel, shape, dtype, config,
// level, and (when compiled) the kernel's resources.
int emit(const DumpOptions& o, nlohmann::json what, const std::string& text, const JitKernel* k) {
  std::cout << text;
  if (!std::cout) return kExitCheckFailed;
  if (o.json_file.empty()) return kExitOk;
  nlohmann::json j = provenance_json();
  j["kernel"] = o.kernel;
  j.update(what);
  j["level"] = level_name(o);
  j["text"] = text;
  if (k) j["compiled"] = kernel_json(*k);
  write_json_file(o.json_file, j);
  std::cerr << "wrote " << o.json_file << "\n";
  return kExitOk;
}

int run_dump_gemm(const DumpOptions& o) {
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16)) {
    std::cerr << "tessel dump gemm: --dtype must be f16 or bf16, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  const SystemInfo& s = system_info();
  const GemmShape shape{static_cast<int>(o.M), static_cast<int>(o.N), static_cast<int>(o.K)};
  kernels::MatmulConfig c;
  try {
    c = o.config.empty() ? default_gemm_config(shape, *dtype, s.smem_cap())
                         : parse_matmul_config(o.config, *dtype);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tessel dump gemm: " << e.what() << "\n";
    return kExitUsage;
  }
  const std::string arch = o.arch.empty() ? s.arch() : o.arch;
  // What the library's Matmul does with this shape: rows that are not 16-byte aligned are staged
  // and the kernel for the padded shape runs; a skinny grid splits K (a tuned split first; this
  // command shows the exact shape's unsplit kernel).
  kernels::MatmulPlan plan;
  try {
    plan = kernels::plan_matmul_for_current_device(o.M, o.N, o.K, *dtype, kernels::MatmulStaging::automatic,
                                                   parse_split_k(o.split_k), arch);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tessel dump gemm: " << e.what() << "\n";
    return kExitUsage;
  }
  const nlohmann::json what = {
      {"M", o.M},
      {"N", o.N},
      {"K", o.K},
      {"dtype", std::string(dtype_name(c.dtype))},
      {"config", format_matmul_config(c)},
      {"library_staging",
       {{"staged", plan.staged()}, {"kernel_shape", {o.M, plan.kernel_N, plan.kernel_K}}, {"why", plan.why}}},
      {"library_split_k",
       {{"splits", plan.split_k},
        {"config", plan.split() ? format_matmul_config(plan.split_config) : ""},
        {"workspace_bytes", plan.workspace_bytes}}}};
  if (chosen_levels(o) == 0 || o.ir)
    return emit(o, what, kernels::matmul_program(o.M, o.N, o.K, c).script(), nullptr);
  JitOptions jo;
  jo.arch = arch;
  const JitKernel k = kernels::make_matmul(o.M, o.N, o.K, c, jo);
  std::string text = level_text(
      o, k,
      shape.describe() + " " + std::string(dtype_name(c.dtype)) + ", config " + format_matmul_config(c));
  if (o.resources && (plan.staged() || plan.split()))
    text += "library:       kernels::Matmul runs " + std::to_string(o.M) + "x" +
            std::to_string(plan.kernel_N) + "x" + std::to_string(plan.kernel_K) +
            (plan.split() ? " as split-K " + std::to_string(plan.split_k) + " (partial GEMM " +
                                format_matmul_config(plan.split_config) + ", then the reduction)"
                          : std::string()) +
            " instead: " + plan.why + "\n";
  return emit(o, what, text, &k);
}

int run_dump_softmax(const DumpOptions& o) {
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16 && *dtype != DType::f32)) {
    std::cerr << "tessel dump softmax: --dtype must be f16, bf16 or f32, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  kernels::SoftmaxConfig c;
  try {
    c = o.config.empty() ? kernels::default_softmax_config(o.M, o.N, *dtype)
                         : kernels::parse_softmax_config(o.config);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tessel dump softmax: " << e.what() << "\n";
    return kExitUsage;
  }
  const nlohmann::json what = {
      {"M", o.M}, {"N", o.N}, {"dtype", std::string(dtype_name(*dtype))}, {"config", c.describe()}};
  if (chosen_levels(o) == 0 || o.ir)
    return emit(o, what, kernels::softmax_program(o.M, o.N, *dtype, c).script(), nullptr);
  JitOptions jo;
  jo.arch = o.arch.empty() ? system_info().arch() : o.arch;
  const JitKernel k = kernels::make_softmax(o.M, o.N, *dtype, c, jo);
  return emit(o, what,
              level_text(o, k,
                         std::to_string(o.M) + "x" + std::to_string(o.N) + " " +
                             std::string(dtype_name(*dtype)) + ", config " + c.describe()),
              &k);
}

int run_dump_attention(const DumpOptions& o) {
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16)) {
    std::cerr << "tessel dump attention: --dtype must be f16 or bf16, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  if (o.layout != "bshd" && o.layout != "bhsd") {
    std::cerr << "tessel dump attention: --layout must be bshd or bhsd, not '" << o.layout << "'\n";
    return kExitUsage;
  }
  kernels::AttentionShape s;
  s.batch = o.batch, s.heads = o.heads, s.kv_heads = o.kv_heads ? o.kv_heads : o.heads;
  s.seqlen_q = o.seqlen_q, s.seqlen_k = o.seqlen_k ? o.seqlen_k : o.seqlen_q, s.dim = o.dim;
  if (o.layout == "bhsd") {
    s.q_strides = kernels::bhsd_strides(s.batch, s.seqlen_q, s.heads, s.dim);
    s.k_strides = s.v_strides = kernels::bhsd_strides(s.batch, s.seqlen_k, s.kv_heads, s.dim);
  }
  kernels::check_attention(s, *dtype);  // a CompileError naming the tensor and what is legal
  const std::string arch = o.arch.empty() ? system_info().arch() : o.arch;
  kernels::AttentionConfig c;
  std::string source = "--config";
  if (o.config.empty()) {
    const kernels::AttentionChoice choice = kernels::choose_attention_config(s, *dtype, o.causal, arch);
    c = choice.config;
    source = choice.tuned ? "tuned (tessel tune attention)" : "built-in";
  } else {
    try {
      c = parse_attention_config(o.config);
    } catch (const std::invalid_argument& e) {
      std::cerr << "tessel dump attention: " << e.what() << "\n";
      return kExitUsage;
    }
  }
  const nlohmann::json what = {{"batch", s.batch},
                               {"heads", s.heads},
                               {"kv_heads", s.kv_heads},
                               {"seqlen_q", s.seqlen_q},
                               {"seqlen_k", s.seqlen_k},
                               {"dim", s.dim},
                               {"causal", o.causal},
                               {"layout", o.layout},
                               {"scale", o.scale},
                               {"dtype", std::string(dtype_name(*dtype))},
                               {"config", format_attention_config(c)},
                               {"config_source", source}};
  if (chosen_levels(o) == 0 || o.ir)
    return emit(o, what, kernels::attention_program(s, *dtype, o.causal, o.scale, c).script(), nullptr);
  kernels::AttentionOptions ao;
  ao.causal = o.causal;
  ao.scale = o.scale;
  ao.config = c;
  ao.jit.arch = arch;
  const JitKernel k = kernels::make_flash_attention(s, *dtype, ao);
  return emit(o, what,
              level_text(o, k,
                         s.describe() + (o.causal ? " causal " : " ") + std::string(dtype_name(*dtype)) + " " +
                             o.layout + ", config " + format_attention_config(c) + " (" + source + ")"),
              &k);
}

int run_dump(const DumpOptions& o) {
  if (chosen_levels(o) > 1) {
    std::cerr << "tessel dump " << o.kernel
              << ": choose one of --ir, --lowered, --source, --ptx, --sass, --sass-loops, --resources\n";
    return kExitUsage;
  }
  try {
    if (o.kernel == "attention") return run_dump_attention(o);
    return o.kernel == "softmax" ? run_dump_softmax(o) : run_dump_gemm(o);
  } catch (const MissingTool& e) {
    std::cerr << "tessel dump " << o.kernel << ": " << e.what() << "\n";
    return kExitNoTool;
  }
}

void add_level_flags(CLI::App* app, DumpOptions& o) {
  app->add_option("--arch", o.arch, "NVRTC target, e.g. sm_80 or sm_90a (default: the GPU's, else sm_90a)")
      ->check(arch());
  app->add_flag("--ir", o.ir, "The program's IR, as recorded from the C++ (PrimFunc::script)");
  app->add_flag("--lowered", o.lowered, "The IR after the compiler's passes (what codegen sees)");
  app->add_flag("--source", o.source, "The generated CUDA C++");
  app->add_flag("--ptx", o.ptx, "The PTX from NVRTC");
  app->add_flag("--sass", o.sass,
                "The SASS of NVRTC's cubin, by nvdisasm (TESSEL_NVDISASM, PATH or the CUDA toolkit's bin/; "
                "PyPI's nvidia-cuda-nvdisasm has it; exit 4 without it)");
  app->add_flag("--sass-loops", o.sass_loops,
                "The SASS's loops (each branch back to an earlier instruction): address range, instruction "
                "count, innermost or not (no other loop inside it), and its 16 most frequent opcodes with "
                "their counts -- "
                "the instructions a kernel issues per iteration of its hot loop (nvdisasm as for --sass)");
  app->add_flag("--resources", o.resources,
                "Registers, spills, shared memory, compile time, instructions used");
  app->add_option(
         "--json", o.json_file,
         "Also write the chosen level, the kernel's shape, dtype and config (and, when compiled, its "
         "resources), with date, device and command, as JSON to FILE")
      ->type_name("FILE");
}

}  // namespace

Command add_dump_command(CLI::App& root) {
  auto o = std::make_shared<DumpOptions>();
  CLI::App* dump = root.add_subcommand("dump", "Print what the compiler makes of a kernel (no GPU needed)");
  dump->require_subcommand(1);
  CLI::App* gemm = dump->add_subcommand("gemm",
                                        "The tutorial GEMM C[M,N] = A[M,K] B[K,N]: its IR (default), lowered "
                                        "IR, CUDA source, PTX or resources");
  gemm->add_option("--m", o->M, "Rows of A and C")->capture_default_str()->check(dimension());
  gemm->add_option("--n", o->N, "Columns of B and C")->capture_default_str()->check(dimension());
  gemm->add_option("--k", o->K, "Columns of A, rows of B")->capture_default_str()->check(dimension());
  gemm->add_option("--dtype", o->dtype, "f16 or bf16")->capture_default_str();
  gemm->add_option(
          "--config", o->config,
          "BMxBNxBK:stages:threads[:swz[N]][:cXxY], e.g. 128x128x32:3:128 (default: the built-in table)")
      ->type_name("CONFIG");
  gemm->add_option(
          "--split-k", o->split_k,
          "What kernels::Matmul's library: line (--resources) and JSON say it runs: auto "
          "(kernels::plan_matmul's "
          "model; the library's default), 1 off, N that many shares")
      ->capture_default_str();
  add_level_flags(gemm, *o);
  gemm->callback([o] { o->kernel = "gemm"; });
  CLI::App* softmax = dump->add_subcommand(
      "softmax",
      "The library softmax over the rows of an M x N tensor: its IR (default), lowered IR, CUDA "
      "source, PTX or resources");
  softmax->add_option("--m", o->M, "Rows")->capture_default_str()->check(dimension());
  softmax->add_option("--n", o->N, "Columns (the softmax dimension)")
      ->capture_default_str()
      ->check(dimension());
  softmax->add_option("--dtype", o->dtype, "f16, bf16 or f32")->capture_default_str();
  softmax
      ->add_option("--config", o->config,
                   "VARIANT:tTHREADS[:rROWS][:bnBLOCK_N][:sVECTORS][:w], e.g. rows:t256:r8:bn1024 (default: the "
                   "dispatcher's)")
      ->type_name("CONFIG");
  add_level_flags(softmax, *o);
  softmax->callback([o] { o->kernel = "softmax"; });
  CLI::App* attention = dump->add_subcommand(
      "attention",
      "The library's FlashAttention forward pass (kernels::flash_attention): its IR (default), lowered IR, "
      "CUDA source, PTX or resources, for the config a call would compile");
  attention->add_option("--batch", o->batch, "The batch size B")->capture_default_str()->check(dimension());
  attention->add_option("--heads", o->heads, "Query heads H")->capture_default_str()->check(dimension());
  attention->add_option("--kv-heads", o->kv_heads, "K/V heads H_kv, dividing H (default: H)")->check(dimension());
  attention->add_option("--seqlen-q", o->seqlen_q, "Query length Sq")->capture_default_str()->check(dimension());
  attention->add_option("--seqlen-k", o->seqlen_k, "Key length Sk (default: Sq)")->check(dimension());
  attention->add_option("--dim", o->dim, "Head dimension D (a multiple of 8 up to 256)")
      ->capture_default_str()
      ->check(dimension());
  attention->add_flag("--causal", o->causal, "The bottom-right causal mask (query i sees keys j <= i + Sk - Sq)");
  attention->add_option("--scale", o->scale, "The softmax scale, any finite value (default 0: 1/sqrt(D))")
      ->capture_default_str()
      ->check(finite_number());
  attention->add_option("--layout", o->layout, "Storage of Q, K and V: bshd ([B, S, H, D]) or bhsd ([B, H, S, D])")
      ->capture_default_str();
  attention->add_option("--dtype", o->dtype, "f16 or bf16")->capture_default_str();
  attention
      ->add_option("--config", o->config,
                   std::string(kAttentionConfigForm) +
                       ", e.g. 128x128:2:256:ring (default: the tuning cache's entry for the shape, else the "
                       "built-in choice)")
      ->type_name("CONFIG");
  add_level_flags(attention, *o);
  attention->callback([o] { o->kernel = "attention"; });
  return {dump, [o] { return run_dump(*o); }};
}

}  // namespace tessel::cli
