// Bandwidth of the collectives one DLRM training step uses, through the MPI communicator:
// all-to-all-v of pooled embeddings and of lookup indices (model-parallel tables), and the
// all-reduce of the MLP gradients (data-parallel), at the sizes of the Kaggle-like model, plus
// a size sweep. Times are medians over repetitions; bandwidths follow nccl-tests: algorithm
// bandwidth = bytes per rank / time, bus bandwidth = algbw x 2(p-1)/p for all-reduce and
// algbw x (p-1)/p for all-to-all.
//   mpirun -np 2 comm_bench [--batch 2048] [--tables 26] [--dim 16] [--reps 30]
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "comm/epoch/epoch_communicator.hpp"
#include "comm/mpi/mpi_communicator.hpp"
#include "core/error.hpp"

namespace {

using recmix::comm::Communicator;
using recmix::comm::DataType;

// Median seconds of op() over reps (after warm-up); the slowest rank's time counts.
double median_seconds(Communicator& comm, int reps, const std::function<void()>& op) {
  for (int i = 0; i < 3; ++i) op();
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    comm.barrier();
    auto t0 = std::chrono::steady_clock::now();
    op();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // Slowest rank per repetition: gather all times and take the max per column.
  std::vector<double> all(times.size() * static_cast<std::size_t>(comm.size()));
  comm.all_gather(times.data(), all.data(), times.size(), DataType::f64);
  std::vector<double> worst(times.size(), 0.0);
  for (int r = 0; r < comm.size(); ++r)
    for (std::size_t i = 0; i < times.size(); ++i)
      worst[i] = std::max(worst[i], all[static_cast<std::size_t>(r) * times.size() + i]);
  std::nth_element(worst.begin(), worst.begin() + static_cast<std::ptrdiff_t>(worst.size() / 2), worst.end());
  return worst[worst.size() / 2];
}

struct Row {
  std::string what;
  double bytes_per_rank, seconds, busbw_factor;
};

void print(const Row& row) {
  double algbw = row.bytes_per_rank / row.seconds / 1e9;
  fmt::print("{:<44} {:>12.0f} {:>10.1f} {:>9.2f} {:>9.2f}\n", row.what, row.bytes_per_rank, row.seconds * 1e6,
             algbw, algbw * row.busbw_factor);
}

// Model-parallel all-to-all-v: rank r owns tables_of[r] tables; every rank sends each owner
// (local batch) x (owner's tables) x width elements, so counts are uneven when tables do not
// divide evenly. Returns the median time.
template <class T>
double time_all_to_all(Communicator& comm, int reps, const std::vector<std::size_t>& tables_of,
                       std::size_t local_batch, std::size_t width, double* bytes_per_rank) {
  const auto p = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  // Forward direction of the pooled-embedding exchange: owner me sends its tables' vectors for
  // every peer's local batch; the receive side gets every owner's tables for our batch.
  std::vector<std::size_t> send_counts(p), send_displs(p), recv_counts(p), recv_displs(p);
  std::size_t send_total = 0, recv_total = 0;
  for (std::size_t q = 0; q < p; ++q) {
    send_counts[q] = tables_of[me] * local_batch * width;
    send_displs[q] = send_total;
    send_total += send_counts[q];
    recv_counts[q] = tables_of[q] * local_batch * width;
    recv_displs[q] = recv_total;
    recv_total += recv_counts[q];
  }
  std::vector<T> send(send_total, T(1)), recv(recv_total);
  *bytes_per_rank = static_cast<double>(std::max(send_total, recv_total) * sizeof(T));
  return median_seconds(comm, reps, [&] {
    comm.all_to_all_v(send.data(), send_counts, send_displs, recv.data(), recv_counts, recv_displs,
                      recmix::comm::data_type_of<T>());
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"comm_bench: collective bandwidth at DLRM step sizes"};
  std::size_t batch = 2048, tables = 26, dim = 16;
  int reps = 30;
  app.add_option("--batch", batch, "global batch size");
  app.add_option("--tables", tables, "embedding tables");
  app.add_option("--dim", dim, "embedding dimension");
  app.add_option("--reps", reps, "timed repetitions per measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 0;
  try {
    auto comm = recmix::comm::make_mpi_world_communicator();
    const auto p = static_cast<std::size_t>(comm->size());
    const bool root = comm->rank() == 0;
    std::vector<std::size_t> tables_of(p);
    for (std::size_t r = 0; r < p; ++r) tables_of[r] = tables / p + (r < tables % p ? 1 : 0);
    const std::size_t local_batch = batch / p;
    const double a2a_factor = static_cast<double>(p - 1) / static_cast<double>(p);
    const double ar_factor = 2.0 * static_cast<double>(p - 1) / static_cast<double>(p);

    // MLP parameters of the Kaggle-like model: bottom 13-512-256-64-16, top 367-512-256-1.
    const std::vector<std::size_t> bottom{13, 512, 256, 64, 16}, top{367, 512, 256, 1};
    std::size_t mlp_params = 0;
    for (const auto* layers : {&bottom, &top})
      for (std::size_t i = 0; i + 1 < layers->size(); ++i) mlp_params += (*layers)[i] * (*layers)[i + 1] + (*layers)[i + 1];

    if (root) {
      fmt::print("comm_bench: {} ranks, global batch {}, {} tables x dim {}, MLP {} parameters, median of {} reps\n",
                 p, batch, tables, dim, mlp_params, reps);
      fmt::print("{:<44} {:>12} {:>10} {:>9} {:>9}\n", "collective", "bytes/rank", "time us", "algbw GB/s",
                 "busbw GB/s");
    }
    std::vector<Row> rows;
    double bytes = 0;
    double t = time_all_to_all<float>(*comm, reps, tables_of, local_batch, dim, &bytes);
    rows.push_back({"all_to_all_v pooled embeddings (f32)", bytes, t, a2a_factor});
    t = time_all_to_all<std::int64_t>(*comm, reps, tables_of, local_batch, 1, &bytes);
    rows.push_back({"all_to_all_v lookup indices (i64)", bytes, t, a2a_factor});

    std::vector<float> grads(mlp_params, 1.0f);
    t = median_seconds(*comm, reps, [&] { comm->all_reduce_sum(grads.data(), grads.data(), grads.size(), DataType::f32); });
    rows.push_back({"all_reduce_sum MLP gradients (f32)", static_cast<double>(grads.size() * 4), t, ar_factor});
    t = median_seconds(*comm, reps, [&] {
      auto request = comm->iall_reduce_sum(grads.data(), grads.data(), grads.size(), DataType::f32);
      while (!request->test()) {
      }
    });
    rows.push_back({"iall_reduce_sum MLP gradients, polled (f32)", static_cast<double>(grads.size() * 4), t, ar_factor});
    for (const auto& row : rows)
      if (root) print(row);

    if (root) fmt::print("size sweep\n");
    for (std::size_t n = 1024; n <= (std::size_t{1} << 22); n *= 8) {
      std::vector<float> buf(n, 1.0f);
      t = median_seconds(*comm, reps, [&] { comm->all_reduce_sum(buf.data(), buf.data(), n, DataType::f32); });
      Row row{fmt::format("all_reduce_sum {} floats", n), static_cast<double>(n * 4), t, ar_factor};
      if (root) print(row);
      std::vector<std::size_t> one_table(p, 1);
      t = time_all_to_all<float>(*comm, reps, one_table, std::max<std::size_t>(n / p, 1), 1, &bytes);
      Row a2a{fmt::format("all_to_all_v {} floats per rank", n), bytes, t, a2a_factor};
      if (root) print(a2a);
    }

    // Device collectives of co-located jobs run in epochs (comm/epoch): each pays one host
    // all-reduce of one integer, the agreement, before it starts. Here the device communicator is
    // MPI itself, the CPU stand-in for NCCL, and no other job contends for the device.
    std::vector<int> all(p);
    for (std::size_t r = 0; r < p; ++r) all[r] = static_cast<int>(r);
    auto wire = recmix::comm::make_mpi_group_communicator(*comm, all, 40);
    auto host = recmix::comm::make_mpi_group_communicator(*comm, all, 41);
    auto epochs = recmix::comm::make_epoch_communicator(recmix::comm::make_mpi_group_communicator(*comm, all, 42),
                                                        *host, 0);
    if (root)
      fmt::print("device collectives in epochs (comm/epoch), partners idle\n{:<44} {:>10} {:>10} {:>10} {:>7}\n",
                 "collective", "plain us", "epoch us", "added us", "ratio");
    auto compare = [&](const std::string& what, const std::function<void(Communicator&)>& op) {
      const double plain = median_seconds(*wire, reps, [&] { op(*wire); });
      const double in_epoch = median_seconds(*wire, reps, [&] { op(*epochs); });
      if (root)
        fmt::print("{:<44} {:>10.1f} {:>10.1f} {:>10.1f} {:>7.3f}\n", what, plain * 1e6, in_epoch * 1e6,
                   (in_epoch - plain) * 1e6, in_epoch / plain);
    };
    float one = 1;
    compare("all_reduce_sum 1 float", [&](Communicator& c) { c.all_reduce_sum(&one, &one, 1, DataType::f32); });
    compare("all_reduce_sum MLP gradients (f32)",
            [&](Communicator& c) { c.all_reduce_sum(grads.data(), grads.data(), grads.size(), DataType::f32); });
    // The pooled-embedding exchange as time_all_to_all makes it.
    std::vector<std::size_t> send_counts(p), send_displs(p), recv_counts(p), recv_displs(p);
    std::size_t send_total = 0, recv_total = 0;
    for (std::size_t q = 0; q < p; ++q) {
      send_counts[q] = tables_of[static_cast<std::size_t>(comm->rank())] * local_batch * dim;
      send_displs[q] = send_total;
      send_total += send_counts[q];
      recv_counts[q] = tables_of[q] * local_batch * dim;
      recv_displs[q] = recv_total;
      recv_total += recv_counts[q];
    }
    std::vector<float> send(send_total, 1.0f), recv(recv_total);
    compare("all_to_all_v pooled embeddings (f32)", [&](Communicator& c) {
      c.all_to_all_v(send.data(), send_counts, send_displs, recv.data(), recv_counts, recv_displs, DataType::f32);
    });
  } catch (const recmix::Error& e) {
    fmt::print(stderr, "comm_bench: {}: {}\n", e.kind(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
