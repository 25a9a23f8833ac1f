#pragma once
// The command line of an MPI benchmark, parsed: on --help or a bad option, CLI11's message is
// printed, MPI is finalised and the exit status returned for main to return.
#include <CLI/CLI.hpp>
#include <mpi.h>

#include <optional>

namespace recmix::bench {

inline std::optional<int> parse_or_exit_status(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }
  return std::nullopt;
}

}  // namespace recmix::bench
