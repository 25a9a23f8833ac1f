// recmix: the command line. Subcommands live in runtime/cli/; errors end here as one line.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "device/cpu/omp_wait_policy.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/cli/mpi_session.hpp"

namespace {

// Edits (insertions, deletions, substitutions, swaps of neighbours) that turn a into b.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// CLI11 reads a first word that names no command as a stray argument ("A subcommand is
// required"): it is named here, with the nearest command when one is close.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return {};
  const std::string word = argv[1];
  std::string nearest;
  std::size_t best = std::string::npos;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return {};
    const std::size_t d = edit_distance(word, sub->get_name());
    if (d < best) best = d, nearest = sub->get_name();
  }
  std::string line = fmt::format("unknown command '{}'", word);
  if (best <= std::max<std::size_t>(2, word.size() / 3)) line += fmt::format(" (did you mean '{}'?)", nearest);
  return line;
}

}  // namespace

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
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "%s: usage error: %s (see recmix --help)\n", recmix::runtime::error_prefix().c_str(),
                 unknown.c_str());
    return static_cast<int>(CLI::ExitCodes::ExtrasError);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print what they were asked for; a command-line error is one line
    // like every other error.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::fprintf(stderr, "%s: usage error: %s (see recmix --help)\n", recmix::runtime::error_prefix().c_str(), e.what());
    return e.get_exit_code();
  } catch (const recmix::Error& e) {
    return recmix::runtime::end_after_error(e.kind(), e.what(), dynamic_cast<const recmix::PeerFailedError*>(&e) != nullptr);
  } catch (const std::exception& e) {
    return recmix::runtime::end_after_error("error", e.what(), false);
  }
  return 0;
}
