// Training throughput of the whole hybrid-parallel DLRM step (embedding lookup and update over
// all-to-all, both MLPs, interaction, loss, optimizers, gradient all-reduce) for the reference
// DLRM's Kaggle model, timed in the same run as the bare GEMM chain of the step (the ceiling)
// and as the bare collectives of the step (the communication share). The chain runs on the step's
// GEMM library and, where that is another, on OpenBLAS as well (the plain BLAS baseline).
// Batches are generated in memory: data reading is measured by bench/data. Run under mpirun for
// several ranks.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <cstdio>
#include <optional>

#include "bench/common/bench_util.hpp"
#include "bench/common/kaggle_batch.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "core/random.hpp"
#include "device/cpu/omp_wait_policy.hpp"
#include "device/memory_pool.hpp"
#include "mlp/cpu/linear.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"

using namespace recmix;

int main(int argc, char** argv) {
  device::cpu::ensure_passive_omp_wait_policy(argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  CLI::App app{"Whole DLRM training step vs the bare GEMM chain (the reference DLRM's Kaggle model)"};
  std::vector<std::int64_t> batches = {128, 2048};
  int threads = 2, reps = 7, tables = 26;
  std::int64_t rows = 100000;
  double min_seconds = 0.5;
  std::string sparse = "sgd";
  bool breakdown = false;
  std::string replicas = "auto";
  std::string gemm = "auto";
  app.add_option("--batch", batches, "global batch sizes");
  app.add_option("--threads", threads, "threads per rank (OpenBLAS and OpenMP)");
  app.add_option("--reps", reps, "repetitions (median reported)");
  app.add_option("--min-seconds", min_seconds, "minimum time per repetition");
  app.add_option("--tables", tables, "embedding tables");
  app.add_option("--rows", rows, "rows per table");
  app.add_option("--sparse", sparse, "sparse optimizer");
  app.add_option("--dense-replicas", replicas,
                 "one rank, several threads: the dense half as one replica per thread (on), every GEMM split "
                 "over the threads (off), or by batch size (auto, the default; docs/job-spec.md)")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--gemm", gemm, "the CPU backend's GEMM library for the step: auto, openblas or onednn")
      ->check(CLI::IsMember({"auto", "openblas", "onednn"}));
  bool compare_unfused = false;
  app.add_flag("--compare-unfused", compare_unfused,
               "also time the step without the fused narrow-layer GEMMs (every GEMM through the backend's library), "
               "interleaved with the default, and print both ratios (beside oneDNN they are off already: the two "
               "then differ by noise only)");
  app.add_flag("--breakdown", breakdown,
               "after the table, the time of each phase of the step on rank 0 (extra timed steps)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    MPI_Finalize();
    return rc;
  }
  auto comm = comm::make_mpi_world_communicator();
  const int rank = comm->rank(), world = comm->size();
  auto backend = device::make_backend(device::BackendKind::cpu, threads, device::parse_cpu_gemm(gemm));
  const bool also_openblas = backend->gemm_library() != device::GemmLibrary::openblas;
  auto openblas = also_openblas ? device::make_backend(device::BackendKind::cpu, threads, device::CpuGemm::openblas)
                                : nullptr;
  auto stream = backend->create_stream();
  if (rank == 0)
    fmt::print("{} rank(s) x {}; {} tables x {} rows, dim 16, one index per bag; bottom 13-512-256-64-16, dot, "
               "top 367-512-256-1, SGD dense, {} sparse; medians of {} repetitions\n\n",
               world, backend->description(), tables, rows, sparse, reps);
  if (rank == 0)
    fmt::print("| global batch | step samples/s | GEMM chain samples/s ({} GEMM, 1 rank, same threads) | step / chain (median of "
               "per-repetition ratios) |{} all-to-all bytes/step | all-reduce bytes/step | comm share |\n|---:|---:|---:|---:|{}"
               "---:|---:|---:|\n",
               to_string(backend->gemm_library()),
               also_openblas ? " OpenBLAS GEMM chain samples/s | step / OpenBLAS chain |" : "",
               also_openblas ? "---:|---:|" : "");

  std::vector<std::string> breakdowns;
  for (std::int64_t global_batch : batches) {
    runtime::JobSpec spec = runtime::parse_job_spec(
        fmt::format("name = \"bench\"\n[optimizer]\nsparse = \"{}\"\nlr = 0.01\n[data]\ntrain = \"none.h5\"\n", sparse),
        "bench");
    std::vector<embedding::TableSpec> specs(tables, embedding::TableSpec{rows, 16});
    auto plan = embedding::ShardingPlan::automatic(specs, world);
    device::MemoryPool pool(*backend, device::Tier::device, "bench");
    const std::int64_t local = (global_batch + world - 1) / world;
    spec.device.dense_replicas = runtime::parse_choice<runtime::DenseReplicas>(replicas, "--dense-replicas");
    runtime::DlrmModel model(spec, specs, 13, *comm, *comm, *backend, pool, local, plan);
    constexpr int kBatches = 8;
    std::vector<data::Batch> data;
    for (int g = 0; g < kBatches; ++g) data.push_back(bench::make_batch(global_batch, rank, world, tables, rows, g));

    // The GEMM chain of the whole global batch on one rank with the same threads: the ceiling.
    device::MemoryPool chain_pool(*backend, device::Tier::device, "chain");
    const std::vector<std::vector<int>> mlps = {{13, 512, 256, 64, 16}, {367, 512, 256, 1}};
    bench::GemmChain chain(*backend, chain_pool, mlps, static_cast<int>(global_batch));
    std::optional<bench::GemmChain> openblas_chain;
    if (also_openblas) openblas_chain.emplace(*openblas, chain_pool, mlps, static_cast<int>(global_batch));

    int step_counter = 0;
    auto timed_steps = [&](int n) {
      comm->barrier();
      double t0 = bench::now();
      for (int i = 0; i < n; ++i) model.train_step(data[step_counter++ % kBatches], global_batch);
      double t = bench::now() - t0;
      double worst = t;
      comm->all_reduce_sum(&t, &worst, 1, comm::DataType::f64);  // mean over ranks
      return worst / world / n;
    };
    timed_steps(2);
    double one = timed_steps(3);
    int iters = std::max(3, static_cast<int>(min_seconds / std::max(one, 1e-6)));
    comm->broadcast(&iters, 1, comm::DataType::i32, 0);
    std::vector<double> step_rate, chain_rate, openblas_rate, unfused_rate;
    auto time_unfused = [&] {
      mlp::cpu::set_fused_linear_enabled(false);
      unfused_rate.push_back(global_batch / timed_steps(iters));
      mlp::cpu::set_fused_linear_enabled(true);
    };
    for (int r = 0; r < reps; ++r) {
      // With --compare-unfused the two variants take turns at going first: whichever runs first
      // after the chain was measured up to 15% slower with oneDNN's GEMM.
      const bool unfused_first = compare_unfused && r % 2 == 1;
      if (unfused_first) time_unfused();
      step_rate.push_back(global_batch / timed_steps(iters));
      if (compare_unfused && !unfused_first) time_unfused();
      if (rank == 0) {
        double t0 = bench::now();
        for (int i = 0; i < iters; ++i) chain.run(*stream);
        chain_rate.push_back(global_batch / ((bench::now() - t0) / iters));
        if (also_openblas) {
          t0 = bench::now();
          for (int i = 0; i < iters; ++i) openblas_chain->run(*stream);
          openblas_rate.push_back(global_batch / ((bench::now() - t0) / iters));
        }
      }
      comm->barrier();
    }
    // Bytes moved per step and the time of the step's collectives alone.
    model.train_step(data[0], global_batch);
    double a2a_bytes = static_cast<double>(model.embedding().bytes_sent_last_step()), a2a_total = 0;
    comm->all_reduce_sum(&a2a_bytes, &a2a_total, 1, comm::DataType::f64);
    std::size_t params = 0;
    for (auto& p : model.dense_parameters()) params += p.count;
    double allreduce_bytes = world > 1 ? 4.0 * params * world : 0;  // payload contributed by all ranks
    double comm_seconds = 0;
    if (world > 1) {
      std::vector<float> grads(params, 1.f);
      // The same count on every rank (the mean per pair), so sends and receives match.
      const std::size_t per_peer = static_cast<std::size_t>(a2a_total / 4 / (world * (world - 1)) / 2);
      std::vector<float> send(per_peer * world), recv(per_peer * world);
      std::vector<std::size_t> counts(world, per_peer), displs(world);
      for (int p = 0; p < world; ++p) displs[p] = p * per_peer;
      counts[rank] = 0;
      std::vector<double> samples;
      for (int r = 0; r < 20; ++r) {
        comm->barrier();
        double t0 = bench::now();
        comm->all_reduce_sum(grads.data(), grads.data(), params, comm::DataType::f32);
        for (int k = 0; k < 2; ++k)  // forward and backward exchanges
          comm->all_to_all_v(send.data(), counts, displs, recv.data(), counts, displs, comm::DataType::f32);
        samples.push_back(bench::now() - t0);
      }
      comm_seconds = bench::median(samples);
    }
    double step = bench::median(step_rate), ceiling = bench::median(chain_rate);
    // The ratio of each repetition's step and chain, timed back to back, then the median: the
    // machine's speed drifts by up to 2x between repetitions, far less within one.
    std::vector<double> ratios, openblas_ratios;
    for (std::size_t r = 0; r < chain_rate.size(); ++r) ratios.push_back(step_rate[r] / chain_rate[r]);
    for (std::size_t r = 0; r < openblas_rate.size(); ++r) openblas_ratios.push_back(step_rate[r] / openblas_rate[r]);
    if (rank == 0)
      fmt::print("| {} | {:.0f} | {:.0f} | {:.2f} |{} {:.2f} MB | {:.2f} MB | {} |\n", global_batch, step, ceiling,
                 bench::median(ratios),
                 also_openblas ? fmt::format(" {:.0f} | {:.2f} |", bench::median(openblas_rate), bench::median(openblas_ratios))
                               : "",
                 a2a_total / 1e6, allreduce_bytes / 1e6,
                 world > 1 ? fmt::format("{:.0f}%", 100.0 * comm_seconds / (global_batch / step)) : "-");
    if (compare_unfused && rank == 0) {
      std::vector<double> unfused_ratios, gain;
      for (std::size_t r = 0; r < chain_rate.size(); ++r) {
        unfused_ratios.push_back(unfused_rate[r] / chain_rate[r]);
        gain.push_back(step_rate[r] / unfused_rate[r]);
      }
      breakdowns.push_back(fmt::format(
          "\nGlobal batch {}: without the fused GEMMs {:.0f} samples/s, step / chain {:.2f}; with / without "
          "(median of per-repetition ratios) {:.3f}\n",
          global_batch, bench::median(unfused_rate), bench::median(unfused_ratios), bench::median(gain)));
    }
    std::fflush(stdout);
    if (breakdown) {
      model.set_phase_timing(true);
      timed_steps(iters);
      double total = 0;
      for (double t : model.phase_seconds()) total += t;
      std::string text = fmt::format("\nPer phase at global batch {} (rank 0, {} steps):\n", global_batch,
                                     model.timed_steps());
      for (int p = 0; p < runtime::DlrmModel::num_phases; ++p) {
        const double t = model.phase_seconds()[p];
        text += fmt::format("  {:<34} {:9.1f} us/step {:6.1f}%\n", runtime::DlrmModel::phase_name(p),
                            1e6 * t / model.timed_steps(), 100.0 * t / total);
      }
      model.set_phase_timing(false);
      breakdowns.push_back(std::move(text));
    }
  }
  if (rank == 0)
    for (const auto& text : breakdowns) fmt::print("{}", text);
  comm.reset();
  MPI_Finalize();
  return 0;
}
