// The case's text form: expressions as s-expressions, cases as `key value` lines.
#include "fuzz/FuzzCase.hpp"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tessel::fuzz {

namespace {

struct OpInfo {
  ExprTree::Op op;
  const char* name;
  int arity;
};
constexpr OpInfo kOps[] = {
    {ExprTree::Op::X, "x", 0},
    {ExprTree::Op::R, "r", 0},
    {ExprTree::Op::Const, "const", 0},
    {ExprTree::Op::Neg, "neg", 1},
    {ExprTree::Op::Abs, "abs", 1},
    {ExprTree::Op::Relu, "relu", 1},
    {ExprTree::Op::Expc, "expc", 1},
    {ExprTree::Op::Add, "add", 2},
    {ExprTree::Op::Sub, "sub", 2},
    {ExprTree::Op::Mul, "mul", 2},
    {ExprTree::Op::Max, "max", 2},
    {ExprTree::Op::Min, "min", 2},
    {ExprTree::Op::Sdiv, "sdiv", 2},
    {ExprTree::Op::Exp2c, "exp2c", 1},
    {ExprTree::Op::PolyExp2c, "pexp2c", 1},
};

// Shortest text that parses back to the same double.
std::string number_text(double v) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::stod(buf) == v) break;
  }
  return buf;
}

class ExprParser {
 public:
  explicit ExprParser(const std::string& s) : s_(s) {}
  ExprTree parse_all() {
    ExprTree e = parse();
    skip_space();
    if (pos_ != s_.size()) fail("trailing text");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw std::invalid_argument("expression '" + s_ + "': " + why + " at offset " + std::to_string(pos_));
  }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::string token() {
    skip_space();
    size_t start = pos_;
    while (pos_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[pos_])) && s_[pos_] != '(' &&
           s_[pos_] != ')')
      ++pos_;
    if (start == pos_) fail("expected a name or a number");
    return s_.substr(start, pos_ - start);
  }
  ExprTree parse() {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '(') {
      ++pos_;
      const std::string name = token();
      ExprTree e;
      const OpInfo* info = nullptr;
      for (const OpInfo& o : kOps)
        if (name == o.name && o.arity > 0) info = &o;
      if (!info) fail("unknown operator '" + name + "'");
      e.op = info->op;
      for (int i = 0; i < info->arity; ++i) {
        skip_space();
        if (pos_ >= s_.size() || s_[pos_] == ')')
          fail("'" + name + "' takes " + std::to_string(info->arity) + " operands, got " + std::to_string(i));
        e.args.push_back(parse());
      }
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ')')
        fail("expected ')' after the " + std::to_string(info->arity) + " operands of '" + name + "'");
      ++pos_;
      return e;
    }
    const std::string t = token();
    ExprTree e;
    if (t == "x") return e;
    if (t == "r") {
      e.op = ExprTree::Op::R;
      return e;
    }
    e.op = ExprTree::Op::Const;
    try {
      size_t used = 0;
      e.value = std::stod(t, &used);
      if (used != t.size()) fail("bad number '" + t + "'");
    } catch (const std::logic_error&) {
      fail("bad leaf '" + t + "' (x, r or a number)");
    }
    return e;
  }
  const std::string& s_;
  size_t pos_ = 0;
};

const std::map<std::string, Family>& families() {
  static const std::map<std::string, Family> m = {{"gemm", Family::Gemm},
                                                  {"tile", Family::Tile},
                                                  {"softmax", Family::Softmax},
                                                  {"attention", Family::Attention}};
  return m;
}
const std::map<std::string, ReduceKind>& reduces() {
  static const std::map<std::string, ReduceKind> m = {{"none", ReduceKind::None},
                                                      {"sum", ReduceKind::Sum},
                                                      {"max", ReduceKind::Max},
                                                      {"min", ReduceKind::Min}};
  return m;
}

}  // namespace

const char* expr_op_name(ExprTree::Op op) {
  for (const OpInfo& o : kOps)
    if (o.op == op) return o.name;
  return "?";
}
int expr_arity(ExprTree::Op op) {
  for (const OpInfo& o : kOps)
    if (o.op == op) return o.arity;
  return 0;
}

int ExprTree::size() const {
  int n = 1;
  for (const ExprTree& a : args) n += a.size();
  return n;
}
bool ExprTree::uses_r() const {
  if (op == Op::R) return true;
  for (const ExprTree& a : args)
    if (a.uses_r()) return true;
  return false;
}
std::string ExprTree::to_text() const {
  if (op == Op::X) return "x";
  if (op == Op::R) return "r";
  if (op == Op::Const) return number_text(value);
  std::string s = std::string("(") + expr_op_name(op);
  for (const ExprTree& a : args) s += " " + a.to_text();
  return s + ")";
}
ExprTree parse_expr(const std::string& text) {
  return ExprParser(text).parse_all();
}

