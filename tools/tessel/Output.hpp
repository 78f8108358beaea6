// Terminal output shared by the tessel commands: a progress bar that only draws on a terminal,
// number formatting, the error-kind names the tutorial prints, and JSON files.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessel::cli {

// A progress bar on stderr. On a terminal it redraws one line in place; otherwise it prints a
// plain line per step when `plain_lines` is set (logs stay readable), or nothing.
class Progress {
 public:
  Progress(int total, bool plain_lines);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts step `done + 1` of `total`, described by `label`.
  void step(const std::string& label);
  // Erases the bar so that a line can be printed to stdout; the next step() redraws it.
  void clear();

 private:
  int total_;
  int done_ = 0;
  bool tty_;
  bool plain_lines_;
  bool drawn_ = false;
};

// True when stderr is a terminal (progress bars) — honours TESSEL_NO_PROGRESS=1.
bool progress_on_terminal();

// "12.345" with `decimals` digits; "-" for NaN.
std::string fixed(double v, int decimals);
// "1.2e-03"; "nan" for NaN.
std::string scientific(double v);
// Pads to `width` on the left (right-aligns).
std::string right(const std::string& s, int width);
std::string left(const std::string& s, int width);

// "CompileError", "InternalError", "RuntimeError" (the Tessel error channels), else the
// standard exception's kind. An NVRTC failure on generated code is the compiler's bug: InternalError.
std::string error_kind(const std::exception& e);
// The first line of the message, at most `max_chars` long (NVRTC logs run to pages).
std::string error_summary(const std::exception& e, std::size_t max_chars = 160);

// Writes `j` (indented) to `path`; throws RuntimeError when the file cannot be written.
void write_json_file(const std::string& path, const nlohmann::json& j);

// The median (mean of the middle two for an even count); NaN for none.
double median(std::vector<double> v);

// 2*M*N*K / seconds / 1e12.
double gemm_tflops(long long M, long long N, long long K, double ms);

}  // namespace tessel::cli
