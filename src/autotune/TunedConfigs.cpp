// The tuning cache as the library kernels see it: the stored winner for one problem on this GPU.
#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Driver.hpp"

namespace tessel::autotune {

namespace {
HardwareLimits current_limits() {
  const DeviceInfo& d = current_device();
  return HardwareLimits{d.smem_optin_per_block, d.max_threads_per_block};
}
}  // namespace

std::optional<TunedMatmul> find_tuned_matmul_config(long long M, long long N, long long K, DType dtype,
                                                    const DeviceKey& device, const std::filesystem::path& dir,
                                                    const HardwareLimits& limits) {
  const std::string arch = device.arch();
  const bool splits = !kernels::split_k_candidates(M, N, K, dtype, arch).empty();
  auto tuned = [&](const StoredResult& r) {
    return TunedMatmul{gemm_config(r.config, dtype), gemm_split_k(r.config), splits};
  };
  if (const auto stored =
          read_valid_tuning_entry(dir, tuning_key(gemm_split_k_key_parts(M, N, K, dtype, device)),
                                  gemm_space(arch, dtype, M, N, K), limits))
    return tuned(*stored);
  if (!splits) return std::nullopt;  // the two keys and spaces are one: looked up already
  const auto stored = read_valid_tuning_entry(dir, tuning_key(gemm_key_parts(M, N, K, dtype, device)),
                                              gemm_space(arch, dtype), limits);
  if (!stored) return std::nullopt;
  TunedMatmul t = tuned(*stored);
  t.split_searched = false;  // a tune of one-kernel configs only
  return t;
}

std::optional<kernels::SoftmaxConfig> find_tuned_softmax_config(long long M, long long N, DType dtype,
                                                                const DeviceKey& device,
                                                                const std::filesystem::path& dir,
                                                                const HardwareLimits& limits) {
  const auto stored = read_valid_tuning_entry(dir, tuning_key(softmax_key_parts(M, N, dtype, device)),
                                              softmax_space(device.arch(), M, N, dtype), limits);
  if (!stored) return std::nullopt;
  return softmax_config(stored->config);
}

std::optional<kernels::AttentionConfig> find_tuned_attention_config(const kernels::AttentionShape& shape,
                                                                    DType dtype, bool causal,
                                                                    const DeviceKey& device,
                                                                    const std::filesystem::path& dir,
                                                                    const HardwareLimits& limits) {
  const auto stored =
      read_valid_tuning_entry(dir, tuning_key(attention_key_parts(shape, dtype, causal, device)),
                              attention_space(device.arch(), shape, dtype, causal), limits);
  if (!stored) return std::nullopt;
  return attention_config(stored->config);
}

std::optional<TunedMatmul> tuned_matmul_config(long long M, long long N, long long K, DType dtype) noexcept {
  try {
    const auto device = current_device_key();
    const auto dir = tuning_cache_directory();
    if (!device || !dir) return std::nullopt;
    return find_tuned_matmul_config(M, N, K, dtype, *device, *dir, current_limits());
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<kernels::SoftmaxConfig> tuned_softmax_config(long long M, long long N, DType dtype) noexcept {
  try {
    const auto device = current_device_key();
    const auto dir = tuning_cache_directory();
    if (!device || !dir) return std::nullopt;
    return find_tuned_softmax_config(M, N, dtype, *device, *dir, current_limits());
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<kernels::AttentionConfig> tuned_attention_config(const kernels::AttentionShape& shape,
                                                               DType dtype, bool causal) noexcept {
  try {
    const auto device = current_device_key();
    const auto dir = tuning_cache_directory();
    if (!device || !dir) return std::nullopt;
    return find_tuned_attention_config(shape, dtype, causal, *device, *dir, current_limits());
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace tessel::autotune
