// bench_dcn: the DLRM-DCNv2 training step (the MLPerf benchmark's dense shape: bottom
// 13-512-256-128, 26 tables of dim 128, three cross layers of rank 512 on n = 3456, top
// 1024-1024-512-256-1; small tables) against this machine's fp32 GEMM ceiling, side by side in one
// run: each repetition times the step in fp32 (and with bf16 GEMMs where the backend runs them),
// the bare GEMM chain of the step, and a 2048^3 GEMM. Reports each one's GFLOP/s by the step's
// GEMM FLOPs and its ratio to the 2048^3 GEMM's, medians of the per-repetition ratios.
// --device cuda (bench/device/gpu_suite.sh) adds the step with TF32 GEMMs and the 2048^3 GEMM in
// TF32; each measurement sets the backend's fp32 math it needs first (a model's constructor sets
// it for the whole backend).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <mpi.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/cli.hpp"
#include "bench/common/bench_util.hpp"
#include "bench/common/kaggle_batch.hpp"
#include "bench/common/timing.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"
#include "core/half.hpp"
#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/cpu/omp_wait_policy.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharding_plan.hpp"
#include "runtime/train/dlrm_model.hpp"
#include "runtime/train/job_spec.hpp"
#include "runtime/train/job_spec_sched.hpp"
#include "sched/dlrm_profile.hpp"
#include "sched/machine_model.hpp"

using namespace recmix;

namespace {

struct Shape {
  std::vector<int> bottom = {13, 512, 256, 128};
  std::vector<int> top = {1024, 1024, 512, 256, 1};
  int tables = 26, dim = 128, layers = 3, rank = 512;
  int n() const { return (tables + 1) * dim; }
};

// One GEMM of the step: C [m x n] = op(A) op(B), k deep.
struct Gemm {
  int m, n, k;
  bool ta, tb;
};

// Every GEMM of a training step on `batch` samples, as the MLPs and the cross network issue them:
// per layer the forward, the weight gradient and the input gradient (the bottom MLP's first layer
// has none); per cross layer two forward products and four backward ones (low rank).
std::vector<Gemm> step_gemms(const Shape& s, int batch) {
  std::vector<Gemm> g;
  auto mlp = [&](const std::vector<int>& widths, int in, bool first_input_grad) {
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const int out = widths[i];
      g.push_back({batch, out, in, false, true});
      g.push_back({out, in, batch, true, false});
      if (i > 0 || first_input_grad) g.push_back({batch, in, out, false, false});
      in = out;
    }
  };
  mlp(std::vector<int>(s.bottom.begin() + 1, s.bottom.end()), s.bottom.front(), false);
  const int n = s.n(), r = s.rank;
  for (int l = 0; l < s.layers; ++l) {
    g.push_back({batch, r, n, false, true});
    g.push_back({batch, n, r, false, true});
    g.push_back({batch, r, n, false, false});
    g.push_back({n, r, batch, true, false});
    g.push_back({r, n, batch, true, false});
    g.push_back({batch, n, r, false, false});
  }
  mlp(s.top, n, true);
  return g;
}

double flops(const std::vector<Gemm>& gemms) {
  double f = 0;
  for (const Gemm& g : gemms) f += 2.0 * g.m * g.n * g.k;
  return f;
}

// Seconds a call of f takes: one untimed, then at least 2 calls and min_seconds.
template <class F>
double seconds_per_call(const F& f, double min_seconds) {
  return 1.0 / bench::calls_per_second(f, min_seconds, 2);
}

