// The tessel subcommands. Each add_* function registers its options on the CLI11 app and returns
// what main needs to run it once parsing has picked it.
#pragma once

#include <functional>
#include <vector>

#include <CLI/CLI.hpp>

namespace tessel::cli {

// Exit codes shared by every command (docs/cli.md lists them).
inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;  // a wrong result, or a kernel that failed
inline constexpr int kExitUsage = 2;        // bad command line
inline constexpr int kExitNoGpu = 3;        // the command needs a GPU and there is none
inline constexpr int kExitNoTool = 4;       // the command needs a tool that is not installed (nvdisasm)

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_info_command(CLI::App& root);
Command add_tutorial_command(CLI::App& root);
Command add_dump_command(CLI::App& root);
Command add_bench_gemm_command(CLI::App& bench);
Command add_bench_compile_command(CLI::App& bench);
Command add_bench_softmax_command(CLI::App& bench);
Command add_bench_chain_command(CLI::App& bench);
Command add_bench_attention_command(CLI::App& bench);
Command add_tune_gemm_command(CLI::App& tune);
Command add_tune_softmax_command(CLI::App& tune);
Command add_tune_attention_command(CLI::App& tune);

}  // namespace tessel::cli
