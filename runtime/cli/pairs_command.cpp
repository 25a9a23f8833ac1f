// recmix pairs: the co-location measured by recmix runs, as the simulator's pair file.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "core/error.hpp"
#include "runtime/cli/commands.hpp"
#include "sched/measured_pairs.hpp"

namespace recmix::cli {
namespace {

struct PairsArgs {
  std::vector<std::string> runs;
  std::string output = "-";
};

void run_pairs(const PairsArgs& a) {
  const sched::MeasuredPairs pairs = sched::measure_pairs(a.runs);
  RECMIX_REQUIRE(!pairs.types.empty(), DataError,
                 fmt::format("no job of {} ran alone long enough to be sampled: nothing to compare co-located "
                             "steps with",
                             a.runs.size() == 1 ? "'" + a.runs[0] + "'" : "these runs"));
  std::ostream& table = a.output == "-" ? std::cerr : std::cout;
  table << fmt::format("{:<24} {:>12} {:>8}\n", "type alone", "step ms", "samples");
  for (const auto& t : pairs.types) table << fmt::format("{:<24} {:>12.3f} {:>8}\n", t.type, 1e3 * t.solo_step_s, t.samples);
  table << fmt::format("\n{:<24} {:<24} {:>12} {:>9} {:>8}\n", "type", "beside", "step ms", "slowdown", "samples");
  for (const auto& p : pairs.pairs)
    table << fmt::format("{:<24} {:<24} {:>12.3f} {:>9.3f} {:>8}\n", p.type, p.other, 1e3 * p.colocated_step_s,
                         p.slowdown, p.samples);
  for (const auto& n : pairs.neighbours)
    table << fmt::format("{:<24} {:<24} {:>12.3f} {:>9.3f} {:>8}\n", n.type, "(alone, a busy rank beside)",
                         1e3 * n.step_s, n.slowdown, n.samples);
  if (a.output == "-") {
    sched::write_pairs_csv(pairs, std::cout);
    return;
  }
  std::ofstream out(a.output);
  RECMIX_REQUIRE(out, IoError, fmt::format("cannot write '{}'", a.output));
  sched::write_pairs_csv(pairs, out);
  RECMIX_REQUIRE(out.good(), IoError, fmt::format("writing '{}' failed", a.output));
}

}  // namespace

void add_pairs_command(CLI::App& app) {
  auto args = std::make_shared<PairsArgs>();
  auto* pairs = app.add_subcommand(
      "pairs",
      "The slowdowns measured by recmix runs (RUN_DIR/events.jsonl): each job type alone and beside each other "
      "type, and alone on its rank while another rank is busy, as the pair file recmix sim --pairs reads. A job's "
      "type is its name up to the first '.'");
  pairs->add_option("runs", args->runs, "Run directories of recmix run")->required()->check(CLI::ExistingDirectory);
  pairs->add_option("-o,--output", args->output, "The pair file ('-': stdout, the table then goes to stderr)");
  pairs->callback([args] { run_pairs(*args); });
}

}  // namespace recmix::cli