// Runs a list of GEMMs on buffers as large as the largest operand.
struct GemmRunner {
  GemmRunner(device::Backend& backend, const std::vector<Gemm>& gemms)
      : backend(backend), pool(backend, device::Tier::device, "gemm chain"), gemms(gemms) {
    std::size_t most = 0;
    for (const Gemm& g : gemms)
      most = std::max({most, std::size_t(g.m) * g.k, std::size_t(g.k) * g.n, std::size_t(g.m) * g.n});
    a = device::Buffer<float>(pool, most, "A");
    b = device::Buffer<float>(pool, most, "B");
    c = device::Buffer<float>(pool, most, "C");
    stream = backend.create_stream();
    // Filled on the host and copied: the device tier is not host memory on every backend.
    std::vector<float> host(most);
    for (auto [buffer, seed] : {std::pair{&a, 1}, std::pair{&b, 2}}) {
      bench::fill(host.data(), host.size(), -1.f, 1.f, seed);
      backend.copy(buffer->data(), host.data(), most * sizeof(float), *stream);
      stream->synchronize();
    }
  }
  void run() {
    for (const Gemm& g : gemms)
      backend.gemm(*stream, g.ta, g.tb, g.m, g.n, g.k, 1.f, a.data(), g.ta ? g.m : g.k, b.data(), g.tb ? g.k : g.n,
                   0.f, c.data(), g.n);
    stream->synchronize();
  }
  device::Backend& backend;
  device::MemoryPool pool;
  std::vector<Gemm> gemms;
  device::Buffer<float> a, b, c;
  std::unique_ptr<device::Stream> stream;
};

// A 2048^3 GEMM on bf16 operands with an fp32 result (Backend::gemm_half): the bf16 ceiling.
struct Bf16Square {
  static constexpr int kSide = 2048;
  explicit Bf16Square(device::Backend& backend)
      : backend(backend), pool(backend, device::Tier::device, "bf16 ceiling"),
        a(pool, std::size_t(kSide) * kSide, "A"), b(pool, std::size_t(kSide) * kSide, "B"),
        c(pool, std::size_t(kSide) * kSide, "C"), stream(backend.create_stream()) {
    std::vector<float> host(std::size_t(kSide) * kSide);
    std::vector<std::uint16_t> rounded(host.size());
    for (auto [buffer, seed] : {std::pair{&a, 3}, std::pair{&b, 4}}) {
      bench::fill(host.data(), host.size(), -1.f, 1.f, seed);
      for (std::size_t i = 0; i < host.size(); ++i) rounded[i] = half::float_to_bf16(host[i]);
      backend.copy(buffer->data(), rounded.data(), rounded.size() * sizeof(std::uint16_t), *stream);
      stream->synchronize();
    }
  }
  void run() {
    backend.gemm_half(*stream, half::Storage::bf16, false, true, kSide, kSide, kSide, 1.f, a.data(), kSide, b.data(),
                      kSide, 0.f, c.data(), kSide);
    stream->synchronize();
  }
  device::Backend& backend;
  device::MemoryPool pool;
  device::Buffer<std::uint16_t> a, b;
  device::Buffer<float> c;
  std::unique_ptr<device::Stream> stream;
};

// One variant of the step: its model (none when the backend refused it) and its measurements.
struct Run {
  std::string name, dense;
  device::Fp32Math math = device::Fp32Math::fp32;
  std::unique_ptr<device::MemoryPool> pool;
  std::unique_ptr<runtime::DlrmModel> model;
  std::string refused;
  std::vector<double> gflops, ratio;
  runtime::JobSpec spec;
};

// Bytes a second a large copy moves, read and write counted (one thread; the machine models'
// memory_bandwidth is taken the same way, sched/machine_model.cpp).
double copy_bandwidth(double min_seconds) {
  const std::size_t bytes = std::size_t(256) << 20;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  return 2.0 * bytes * bench::calls_per_second([&] { std::memcpy(to.data(), from.data(), bytes); }, min_seconds, 2);
}

// The simulator's model of this step (sched::dlrm_profile, docs/scheduler.md): on a GPU the
// card's machine model as the simulator has it; on the CPU, whose machine models are other CPUs,
// the cpu model with this run's measured figures (Measured).
struct StepModel {
  std::string machine;
  sched::JobSpec job;
  sched::MachineModel model;
};

