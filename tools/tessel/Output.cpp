#include "tools/tessel/Output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "tessel/Error.hpp"
#include "tessel/runtime/Nvrtc.hpp"

namespace tessel::cli {

bool progress_on_terminal() {
  if (const char* off = std::getenv("TESSEL_NO_PROGRESS"); off && std::string(off) == "1") return false;
  return isatty(STDERR_FILENO) == 1;
}

Progress::Progress(int total, bool plain_lines)
    : total_(total), tty_(progress_on_terminal()), plain_lines_(plain_lines) {}

Progress::~Progress() {
  clear();
}

void Progress::step(const std::string& label) {
  ++done_;
  if (tty_) {
    constexpr int kWidth = 24;
    const int filled = total_ > 0 ? (done_ - 1) * kWidth / total_ : 0;
    std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
    std::cerr << "\r\033[K[" << bar << "] " << done_ << "/" << total_ << "  " << label << std::flush;
    drawn_ = true;
  } else if (plain_lines_) {
    std::cerr << "[" << done_ << "/" << total_ << "] " << label << "\n" << std::flush;
  }
}

void Progress::clear() {
  if (tty_ && drawn_) {
    std::cerr << "\r\033[K" << std::flush;
    drawn_ = false;
  }
}

std::string fixed(double v, int decimals) {
  if (std::isnan(v)) return "-";
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(decimals);
  os << v;
  return os.str();
}

std::string scientific(double v) {
  if (std::isnan(v)) return "nan";
  std::ostringstream os;
  os.setf(std::ios::scientific);
  os.precision(1);
  os << v;
  return os.str();
}

std::string right(const std::string& s, int width) {
  return static_cast<int>(s.size()) >= width ? s : std::string(width - s.size(), ' ') + s;
}

std::string left(const std::string& s, int width) {
  return static_cast<int>(s.size()) >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string error_kind(const std::exception& e) {
  if (dynamic_cast<const CompileError*>(&e)) return "CompileError";
  if (dynamic_cast<const InternalError*>(&e)) return "InternalError";
  if (dynamic_cast<const NvrtcError*>(&e)) return "InternalError";
  if (dynamic_cast<const RuntimeError*>(&e)) return "RuntimeError";
  if (dynamic_cast<const std::bad_alloc*>(&e)) return "std::bad_alloc";
  return "std::exception";
}

std::string error_summary(const std::exception& e, std::size_t max_chars) {
  std::string s = e.what();
  if (auto nl = s.find('\n'); nl != std::string::npos) s = s.substr(0, nl) + " ...";
  if (s.size() > max_chars) s = s.substr(0, max_chars - 3) + "...";
  return s;
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) throw RuntimeError("cannot write the JSON file '" + path + "'");
  out << j.dump(2) << "\n";
  if (!out) throw RuntimeError("writing the JSON file '" + path + "' failed");
}

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double gemm_tflops(long long M, long long N, long long K, double ms) {
  return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) / (ms * 1e-3) / 1e12;
}

}  // namespace tessel::cli
