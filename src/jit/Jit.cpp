// jit(): lower -> generate CUDA -> NVRTC (through the kernel cache) -> a callable kernel.
// The module is loaded on the first call, so compiling works on a machine with no GPU.
#include "tessel/Jit.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>

#include "Lower.hpp"
#include "codegen/CodegenCuda.hpp"
#include "tessel/interp/Interpreter.hpp"
#include "tessel/ir/Mutator.hpp"
#include "tessel/ir/Printer.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Module.hpp"

namespace tessel {

class JitKernelImpl {
 public:
  std::shared_ptr<const ir::PrimFuncNode> program;
  PrimFunc func;  // what run_on_cpu interprets
  JitOptions options;
  LoweredFunc lowered;
  CompiledKernel compiled;
  KernelInfo info;
  Dim3 grid{1, 1, 1};
  std::vector<int> outputs;  // parameter indices, in order
  mutable std::mutex load_mutex;
  mutable std::unique_ptr<LoadedKernel> loaded;
  // A warp-specialized kernel's setmaxnreg budgets assume it launches with this many registers
  // per thread; checked at load when NVRTC's log gave no count (0: nothing to check).
  int required_regs = 0;

  const LoadedKernel& kernel() const {
    std::lock_guard<std::mutex> lock(load_mutex);
    if (!loaded) {
      auto k = std::make_unique<LoadedKernel>(compiled);
      if (required_regs > 0 && k->num_registers() != required_regs)
        throw_internal_error(
            "the warp-specialized " + compiled.lowered_name + " was loaded with " +
            std::to_string(k->num_registers()) + " registers per thread (the driver's count), not the " +
            std::to_string(required_regs) + " its setmaxnreg budgets assume; launching it could hang");
      loaded = std::move(k);
    }
    return *loaded;
  }
};

namespace {

std::string shape_text(const std::vector<std::int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The path's words for multicast_cluster_loads: ", A tiles multicast over 2-CTA clusters".
std::string multicast_path(const passes::PassContext& ctx) {
  std::string tensors;
  for (const std::string& t : ctx.cluster_multicast.tensors) tensors += (tensors.empty() ? "" : ", ") + t;
  return ", " + tensors + " tiles multicast over " + std::to_string(ctx.cluster_multicast.ctas) +
         "-CTA clusters";
}

std::vector<std::string> instructions_in(const std::string& ptx) {
  std::vector<std::string> out;
  auto has = [&](const char* needle) { return ptx.find(needle) != std::string::npos; };
  if (has("mma.sync")) out.push_back("mma.sync");
  if (has("wgmma.mma_async")) out.push_back("wgmma");
  if (has("ldmatrix")) out.push_back("ldmatrix");
  if (has("cp.async.ca") || has("cp.async.cg")) out.push_back("cp.async");
  if (has("cp.async.bulk.tensor")) out.push_back("cp.async.bulk.tensor");
  if (has("mbarrier.")) out.push_back("mbarrier");
  if (has("setmaxnreg")) out.push_back("setmaxnreg");
  return out;
}

int smem_cap_for(const std::string& arch, const JitOptions& o) {
  if (o.smem_cap_bytes > 0) return o.smem_cap_bytes;
  if (gpu_available() && current_device().arch() == arch) return current_device().smem_optin_per_block;
  return default_smem_cap(arch);
}

// A 2-D row-major tensor as TMA sees it: {cols, rows}, swizzled (by the box's row size) boxes of
// box_rows x box_cols, zero fill past the edges (which the GEMM relies on for partial tiles).
// An N-D tensor map (plan_tma_copies): the tensor's dimensions and the strides the kernel was
// compiled for, innermost first; the box per dimension; the swizzle of the tiles it fills.
CUtensorMap encode_tensor_map_nd(const Tensor& t, const passes::TmaParam& p) {
  CUtensorMap map;
  const int rank = t.dim();
  const std::vector<ir::Expr> strides = p.tensor.strides();
  cuuint64_t dims[5], byte_strides[4];
  cuuint32_t box[5], element_strides[5];
  const int elem = dtype_bytes(t.dtype());
  for (int i = 0; i < rank; ++i) {
    const int d = rank - 1 - i;  // innermost first
    dims[i] = static_cast<cuuint64_t>(t.size(d));
    box[i] = static_cast<cuuint32_t>(p.box[static_cast<size_t>(d)]);
    element_strides[i] = 1;
    if (i > 0)
      byte_strides[i - 1] =
          static_cast<cuuint64_t>(*ir::as_const_int(strides[static_cast<size_t>(d)]) * elem);
  }
  CUtensorMapDataType type =
      t.dtype() == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUtensorMapSwizzle swizzle = p.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : p.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                       : CU_TENSOR_MAP_SWIZZLE_32B;
  check_cu(driver().cuTensorMapEncodeTiled(&map, type, static_cast<cuuint32_t>(rank), t.data_ptr(), dims,
                                           byte_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                           swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                           CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
           "cuTensorMapEncodeTiled (tensor map of " + p.tensor->name + ")");
  return map;
}

CUtensorMap encode_tensor_map(const Tensor& t, const passes::TmaParam& p) {
  if (!p.box.empty()) return encode_tensor_map_nd(t, p);
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(t.size(1)), static_cast<cuuint64_t>(t.size(0))};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(t.size(1) * dtype_bytes(t.dtype()))};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(p.box_cols), static_cast<cuuint32_t>(p.box_rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  CUtensorMapDataType type =
      t.dtype() == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const int row_bytes = p.box_cols * dtype_bytes(t.dtype());
  CUtensorMapSwizzle swizzle = row_bytes >= 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : row_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                                 : CU_TENSOR_MAP_SWIZZLE_32B;
  check_cu(
      driver().cuTensorMapEncodeTiled(&map, type, 2, t.data_ptr(), dims, strides, box, element_strides,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      "cuTensorMapEncodeTiled (tensor map of " + p.tensor->name + ")");
  return map;
}

// The feature names an environment variable lists, comma- or space-separated, each one exactly
// (tma_store is not tma); a name not in `known` is the user's mistake, reported with the legal ones.
std::set<std::string> features_named(const char* var, const std::set<std::string>& known) {
  const char* env = std::getenv(var);
  std::set<std::string> out;
  std::string text = env ? env : "", word;
  text += ',';
  for (char ch : text) {
    if (ch != ',' && !std::isspace(static_cast<unsigned char>(ch))) {
      word += ch;
      continue;
    }
    if (word.empty()) continue;
    if (!known.count(word)) {
      std::string legal;
      for (const std::string& k : known) legal += (legal.empty() ? "" : ", ") + k;
      TESSEL_USER_ERROR("jit", std::source_location(),
                        var << " names '" << word << "'; it takes a comma-separated list of " << legal);
    }
    out.insert(word);
    word.clear();
  }
  return out;
}

// TESSEL_MAX_PERSISTENT_CTAS=N: JitOptions::max_persistent_ctas for every jit that leaves it 0
// (a fuzz batch or a benchmark with few blocks looping over many tiles); unset: 0.
int max_persistent_ctas_from_env() {
  const char* env = std::getenv("TESSEL_MAX_PERSISTENT_CTAS");
  if (!env || !*env) return 0;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(env, &end, 10);
  if (errno != 0 || *end != '\0' || v < 1 || v > 1 << 20)
    TESSEL_USER_ERROR("jit", std::source_location(),
                      "TESSEL_MAX_PERSISTENT_CTAS is '" << env << "'; legal: a whole number of blocks, 1 to "
                                                        << (1 << 20) << " (unset: the SM count)");
  return static_cast<int>(v);
}

}  // namespace

// The passes' switches a jit() with `options` compiles under: the options, then TESSEL_DISABLE /
// TESSEL_ENABLE / TESSEL_MAX_PERSISTENT_CTAS from the environment (tools that lower a program
// without NVRTC -- the tuning spaces -- use the same, so that they plan what jit() builds).
passes::PassContext::Switches jit_switches(const JitOptions& options) {
  // TESSEL_DISABLE=tma,wgmma,warp_specialization turns the same switches off from outside a
  // program (the CLI's benchmarks, a user bisecting a wrong result).
  const std::set<std::string> disabled = features_named("TESSEL_DISABLE", {"tma",
                                                                           "wgmma",
                                                                           "warp_specialization",
                                                                           "split_k",
                                                                           "tma_store",
                                                                           "multicast",
                                                                           "async_pipeline",
                                                                           "pingpong",
                                                                           "async_gemm",
                                                                           "gemm_chains",
                                                                           "row_staging",
                                                                           "async_span_copy",
                                                                           "persistent_tiles",
                                                                           "realigned_global_loads",
                                                                           "programmatic_launch",
                                                                           "uniform_roles",
                                                                           "tile_loads",
                                                                           "gemm_from_passes",
                                                                           "unit_scale_skips",
                                                                           "realigned_rings"});
  auto env_off = [&](const char* name) { return disabled.count(name) != 0; };
  // TESSEL_ENABLE turns opt-in features on from outside (benchmarks of a feature not on by default).
  const std::set<std::string> enabled =
      features_named("TESSEL_ENABLE", {"rotate_gemm_loops", "realigned_span_reads", "realigned_global_loads",
                                       "programmatic_launch", "uniform_roles", "gemm_from_passes",
                                       "persistent_rings", "unit_scale_skips"});
  auto env_on = [&](const char* name) { return enabled.count(name) != 0; };
  return passes::PassContext::Switches{
      !options.disable_tma && !env_off("tma"), !options.disable_wgmma && !env_off("wgmma"),
      !options.disable_warp_specialization && !env_off("warp_specialization"),
      !options.disable_split_k && !env_off("split_k"), !options.disable_tma_store && !env_off("tma_store"),
      !options.disable_multicast && !env_off("multicast"),
      !options.disable_async_pipeline && !env_off("async_pipeline"), options.allow_register_spills,
      !options.disable_pingpong && !env_off("pingpong"),
      !options.disable_async_gemm && !env_off("async_gemm"),
      !options.disable_gemm_chains && !env_off("gemm_chains"),
      (options.unit_scale_skips || env_on("unit_scale_skips")) && !options.disable_unit_scale_skips &&
          !env_off("unit_scale_skips"),
      (options.rotate_gemm_loops || env_on("rotate_gemm_loops")) && !options.disable_async_gemm &&
          !env_off("async_gemm"),
      !options.disable_row_staging && !env_off("row_staging"),
      !options.disable_async_span_copy && !env_off("async_span_copy"),
      options.realigned_span_reads || env_on("realigned_span_reads"),
      options.realigned_global_loads || env_on("realigned_global_loads"),
      !options.disable_realigned_global_loads && !env_off("realigned_global_loads"),
      (options.programmatic_launch || env_on("programmatic_launch")) &&
          !options.disable_programmatic_launch && !env_off("programmatic_launch"),
      options.uniform_roles || env_on("uniform_roles"),
      !options.disable_uniform_roles && !env_off("uniform_roles"),
      // On by default; TESSEL_ENABLE may still name it (scripts from before it was), TESSEL_DISABLE wins.
      (options.gemm_from_passes || env_on("gemm_from_passes")) && !env_off("gemm_from_passes"),
      !options.disable_persistent_tiles && !env_off("persistent_tiles"),
      !options.disable_tile_loads && !env_off("tile_loads"),
      options.max_persistent_ctas > 0 ? options.max_persistent_ctas : max_persistent_ctas_from_env(),
      options.persistent_rings || env_on("persistent_rings"), std::max(0, options.min_blocks_per_sm),
      !options.disable_realigned_rings && !env_off("realigned_rings")};
}

std::string switches_text(const passes::PassContext::Switches& s) {
  std::string out;
  auto flag = [&](const char* name, bool on) { out += std::string(out.empty() ? "" : " ") + name + "=" + (on ? "1" : "0"); };
  flag("tma", s.allow_tma);
  flag("wgmma", s.allow_wgmma);
  flag("warp_specialization", s.allow_warp_specialization);
  flag("split_k", s.allow_split_k);
  flag("tma_store", s.allow_tma_store);
  flag("multicast", s.allow_multicast);
  flag("async_pipeline", s.allow_async_pipeline);
  flag("register_spills", s.allow_register_spills);
  flag("pingpong", s.allow_pingpong);
  flag("async_gemm", s.allow_async_gemm);
  flag("gemm_chains", s.allow_gemm_chains);
  flag("unit_scale_skips", s.unit_scale_skips);
  flag("loop_rotation", s.allow_loop_rotation);
  flag("row_staging", s.allow_row_staging);
  flag("async_span_copy", s.async_span_copy);
  flag("realigned_span_reads", s.realigned_span_reads);
  flag("realigned_global_loads", s.realigned_global_loads);
  flag("allow_realigned_global_loads", s.allow_realigned_global_loads);
  flag("programmatic_launch", s.programmatic_launch);
  flag("uniform_roles", s.uniform_roles);
  flag("allow_uniform_roles", s.allow_uniform_roles);
  flag("gemm_from_passes", s.gemm_from_passes);
  flag("persistent_tiles", s.allow_persistent_tiles);
  flag("tile_loads", s.allow_tile_loads);
  flag("persistent_rings", s.persistent_rings);
  out += " max_persistent_ctas=" + std::to_string(s.max_persistent_ctas);
  out += " min_blocks_per_sm=" + std::to_string(s.min_blocks_per_sm);
  out += std::string(" realigned_rings=") + (s.allow_realigned_rings ? "1" : "0");
  return out;
}

namespace {

// The line of the program's Kernel(...) call: where grid errors belong.
std::source_location kernel_location(const ir::Stmt& body) {
  struct Find : ir::IRVisitor {
    std::source_location where;
    void visit_node(const ir::KernelStmt* op) override { where = op->where; }
  } find;
  if (body.defined()) find.visit(body);
  return find.where;
}

// More shared memory per block than any GPU has (228 KB on Hopper) by a wide margin: a cap past
// this is a typo, not a target.
constexpr int kMaxSmemCapBytes = 16 << 20;

int sm_of(const std::string& arch) {
  int v = 0;
  for (char c : arch)
    if (std::isdigit(static_cast<unsigned char>(c))) v = v * 10 + (c - '0');
  return v;
}

}  // namespace

JitKernel jit(const PrimFunc& f, const JitOptions& options, std::source_location where) {
  auto impl = std::make_shared<JitKernelImpl>();
  impl->program = f.ir_ptr();
  impl->func = f;
  impl->options = options;
  const ir::PrimFuncNode& prog = *impl->program;
  std::string arch = options.arch;
  if (arch.empty()) arch = gpu_available() ? current_device().arch() : "sm_90a";
  if (auto why = why_not_arch(arch)) TESSEL_USER_ERROR("jit", where, "JitOptions::arch " << *why);
  if (!(options.compile_time_limit_s >= 0))
    TESSEL_USER_ERROR("jit", where,
                      "JitOptions::compile_time_limit_s is "
                          << options.compile_time_limit_s
                          << "; legal: 0 (no limit) or a number of seconds > 0");
  if (options.smem_cap_bytes < 0 || options.smem_cap_bytes > kMaxSmemCapBytes)
    TESSEL_USER_ERROR("jit", where,
                      "JitOptions::smem_cap_bytes is "
                          << options.smem_cap_bytes
                          << "; legal: 0 (the GPU's opt-in cap, else the target's) or "
                             "1 to "
                          << kMaxSmemCapBytes << " bytes (no GPU has more than 228 KB per block)");
  if (options.min_blocks_per_sm < 0 || options.min_blocks_per_sm > 32)
    TESSEL_USER_ERROR("jit", where,
                      "JitOptions::min_blocks_per_sm is "
                          << options.min_blocks_per_sm
                          << "; legal: 0 (no request) or 1 to 32 blocks per SM (no GPU runs more)");
  passes::Target target{arch, sm_of(arch), smem_cap_for(arch, options),
                        gpu_available() && current_device().arch() == arch ? current_device().sm_count : 0};
  const passes::PassContext::Switches switches = jit_switches(options);

  int nparams = static_cast<int>(prog.params.size());
  for (std::size_t n = 0; n < options.out_idx.size(); ++n) {
    const int idx = options.out_idx[n];
    int i = idx < 0 ? idx + nparams : idx;
    if (i < 0 || i >= nparams)
      TESSEL_USER_ERROR("jit", where,
                        "out_idx " << idx << " is out of range for " << prog.name << " with " << nparams
                                   << " parameters; legal: 0 to " << nparams - 1 << ", or -1 to -"
                                   << nparams);
    for (std::size_t m = 0; m < n; ++m) {
      const int other = options.out_idx[m];
      if ((other < 0 ? other + nparams : other) == i)
        TESSEL_USER_ERROR("jit", where,
                          "out_idx names parameter " << i << " (" << prog.params[i]->name << ") twice, as "
                                                     << other << " and " << idx
                                                     << "; each output is allocated and returned once");
    }
    impl->outputs.push_back(i);
  }

  impl->lowered = lower(prog, target, switches, options.keep_ir_stages);
  // The launch shape is known once lowered (the kernel ABI, plan_kernel_abi): check it before
  // paying for NVRTC.
  const auto& ctx = impl->lowered.ctx;
  const passes::PassContext::KernelAbi& abi = ctx.abi;
  std::int64_t g[3] = {1, 1, 1};
  for (size_t d = 0; d < abi.grid.size(); ++d) {
    auto v = ir::as_const_int(abi.grid[d]);
    TESSEL_INTERNAL_CHECK(v.has_value(),
                          "grid dimension " << d << " is not constant: " << ir::to_string(abi.grid[d]));
    g[d] = *v;
  }
  const std::source_location kernel_where = kernel_location(prog.body);
  for (size_t d = 0; d < abi.grid.size(); ++d)
    if (g[d] < 1)
      TESSEL_USER_ERROR("Kernel", kernel_where,
                        "grid dimension "
                            << d << " is " << ir::to_string(abi.grid[d]) << " = " << g[d]
                            << ", not a positive block count; check the tile sizes it divides by");
  if (g[0] > 2147483647LL || g[1] > 65535 || g[2] > 65535)
    TESSEL_USER_ERROR("Kernel", kernel_where,
                      "the grid is " << g[0] << " x " << g[1] << " x " << g[2]
                                     << "; the x extent may be at most 2147483647 and the y and z extents at "
                                        "most 65535 (CUDA's limits)");
  impl->grid = Dim3{static_cast<unsigned>(g[0]), static_cast<unsigned>(g[1]), static_cast<unsigned>(g[2])};
  std::string source = codegen::generate_cuda(impl->lowered);
  std::string name = codegen::kernel_name(prog.name);
  CompileOptions copts;
  copts.arch = arch;
  copts.program_name = prog.name + ".cu";
  copts.time_limit_s = options.compile_time_limit_s;
  try {
    impl->compiled = compile_cached(source, name, copts);
  } catch (const NvrtcError& e) {
    // The author's occupancy request can leave ptxas too few registers for an instruction (a
    // wgmma's accumulators): that is the request's error, not the compiler's.
    const std::string what = e.what();
    if (ctx.abi.min_blocks_per_sm > 1 && options.min_blocks_per_sm > 1 &&
        what.find("Insufficient registers") != std::string::npos)
      TESSEL_USER_ERROR("JitOptions::min_blocks_per_sm", kernel_where,
                        "min_blocks_per_sm = " << options.min_blocks_per_sm << " caps " << prog.name << "'s "
                                               << ctx.abi.threads << "-thread blocks at "
                                               << 65536 / (ctx.abi.min_blocks_per_sm *
                                                           ctx.abi.threads)
                                               << " registers per thread, too few for its instructions (ptxas: "
                                               << "Insufficient registers); ask for fewer blocks per SM or leave it 0");
    throw_internal_error("the CUDA generated for " + prog.name + " does not compile:\n" + e.what() +
                         "\n--- generated source ---\n" + source);
  }
  impl->compiled.source = source;
  // setmaxnreg moves registers within the CTA's pool: the consumers' setmaxnreg.inc waits
  // forever unless the kernel launched with the registers specialize_warps budgeted from.
  // When ptxas's log gives no register count (seen on the H200 for two generated attention
  // kernels, whose logs were not kept), the driver's count is checked when the kernel loads.
  if (ctx.consumer_regs > 0 && impl->compiled.resources.registers < 0) impl->required_regs = ctx.entry_regs;
  if (ctx.consumer_regs > 0 && impl->compiled.resources.registers >= 0 &&
      impl->compiled.resources.registers != ctx.entry_regs)
    throw_internal_error("the warp-specialized " + prog.name + " was compiled to " +
                         std::to_string(impl->compiled.resources.registers) +
                         " registers per thread, not the " + std::to_string(ctx.entry_regs) +
                         " its setmaxnreg budgets assume; launching it could hang");

  impl->info.kernel_name = name;
  impl->info.threads = abi.threads;
  impl->info.dynamic_smem_bytes = static_cast<int>(abi.dynamic_smem_bytes);
  impl->info.arch = arch;
  impl->info.instructions = instructions_in(impl->compiled.ptx);
  const passes::HopperPlan& hopper = ctx.hopper;
  const bool tensor_cores = std::find(impl->info.instructions.begin(), impl->info.instructions.end(),
                                      "mma.sync") != impl->info.instructions.end();
  impl->info.path =
      hopper.selected ? std::string("sm90 TMA + wgmma, warp-specialized, persistent") +
                            (hopper.split_k > 1 ? ", split-K over 2-CTA clusters" : "") +
                            (hopper.cluster_n > 1   ? ", A multicast over 2-CTA clusters"
                             : hopper.cluster_m > 1 ? ", B multicast over 2-CTA clusters"
                                                    : "") +
                            (hopper.tma_store ? ", TMA-store epilogue" : "") +
                            (hopper.fused_epilogue ? ", fused Parallel epilogue" : "")
      : ctx.uses_wgmma
          ? std::string("sm90 wgmma block gemm (generic kernel)") + (tensor_cores ? " + mma.sync" : "") +
                (!ctx.mbarriers.empty() ? ", TMA + mbarrier ring" : "") +
                (ctx.launch_threads > 0 ? ", warp-specialized" : "") +
                (ctx.tile_loop.applied ? ", persistent" : "") +
                (ctx.cluster_split.applied
                     ? ", split-K over " + std::to_string(ctx.cluster_split.ranks) + "-CTA clusters"
                     : std::string()) +
                (ctx.cluster_multicast.applied ? multicast_path(ctx) : std::string()) +
                (ctx.pingpong ? ", ping-pong" : "") + (!ctx.tma_stores.empty() ? ", TMA-store epilogue" : "")
      : tensor_cores ? "mma.sync"
                     : "CUDA cores (no gemm)";
  impl->info.hopper_declined = hopper.why_not;
  if (!ctx.cluster_multicast.why_not.empty())
    impl->info.declined.push_back("use_cluster multicast: " + ctx.cluster_multicast.why_not);
  for (const std::string& w : ctx.wgmma_declined) impl->info.declined.push_back("wgmma: " + w);
  if (!hopper.selected && !ctx.mbarriers.empty()) {
    if (!ctx.tile_loop.applied)
      impl->info.declined.push_back("persistent tiles: " + (ctx.tile_loop.why_not.empty() ? std::string("not applicable")
                                                                                         : ctx.tile_loop.why_not));
    if (ctx.launch_threads == 0)
      impl->info.declined.push_back("warp specialization: " + (ctx.specialize_why_not.empty()
                                                                  ? std::string("not applicable")
                                                                  : ctx.specialize_why_not));
  }
  for (const passes::TmaParam& t : ctx.tma_params) {
    if (t.box.empty()) continue;  // the Hopper GEMM's own maps (its plan says them)
    std::string box;
    for (size_t d = 0; d < t.box.size(); ++d) box += (d ? ", " : "") + std::to_string(t.box[d]);
    impl->info.tma_maps.push_back(t.var.name() + ": box [" + box + "] of " + t.tensor->name + ", " +
                                  std::to_string(t.swizzle_bytes) + "-byte swizzle");
  }
  for (const passes::MbarrierArray& a : ctx.mbarriers)
    impl->info.mbarriers.push_back(a.bars->name + "[" + std::to_string(a.bars.const_numel()) +
                                   "]: " + std::to_string(a.count) +
                                   (a.count == 1 ? " arrival" : " arrivals") + " per phase");
  if (ctx.launch_threads > 0) {
    impl->info.consumer_threads = ctx.threads;
    impl->info.producer_threads = ctx.launch_threads - ctx.threads;
    impl->info.consumer_regs = ctx.consumer_regs;
    impl->info.producer_regs = ctx.producer_regs;
  }
  impl->info.pingpong = ctx.pingpong;
  for (const passes::PassContext::TileLoad& t : ctx.tile_loads) {
    if (t.taken)
      impl->info.tile_loads.push_back(t.tensor + " -> " + t.buffer);
    else
      impl->info.declined.push_back("tile loads: " + t.tensor + " -> " + t.buffer +
                                    " stays the consumers' copy: " + t.why_not);
  }
  impl->info.persistent = abi.persistent;
  impl->info.cluster_size = abi.cluster_size;
  return JitKernel(impl);
}

const std::string& JitKernel::name() const {
  return impl_->program->name;
}
const std::string& JitKernel::source() const {
  return impl_->compiled.source;
}
const std::string& JitKernel::ptx() const {
  return impl_->compiled.ptx;
}
const std::vector<char>& JitKernel::cubin() const {
  return impl_->compiled.cubin;
}
const std::string& JitKernel::compile_log() const {
  return impl_->compiled.log;
}
const Resources& JitKernel::resources() const {
  return impl_->compiled.resources;
}
const KernelInfo& JitKernel::info() const {
  return impl_->info;
}
const ir::PrimFuncNode& JitKernel::program() const {
  return *impl_->program;
}

const std::vector<std::pair<std::string, std::string>>& JitKernel::ir_stages() const {
  return impl_->lowered.stages;
}

std::string JitKernel::lowered_ir() const {
  ir::PrimFuncNode f{impl_->program->name, impl_->program->params, impl_->lowered.body};
  return ir::to_string(f);
}

void JitKernel::launch(const std::vector<Tensor>& args, CUstream stream) const {
  const auto& params = impl_->program->params;
  const std::string& fn = impl_->program->name;
  if (args.size() != params.size())
    throw RuntimeError(fn + ": expected " + std::to_string(params.size()) + " tensors, got " +
                       std::to_string(args.size()));
  std::vector<CUdeviceptr> ptrs(args.size());
  std::vector<void*> argv(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Tensor& t = args[i];
    const ir::Buffer& p = params[i];
    // Built only for an error: a launch is on every op's per-call path.
    auto which = [&] { return fn + ": argument " + std::to_string(i) + " (" + p->name + ")"; };
    if (!t.defined()) throw RuntimeError(which() + " is an undefined tensor");
    if (t.dtype() != p->dtype)
      throw RuntimeError(which() + " has dtype " + std::string(dtype_name(t.dtype())) + "; expected " +
                         std::string(dtype_name(p->dtype)));
    std::vector<std::int64_t> want = p.const_shape();
    if (t.shape() != want)
      throw RuntimeError(which() + " has shape " + shape_text(t.shape()) + "; expected " + shape_text(want));
    if (!p.row_major() || !t.is_contiguous()) {
      // The kernel was compiled for the parameter's strides (row-major unless it declared
      // others); dimensions of size 1 may have any stride.
      std::vector<std::int64_t> compiled;
      for (const ir::Expr& e : p.strides()) compiled.push_back(*ir::as_const_int(e));
      bool same = true;
      for (size_t d = 0; d < want.size(); ++d) same = same && (want[d] == 1 || t.strides()[d] == compiled[d]);
      if (!same)
        throw RuntimeError(which() + " has strides " + shape_text(t.strides()) +
                           "; the kernel was compiled for " + shape_text(compiled) +
                           (p.row_major() ? " (row-major): copy it to a contiguous tensor, or declare the "
                                            "parameter with its strides (PrimFunc::tensor)"
                                          : ""));
    }
    if (t.device_ptr() % 16 != 0)
      throw RuntimeError(which() + " is at address " + std::to_string(t.device_ptr()) +
                         ", not 16-byte aligned; Tessel's vectorized copies need 16-byte aligned tensors");
    if (gpu_available() && t.device() != current_device().ordinal)
      throw RuntimeError(which() + " is on cuda:" + std::to_string(t.device()) +
                         " but the kernel runs on cuda:" + std::to_string(current_device().ordinal));
    ptrs[i] = t.device_ptr();
    argv[i] = &ptrs[i];
  }
  // Tensor maps (TMA) are encoded for this launch's pointers and passed by value.
  const auto& tma = impl_->lowered.ctx.tma_params;
  std::vector<CUtensorMap> maps(tma.size());
  for (size_t i = 0; i < tma.size(); ++i) {
    size_t index = 0;
    while (!params[index].same_as(tma[i].tensor)) ++index;
    maps[i] = encode_tensor_map(args[index], tma[i]);
    argv.push_back(&maps[i]);
  }
  const auto& info = impl_->info;
  Dim3 grid = impl_->grid;
  if (impl_->lowered.ctx.abi.grid_capped_at_launch) {
    // Whole clusters: the grid is a multiple of the cluster size (__cluster_dims__).
    const int cluster = std::max(1, info.cluster_size);
    int ctas = current_device().sm_count;
    const int cap = impl_->options.max_persistent_ctas > 0 ? impl_->options.max_persistent_ctas
                                                           : impl_->lowered.ctx.max_persistent_ctas;
    if (cap > 0) ctas = std::min(ctas, cap);
    const int slots = std::max(cluster, ctas / cluster * cluster);
    grid.x = static_cast<unsigned>(std::min<std::int64_t>(grid.x, slots));
  }
  impl_->kernel().launch(grid, Dim3{static_cast<unsigned>(info.threads), 1, 1}, info.dynamic_smem_bytes,
                         stream, argv.data(), impl_->lowered.ctx.abi.programmatic_launch);
}

std::vector<Tensor> JitKernel::call(const std::vector<Tensor>& inputs, CUstream stream) const {
  const auto& params = impl_->program->params;
  const auto& outs = impl_->outputs;
  if (inputs.size() + outs.size() != params.size())
    throw RuntimeError(impl_->program->name + ": expected " + std::to_string(params.size() - outs.size()) +
                       " input tensors (" + std::to_string(params.size()) + " parameters, " +
                       std::to_string(outs.size()) + " allocated as outputs), got " +
                       std::to_string(inputs.size()));
  std::vector<Tensor> all(params.size());
  std::vector<Tensor> result;
  for (int o : outs) {
    all[o] = Tensor::empty(params[o].const_shape(), params[o]->dtype);
  }
  size_t next = 0;
  for (size_t i = 0; i < params.size(); ++i)
    if (!all[i].defined()) all[i] = inputs[next++];
  launch(all, stream);
  for (int o : outs) result.push_back(all[o]);
  return result;
}

std::vector<interp::HostTensor> JitKernel::run_on_cpu(const std::vector<interp::HostTensor>& inputs) const {
  return interp::run_on_cpu(impl_->func, inputs, impl_->options.out_idx);
}

Tensor JitKernel::single_output(std::vector<Tensor>& out) const {
  if (out.size() != 1)
    throw RuntimeError(impl_->program->name + " returns " + std::to_string(out.size()) +
                       " outputs; use call() to get them all");
  return out[0];
}

}  // namespace tessel
