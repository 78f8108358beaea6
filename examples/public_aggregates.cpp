// Designated initializers of the public option and result structs, compiled under the consumer's
// -Wall -Wextra -Werror -pedantic: a member without a default member initializer would warn
// (-Wmissing-field-initializers) here, as it would in any program that names only some fields.
#include <tessel/autotune/Autotune.hpp>
#include <tessel/interp/Interpreter.hpp>
#include <tessel/kernels/attention/FlashAttention.hpp>
#include <tessel/kernels/attention/GemmChain.hpp>
#include <tessel/kernels/gemm/Matmul.hpp>
#include <tessel/kernels/softmax/Softmax.hpp>
#include <tessel/runtime/Nvrtc.hpp>
#include <tessel/tessel.hpp>

namespace T = tessel;

T::JitOptions jit_options() {
  return {.out_idx = {-1}};
}
T::JitOptions jit_options_arch() {
  return {.arch = "sm_80", .smem_cap_bytes = 0};
}
T::KernelInfo kernel_info() {
  return {.threads = 128};
}
T::CompileOptions compile_options() {
  return {.arch = "sm_90a"};
}
T::Resources resources() {
  return {.registers = 0};
}
T::CompiledKernel compiled_kernel() {
  return {.ptx = ""};
}
T::interp::InterpOptions interp_options() {
  return {.poison_scratch = false};
}
T::kernels::MatmulConfig matmul_config() {
  return {.block_M = 64};
}
T::kernels::SoftmaxConfig softmax_config() {
  return {.threads = 128};
}
T::kernels::GemmChainConfig chain_config() {
  return {};
}
T::kernels::AttentionShape attention_shape() {
  return {.heads = 8, .dim = 128};
}
T::kernels::AttentionConfig attention_config() {
  return {.block_N = 64};
}
T::kernels::AttentionOptions attention_options() {
  return {.causal = true};
}
T::autotune::SearchOptions search_options() {
  return {.repeats = 5};
}
T::autotune::Options tune_options() {
  return {.warmup = 1};
}
T::autotune::CompileOptions tune_compile_options() {
  return {.threads = 2};
}
T::autotune::HardwareLimits hardware_limits() {
  return {.threads_per_block = 1024};
}
T::autotune::KeyParts key_parts() {
  return {.kernel = "gemm"};
}
T::autotune::Result tune_result() {
  return {.found = false};
}