StepModel step_model(const runtime::JobSpec& spec, const std::vector<std::int64_t>& table_rows, int batch,
                     const std::string& description, bool gpu) {
  data::DatasetInfo info;
  info.rows = batch;
  info.num_dense = 13;
  info.table_rows = table_rows;
  StepModel m{"", runtime::to_sched_spec(spec, info, 1), {}};
  m.job.global_batch = batch;
  if (!gpu) {
    m.machine = "this CPU (the cpu model with this run's figures)";
    m.model = sched::machine_model("cpu-zen3-2vcpu");
  } else if (description.find("H100") != std::string::npos || description.find("H200") != std::string::npos) {
    m.machine = description.find("H100") != std::string::npos ? "h100-dgx" : "h200-dgx";
    m.model = sched::machine_model(m.machine);
  }
  return m;
}

// What this run measured of the machine, for the step model: the 2048^3 GEMMs as the fp32 and
// bf16 peaks (GFLOP/s), the bare chain's share of the fp32 one as the GEMM efficiency, and the
// copy bandwidth (bytes/s).
struct Measured {
  double fp32_gflops, bf16_gflops, chain_share, copy_bytes_s;
};

void print_step_model(const std::vector<Run>& runs, const std::vector<std::int64_t>& table_rows, int batch,
                      double step_flops, const std::string& description, bool gpu, const Measured& measured) {
  for (const Run& r : runs) {
    if (!r.model) continue;
    StepModel m = step_model(r.spec, table_rows, batch, description, gpu);
    if (m.machine.empty()) continue;  // a GPU the simulator has no model of
    if (!gpu) {
      m.model.fp32_flops = m.model.tf32_flops = m.model.fp16_flops = measured.fp32_gflops * 1e9;
      m.model.bf16_flops = measured.bf16_gflops * 1e9;
      m.model.gemm_efficiency = measured.chain_share;
      m.model.memory_bandwidth = measured.copy_bytes_s;
    }
    const double predicted = sched::dlrm_profile(m.job, m.model).solo_step_s;
    const double step = step_flops / (bench::median(r.gflops) * 1e9);
    fmt::print("the simulator's step model on {}, {}: {:.2f} ms predicted, {:.2f} ms measured, "
               "measured / predicted {:.2f}\n",
               m.machine, r.name, 1e3 * predicted, 1e3 * step, step / predicted);
  }
  if (!gpu)
    fmt::print("(the figures: fp32 {:.1f} GFLOP/s, bf16 {:.1f}, GEMM efficiency {:.2f}, memory {:.1f} GB/s read + "
               "write)\n",
               measured.fp32_gflops, measured.bf16_gflops, measured.chain_share, measured.copy_bytes_s / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  device::cpu::ensure_passive_omp_wait_policy(argv);
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  CLI::App app{"The DLRM-DCNv2 training step against the machine's fp32 GEMM ceiling, side by side"};
  int batch = 2048, threads = 2, reps = 3, rank = 512;
  std::int64_t rows = 1000;
  double min_seconds = 2.0;
  app.add_option("--batch", batch, "batch size (one rank)");
  app.add_option("--threads", threads, "threads");
  app.add_option("--reps", reps, "repetitions (medians reported)");
  app.add_option("--min-seconds", min_seconds, "minimum time of each measurement in a repetition");
  app.add_option("--rows", rows, "rows per table (small: the dense half is what is measured)");
  app.add_option("--cross-rank", rank, "the cross layers' rank (0: full rank)");
  std::string device_name = "cpu";
  app.add_option("--device", device_name, "backend")->check(CLI::IsMember({"cpu", "cpu-strict", "cuda"}));
  bool phases = false;
  app.add_flag("--phases", phases, "also each step's time by phase (each phase ends with a wait)");
  if (const auto rc = bench::parse_or_exit_status(app, argc, argv)) return *rc;
  auto comm = comm::make_mpi_world_communicator();
  if (comm->size() != 1) {
    if (comm->rank() == 0) fmt::print(stderr, "bench_dcn runs on one rank\n");
    MPI_Finalize();
    return 2;
  }
  const device::BackendKind kind = device::parse_backend_kind(device_name);
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) {
    fmt::print(stderr, "bench_dcn: this build or machine has no CUDA device\n");
    MPI_Finalize();
    return 77;
  }
  auto backend = device::make_backend(kind, threads);
  const bool gpu = kind == device::BackendKind::cuda;
  Shape shape;
  shape.rank = rank;
  const std::vector<Gemm> gemms = step_gemms(shape, batch);
  const double step_flops = flops(gemms);
  fmt::print("{}; bottom 13-512-256-128, {} tables x {} rows of dim 128, dcn: 3 cross layers of rank {} on n = {}, "
             "top 1024-1024-512-256-1, SGD; batch {}; {:.1f} MFLOP a sample in GEMMs; medians of {} repetitions\n\n",
             backend->description(), shape.tables, rows, rank, shape.n(), batch, step_flops / batch / 1e6, reps);

  std::vector<Run> runs;
  const std::vector<std::int64_t> table_rows(shape.tables, rows);
  std::vector<embedding::TableSpec> specs;
  for (auto r : table_rows) specs.push_back({r, shape.dim});
  const auto plan = embedding::ShardingPlan::automatic(specs, 1);
  std::vector<std::pair<std::string, std::string>> variants = {{"step, fp32", "fp32"}};
  if (gpu) variants.push_back({"step, tf32", "tf32"});
  variants.push_back({"step, bf16 GEMMs", "bf16"});
  for (const auto& [name, dense] : variants) {
    const auto spec = runtime::parse_job_spec(
        fmt::format("name = \"bench\"\n[model]\nembedding_dim = 128\nbottom_mlp = [512, 256, 128]\n"
                    "top_mlp = [1024, 1024, 512, 256, 1]\ninteraction = \"dcn\"\ncross_rank = {}\n[optimizer]\n"
                    "lr = 0.001\n[data]\ntrain = \"none.h5\"\n[precision]\ndense = \"{}\"\n",
                    rank, dense),
        "bench");
    Run r{name, dense, dense == "tf32" ? device::Fp32Math::tf32 : device::Fp32Math::fp32,
          std::make_unique<device::MemoryPool>(*backend, device::Tier::device, name), nullptr, "", {}, {}, spec};
    try {
      r.model = std::make_unique<runtime::DlrmModel>(spec, specs, 13, *comm, *comm, *backend, *r.pool, batch, plan);
    } catch (const ConfigError& e) {
      r.refused = e.what();
    }
    runs.push_back(std::move(r));
  }
  std::vector<data::Batch> data;
  for (int g = 0; g < 4; ++g) data.push_back(bench::make_batch(batch, 0, 1, shape.tables, rows, g));
  GemmRunner chain(*backend, gemms);
  GemmRunner square(*backend, {{2048, 2048, 2048, false, true}});
  // The bf16 ceiling where a job would take bf16 GEMMs (a CPU with AVX512_BF16, or a GPU).
  const bool bf16 = runs.back().model != nullptr;
  std::unique_ptr<Bf16Square> square16 = bf16 ? std::make_unique<Bf16Square>(*backend) : nullptr;
  std::vector<double> chain_gflops, chain_ratio, ceiling, ceiling_tf32, ceiling_bf16, bf16_speedup, copy_bw;
  int step = 0;
  const double square_flops = 2.0 * 2048 * 2048 * 2048;
  for (int rep = 0; rep < reps; ++rep) {
    if (gpu) {
      backend->set_fp32_math(device::Fp32Math::tf32);
      ceiling_tf32.push_back(square_flops / seconds_per_call([&] { square.run(); }, min_seconds) / 1e9);
    }
    backend->set_fp32_math(device::Fp32Math::fp32);
    const double peak = square_flops / seconds_per_call([&] { square.run(); }, min_seconds) / 1e9;
    ceiling.push_back(peak);
    if (square16) ceiling_bf16.push_back(square_flops / seconds_per_call([&] { square16->run(); }, min_seconds) / 1e9);
    const double c = step_flops / seconds_per_call([&] { chain.run(); }, min_seconds) / 1e9;
    chain_gflops.push_back(c);
    chain_ratio.push_back(c / peak);
    if (!gpu) copy_bw.push_back(copy_bandwidth(min_seconds));
    for (Run& r : runs) {
      if (!r.model) continue;
      backend->set_fp32_math(r.math);
      const double s =
          seconds_per_call([&] { r.model->train_step(data[step++ % data.size()], batch); }, min_seconds);
      r.gflops.push_back(step_flops / s / 1e9);
      r.ratio.push_back(step_flops / s / 1e9 / peak);
    }
    if (bf16) bf16_speedup.push_back(runs.back().gflops.back() / runs.front().gflops.back());
  }
  for (Run& r : runs) {
    if (!phases || !r.model) continue;
    auto& model = *r.model;
    backend->set_fp32_math(r.math);
    model.set_phase_timing(true);
    for (int i = 0; i < 3; ++i) model.train_step(data[step++ % data.size()], batch);
    fmt::print("{} by phase (ms, mean of {} steps):", r.name, model.timed_steps());
    for (int p = 0; p < runtime::DlrmModel::num_phases; ++p)
      if (model.phase_seconds()[p] > 0)
        fmt::print(" {} {:.1f};", runtime::DlrmModel::phase_name(p), 1e3 * model.phase_seconds()[p] / model.timed_steps());
    fmt::print("\n\n");
  }
  fmt::print("| | samples/s | GFLOP/s (GEMM FLOPs) | / 2048^3 GEMM |\n|---|---:|---:|---:|\n");
  fmt::print("| 2048^3 fp32 GEMM (the ceiling) | | {:.1f} | 1.00 |\n", bench::median(ceiling));
  if (gpu) fmt::print("| 2048^3 tf32 GEMM | | {:.1f} | {:.2f} |\n", bench::median(ceiling_tf32),
                      bench::median(ceiling_tf32) / bench::median(ceiling));
  if (square16) fmt::print("| 2048^3 bf16 GEMM | | {:.1f} | {:.2f} |\n", bench::median(ceiling_bf16),
                           bench::median(ceiling_bf16) / bench::median(ceiling));
  fmt::print("| the step's GEMMs alone | {:.0f} | {:.1f} | {:.2f} |\n",
             bench::median(chain_gflops) * 1e9 * batch / step_flops, bench::median(chain_gflops),
             bench::median(chain_ratio));
  for (const Run& r : runs) {
    if (!r.model) {
      fmt::print("| {} | refused: {} | | |\n", r.name, r.refused);
      continue;
    }
    fmt::print("| {} | {:.0f} | {:.1f} | {:.2f} |\n", r.name, bench::median(r.gflops) * 1e9 * batch / step_flops,
               bench::median(r.gflops), bench::median(r.ratio));
  }
  if (bf16)
    fmt::print("\nbf16 GEMMs against fp32, the same repetition's steps: {:.2f}x (medians of {}); the bf16 step at {:.2f} "
               "of the 2048^3 bf16 GEMM\n",
               bench::median(bf16_speedup), reps, bench::median(runs.back().gflops) / bench::median(ceiling_bf16));
  print_step_model(runs, table_rows, batch, step_flops, backend->description(), gpu,
                   {bench::median(ceiling), bf16 ? bench::median(ceiling_bf16) : 0.0, bench::median(chain_ratio),
                    gpu ? 0.0 : bench::median(copy_bw)});
  MPI_Finalize();
  return 0;
}
