// Spaces (enumeration, constraints, pruning) and the search strategies, independent of compiling.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "tessel/autotune/Autotune.hpp"

namespace tessel::autotune {

std::string describe(const Config& c) {
  std::string out;
  for (const auto& [k, v] : c) out += (out.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return out;
}

int get(const Config& c, const std::string& name, int fallback) {
  auto it = c.find(name);
  return it == c.end() ? fallback : it->second;
}

Space& Space::knob(const std::string& name, std::vector<int> values) {
  knobs_.emplace_back(name, std::move(values));
  return *this;
}
Space& Space::point(Config c) {
  points_.push_back(std::move(c));
  return *this;
}
Space& Space::constraint(const std::string& name, std::function<bool(const Config&)> ok) {
  constraints_.emplace_back(name, std::move(ok));
  return *this;
}
Space& Space::smem_bytes(std::function<long long(const Config&)> f) {
  smem_ = std::move(f);
  return *this;
}
Space& Space::threads(std::function<int(const Config&)> f) {
  threads_ = std::move(f);
  return *this;
}

std::vector<Config> Space::points() const {
  std::vector<Config> out;
  if (!knobs_.empty()) {
    std::vector<std::size_t> idx(knobs_.size(), 0);
    bool any_empty = false;
    for (const auto& k : knobs_) any_empty |= k.second.empty();
    while (!any_empty) {
      Config c;
      for (std::size_t i = 0; i < knobs_.size(); ++i) c[knobs_[i].first] = knobs_[i].second[idx[i]];
      out.push_back(std::move(c));
      std::size_t d = knobs_.size();
      while (d > 0) {
        --d;
        if (++idx[d] < knobs_[d].second.size()) break;
        idx[d] = 0;
        if (d == 0) any_empty = true;  // wrapped the first knob: done
      }
    }
  }
  std::set<Config> seen(out.begin(), out.end());
  for (const Config& p : points_)
    if (seen.insert(p).second) out.push_back(p);
  return out;
}

std::string Space::description() const {
  std::string out = "space " + name_ + "\n";
  for (const auto& [name, values] : knobs_) {
    out += "knob " + name + ":";
    for (int v : values) out += " " + std::to_string(v);
    out += "\n";
  }
  for (const Config& p : points_) out += "point " + describe(p) + "\n";
  for (const auto& c : constraints_) out += "constraint " + c.first + "\n";
  return out;
}

std::string Space::prune_reason(const Config& c, const HardwareLimits& limits) const {
  for (const auto& [name, ok] : constraints_)
    if (!ok(c)) return "constraint " + name;
  if (smem_ && limits.smem_per_block > 0) {
    const long long s = smem_(c);
    if (s > limits.smem_per_block)
      return "shared memory " + std::to_string(s) + " > " + std::to_string(limits.smem_per_block) + " bytes";
  }
  if (threads_ && limits.threads_per_block > 0) {
    const int t = threads_(c);
    if (t > limits.threads_per_block)
      return "threads " + std::to_string(t) + " > " + std::to_string(limits.threads_per_block);
  }
  return {};
}

Space::Enumeration Space::enumerate(const HardwareLimits& limits) const {
  Enumeration e;
  std::vector<Config> all = points();
  e.total = all.size();
  for (Config& c : all) {
    std::string why = prune_reason(c, limits);
    if (why.empty())
      e.kept.push_back(std::move(c));
    else
      e.pruned.push_back({std::move(c), std::move(why)});
  }
  return e;
}

std::optional<std::string> Space::why_not(const Config& c, const HardwareLimits& limits) const {
  const std::vector<Config> all = points();
  if (std::find(all.begin(), all.end(), c) == all.end()) {
    // Points may differ in their knobs (gemm_space's split points have split_k, its grid does
    // not): a knob every point has is required, one no point has is foreign.
    std::map<std::string, std::size_t> holders;
    for (const Config& p : all)
      for (const auto& knob : p) ++holders[knob.first];
    for (const auto& [name, count] : holders)
      if (count == all.size() && !c.count(name))
        return "lacks the knob " + name + " of the space '" + name_ + "'";
    for (const auto& knob : c)
      if (!holders.count(knob.first))
        return "has a knob " + knob.first + " the space '" + name_ + "' does not have";
    return "is not a point of the space '" + name_ + "'";
  }
  const std::string why = prune_reason(c, limits);
  if (!why.empty()) return "is pruned from the space '" + name_ + "' by " + why;
  return std::nullopt;
}

const char* status_name(Status s) {
  switch (s) {
    case Status::ok:
      return "ok";
    case Status::pruned:
      return "pruned";
    case Status::compile_failed:
      return "compile_failed";
    case Status::launch_failed:
      return "launch_failed";
    case Status::wrong:
      return "wrong";
    case Status::spills:
      return "spills";
    case Status::not_timed:
      return "not_timed";
    case Status::ranked_out:
      return "ranked_out";
  }
  return "?";
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::exhaustive:
      return "exhaustive";
    case Strategy::random:
      return "random";
    case Strategy::halving:
      return "halving";
  }
  return "?";
}

std::optional<Strategy> parse_strategy(const std::string& s) {
  if (s == "exhaustive") return Strategy::exhaustive;
  if (s == "random") return Strategy::random;
  if (s == "halving") return Strategy::halving;
  return std::nullopt;
}

Measurement summarize(std::vector<double> v) {
  Measurement m;
  if (v.empty()) return m;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  m.median_ms = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  m.spread_ms = v[(3 * (n - 1)) / 4] - v[(n - 1) / 4];
  return m;
}

namespace {

// Successive halving's rounds below full repeats: (candidates timed, repeats) each. Everyone at
// few repeats, the faster half again at twice the repeats, ... until `final_fraction` of the
// candidates (at least 2) are left for the full repeats.
struct Round {
  std::size_t candidates;
  int repeats;
};
std::vector<Round> halving_rounds(int n, const SearchOptions& o, std::size_t& finalists) {
  const int full = std::max(1, o.repeats);
  const std::size_t stop =
      std::max<std::size_t>(2, static_cast<std::size_t>(std::ceil(n * o.final_fraction)));
  std::vector<Round> rounds;
  std::size_t alive = static_cast<std::size_t>(n);
  int reps = std::max(1, std::min(o.first_repeats, full));
  while (alive > stop && reps < full) {
    rounds.push_back({alive, reps});
    alive = std::max(stop, (alive + 1) / 2);
    reps = std::min(full, reps * 2);
  }
  finalists = alive;
  return rounds;
}

int random_budget(int n, const SearchOptions& o) {
  return o.budget > 0 ? std::min(o.budget, n) : std::max(1, n / 4);
}

}  // namespace

int planned_timings(int n, const SearchOptions& o) {
  if (n <= 0) return 0;
  if (o.strategy == Strategy::exhaustive) return n;
  if (o.strategy == Strategy::random) return random_budget(n, o);
  std::size_t finalists = 0;
  std::size_t total = 0;
  for (const Round& r : halving_rounds(n, o, finalists)) total += r.candidates;
  return static_cast<int>(total + finalists);
}

SearchResult search(int n, const std::function<Measurement(int, int)>& measure, const SearchOptions& o) {
  SearchResult r;
  r.measured.assign(static_cast<std::size_t>(std::max(n, 0)), Measurement{});
  r.repeats.assign(static_cast<std::size_t>(std::max(n, 0)), 0);
  if (n <= 0) return r;
  const int full = std::max(1, o.repeats);
  auto time = [&](int i, int reps) {
    r.measured[i] = measure(i, reps);
    r.repeats[i] = reps;
    ++r.timings;
    if (reps >= full) ++r.timed_full;
  };
  auto by_time = [&](std::vector<int>& v) {
    std::stable_sort(v.begin(), v.end(),
                     [&](int a, int b) { return r.measured[a].median_ms < r.measured[b].median_ms; });
  };

  std::vector<int> finalists;
  if (o.strategy == Strategy::exhaustive) {
    finalists.resize(n);
    std::iota(finalists.begin(), finalists.end(), 0);
  } else if (o.strategy == Strategy::random) {
    std::vector<int> all(n);
    std::iota(all.begin(), all.end(), 0);
    std::mt19937_64 rng(o.seed);
    std::shuffle(all.begin(), all.end(), rng);
    finalists.assign(all.begin(), all.begin() + random_budget(n, o));
  } else {
    std::vector<int> alive(n);
    std::iota(alive.begin(), alive.end(), 0);
    std::size_t left = 0;
    const std::vector<Round> rounds = halving_rounds(n, o, left);
    for (std::size_t k = 0; k < rounds.size(); ++k) {
      for (int i : alive) time(i, rounds[k].repeats);
      by_time(alive);
      // The faster half goes on, and with it anyone within `keep_within` of the round's leader:
      // a few repeats cannot tell those apart, and dropping one on noise loses the winner.
      // At most half as many again as planned, so the full-repeat timings stay few.
      const std::size_t planned = k + 1 < rounds.size() ? rounds[k + 1].candidates : left;
      std::size_t next = planned;
      const double close = r.measured[alive[0]].median_ms * (1.0 + o.keep_within);
      while (next < alive.size() && next < planned + planned / 2 &&
             r.measured[alive[next]].median_ms <= close)
        ++next;
      alive.resize(std::min(next, alive.size()));
    }
    finalists = alive;
  }
  for (int i : finalists) time(i, full);
  by_time(finalists);

  // Near-ties: everyone within the leader's measured spread (at least 1 %) is timed once more
  // at full repeats, and the mean of the two medians decides.
  const Measurement lead = r.measured[finalists[0]];
  const double margin = std::max(lead.spread_ms, 0.01 * lead.median_ms);
  std::vector<int> tied;
  for (int i : finalists)
    if (r.measured[i].median_ms <= lead.median_ms + margin) tied.push_back(i);
  if (tied.size() > 1) {
    std::map<int, double> first;
    for (int i : tied) first[i] = r.measured[i].median_ms;
    for (int i : tied) {
      time(i, full);
      --r.timed_full;  // a re-timing of a candidate already counted
      r.measured[i].median_ms = 0.5 * (first[i] + r.measured[i].median_ms);
    }
    by_time(tied);
    r.best = tied[0];
  } else {
    r.best = finalists[0];
  }
  return r;
}

}  // namespace tessel::autotune
