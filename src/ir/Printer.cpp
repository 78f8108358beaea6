#include "tessel/ir/Printer.hpp"

#include <cmath>
#include <iomanip>
#include <map>
#include <sstream>

namespace tessel::ir {

namespace {

class Printer {
 public:
  std::string expr(const Expr& e) {
    if (!e.defined()) return "<undef>";
    std::ostringstream os;
    print(os, e);
    return os.str();
  }

  void print(std::ostream& os, const Expr& e) {
    if (const auto* i = e.as<IntImm>()) {
      if (i->dtype == DType::boolean) {
        os << (i->value ? "true" : "false");
      } else {
        os << i->value;
        if (i->dtype != DType::i32) os << "_" << dtype_name(i->dtype);
      }
    } else if (const auto* f = e.as<FloatImm>()) {
      if (std::isinf(f->value)) {
        os << (f->value < 0 ? "-inf" : "inf");
      } else {
        std::ostringstream v;
        v << std::setprecision(9) << f->value;
        std::string s = v.str();
        if (s.find_first_of(".en") == std::string::npos) s += ".0";
        os << s;
      }
      os << "_" << dtype_name(f->dtype);
    } else if (const auto* v = e.as<VarNode>()) {
      os << var_name(v);
    } else if (const auto* b = e.as<Binary>()) {
      if (b->op == BinaryOp::Min || b->op == BinaryOp::Max || b->op == BinaryOp::FloorDiv ||
          b->op == BinaryOp::FloorMod) {
        os << binary_op_name(b->op) << "(";
        print(os, b->a);
        os << ", ";
        print(os, b->b);
        os << ")";
      } else {
        os << "(";
        print(os, b->a);
        os << " " << binary_op_name(b->op) << " ";
        print(os, b->b);
        os << ")";
      }
    } else if (const auto* u = e.as<Unary>()) {
      os << (u->op == UnaryOp::Neg ? "-" : "!");
      print(os, u->a);
    } else if (const auto* s = e.as<Select>()) {
      os << "select(";
      print(os, s->cond);
      os << ", ";
      print(os, s->true_value);
      os << ", ";
      print(os, s->false_value);
      os << ")";
    } else if (const auto* c = e.as<Cast>()) {
      os << dtype_name(c->dtype) << "(";
      print(os, c->value);
      os << ")";
    } else if (const auto* c = e.as<Call>()) {
      os << c->name << "(";
      for (size_t i = 0; i < c->args.size(); ++i) {
        if (i) os << ", ";
        print(os, c->args[i]);
      }
      os << ")";
      if (c->args.empty()) os << "_" << dtype_name(c->dtype);
    } else if (const auto* l = e.as<BufferLoad>()) {
      os << l->buffer->name << "[" << join(l->indices) << "]";
    } else {
      os << "<" << node_kind_name(e->kind) << ">";
    }
  }

  std::string join(const std::vector<Expr>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + expr(v[i]);
    return out;
  }

  std::string region(const Region& r) {
    std::string out = r.buffer->name + "[";
    for (size_t i = 0; i < r.starts.size(); ++i) {
      if (i) out += ", ";
      out += expr(r.starts[i]);
      if (i < r.extents.size()) out += ":+" + expr(r.extents[i]);
    }
    return out + "]";
  }

  // A whole-buffer operand prints as its name; a part of a buffer as a region.
  std::string operand(const Region& r) {
    bool whole = true;
    for (size_t i = 0; i < r.starts.size(); ++i)
      whole = whole && is_const_int(r.starts[i], 0) && i < r.extents.size() && i < r.buffer->shape.size() &&
              as_const_int(r.extents[i]) == as_const_int(r.buffer->shape[i]);
    return whole ? r.buffer->name : region(r);
  }

  std::string buffer_type(const Buffer& b) {
    std::string t = std::string(dtype_name(b->dtype)) + "[" + join(b->shape) + "]";
    if (!b->strides.empty()) t += " strides [" + join(b->strides) + "]";
    return t;
  }

