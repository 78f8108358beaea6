// The tuning cache: one JSON file per key under cache_directory()/tune, written atomically.
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "tessel/autotune/Autotune.hpp"
#include "tessel/runtime/Cache.hpp"
#include "tessel/runtime/Driver.hpp"
#include "tessel/runtime/Nvrtc.hpp"

namespace tessel::autotune {

namespace fs = std::filesystem;

namespace {
constexpr int kFormat = 1;

std::string temp_suffix() {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::ostringstream os;
  os << ".tmp." << ::getpid() << "." << std::hex << std::hash<std::thread::id>{}(std::this_thread::get_id())
     << "." << rng();
  return os.str();
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

KeyParts softmax_key_parts(long long M, long long N, DType dtype, const DeviceKey& device) {
  return key_parts("softmax", {M, N}, {std::string(dtype_name(dtype))},
                   softmax_space(device.arch(), M, N, dtype), device);
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
  if (!d) return std::nullopt;
  return *d / "tune";
}

std::optional<StoredResult> read_tuning_entry(const fs::path& dir, const std::string& key) {
  const fs::path file = dir / (key + ".json");
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    const nlohmann::json j = nlohmann::json::parse(data);
    if (j.at("format").get<int>() != kFormat || j.at("key").get<std::string>() != key)
      throw std::runtime_error("another key");
    StoredResult r;
    r.config = j.at("config").get<Config>();
    r.ms = j.at("ms").get<double>();
    r.strategy = j.at("strategy").get<std::string>();
    r.space = j.at("space").get<std::string>();
    if (r.config.empty()) throw std::runtime_error("empty config");
    return r;
  } catch (const std::exception&) {
    std::error_code ec;
    fs::remove(file, ec);  // damaged: the next tune writes it again
    return std::nullopt;
  }
}

bool write_tuning_entry(const fs::path& dir, const std::string& key, const StoredResult& r) {
  nlohmann::json j = {{"format", kFormat},      {"key", key},      {"config", r.config}, {"ms", r.ms},
                      {"strategy", r.strategy}, {"space", r.space}};
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path file = dir / (key + ".json");
  const fs::path temp = file.string() + temp_suffix();
  {
    std::ofstream out(temp, std::ios::trunc);
    if (!out) return false;
    out << j.dump(2) << "\n";
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      return false;
    }
  }
  fs::rename(temp, file, ec);
  if (ec) {
    fs::remove(temp, ec);
    return false;
  }
  return true;
}

}  // namespace tessel::autotune
