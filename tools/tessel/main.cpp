// tessel: the command-line face of the library — the tutorial, benchmarks, IR/source dumps and
// device information. See docs/cli.md.
#include <exception>
#include <iostream>

#include "tessel/Error.hpp"
#include "tools/tessel/Commands.hpp"
#include "tools/tessel/Output.hpp"
#include "tools/tessel/System.hpp"

int main(int argc, char** argv) {
  namespace cli = tessel::cli;
  cli::set_command_line(argc, argv);

  CLI::App app{"Tessel " TESSEL_VERSION
               ": a tile-level GPU kernel language in C++20, its compiler to CUDA and an NVRTC JIT.\n"
               "Commands that run kernels need an NVIDIA GPU (sm_80+); the others work anywhere.",
               "tessel"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tessel ") + TESSEL_VERSION);

  std::vector<cli::Command> commands;
  commands.push_back(cli::add_info_command(app));
  commands.push_back(cli::add_tutorial_command(app));
  commands.push_back(cli::add_dump_command(app));
  CLI::App* bench =
      app.add_subcommand("bench", "Benchmarks: Tessel against cuBLAS and cuDNN, and the JIT's compile times");
  bench->require_subcommand(1);
  commands.push_back(cli::add_bench_gemm_command(*bench));
  commands.push_back(cli::add_bench_compile_command(*bench));
  commands.push_back(cli::add_bench_softmax_command(*bench));
  commands.push_back(cli::add_bench_chain_command(*bench));
  commands.push_back(cli::add_bench_attention_command(*bench));
  CLI::App* tune = app.add_subcommand("tune", "The autotuner: search a kernel's tuning space for one shape");
  tune->require_subcommand(1);
  commands.push_back(cli::add_tune_gemm_command(*tune));
  commands.push_back(cli::add_tune_softmax_command(*tune));
  commands.push_back(cli::add_tune_attention_command(*tune));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return cli::kExitUsage;
  }

  try {
    for (const cli::Command& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "tessel: " << cli::error_kind(e) << ": " << e.what() << "\n";
    return cli::kExitCheckFailed;
  }
  std::cerr << "tessel: no command given (see tessel --help)\n";
  return cli::kExitUsage;
}