const char* family_name(Family f) {
  for (const auto& [name, v] : families())
    if (v == f) return name.c_str();
  return "?";
}
const char* reduce_name(ReduceKind r) {
  for (const auto& [name, v] : reduces())
    if (v == r) return name.c_str();
  return "?";
}

std::string FuzzCase::to_text() const {
  std::ostringstream os;
  os << "tessel-fuzz 1\n";
  os << "family " << family_name(family) << "\n";
  os << "seed " << seed << "\n";
  os << "dtype " << dtype_name(dtype) << "\n";
  os << "out_dtype " << dtype_name(out_dtype) << "\n";
  os << "M " << M << "\nN " << N << "\nK " << K << "\n";
  os << "BM " << BM << "\nBN " << BN << "\nBK " << BK << "\n";
  os << "threads " << threads << "\nstages " << stages << "\n";
  os << "trans_a " << trans_a << "\ntrans_b " << trans_b << "\npolicy " << policy << "\n";
  os << "swizzle " << swizzle << "\ncluster " << cluster << "\nbias " << bias << "\nepilogue " << epilogue
     << "\nrow_sums " << row_sums << "\n";
  os << "row_off " << row_off << "\ncol_off " << col_off << "\n";
  os << "via_shared " << via_shared << "\nstore_via_shared " << store_via_shared << "\npadded " << padded
     << "\npad " << number_text(pad) << "\n";
  os << "frag_in_dtype " << frag_in_dtype << "\n";
  os << "reduce " << reduce_name(reduce) << "\nreduce_init " << reduce_init << "\ninit_value "
     << number_text(init_value) << "\n";
  os << "variant " << variant << "\nshared_tail " << shared_tail << "\nwindow " << window << "\n";
  os << "online " << online << "\ncausal " << causal << "\nscale " << number_text(scale) << "\n";
  os << "p_via_copy " << p_via_copy << "\nskip_masked " << skip_masked << "\nk_by_block " << k_by_block << "\n";
  os << "expr " << expr.to_text() << "\n";
  os << "expr2 " << expr2.to_text() << "\n";
  return os.str();
}

std::string FuzzCase::summary() const {
  std::ostringstream os;
  os << family_name(family) << " " << dtype_name(dtype) << "->" << dtype_name(out_dtype) << " " << M << "x"
     << N << "x" << K << " tile " << BM << "x" << BN;
  if (family == Family::Gemm) os << "x" << BK;
  os << " t" << threads;
  if (family == Family::Gemm || family == Family::Attention) os << " s" << stages;
  switch (family) {
    case Family::Gemm:
      os << (trans_a ? " A^T" : "") << (trans_b ? " B^T" : "") << " policy" << policy
         << (swizzle ? " swizzle" : "") << (cluster ? " cluster" + std::to_string(cluster) : "")
         << (bias ? " bias" : "") << (row_sums ? " row-sums" : "") << (k_by_block ? " k-by-block" : "");
      if (epilogue) os << " epi " << expr.to_text();
      break;
    case Family::Tile:
      os << " off " << row_off << "," << col_off << (via_shared ? " via-shared" : "")
         << (store_via_shared ? " store-via-shared" : "") << (padded ? " pad " + number_text(pad) : "")
         << (frag_in_dtype ? " frag-dtype" : "") << " reduce " << reduce_name(reduce)
         << (reduce_init ? " init " + number_text(init_value) : "") << " " << expr.to_text() << " ; "
         << expr2.to_text();
      break;
    case Family::Softmax:
      os << " variant " << variant << (shared_tail ? " tail " + std::to_string(shared_tail) : "")
         << (window ? " window" : "") << " scale "
         << number_text(scale);
      break;
    case Family::Attention:
      os << (online ? " online" : " chain") << (causal ? " causal" : "") << (skip_masked ? " skip" : "") << (p_via_copy ? " p-copy" : "")
         << " scale " << number_text(scale);
      break;
  }
  os << " seed " << seed;
  return os.str();
}