  void stmt(std::ostream& os, const Stmt& s, int indent) {
    if (!s.defined()) return;
    std::string pad(indent * 2, ' ');
    if (const auto* seq = s.as<SeqStmt>()) {
      for (const Stmt& c : seq->stmts) stmt(os, c, indent);
    } else if (const auto* f = s.as<ForStmt>()) {
      os << pad << for_kind_name(f->kind) << " " << var_name(f->var.as<VarNode>()) << " in [" << expr(f->min)
         << ", " << expr(f->min) << " + " << expr(f->extent) << ")";
      if (f->kind == ForKind::Pipelined) os << " stages=" << f->num_stages;
      os << " {\n";
      stmt(os, f->body, indent + 1);
      os << pad << "}\n";
    } else if (const auto* i = s.as<IfStmt>()) {
      os << pad << "if " << expr(i->cond) << " {\n";
      stmt(os, i->then_case, indent + 1);
      if (i->else_case.defined()) {
        os << pad << "} else {\n";
        stmt(os, i->else_case, indent + 1);
      }
      os << pad << "}\n";
    } else if (const auto* l = s.as<LetStmt>()) {
      os << pad << "let " << var_name(l->var.as<VarNode>()) << " = " << expr(l->value) << "\n";
      stmt(os, l->body, indent);
    } else if (const auto* st = s.as<BufferStore>()) {
      os << pad << st->buffer->name << "[" << join(st->indices) << "] = " << expr(st->value) << "\n";
    } else if (const auto* d = s.as<DeclBuffer>()) {
      os << pad << scope_name(d->buffer->scope) << " " << d->buffer->name << ": " << buffer_type(d->buffer);
      if (d->buffer->shared_tail) os << " shared_tail(" << d->buffer->shared_tail << ")";
      os << "\n";
    } else if (const auto* k = s.as<KernelStmt>()) {
      os << pad << "kernel grid(" << join(k->grid) << ") threads(" << k->threads << ") (";
      for (size_t i = 0; i < k->block_vars.size(); ++i)
        os << (i ? ", " : "") << var_name(k->block_vars[i].as<VarNode>());
      os << ") {\n";
      stmt(os, k->body, indent + 1);
      os << pad << "}\n";
    } else if (const auto* c = s.as<CopyStmt>()) {
      os << pad << "copy(" << region(c->src) << " -> " << region(c->dst);
      if (c->pad.defined()) os << ", pad=" << expr(c->pad);
      if (c->row_window) os << ", window=aligned";
      os << ")\n";
    } else if (const auto* g = s.as<GemmStmt>()) {
      os << pad << (g->async ? "gemm_issue(" : "gemm(") << operand(g->A) << (g->trans_a ? "^T" : "") << ", "
         << operand(g->B) << (g->trans_b ? "^T" : "") << " -> " << operand(g->C)
         << ", policy=" << gemm_warp_policy_name(g->policy) << ")\n";
    } else if (const auto* f = s.as<FillStmt>()) {
      os << pad << "fill(" << region(f->dst) << ", " << expr(f->value) << ")\n";
    } else if (const auto* r = s.as<ReduceStmt>()) {
      os << pad << "reduce_" << reduce_op_name(r->op) << "(" << r->src->name << " -> " << r->dst->name
         << ", dim=" << r->dim << ", clear=" << (r->clear ? "true" : "false") << ")\n";
    } else if (const auto* sw = s.as<SwizzleStmt>()) {
      os << pad << "use_swizzle(" << sw->panel_size << ")\n";
    } else if (const auto* cl = s.as<ClusterStmt>()) {
      os << pad << "use_cluster(" << cl->cluster_x << ", " << cl->cluster_y << ")\n";
    } else if (const auto* dc = s.as<DeviceCall>()) {
      os << pad << dc->callee;
      if (!dc->template_args.empty()) {
        os << "<";
        for (size_t i = 0; i < dc->template_args.size(); ++i) os << (i ? ", " : "") << dc->template_args[i];
        os << ">";
      }
      os << "(";
      for (size_t i = 0; i < dc->args.size(); ++i) {
        if (i) os << ", ";
        const auto& a = dc->args[i];
        if (a.lambda_body.defined()) {
          os << "lambda(";
          for (size_t p = 0; p < a.lambda_params.size(); ++p)
            os << (p ? ", " : "") << var_name(a.lambda_params[p].as<VarNode>());
          os << ") {\n";
          stmt(os, a.lambda_body, indent + 1);
          if (a.lambda_result.defined()) os << pad << "  return " << expr(a.lambda_result) << "\n";
          os << pad << "}";
        } else if (a.buffer.defined()) {
          os << "&" << a.buffer->name;
          if (a.offset.defined() && !is_const_int(a.offset, 0)) os << "[" << expr(a.offset) << "]";
        } else {
          os << expr(a.expr);
        }
      }
      os << ")\n";
    } else if (const auto* b = s.as<BarrierStmt>()) {
      if (b->threads == 0)
        os << pad << "barrier()\n";
      else
        os << pad << "barrier(id=" << b->id << ", threads=" << b->threads << ")\n";
    } else if (const auto* m = s.as<MbarrierStmt>()) {
      os << pad << "mbarrier." << mbarrier_op_name(m->op) << "(" << m->bars->name << "[" << expr(m->index)
         << "]";
      if (m->value.defined())
        os << ", "
           << (m->op == MbarrierOp::Init         ? "count="
               : m->op == MbarrierOp::Wait       ? "parity="
               : m->op == MbarrierOp::WarpArrive ? "cluster_ctas="
                                                 : "bytes=")
           << expr(m->value);
      os << ")\n";
    } else if (const auto* t = s.as<TmaLoadStmt>()) {
      os << pad << "tma_load(" << region(t->src) << " -> " << region(t->dst)
         << ", map=" << var_name(t->map.as<VarNode>());
      if (t->bars.defined()) os << ", complete_tx=" << t->bars->name << "[" << expr(t->index) << "]";
      if (t->multicast > 1) os << ", multicast=" << t->multicast;
      os << ")\n";
    } else if (const auto* cr = s.as<ClusterReduceStmt>()) {
      os << pad << "cluster_reduce(" << cr->acc->name << " += the other " << cr->ranks - 1
         << " CTAs' of the cluster, into rank 0, rank=" << expr(cr->rank) << ", scratch=" << cr->scratch->name
         << ", bars=" << cr->bars->name << ")\n";
    } else if (const auto* p = s.as<ProducerStmt>()) {
      os << pad << "producer {\n";
      stmt(os, p->body, indent + 1);
      os << pad << "}\n";
    } else if (const auto* sp = s.as<SpecializeStmt>()) {
      os << pad << "specialize(consumers=" << sp->consumer_threads << " threads regs=" << sp->consumer_regs
         << ", producer=" << sp->producer_threads << " threads regs=" << sp->producer_regs << ") {\n";
      os << pad << "  producer:\n";
      stmt(os, sp->producer, indent + 2);
      os << pad << "  consumers:\n";
      stmt(os, sp->consumer, indent + 2);
      os << pad << "}\n";
    } else if (const auto* gw = s.as<AsyncGemmWait>()) {
      os << pad << "gemm_wait(pending=" << gw->pending;
      for (const Buffer& f : gw->fence) os << ", " << f->name;
      for (size_t i = 0; i < gw->pinned.size(); ++i) os << (i ? ", " : "; after ") << gw->pinned[i]->name;
      os << ")\n";
    } else if (s.as<AsyncCommit>()) {
      os << pad << "async_commit()\n";
    } else if (const auto* w = s.as<AsyncWait>()) {
      os << pad << "async_wait(" << w->pending << ")\n";
    } else {
      os << pad << "<" << node_kind_name(s->kind) << ">\n";
    }
  }

  std::string var_name(const VarNode* v) {
    auto it = names_.find(v);
    if (it != names_.end()) return it->second;
    int& count = used_[v->name];
    std::string n = count == 0 ? v->name : v->name + "#" + std::to_string(count);
    ++count;
    names_[v] = n;
    return n;
  }

 private:
  std::map<const VarNode*, std::string> names_;
  std::map<std::string, int> used_;
};

}  // namespace

std::string to_string(const Expr& e) {
  return Printer().expr(e);
}

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  Printer().stmt(os, s, 0);
  return os.str();
}

std::string to_string(const Region& r) {
  return Printer().region(r);
}

std::string to_string(const PrimFuncNode& f) {
  Printer p;
  std::ostringstream os;
  os << "func " << f.name << "(";
  for (size_t i = 0; i < f.params.size(); ++i)
    os << (i ? ", " : "") << f.params[i]->name << ": " << p.buffer_type(f.params[i]);
  os << ") {\n";
  p.stmt(os, f.body, 1);
  os << "}\n";
  return os.str();
}

}  // namespace tessel::ir
