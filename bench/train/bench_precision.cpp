// bench_precision: the Kaggle-shape training step in each precision ([precision], docs/math.md)
// side by side in one run: fp32, 16-bit tables, bf16 GEMMs, both; samples/s (medians, and each
// against fp32 as the median of per-repetition ratios) and the device pool's peak bytes. Then the
// step's GEMM chain in fp32 and in bf16 (Backend::gemm_half), and a 2048^3 GEMM of each, the
// machine's ceiling for that type on this backend (GFLOP/s). With --kernels-ab, instead of the
// precisions: the GPU kernels' A/B (lanes, prefetch, GEMM epilogues, the exchange stream, the L2
// window), each off in turn, against the eager fp32 step with none of them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/common/cli.hpp"
#include "bench/common/bench_util.hpp"
#include "bench/common/kaggle_batch.hpp"
#include "bench/common/timing.hpp"
#include "comm/device_communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "device/backend.hpp"
#include "device/cpu/omp_wait_policy.hpp"
#include "device/fine_grained.hpp"
#include "device/memory_pool.hpp"
#include "embedding/kernel_launch.hpp"
#include "embedding/sharded_embedding.hpp"
#include "embedding/sharding_plan.hpp"
#include "mlp/mlp.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"

using namespace recmix;

namespace {

// The GPU kernels' A/B switches (--kernels-ab): each one off turns a feature of the GPU step off.
enum Off : unsigned {
  kLanes = 1,           // embedding lanes (device::GpuItems::fine instead)
  kPrefetch = 2,        // the poolings' next-row prefetch
  kEpilogues = 4,       // the MLPs' GEMM epilogues
  kExchangeStream = 8,  // the all-to-alls on their own stream
  kL2Window = 16,       // device.l2_window
  kAllNew = 31,
};

struct Config {
  std::string name, dense, tables;
  bool graphs = false;  // device.graphs: the dense middle replayed from a captured graph
  unsigned off = 0;     // Off bits
};

// Sets the process-wide switches of a config's Off bits (all on for 0), around its steps.
void apply_switches(unsigned off) {
  device::set_gpu_items(off & kLanes ? device::GpuItems::fine : device::GpuItems::lanes);
  embedding::set_lane_prefetch(!(off & kPrefetch));
  mlp::set_gemm_epilogues_enabled(!(off & kEpilogues));
  embedding::set_exchange_stream_enabled(!(off & kExchangeStream));
}

// GFLOP/s of repeated m x n x k GEMMs, fp32 or bf16 operands, for at least min_seconds.
double gemm_gflops(device::Backend& backend, int m, int n, int k, bool bf16, double min_seconds) {
  device::MemoryPool pool(backend, device::Tier::device, "gemm");
  device::Buffer<float> a(pool, std::size_t(m) * k), b(pool, std::size_t(n) * k), c(pool, std::size_t(m) * n);
  bench::fill(a.data(), a.size(), -1.f, 1.f, 1);
  bench::fill(b.data(), b.size(), -1.f, 1.f, 2);
  std::vector<std::uint16_t> a16(a.size()), b16(b.size());
  for (std::size_t i = 0; i < a.size(); ++i) a16[i] = half::float_to_bf16(a.data()[i]);
  for (std::size_t i = 0; i < b.size(); ++i) b16[i] = half::float_to_bf16(b.data()[i]);
  auto stream = backend.create_stream();
  auto once = [&] {
    if (bf16)
      backend.gemm_half(*stream, half::Storage::bf16, false, true, m, n, k, 1.f, a16.data(), k, b16.data(), k, 0.f, c.data(), n);
    else
      backend.gemm(*stream, false, true, m, n, k, 1.f, a.data(), k, b.data(), k, 0.f, c.data(), n);
  };
  return 2.0 * m * n * k * bench::calls_per_second(once, min_seconds) / 1e9;
}

// The step's GEMMs (bench::GemmChain's shapes) with bf16 operands rounded once beforehand.
double chain_gflops(device::Backend& backend, int batch, bool bf16, double min_seconds) {
  device::MemoryPool pool(backend, device::Tier::device, "chain");
  const std::vector<std::vector<int>> mlps = {{13, 512, 256, 64, 16}, {367, 512, 256, 1}};
  bench::GemmChain chain(backend, pool, mlps, batch);
  double flops = 0;
  for (auto& l : chain.layers) flops += 3.0 * 2.0 * batch * l.in * l.out;
  auto stream = backend.create_stream();
  auto round = [](const device::Buffer<float>& x) {
    std::vector<std::uint16_t> r(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) r[i] = half::float_to_bf16(x.data()[i]);
    return r;
  };
  std::vector<std::vector<std::uint16_t>> w16, dy16;
  for (auto& l : chain.layers) w16.push_back(round(l.w)), dy16.push_back(round(l.dy));
  const auto x16 = round(chain.input);
  auto run = [&] {
    if (!bf16) return chain.run(*stream);
    for (std::size_t i = 0; i < chain.layers.size(); ++i) {
      auto& l = chain.layers[i];
      backend.gemm_half(*stream, half::Storage::bf16, false, true, batch, l.out, l.in, 1.f, x16.data(), l.in, w16[i].data(), l.in, 0.f,
                        l.y.data(), l.out);
    }
    for (std::size_t i = chain.layers.size(); i-- > 0;) {
      auto& l = chain.layers[i];
      backend.gemm_half(*stream, half::Storage::bf16, true, false, l.out, l.in, batch, 1.f, dy16[i].data(), l.out, x16.data(), l.in, 0.f,
                        l.dw.data(), l.in);
      backend.gemm_half(*stream, half::Storage::bf16, false, false, batch, l.in, l.out, 1.f, dy16[i].data(), l.out, w16[i].data(), l.in,
                        0.f, l.dx.data(), l.in);
    }
  };
  return flops * bench::calls_per_second(run, min_seconds) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  device::cpu::ensure_passive_omp_wait_policy(argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  CLI::App app{"The training step in each precision, side by side"};
  std::vector<std::int64_t> batches = {128, 2048};
  int threads = 2, reps = 7, tables = 26;
  std::int64_t rows = 100000;
  double min_seconds = 0.3;
  std::string device_kind = "cpu";
  std::string rounding = "stochastic";
  std::vector<std::string> only;
  bool gemms = true;
  app.add_option("--batch", batches, "global batch sizes");
  app.add_option("--threads", threads, "threads per rank");
  app.add_option("--reps", reps, "repetitions (medians reported)");
  app.add_option("--min-seconds", min_seconds, "minimum time of each configuration in a repetition");
  app.add_option("--tables", tables, "embedding tables");
  app.add_option("--rows", rows, "rows per table");
  app.add_option("--rounding", rounding, "how 16-bit tables round an update: stochastic or nearest")
      ->check(CLI::IsMember({"stochastic", "nearest"}));
  app.add_option("--only", only, "run these precisions only, besides fp32 (e.g. --only \"fp16 tables\"), for profiling");
  app.add_flag("!--no-gemms", gemms, "skip the GEMM GFLOP/s table");
  bool graphs_ab = false, kernels_ab = false;
  app.add_flag("--graphs-ab", graphs_ab,
               "also fp32 and bf16 GEMMs with device.graphs = true, side by side with the eager steps");
  app.add_flag("--kernels-ab", kernels_ab,
               "instead of the precisions: the GPU kernels' A/B, each of lanes, prefetch, GEMM epilogues, the "
               "exchange stream and the L2 window off in turn from the TF32 step with graphs, against the eager "
               "fp32 step with none of them (the step before they existed)");
  app.add_option("--device", device_kind, "backend: cpu or cuda (cpu-strict runs, but its speed means nothing)")
      ->check(CLI::IsMember({"cpu", "cuda", "cpu-strict"}));
  if (const auto rc = bench::parse_or_exit_status(app, argc, argv)) return *rc;
  auto comm = comm::make_mpi_world_communicator();
  const int rank = comm->rank(), world = comm->size();
  // The device communicator as the trainer makes it (NCCL on CUDA, staged under cpu-strict):
  // the embedding's exchanges move device buffers.
  const device::BackendKind kind = device::parse_backend_kind(device_kind);
  auto early_device_comm = comm::device_communicator_before_backend(*comm, kind);
  auto backend = device::make_backend(kind, threads);
  auto device_comm_owned = comm::device_communicator(*comm, *backend, std::move(early_device_comm), false);
  comm::Communicator& device_comm = device_comm_owned ? *device_comm_owned : *comm;
  auto stream = backend->create_stream();
  std::vector<Config> configs = {{"fp32", "fp32", "fp32"},
                                 {"tf32 GEMMs", "tf32", "fp32"},
                                 {"fp16 tables", "fp32", "fp16"},
                                 {"bf16 tables", "fp32", "bf16"},
                                 {"bf16 GEMMs", "bf16", "fp32"},
                                 {"bf16 GEMMs + bf16 tables", "bf16", "bf16"}};
  if (kernels_ab) {
    const bool graphs = backend->supports_graphs();
    const std::string g = graphs ? ", graphs" : "";
    configs = {{"fp32 eager, none of the new kernels", "fp32", "fp32", false, kAllNew},
               {"fp32 eager", "fp32", "fp32"},
               {"tf32" + g, "tf32", "fp32", graphs},
               {"tf32" + g + ", fine items", "tf32", "fp32", graphs, kLanes},
               {"tf32" + g + ", no prefetch", "tf32", "fp32", graphs, kPrefetch},
               {"tf32" + g + ", no epilogues", "tf32", "fp32", graphs, kEpilogues},
               {"tf32" + g + ", exchange on the compute stream", "tf32", "fp32", graphs, kExchangeStream},
               {"tf32" + g + ", no L2 window", "tf32", "fp32", graphs, kL2Window},
               {"bf16 GEMMs" + g, "bf16", "fp32", graphs}};
  } else if (graphs_ab) {
    configs.push_back({"fp32, graphs", "fp32", "fp32", true});
    configs.push_back({"bf16 GEMMs, graphs", "bf16", "fp32", true});
    configs.push_back({"tf32 GEMMs, graphs", "tf32", "fp32", true});
  }
  if (!only.empty()) {
    for (const auto& name : only)
      if (std::none_of(configs.begin(), configs.end(), [&](const Config& c) { return c.name == name; })) {
        if (rank == 0) fmt::print(stderr, "--only: no precision is called '{}'\n", name);
        MPI_Finalize();
        return 2;
      }
    std::erase_if(configs, [&](const Config& c) {
      return c.name != "fp32" && std::find(only.begin(), only.end(), c.name) == only.end();
    });
  }
  if (rank == 0)
    fmt::print("{} rank(s) x {}; {} tables x {} rows, dim 16, one index per bag; bottom 13-512-256-64-16, dot, "
               "top 367-512-256-1, SGD; 16-bit tables rounded {}; AVX512_BF16: {}; medians of {} repetitions\n\n",
               world, backend->description(), tables, rows, rounding == "nearest" ? "to nearest" : "stochastically",
               device::cpu_has_avx512_bf16() ? "yes" : "no", reps);

  for (std::int64_t global_batch : batches) {
    const std::int64_t local = (global_batch + world - 1) / world;
    const std::vector<embedding::TableSpec> specs(tables, embedding::TableSpec{rows, 16});
    const auto plan = embedding::ShardingPlan::automatic(specs, world);
    std::vector<data::Batch> data;
    for (int g = 0; g < 8; ++g) data.push_back(bench::make_batch(global_batch, rank, world, tables, rows, g));

    struct Run {
      const Config* config;
      std::unique_ptr<device::MemoryPool> pool;
      std::unique_ptr<runtime::DlrmModel> model;
      std::string refused;
      std::vector<double> rate, ratio;
      int iters = 3, step = 0;
    };
    std::vector<Run> runs;
    for (const Config& c : configs) {
      Run r{&c, std::make_unique<device::MemoryPool>(*backend, device::Tier::device, c.name), nullptr, "", {}, {}};
      runtime::JobSpec spec = runtime::parse_job_spec(
          fmt::format("name = \"bench\"\n[optimizer]\nlr = 0.01\n[data]\ntrain = \"none.h5\"\n[precision]\n"
                      "dense = \"{}\"\nembedding = \"{}\"\nrounding = \"{}\"\n[device]\ngraphs = {}\n"
                      "l2_window = {}\n",
                      c.dense, c.tables, rounding, c.graphs,
                      c.off & kL2Window || !backend->has_l2_window() ? "false" : "\"auto\""),
          "bench");
      try {
        r.model = std::make_unique<runtime::DlrmModel>(spec, specs, 13, *comm, device_comm, *backend, *r.pool, local,
                                                       plan);
      } catch (const ConfigError& e) {
        r.refused = e.what();
      }
      runs.push_back(std::move(r));
    }
    auto timed_steps = [&](Run& r, int n) {
      apply_switches(r.config->off);
      // One backend for every run: each run's GEMM math is set again before its steps (a model
      // sets it when it is made, and the last one made would win).
      backend->set_fp32_math(r.config->dense == "tf32" ? device::Fp32Math::tf32 : device::Fp32Math::fp32);
      comm->barrier();
      const double t0 = bench::now();
      for (int i = 0; i < n; ++i) r.model->train_step(data[r.step++ % data.size()], global_batch);
      double t = bench::now() - t0, sum = 0;
      comm->all_reduce_sum(&t, &sum, 1, comm::DataType::f64);
      return sum / world / n;
    };
    for (Run& r : runs) {
      if (!r.model) continue;
      timed_steps(r, 2);
      r.iters = std::max(3, static_cast<int>(min_seconds / std::max(timed_steps(r, 3), 1e-6)));
      comm->broadcast(&r.iters, 1, comm::DataType::i32, 0);
    }
    for (int rep = 0; rep < reps; ++rep) {
      double base = 0;
      for (Run& r : runs) {
        if (!r.model) continue;
        const double rate = global_batch / timed_steps(r, r.iters);
        if (r.config == &configs[0]) base = rate;
        r.rate.push_back(rate);
        r.ratio.push_back(rate / base);
      }
    }
    if (rank != 0) continue;
    fmt::print("global batch {}:\n\n| {} | step samples/s | / {} (median of per-repetition ratios) | device "
               "pool peak (rank 0) | / {} |\n|---|---:|---:|---:|---:|\n",
               global_batch, kernels_ab ? "step" : "precision", configs[0].name, configs[0].name);
    const double base_peak = static_cast<double>(runs[0].pool->peak_bytes());
    for (Run& r : runs) {
      if (!r.model) {
        fmt::print("| {} | refused: {} | | | |\n", r.config->name, r.refused);
        continue;
      }
      fmt::print("| {} | {:.0f} | {:.2f} | {} | {:.2f} |\n", r.config->name, bench::median(r.rate),
                 bench::median(r.ratio), device::format_bytes(r.pool->peak_bytes()),
                 r.pool->peak_bytes() / base_peak);
    }
    fmt::print("\n");
  }

  if (gemms && rank == 0 && backend->kind() == device::BackendKind::cpu) {  // the GEMMs read host-filled buffers
    std::vector<std::string> rows;
    for (std::int64_t b : batches)
      rows.push_back(fmt::format("| the step's GEMM chain, batch {} | {:.1f} | {:.1f} |", b,
                                 chain_gflops(*backend, static_cast<int>(b), false, 1.0),
                                 chain_gflops(*backend, static_cast<int>(b), true, 1.0)));
    rows.push_back(fmt::format("| 2048 x 2048 x 2048 (the ceiling) | {:.1f} | {:.1f} |",
                               gemm_gflops(*backend, 2048, 2048, 2048, false, 2.0),
                               gemm_gflops(*backend, 2048, 2048, 2048, true, 2.0)));
    fmt::print("GEMMs, GFLOP/s (bf16 ran {}):\n\n| | fp32 | bf16 |\n|---|---:|---:|\n{}\n",
               to_string(backend->last_half_gemm_path()), fmt::join(rows, "\n"));
  }
  apply_switches(0);
  device_comm_owned.reset();
  comm.reset();
  MPI_Finalize();
  return 0;
}
