// The tuning cache: one JSON file per key under cache_directory()/tune, written atomically into
// a private folder (CacheFolder.hpp), read strictly (integers only, in range), and used only for
// a config its space still holds.
#include <climits>
#include <nlohmann/json.hpp>

#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/CacheFolder.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Nvrtc.hpp"

namespace tessel::autotune {

namespace fs = std::filesystem;

namespace {
constexpr int kFormat = 1;
// A stored result is a few hundred bytes; anything much larger is not one of ours.
constexpr std::uint64_t kMaxEntryBytes = 1 << 20;

// The config object, knob by knob: every value an integer that fits an int (1e20, 12.5, "64",
// 2^31 are rejected, never converted).
Config config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw std::runtime_error("the config is not a JSON object");
  Config c;
  for (const auto& [name, value] : j.items()) {
    const bool fits = value.is_number_unsigned() ? value.get<std::uint64_t>() <= INT_MAX
                      : value.is_number_integer()
                          ? value.get<std::int64_t>() >= INT_MIN && value.get<std::int64_t>() <= INT_MAX
                          : false;
    if (!fits)
      throw std::runtime_error("knob " + name + " is " + value.dump() + ", not an integer that fits an int");
    c[name] = value.get<int>();
  }
  if (c.empty()) throw std::runtime_error("the config is empty");
  return c;
}

void remove_with_note(const fs::path& file, const std::string& why) {
  std::error_code ec;
  fs::remove(file, ec);
  cache_note("tuning cache entry " + file.string() + " " + why + "; removed");
}
}  // namespace

std::string DeviceKey::arch() const {
  return arch_for_compute_capability(cc_major, cc_minor);
}

