// recmix init-checkpoint: a step-0 checkpoint of a job from weights given in a file (for example
// a PyTorch DLRM's state_dict exported with h5py; docs/checkpoint-format.md, "Weights in").
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "runtime/checkpoint/checkpoint.hpp"
#include "runtime/cli/commands.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/cli/mpi_session.hpp"
#include "runtime/train/trainer.hpp"

namespace recmix::cli {
namespace {

struct InitArgs {
  std::string job_file, weights, output;
  bool force = false;
};

void run_init(const InitArgs& a) {
  runtime::ensure_mpi();
  auto comm = comm::make_mpi_world_communicator();
  runtime::JobSpec spec = runtime::load_job_spec(a.job_file);
  const std::string out =
      a.output.empty() ? (std::filesystem::path(spec.checkpoint.dir) / "ckpt-000000000.h5").string() : a.output;
  if (std::filesystem::exists(out) && !a.force)
    throw IoError(fmt::format("'{}' exists: give --force to replace it, or -o another path", out));
  if (comm->rank() == 0) std::filesystem::create_directories(std::filesystem::path(out).parent_path().empty()
                                                                 ? std::filesystem::path(".")
                                                                 : std::filesystem::path(out).parent_path());
  comm->barrier();
  runtime::Trainer trainer(spec, *comm);
  runtime::load_weights(a.weights, trainer.model());
  trainer.save(out, 0);
  if (comm->rank() == 0)
    std::printf("checkpoint %s: step 0 of job '%s' with the weights of %s (resume it with recmix train %s "
                "--resume %s)\n",
                out.c_str(), spec.name.c_str(), a.weights.c_str(), a.job_file.c_str(), out.c_str());
}

}  // namespace

void add_init_checkpoint_command(CLI::App& app) {
  auto args = std::make_shared<InitArgs>();
  auto* init = app.add_subcommand(
      "init-checkpoint",
      "Write a step-0 checkpoint of a job with weights from a file: /dense/<name> (weight [out, in], bias [out]) "
      "and /embedding/<t> [rows, dim], float32, shapes exactly the model's (docs/checkpoint-format.md)");
  init->add_option("job", args->job_file, "Job spec (TOML): the model and its data")->required()->check(CLI::ExistingFile);
  init->add_option("--weights", args->weights, "The weights file (HDF5)")->required()->check(CLI::ExistingFile);
  init->add_option("-o,--output", args->output, "The checkpoint (default: the job's checkpoint folder, ckpt-000000000.h5)");
  init->add_flag("--force", args->force, "Replace an existing checkpoint");
  init->callback([args] { run_init(*args); });
}

}  // namespace recmix::cli
