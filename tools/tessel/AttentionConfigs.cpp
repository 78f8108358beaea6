#include "tools/tessel/AttentionConfigs.hpp"

#include <cstdio>
#include <stdexcept>

namespace tessel::cli {

kernels::AttentionConfig parse_attention_config(const std::string& text) {
  kernels::AttentionConfig c;
  int used = 0;
  const auto bad = [&] {
    return std::invalid_argument("--config: '" + text + "' is not " + kAttentionConfigForm +
                                 " with positive numbers, e.g. 128x128:2:256, 128x128:2:256:ring, "
                                 "128x128:2:256:pingpong:persistent or "
                                 "128x128:2:256:ring:interleave or 192x128:2:384:ring:persistent:poly4 or "
                                 "192x128:2:384:ring:persistent:lazy");
  };
  if (std::sscanf(text.c_str(), "%dx%d:%d:%d%n", &c.block_M, &c.block_N, &c.num_stages, &c.threads, &used) !=
          4 ||
      c.block_M < 1 || c.block_N < 1 || c.num_stages < 1 || c.threads < 1)
    throw bad();
  std::string schedule = text.substr(static_cast<size_t>(used));
  if (const size_t poly = schedule.rfind(":poly"); poly != std::string::npos) {
    const std::string n = schedule.substr(poly + 5);
    if (n.empty() || n.size() > 2 || n.find_first_not_of("0123456789") != std::string::npos) throw bad();
    c.poly_exp_one_in = std::stoi(n);
    if (c.poly_exp_one_in < 2 || c.poly_exp_one_in > 16)
      throw std::invalid_argument(
          "--config: '" + text + "' asks for poly" + n +
          "; legal: poly2 .. poly16 (one group of 8 key columns in that many with its "
          "exponentials on the FMA pipe)");
    schedule.resize(poly);
  }
  const std::string lazy = ":lazy";
  if (schedule.size() >= lazy.size() &&
      schedule.compare(schedule.size() - lazy.size(), lazy.size(), lazy) == 0) {
    c.lazy_rescale = true;
    schedule.resize(schedule.size() - lazy.size());
  }
  const std::string interleave = ":interleave";
  if (schedule.size() >= interleave.size() &&
      schedule.compare(schedule.size() - interleave.size(), interleave.size(), interleave) == 0) {
    c.kv_interleave = true;
    schedule.resize(schedule.size() - interleave.size());
  }
  const std::string persistent = ":persistent";
  if (schedule.size() >= persistent.size() &&
      schedule.compare(schedule.size() - persistent.size(), persistent.size(), persistent) == 0) {
    c.persistent = true;
    schedule.resize(schedule.size() - persistent.size());
  }
  if (schedule == ":pingpong")
    c.schedule = kernels::AttentionConfig::Schedule::ring_pingpong;
  else if (schedule == ":ring")
    c.schedule = kernels::AttentionConfig::Schedule::ring;
  else if (schedule == ":cpasync")
    c.schedule = kernels::AttentionConfig::Schedule::cp_async;
  else if (!schedule.empty())
    throw bad();
  if (c.persistent && c.schedule == kernels::AttentionConfig::Schedule::cp_async)
    throw std::invalid_argument("--config: '" + text +
                                "' is persistent on the cp.async schedule; ':persistent' takes a ring schedule "
                                "(pingpong or ring)");
  return c;
}

std::string format_attention_config(const kernels::AttentionConfig& c) {
  const char* schedule = c.schedule == kernels::AttentionConfig::Schedule::ring_pingpong ? "pingpong"
                         : c.schedule == kernels::AttentionConfig::Schedule::ring      ? "ring"
                                                                                       : "cpasync";
  return std::to_string(c.block_M) + "x" + std::to_string(c.block_N) + ":" + std::to_string(c.num_stages) +
         ":" + std::to_string(c.threads) + ":" + schedule + (c.persistent ? ":persistent" : "") +
         (c.kv_interleave ? ":interleave" : "") + (c.lazy_rescale ? ":lazy" : "") +
         (c.poly_exp_one_in ? ":poly" + std::to_string(c.poly_exp_one_in) : "");
}

}  // namespace tessel::cli