std::optional<DeviceKey> current_device_key() {
  try {
    if (!gpu_available()) return std::nullopt;
    const DeviceInfo& d = current_device();
    return DeviceKey{d.name, d.cc_major, d.cc_minor, d.sm_count, d.driver_version, nvrtc_version()};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

KeyParts key_parts(std::string kernel, std::vector<long long> shapes, std::vector<std::string> dtypes,
                   const Space& space, const DeviceKey& device) {
  KeyParts p;
  p.kernel = std::move(kernel);
  p.shapes = std::move(shapes);
  p.dtypes = std::move(dtypes);
  p.device_name = device.name;
  p.cc_major = device.cc_major;
  p.cc_minor = device.cc_minor;
  p.sm_count = device.sm_count;
  p.driver_version = device.driver_version;
  p.nvrtc_version = device.nvrtc_version;
  p.space = space.description();
  return p;
}

KeyParts key_parts_for_current_device(std::string kernel, std::vector<long long> shapes,
                                      std::vector<std::string> dtypes, const Space& space) {
  const DeviceInfo& d = current_device();  // throws, with the reason, without a GPU
  const DeviceKey device{d.name, d.cc_major, d.cc_minor, d.sm_count, d.driver_version, nvrtc_version()};
  return key_parts(std::move(kernel), std::move(shapes), std::move(dtypes), space, device);
}

KeyParts gemm_key_parts(long long M, long long N, long long K, DType dtype, const DeviceKey& device) {
  return key_parts("matmul", {M, N, K}, {std::string(dtype_name(dtype))}, gemm_space(device.arch(), dtype),
                   device);
}

KeyParts gemm_split_k_key_parts(long long M, long long N, long long K, DType dtype, const DeviceKey& device) {
  return key_parts("matmul", {M, N, K}, {std::string(dtype_name(dtype))},
                   gemm_space(device.arch(), dtype, M, N, K), device);
}

KeyParts softmax_key_parts(long long M, long long N, DType dtype, const DeviceKey& device) {
  return key_parts("softmax", {M, N}, {std::string(dtype_name(dtype))},
                   softmax_space(device.arch(), M, N, dtype), device);
}

KeyParts attention_key_parts(const kernels::AttentionShape& s, DType dtype, bool causal,
                             const DeviceKey& device) {
  return key_parts("attention",
                   {s.batch, s.heads, s.kv_heads, s.seqlen_q, s.seqlen_k, s.dim, causal ? 1 : 0,
                    attention_strides_class(s.q_strides, s.batch, s.seqlen_q, s.heads, s.dim),
                    attention_strides_class(s.k_strides, s.batch, s.seqlen_k, s.kv_heads, s.dim),
                    attention_strides_class(s.v_strides, s.batch, s.seqlen_k, s.kv_heads, s.dim)},
                   {std::string(dtype_name(dtype))}, attention_space(device.arch(), s, dtype, causal),
                   device);
}

std::string tuning_key(const KeyParts& p) {
  std::string text;
  auto field = [&](const std::string& name, const std::string& value) {
    text += name + " " + std::to_string(value.size()) + ":" + value + "\n";
  };
  field("format", std::to_string(kFormat));
  field("kernel", p.kernel);
  for (long long s : p.shapes) field("shape", std::to_string(s));
  for (const std::string& d : p.dtypes) field("dtype", d);
  field("device", p.device_name);
  field("cc", std::to_string(p.cc_major) + "." + std::to_string(p.cc_minor));
  field("sms", std::to_string(p.sm_count));
  field("driver", std::to_string(p.driver_version));
  field("nvrtc", std::to_string(p.nvrtc_version));
  field("tessel", p.tessel_version);
  field("space", p.space);
  return sha256_hex(text);
}

std::optional<fs::path> tuning_cache_directory() {
  auto d = cache_directory();
  if (!d || !use_private_folder(*d)) return std::nullopt;
  return *d / "tune";
}

std::optional<StoredResult> read_tuning_entry(const fs::path& dir, const std::string& key) {
  if (!use_private_folder(dir)) return std::nullopt;
  const fs::path file = dir / (key + ".json");
  const FileRead read = read_private_file(file, kMaxEntryBytes);
  if (read.status == FileRead::Status::missing) return std::nullopt;
  if (read.status == FileRead::Status::refused) {
    // Only a regular file is removed; a FIFO, a directory or a link is left alone.
    if (read.regular_file)
      remove_with_note(file, read.reason);
    else
      cache_note("tuning cache entry " + file.string() + " " + read.reason + "; not used");
    return std::nullopt;
  }
  try {
    const nlohmann::json j = nlohmann::json::parse(read.data);
    if (!j.is_object()) throw std::runtime_error("is not a JSON object");
    if (j.at("format") != kFormat || j.at("key") != key)
      throw std::runtime_error("holds another format or key");
    StoredResult r;
    r.config = config_from_json(j.at("config"));
    r.ms = j.at("ms").get<double>();
    r.strategy = j.at("strategy").get<std::string>();
    r.space = j.at("space").get<std::string>();
    return r;
  } catch (const std::exception& e) {
    remove_with_note(file, std::string("is damaged (") + e.what() + ")");  // the next tune writes it again
    return std::nullopt;
  }
}

std::optional<StoredResult> read_valid_tuning_entry(const fs::path& dir, const std::string& key,
                                                    const Space& space, const HardwareLimits& limits) {
  std::optional<StoredResult> r = read_tuning_entry(dir, key);
  if (!r) return std::nullopt;
  if (const std::optional<std::string> why = space.why_not(r->config, limits)) {
    remove_with_note(dir / (key + ".json"), "holds " + describe(r->config) + ", which " + *why);
    return std::nullopt;
  }
  return r;
}

bool write_tuning_entry(const fs::path& dir, const std::string& key, const StoredResult& r) {
  const nlohmann::json j = {{"format", kFormat},      {"key", key},      {"config", r.config}, {"ms", r.ms},
                            {"strategy", r.strategy}, {"space", r.space}};
  return use_private_folder(dir) && write_private_file(dir / (key + ".json"), j.dump(2) + "\n");
}

}  // namespace tessel::autotune
