// recmix: the command line. Subcommands live in runtime/cli/; errors end here as one line.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>

#include "core/error.hpp"
#include "device/cpu/omp_wait_policy.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/mpi_session.hpp"

int main(int argc, char** argv) {
  recmix::device::cpu::ensure_passive_omp_wait_policy(argv);
  CLI::App app{"recmix: DLRM training and co-location of training jobs on GPU clusters"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "recmix 0.1.0");
  recmix::cli::add_train_commands(app);
  recmix::cli::add_data_commands(app);
  recmix::cli::add_sim_command(app);
  recmix::cli::add_run_commands(app);
  recmix::cli::add_pairs_command(app);
  recmix::cli::add_init_checkpoint_command(app);
  recmix::cli::add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print what they were asked for; a command-line error is one line
    // like every other error.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::fprintf(stderr, "%s: usage error: %s (see recmix --help)\n", recmix::runtime::error_prefix().c_str(), e.what());
    return e.get_exit_code();
  } catch (const recmix::Error& e) {
    std::fprintf(stderr, "%s: %s: %s\n", recmix::runtime::error_prefix().c_str(), e.kind(), e.what());
    recmix::runtime::abort_other_ranks_on_failure();
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", recmix::runtime::error_prefix().c_str(), e.what());
    recmix::runtime::abort_other_ranks_on_failure();
    return 1;
  }
  return 0;
}
