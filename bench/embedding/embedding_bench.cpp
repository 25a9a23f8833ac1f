// Times ShardedEmbedding forward and backward at one training step's sizes (default: the reference
// DLRM's Kaggle model, 26 tables x 1e5 rows, dim 16, one index per bag, SGD, global batch 2048),
// on one rank or under mpirun. Beside it, the same run times a plain gather of the same rows (the
// memory floor of a lookup on this machine). Medians over the timed steps; rank 0 prints.
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <fmt/format.h>
#include <map>
#include <random>
#include <vector>

#include "comm/mpi/mpi_communicator.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"

using namespace recmix;
using namespace recmix::embedding;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double thread_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"embedding forward + backward benchmark"};
  int global_batch = 2048, threads = 1, tables_n = 26, dim = 16, steps = 50, warmup = 10, hot = 1;
  std::int64_t rows = 100000;
  std::string plan_text = "auto", optimizer = "sgd";
  app.add_option("--batch", global_batch, "global batch (split over ranks)");
  app.add_option("--threads", threads, "CPU threads per rank");
  app.add_option("--tables", tables_n, "number of tables");
  app.add_option("--rows", rows, "rows per table");
  app.add_option("--dim", dim, "embedding dim");
  app.add_option("--indices-per-bag", hot, "indices per bag (1: one-hot)");
  app.add_option("--steps", steps, "timed steps");
  app.add_option("--plan", plan_text, "auto, rowwise (every table), or a hand-written plan");
  const std::map<std::string, SparseOptimizerKind> optimizers{{"sgd", SparseOptimizerKind::sgd},
                                                              {"adagrad", SparseOptimizerKind::adagrad},
                                                              {"rowwise_adagrad", SparseOptimizerKind::rowwise_adagrad}};
  app.add_option("--optimizer", optimizer, "sgd, adagrad or rowwise_adagrad")->check(CLI::IsMember(optimizers));
  CLI11_PARSE(app, argc, argv);

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  {
    auto comm = comm::make_mpi_world_communicator();
    const int rank = comm->rank(), world = comm->size();
    const int begin = global_batch * rank / world, batch = global_batch * (rank + 1) / world - begin;
    auto backend = device::make_backend(device::BackendKind::cpu, threads);
    device::MemoryPool pool(*backend, device::Tier::device, "bench");
    auto stream = backend->create_stream();
    std::vector<TableSpec> tables(tables_n, TableSpec{rows, dim});
    ShardingPlan plan;
    if (plan_text == "auto") {
      plan = ShardingPlan::automatic(tables, world);
    } else if (plan_text == "rowwise") {
      std::string text;
      for (int t = 0; t < tables_n; ++t) text += fmt::format("{}{}:rowwise", t ? "," : "", t);
      plan = ShardingPlan::parse(text, tables, world);
    } else {
      plan = ShardingPlan::parse(plan_text, tables, world);
    }
    if (rank == 0) fmt::print("{}", plan.describe());
    ShardedEmbedding emb(*comm, *backend, pool, tables, Pooling::sum, plan, {optimizers.at(optimizer), 0.01f}, 1);

    std::mt19937_64 rng(100 + rank);
    std::vector<std::vector<std::int64_t>> offsets(tables_n), indices(tables_n);
    std::vector<float> out(std::size_t(batch) * tables_n * dim), grad(out.size(), 1e-3f);
    std::vector<double> fwd, bwd, fwd_cpu, bwd_cpu, gather;
    std::size_t bytes = 0;
    for (int step = 0; step < warmup + steps; ++step) {
      std::vector<Bags> bags;
      for (int t = 0; t < tables_n; ++t) {
        offsets[t].resize(batch + 1);
        indices[t].resize(std::size_t(batch) * hot);
        for (int b = 0; b <= batch; ++b) offsets[t][b] = std::int64_t(b) * hot;
        for (auto& i : indices[t]) i = static_cast<std::int64_t>(rng() % rows);
        bags.push_back({offsets[t], indices[t]});
      }
      comm->barrier();
      const double t0 = now_ms(), c0 = thread_cpu_ms();
      emb.forward(*stream, bags, batch, out.data());
      const double t1 = now_ms(), c1 = thread_cpu_ms();
      emb.backward(*stream, grad.data());
      const double t2 = now_ms(), c2 = thread_cpu_ms();
      // The floor: as many plain row reads, spread over the rank's own shards.
      const auto views = emb.local_shards();
      double g0 = now_ms();
      float sink = 0;
      if (!views.empty()) {
        for (int b = 0; b < batch; ++b)
          for (int t = 0; t < tables_n; ++t) {
            const auto& v = views[t % views.size()];
            const std::int64_t r = indices[t][std::size_t(b) * hot] % (v.row_end - v.row_begin);
            const float* w = v.weights + r * dim;
            float* o = out.data() + (std::size_t(b) * tables_n + t) * dim;
            for (int d = 0; d < dim; ++d) o[d] = w[d];
            sink += o[0];
          }
      }
      const double g1 = now_ms();
      if (sink == 12345.f) fmt::print("");
      if (step >= warmup) {
        fwd.push_back(t1 - t0);
        bwd.push_back(t2 - t1);
        fwd_cpu.push_back(c1 - c0);
        bwd_cpu.push_back(c2 - c1);
        gather.push_back(g1 - g0);
        bytes = emb.bytes_sent_last_step();
      }
    }
    std::vector<double> mine{median(fwd), median(bwd), median(fwd_cpu), median(bwd_cpu), median(gather),
                             double(bytes)};
    std::vector<double> all(mine.size() * world);
    comm->all_gather(mine.data(), all.data(), mine.size(), comm::DataType::f64);
    if (rank == 0) {
      fmt::print("{} rank(s) x {} thread(s), global batch {}, {} tables x {} rows, dim {}, {} index/bag, {}\n",
                 world, threads, global_batch, tables_n, rows, dim, hot, optimizer);
      fmt::print("{:>4} {:>12} {:>13} {:>12} {:>13} {:>15} {:>16}\n", "rank", "forward ms", "backward ms",
                 "fwd cpu ms", "bwd cpu ms", "gather floor ms", "bytes sent/step");
      for (int r = 0; r < world; ++r) {
        const double* m = &all[r * mine.size()];
        fmt::print("{:>4} {:>12.3f} {:>13.3f} {:>12.3f} {:>13.3f} {:>15.3f} {:>16.0f}\n", r, m[0], m[1], m[2],
                   m[3], m[4], m[5]);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