FuzzCase parse_case(const std::string& text) {
  FuzzCase c;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  bool header = false;
  auto fail = [&](const std::string& why) -> void {
    throw std::invalid_argument("fuzz case, line " + std::to_string(line_no) + ": " + why);
  };
  while (std::getline(in, line)) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != std::string::npos) line = line.substr(0, hash);
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string value = sp == std::string::npos ? "" : line.substr(line.find_first_not_of(' ', sp));
    auto integer = [&]() -> long long {
      long long v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size())
        fail(key + ": '" + value + "' is not an integer");
      return v;
    };
    auto boolean = [&]() -> bool {
      long long v = integer();
      if (v != 0 && v != 1) fail(key + ": '" + value + "' is not 0 or 1");
      return v == 1;
    };
    auto real = [&]() -> double {
      try {
        size_t used = 0;
        double v = std::stod(value, &used);
        if (used == value.size()) return v;
      } catch (const std::logic_error&) {
      }
      fail(key + ": '" + value + "' is not a number");
      return 0.0;
    };
    auto dtype = [&]() {
      auto t = parse_dtype(value);
      if (!t) fail(key + ": unknown dtype '" + value + "'");
      return t.value_or(DType::f32);
    };
    if (key == "tessel-fuzz") {
      if (value != "1") fail("format version '" + value + "' (this build reads 1)");
      header = true;
    } else if (key == "family") {
      auto it = families().find(value);
      if (it == families().end()) fail("unknown family '" + value + "'");
      c.family = it->second;
    } else if (key == "seed") {
      c.seed = static_cast<std::uint64_t>(integer());
    } else if (key == "dtype") {
      c.dtype = dtype();
    } else if (key == "out_dtype") {
      c.out_dtype = dtype();
    } else if (key == "reduce") {
      auto it = reduces().find(value);
      if (it == reduces().end()) fail("unknown reduce '" + value + "'");
      c.reduce = it->second;
    } else if (key == "expr" || key == "expr2") {
      try {
        (key == "expr" ? c.expr : c.expr2) = parse_expr(value);
      } catch (const std::invalid_argument& e) {
        fail(e.what());
      }
    } else {
      static const std::map<std::string, int FuzzCase::*> ints = {{"M", &FuzzCase::M},
                                                                  {"N", &FuzzCase::N},
                                                                  {"K", &FuzzCase::K},
                                                                  {"BM", &FuzzCase::BM},
                                                                  {"BN", &FuzzCase::BN},
                                                                  {"BK", &FuzzCase::BK},
                                                                  {"threads", &FuzzCase::threads},
                                                                  {"stages", &FuzzCase::stages},
                                                                  {"policy", &FuzzCase::policy},
                                                                  {"row_off", &FuzzCase::row_off},
                                                                  {"col_off", &FuzzCase::col_off},
                                                                  {"variant", &FuzzCase::variant},
                                                                  {"shared_tail", &FuzzCase::shared_tail},
                                                                  {"cluster", &FuzzCase::cluster}};
      static const std::map<std::string, bool FuzzCase::*> bools = {
          {"trans_a", &FuzzCase::trans_a},         {"trans_b", &FuzzCase::trans_b},
          {"swizzle", &FuzzCase::swizzle},         {"bias", &FuzzCase::bias},
          {"epilogue", &FuzzCase::epilogue},       {"via_shared", &FuzzCase::via_shared},
          {"row_sums", &FuzzCase::row_sums},       {"store_via_shared", &FuzzCase::store_via_shared},
          {"padded", &FuzzCase::padded},           {"frag_in_dtype", &FuzzCase::frag_in_dtype},
          {"reduce_init", &FuzzCase::reduce_init}, {"online", &FuzzCase::online},
          {"causal", &FuzzCase::causal},           {"p_via_copy", &FuzzCase::p_via_copy},
          {"skip_masked", &FuzzCase::skip_masked}, {"k_by_block", &FuzzCase::k_by_block},
          {"window", &FuzzCase::window}};
      static const std::map<std::string, double FuzzCase::*> reals = {
          {"pad", &FuzzCase::pad}, {"init_value", &FuzzCase::init_value}, {"scale", &FuzzCase::scale}};
      if (auto i = ints.find(key); i != ints.end()) {
        c.*(i->second) = static_cast<int>(integer());
      } else if (auto bl = bools.find(key); bl != bools.end()) {
        c.*(bl->second) = boolean();
      } else if (auto r = reals.find(key); r != reals.end()) {
        c.*(r->second) = real();
      } else {
        fail("unknown key '" + key + "'");
      }
    }
  }
  if (!header) throw std::invalid_argument("fuzz case: no 'tessel-fuzz 1' header line");
  return c;
}

}  // namespace tessel::fuzz
