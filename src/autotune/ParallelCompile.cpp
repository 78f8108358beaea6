// compile_all(): the candidates compiled on a pool of threads, each under a time limit.
//
// NVRTC cannot be interrupted, so a candidate past the limit is not stopped: its row is final at
// once (compile_failed, "compile time limit ..."), a new worker takes its thread's place so the
// others keep the pool's width, and when its compile ends the result is dropped and the stalled
// thread exits. compile_all joins every thread before returning (the factory may hold references
// to the caller's state), so a candidate that never finishes compiling would still hold it up;
// the limit keeps slow candidates out of the search and the other compiles going meanwhile.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "tessel/autotune/Autotune.hpp"

namespace tessel::autotune {

namespace {

using Clock = std::chrono::steady_clock;

std::string first_line(const std::string& s, std::size_t max_chars = 200) {
  std::string out = s.substr(0, s.find('\n'));
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out;
}

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Compiles one candidate; the row and, when usable, the kernel.
std::pair<Row, JitKernel> compile_one(const Factory& factory, const Config& config, bool allow_spills) {
  Row row;
  row.config = config;
  JitKernel kernel;
  const auto c0 = Clock::now();
  try {
    JitKernel k = factory(config);
    if (!k.defined()) throw std::runtime_error("the factory returned no kernel");
    const Resources& res = k.resources();
    row.registers = res.registers;
    row.compile_ms = 1000 * seconds_between(c0, Clock::now());
    const int spill = res.spill_store_bytes + res.spill_load_bytes;
    row.spill_bytes = spill;
    row.smem_bytes = k.info().dynamic_smem_bytes + res.static_smem_bytes;
    if (spill > 0 && !allow_spills) {
      row.status = Status::spills;
      row.reason = std::to_string(spill) + " bytes of spill loads/stores";
    } else {
      row.status = Status::not_timed;
      if (spill > 0) row.reason = "spills " + std::to_string(spill) + " bytes (allowed)";
      kernel = std::move(k);
    }
  } catch (const std::exception& e) {
    row.status = Status::compile_failed;
    row.reason = first_line(e.what());
    row.compile_ms = 1000 * seconds_between(c0, Clock::now());
  }
  return {std::move(row), std::move(kernel)};
}

std::string limit_text(double seconds) {
  std::ostringstream os;
  os << seconds;
  return os.str();
}

}  // namespace

CompileReport compile_all(const Factory& factory, const std::vector<Config>& configs,
                          const CompileOptions& o) {
  CompileReport r;
  const std::size_t n = configs.size();
  r.rows.resize(n);
  r.kernels.resize(n);
  const auto t0 = Clock::now();
  if (n == 0) return r;
  int workers =
      o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(workers), n));

  // Everything below is guarded by `mutex`, which also serializes on_compiled.
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t next = 0, finished = 0;
  std::vector<std::optional<Clock::time_point>> started(n);
  std::vector<char> settled(n, 0);  // row i is final

  auto finish = [&](std::size_t i, Row row, JitKernel kernel) {  // with the mutex held
    r.rows[i] = std::move(row);
    r.kernels[i] = std::move(kernel);
    settled[i] = 1;
    ++finished;
    if (o.on_compiled) o.on_compiled(i, r.rows[i]);
    changed.notify_all();
  };
  auto work = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    while (next < n) {
      const std::size_t i = next++;
      started[i] = Clock::now();
      lock.unlock();
      auto [row, kernel] = compile_one(factory, configs[i], o.allow_spills);
      lock.lock();
      if (settled[i]) return;  // past the limit: the row is written, another worker took this seat
      finish(i, std::move(row), std::move(kernel));
    }
  };

  std::vector<std::thread> pool;
  for (int t = 0; t < workers; ++t) pool.emplace_back(work);
  {
    // The calling thread watches the clock: a candidate past the limit is final now.
    std::unique_lock<std::mutex> lock(mutex);
    const auto poll = o.time_limit_s > 0
                          ? std::chrono::duration<double>(std::clamp(o.time_limit_s / 4, 0.001, 0.1))
                          : std::chrono::duration<double>(3600);
    while (finished < n) {
      changed.wait_for(lock, poll);
      if (o.time_limit_s <= 0) continue;
      const auto now = Clock::now();
      for (std::size_t i = 0; i < n; ++i) {
        if (settled[i] || !started[i] || seconds_between(*started[i], now) <= o.time_limit_s) continue;
        Row row;
        row.config = configs[i];
        row.status = Status::compile_failed;
        row.reason = "compile time limit: still compiling after " + limit_text(o.time_limit_s) + " s";
        row.compile_ms = 1000 * seconds_between(*started[i], now);
        finish(i, std::move(row), JitKernel{});
        if (next < n) pool.emplace_back(work);  // the stalled thread's seat
      }
    }
  }
  for (std::thread& t : pool) t.join();
  r.seconds = seconds_between(t0, Clock::now());
  return r;
}

}  // namespace tessel::autotune
