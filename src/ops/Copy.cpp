// copy(src, dst): reads src, writes dst. verify: equal extents (one side may leave them out: taken
// from the other), tile regions inside their tiles, no global->global copy, a global->shared
// copy between equal dtypes.
#include "ops/TileOp.hpp"

#include "ops/Checks.hpp"
#include "tessel/Error.hpp"
#include "tessel/ir/Printer.hpp"

namespace tessel::ops {

namespace {

using namespace ir;

class CopyOp final : public TileOp {
 public:
  const char* name() const override { return "copy"; }
  Access access(const StmtNode& s) const override {
    const auto* c = static_cast<const CopyStmt*>(&s);
    return {{c->src}, {c->dst}};
  }

  Stmt verify(const Stmt& s) const override {
    const auto* op = s.as<CopyStmt>();
    const auto* c = op;
    Region src = c->src, dst = c->dst;
    const char* name = "copy";
    if (src.extents.empty() && dst.extents.empty())
      TESSEL_USER_ERROR(name, op->where,
                        "neither " << src.buffer->name << " nor " << dst.buffer->name
                                   << " gives the region's extents; pass a whole buffer on one side");
    if (src.extents.empty()) {
      auto e = fit_extents(dst.extents, src.starts.size());
      if (!e)
        TESSEL_USER_ERROR(
            name, op->where,
            "the destination " << to_string(dst) << " has more dimensions than " << buffer_desc(src.buffer));
      src.extents = *e;
    }
    if (dst.extents.empty()) {
      auto e = fit_extents(src.extents, dst.starts.size());
      if (!e)
        TESSEL_USER_ERROR(
            name, op->where,
            "the source " << to_string(src) << " has more dimensions than " << buffer_desc(dst.buffer));
      dst.extents = *e;
    }
    if (!same_extents(src.extents, dst.extents))
      TESSEL_USER_ERROR(name, op->where,
                        "the regions have different extents: "
                            << to_string(src) << " is " << shape_str(src.extents) << ", " << to_string(dst)
                            << " is " << shape_str(dst.extents) << "; a copy needs equal extents");
    check_inside(src, name, op->where);
    check_inside(dst, name, op->where);
    if (src.buffer->scope == Scope::Global && dst.buffer->scope == Scope::Global)
      TESSEL_USER_ERROR(name, op->where,
                        "copies from global " << src.buffer->name << " to global " << dst.buffer->name
                                              << "; stage the data through shared memory or a fragment");
    if (src.buffer->scope == Scope::Global && dst.buffer->scope == Scope::Shared &&
        src.buffer->dtype != dst.buffer->dtype)
      TESSEL_USER_ERROR(name, op->where,
                        "global " << src.buffer->name << " is " << dtype_name(src.buffer->dtype)
                                  << " but shared " << dst.buffer->name << " is "
                                  << dtype_name(dst.buffer->dtype)
                                  << "; a global->shared copy moves bytes, so the dtypes must match");
    return make_copy(src, dst, c->pad, op->where);
  }
};

}  // namespace

const TileOp& copy_op() {
  static const CopyOp op;
  return op;
}

}  // namespace tessel::ops
