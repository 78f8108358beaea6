// tessel dump gemm: what the compiler makes of the tutorial GEMM, at each level — the program's
// IR, the lowered IR, the generated CUDA C++, the PTX. Needs no GPU.
#include <iostream>
#include <memory>

#include "kernels/gemm/Matmul.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/GemmConfigs.hpp"
#include "tools/tessel/System.hpp"

namespace tessel::cli {

namespace {

struct DumpOptions {
  int M = 2048, N = 2048, K = 2048;
  std::string dtype = "f16";
  std::string config;
  std::string arch;
  bool ir = false, lowered = false, source = false, ptx = false, resources = false;
};

int run_dump(const DumpOptions& o) {
  const int chosen = int(o.ir) + int(o.lowered) + int(o.source) + int(o.ptx) + int(o.resources);
  if (chosen > 1) {
    std::cerr << "tessel dump gemm: choose one of --ir, --lowered, --source, --ptx, --resources\n";
    return kExitUsage;
  }
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype || (*dtype != DType::f16 && *dtype != DType::bf16)) {
    std::cerr << "tessel dump gemm: --dtype must be f16 or bf16, not '" << o.dtype << "'\n";
    return kExitUsage;
  }
  const SystemInfo& s = system_info();
  const GemmShape shape{o.M, o.N, o.K};
  kernels::MatmulConfig c;
  try {
    c = o.config.empty() ? default_gemm_config(shape, *dtype, s.smem_cap())
                         : parse_matmul_config(o.config, *dtype);
  } catch (const std::invalid_argument& e) {
    std::cerr << "tessel dump gemm: " << e.what() << "\n";
    return kExitUsage;
  }

  if (chosen == 0 || o.ir) {
    std::cout << kernels::matmul_program(o.M, o.N, o.K, c).script();
    return kExitOk;
  }
  JitOptions jo;
  jo.arch = o.arch.empty() ? s.arch() : o.arch;
  const JitKernel k = kernels::make_matmul(o.M, o.N, o.K, c, jo);
  if (o.lowered) std::cout << k.lowered_ir();
  if (o.source) std::cout << k.source();
  if (o.ptx) std::cout << k.ptx();
  if (o.resources) {
    const Resources& r = k.resources();
    const KernelInfo& info = k.info();
    std::cout << "kernel:        " << info.kernel_name << " (" << shape.describe() << " "
              << dtype_name(c.dtype) << ", config " << format_matmul_config(c) << ", " << info.arch << ")\n"
              << "threads:       " << info.threads << "\n"
              << "registers:     " << r.registers << "\n"
              << "spills:        " << r.spill_store_bytes << " B stored, " << r.spill_load_bytes
              << " B loaded\n"
              << "shared memory: " << info.dynamic_smem_bytes << " B dynamic, " << r.static_smem_bytes
              << " B static\n"
              << "compile:       " << r.compile_ms << " ms" << (r.cache_hit ? " (cache hit)" : "") << "\n"
              << "instructions: ";
    for (const std::string& i : info.instructions) std::cout << " " << i;
    std::cout << "\n";
  }
  if (!std::cout) return kExitCheckFailed;
  return kExitOk;
}

}  // namespace

Command add_dump_command(CLI::App& root) {
  auto o = std::make_shared<DumpOptions>();
  CLI::App* dump = root.add_subcommand("dump", "Print what the compiler makes of a kernel (no GPU needed)");
  dump->require_subcommand(1);
  CLI::App* app = dump->add_subcommand("gemm",
                                       "The tutorial GEMM C[M,N] = A[M,K] B[K,N]: its IR (default), lowered "
                                       "IR, CUDA source, PTX or resources");
  app->add_option("--m", o->M, "Rows of A and C")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--n", o->N, "Columns of B and C")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--k", o->K, "Columns of A, rows of B")->capture_default_str()->check(CLI::PositiveNumber);
  app->add_option("--dtype", o->dtype, "f16 or bf16")->capture_default_str();
  app->add_option("--config", o->config,
                  "BMxBNxBK:stages:threads[:swz[N]], e.g. 128x128x32:3:128 (default: the built-in table)")
      ->type_name("CONFIG");
  app->add_option("--arch", o->arch, "NVRTC target, e.g. sm_80 or sm_90a (default: the GPU's, else sm_90a)");
  app->add_flag("--ir", o->ir, "The program's IR, as recorded from the C++ (PrimFunc::script)");
  app->add_flag("--lowered", o->lowered, "The IR after the compiler's passes (what codegen sees)");
  app->add_flag("--source", o->source, "The generated CUDA C++");
  app->add_flag("--ptx", o->ptx, "The PTX from NVRTC");
  app->add_flag("--resources", o->resources,
                "Registers, spills, shared memory, compile time, instructions used");
  return {app, [o] { return run_dump(*o); }};
}

}  // namespace tessel::cli
