// What `recmix run` adds to a job's training step, against the same step as `recmix train` runs
// it, side by side in one process: two copies of the reference DLRM's Kaggle model on the same
// ranks and threads, one over the plain MPI communicator, one over the guarded communicator that
// every job of a run trains over (comm/guarded), plus the run's per-step status word (stop votes
// and failed reads: one all-reduce of two integers) and the sample hook's clock reads. Blocks of
// steps alternate between the two (which goes first alternates too); the median of the
// per-repetition ratios is printed, with the status all-reduces counted per step and timed alone,
// back to back, as the other estimate of the cost. Run under mpirun.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "bench/common/cli.hpp"
#include "bench/common/kaggle_batch.hpp"
#include "bench/common/timing.hpp"
#include "comm/guarded/guarded_communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "device/cpu/omp_wait_policy.hpp"
#include "device/memory_pool.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"

using namespace recmix;

int main(int argc, char** argv) {
  device::cpu::ensure_passive_omp_wait_policy(argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  CLI::App app{"The per-step cost of recmix run's guarded communicator and status word on the Kaggle DLRM step"};
  std::vector<std::int64_t> batches = {128, 2048};
  int threads = 1, reps = 9, tables = 26;
  std::int64_t rows = 100000;
  double min_seconds = 0.5;
  app.add_option("--batch", batches, "global batch sizes");
  app.add_option("--threads", threads, "threads per rank");
  app.add_option("--reps", reps, "repetitions (median of the per-repetition ratios)");
  app.add_option("--min-seconds", min_seconds, "minimum time per block of steps");
  app.add_option("--tables", tables, "embedding tables");
  app.add_option("--rows", rows, "rows per table");
  if (const auto rc = bench::parse_or_exit_status(app, argc, argv)) return *rc;
  auto plain = comm::make_mpi_world_communicator();
  const int rank = plain->rank(), world = plain->size();
  std::vector<int> everyone(world);
  for (int r = 0; r < world; ++r) everyone[r] = r;
  comm::GuardedCommunicator guarded(comm::make_mpi_group_communicator(*plain, everyone, 1));
  auto backend = device::make_backend(device::BackendKind::cpu, threads);
  if (rank == 0)
    fmt::print("{} rank(s) x {}; Kaggle shape ({} tables x {} rows, dim 16); medians of {} repetitions\n\n"
               "| global batch | step as recmix train | step as recmix run | run speed / train speed (median ratio) | status "
               "all-reduces per step | one status all-reduce | their share of the step |\n|---:|---:|---:|---:|---:|---:|---:|\n",
               world, backend->description(), tables, rows, reps);
  for (const std::int64_t global_batch : batches) {
    const runtime::JobSpec spec =
        runtime::parse_job_spec("name = \"bench\"\n[data]\ntrain = \"none.h5\"\n", "bench");
    const std::vector<embedding::TableSpec> specs(tables, embedding::TableSpec{rows, 16});
    const auto plan = embedding::ShardingPlan::automatic(specs, world);
    const std::int64_t local = (global_batch + world - 1) / world;
    device::MemoryPool pool_a(*backend, device::Tier::device, "train"), pool_b(*backend, device::Tier::device, "run");
    runtime::DlrmModel as_train(spec, specs, 13, *plain, *plain, *backend, pool_a, local, plan);
    runtime::DlrmModel as_run(spec, specs, 13, guarded, guarded, *backend, pool_b, local, plan);
    constexpr int kBatches = 8;
    std::vector<data::Batch> data;
    for (int g = 0; g < kBatches; ++g) data.push_back(bench::make_batch(global_batch, rank, world, tables, rows, g));

    int counter = 0;
    // Mean seconds per step over ranks; the run's variant adds what JobRunner and the trainer add.
    auto block = [&](bool run, int n) {
      plain->barrier();
      const double t0 = bench::now();
      for (int i = 0; i < n; ++i) {
        const data::Batch& b = data[counter++ % kBatches];
        if (run) {
          std::int32_t status[2] = {0, 0};  // the trainer's status word (stop votes, failed reads)
          guarded.all_reduce_sum(status, status, 2, comm::DataType::i32);
          const auto before = std::chrono::steady_clock::now();  // the sample hook's clocks
          as_run.train_step(b, global_batch);
          volatile auto after = std::chrono::steady_clock::now() - before;
          (void)after;
        } else {
          as_train.train_step(b, global_batch);
        }
      }
      double t = bench::now() - t0, sum = 0;
      plain->all_reduce_sum(&t, &sum, 1, comm::DataType::f64);
      return sum / world / n;
    };
    block(false, 3);
    block(true, 3);
    int iters = std::max(5, static_cast<int>(min_seconds / std::max(block(false, 5), 1e-6)));
    plain->broadcast(&iters, 1, comm::DataType::i32, 0);
    std::vector<double> train_s, run_s, ratios;
    for (int r = 0; r < reps; ++r) {
      const bool run_first = r % 2 == 1;
      double a = 0, b = 0;
      if (run_first) b = block(true, iters);
      a = block(false, iters);
      if (!run_first) b = block(true, iters);
      train_s.push_back(a);
      run_s.push_back(b);
      ratios.push_back(a / b);  // speed as run over speed as train
    }
    // Status all-reduces per step, counted; and one alone, timed back to back.
    const long long words_before = guarded.status_words();
    block(true, 10);
    const double words_per_step = static_cast<double>(guarded.status_words() - words_before) / 10.0;
    std::vector<double> word_s;
    for (int r = 0; r < 5; ++r) {
      plain->barrier();
      const double t0 = bench::now();
      std::int32_t w[2] = {0, 0};
      for (int i = 0; i < 2000; ++i) plain->all_reduce_sum(w, w, 2, comm::DataType::i32);
      word_s.push_back((bench::now() - t0) / 2000);
    }
    const double one_word = bench::median(word_s), train_step = bench::median(train_s);
    if (rank == 0)
      fmt::print("| {} | {:.0f} samples/s | {:.0f} samples/s | {:.3f} | {:.0f} | {:.1f} us | {:.2f}% |\n", global_batch,
                 global_batch / train_step, global_batch / bench::median(run_s), bench::median(ratios), words_per_step,
                 1e6 * one_word, 100.0 * words_per_step * one_word / train_step);
  }
  MPI_Finalize();
  return 0;
}
