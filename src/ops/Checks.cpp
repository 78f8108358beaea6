// Checks and descriptions the tile ops' verify() share.
#include "ops/Checks.hpp"

#include "tessel/Error.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::ops {

using namespace ir;

std::string shape_str(const std::vector<Expr>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + to_string(v[i]);
  return s + "]";
}

std::string buffer_desc(const Buffer& b) {
  return b->name + " (" + scope_name(b->scope) + " " + std::string(dtype_name(b->dtype)) +
         shape_str(b->shape) + ")";
}

std::vector<Expr> squeeze(const std::vector<Expr>& e) {
  size_t i = 0;
  while (i + 1 < e.size() && is_const_int(e[i], 1)) ++i;
  return {e.begin() + static_cast<long>(i), e.end()};
}

// Extents without any 1s: a [1, 128, 1, 64] region of a [B, S, H, D] tensor and a [128, 64]
// tile have the same extents.
std::vector<Expr> drop_ones(const std::vector<Expr>& e) {
  std::vector<Expr> out;
  for (const Expr& x : e)
    if (!is_const_int(x, 1)) out.push_back(x);
  return out;
}

bool same_extents(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  auto sa = drop_ones(a), sb = drop_ones(b);
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i) {
    auto x = as_const_int(sa[i]), y = as_const_int(sb[i]);
    if (!x || !y || *x != *y) return false;
  }
  return true;
}

std::optional<std::vector<Expr>> fit_extents(std::vector<Expr> extents, size_t ndim) {
  extents = squeeze(extents);
  if (extents.size() > ndim) return std::nullopt;
  std::vector<Expr> out(ndim - extents.size(), make_int(1));
  out.insert(out.end(), extents.begin(), extents.end());
  return out;
}

void check_inside(const Region& r, const char* op, std::source_location where) {
  if (r.buffer->scope == Scope::Global) return;
  for (size_t d = 0; d < r.starts.size(); ++d) {
    auto s = as_const_int(r.starts[d]), e = as_const_int(r.extents[d]),
         n = as_const_int(r.buffer->shape[d]);
    if (e && n && *e > *n)
      TESSEL_USER_ERROR(op, where,
                        "the region " << to_string(r) << " is " << shape_str(r.extents) << " but "
                                      << buffer_desc(r.buffer) << " is smaller in dimension " << d);
    if (s && e && n && (*s < 0 || *s + *e > *n))
      TESSEL_USER_ERROR(
          op, where,
          "the region " << to_string(r) << " overruns " << buffer_desc(r.buffer) << " in dimension " << d);
  }
}


}  // namespace tessel::ops
