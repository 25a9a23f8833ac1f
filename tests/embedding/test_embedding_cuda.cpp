// The device paths of the embedding (the ones CUDA takes: staged exchange, device kernels) against
// the CPU backend's: the same steps give the same outputs and weights (to fp32 rounding). Under
// the strict device emulator (cpu-strict) always, any host access to device memory in those
// paths killing the test; on CUDA when a GPU is present, else skipped.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "comm/staged/staged_communicator.hpp"
#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "embedding/sharded_embedding.hpp"
#include "reference.hpp"
#include "self_communicator.hpp"

using namespace recmix;
using namespace recmix::embedding;

class EmbeddingDevice : public testing::TestWithParam<device::BackendKind> {};

TEST_P(EmbeddingDevice, MatchesTheCpuBackend) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  const std::vector<TableSpec> tables{{300, 12}, {40, 12}};
  for (const char* optimizer : {"rowwise_adagrad", "sgd", "adagrad"})
  for (const char* plan_text : {"0:r0,1:r0", "0:0-100@r0+100-300@r0,1:r0"}) {
    SCOPED_TRACE(optimizer);
    std::vector<std::vector<float>> outs(2), weights(2);
    for (int which = 0; which < 2; ++which) {
      auto backend = device::make_backend(which ? kind : device::BackendKind::cpu, 1);
      device::MemoryPool pool(*backend, device::Tier::device, "test");
      auto stream = backend->create_stream();
      test::SelfCommunicator comm;
      // Device buffers travel through a device communicator: the staged one over comm here.
      auto device_comm = which ? comm::make_staged_communicator(comm, *backend) : nullptr;
      ShardedEmbedding emb(comm, *backend, pool, tables, Pooling::mean,
                           ShardingPlan::parse(plan_text, tables, 1), {test::sparse_kind(optimizer), 0.1f}, 3,
                           device_comm.get());
      std::mt19937_64 rng(8);
      for (int step = 0; step < 3; ++step) {
        auto batch = test::random_batch(tables, 50, 4, false, rng);
        std::vector<Bags> bags;
        for (auto& tb : batch) bags.push_back(tb.view());
        const std::size_t n = 50 * 2 * 12;
        auto grad = test::random_vector(n, rng);
        void* dev_out = backend->allocate(n * sizeof(float), device::Tier::device);
        void* dev_grad = backend->allocate(n * sizeof(float), device::Tier::device);
        emb.forward(*stream, bags, 50, static_cast<float*>(dev_out));
        std::vector<float> out(n);
        backend->copy(out.data(), dev_out, n * sizeof(float), *stream);
        backend->copy(dev_grad, grad.data(), n * sizeof(float), *stream);
        stream->synchronize();
        emb.backward(*stream, static_cast<const float*>(dev_grad));
        stream->synchronize();
        outs[which].insert(outs[which].end(), out.begin(), out.end());
        backend->deallocate(dev_out, device::Tier::device);
        backend->deallocate(dev_grad, device::Tier::device);
      }
      for (const auto& v : emb.local_shards()) {
        std::vector<float> w((v.row_end - v.row_begin) * v.dim);
        backend->copy(w.data(), v.weights, w.size() * sizeof(float), *stream);
        stream->synchronize();
        weights[which].insert(weights[which].end(), w.begin(), w.end());
      }
    }
    ASSERT_EQ(outs[0].size(), outs[1].size());
    for (std::size_t i = 0; i < outs[0].size(); ++i) ASSERT_TRUE(test::close(outs[1][i], outs[0][i])) << i;
    ASSERT_EQ(weights[0].size(), weights[1].size());
    for (std::size_t i = 0; i < weights[0].size(); ++i)
      ASSERT_TRUE(test::close(weights[1][i], weights[0][i])) << i;
  }
}

// One rank, whole tables, one index a bag, on a device: a batch given as OneHotRows goes up as it
// is read and becomes the owner CSR on the device (kernels::OneHotCsr). It must give the bits
// that the same batch as per-table CSRs gives (the host-built CSR path), for either pooling and
// every optimizer; a bad index is a DataError naming its table, index and bag, with nothing
// issued, and the next batch runs.
TEST_P(EmbeddingDevice, OneHotRowsMatchPerTableBagsBitForBit) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  const std::vector<TableSpec> tables{{300, 12}, {40, 12}, {5, 12}};
  const int T = 3, B = 64, D = 12;
  const std::size_t n = std::size_t(B) * T * D;
  for (Pooling pooling : {Pooling::sum, Pooling::mean})
    for (const char* optimizer : {"rowwise_adagrad", "sgd", "adagrad"}) {
      SCOPED_TRACE(std::string(optimizer) + (pooling == Pooling::mean ? ", mean" : ", sum"));
      auto backend = device::make_backend(kind, 1);
      device::MemoryPool pool(*backend, device::Tier::device, "test");
      auto stream = backend->create_stream();
      test::SelfCommunicator comm;
      auto device_comm = comm::make_staged_communicator(comm, *backend);
      auto make = [&] {
        return std::make_unique<ShardedEmbedding>(comm, *backend, pool, tables, pooling,
                                                  ShardingPlan::automatic(tables, 1),
                                                  SparseOptimizerConfig{test::sparse_kind(optimizer), 0.1f}, 3, device_comm.get());
      };
      auto by_bags = make(), by_rows = make();
      auto* dev_out = static_cast<float*>(backend->allocate(n * sizeof(float), device::Tier::device));
      auto* dev_grad = static_cast<float*>(backend->allocate(n * sizeof(float), device::Tier::device));
      auto download = [&](const float* p, std::size_t count) {
        std::vector<float> x(count);
        backend->copy(x.data(), p, count * sizeof(float), *stream);
        stream->synchronize();
        return x;
      };
      std::mt19937_64 rng(9);
      for (int step = 0; step < 3; ++step) {
        auto batch = test::random_batch(tables, B, 1, true, rng);
        std::vector<Bags> bags;
        for (auto& tb : batch) bags.push_back(tb.view());
        const auto packed = test::packed_one_hot(batch, B);
        const auto grad = test::random_vector(n, rng);
        backend->copy(dev_grad, grad.data(), n * sizeof(float), *stream);
        by_bags->forward(*stream, bags, B, dev_out);
        const auto out_bags = download(dev_out, n);
        by_bags->backward(*stream, dev_grad);
        by_rows->forward(*stream, OneHotRows{packed, T}, B, dev_out);
        const auto out_rows = download(dev_out, n);
        by_rows->backward(*stream, dev_grad);
        ASSERT_EQ(std::memcmp(out_rows.data(), out_bags.data(), n * sizeof(float)), 0) << "step " << step;
      }
      const auto a = by_bags->local_shards(), b = by_rows->local_shards();
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t s = 0; s < a.size(); ++s) {
        const std::size_t count = std::size_t(a[s].row_end - a[s].row_begin) * D;
        const auto wa = download(a[s].weights, count), wb = download(b[s].weights, count);
        ASSERT_EQ(std::memcmp(wa.data(), wb.data(), count * sizeof(float)), 0) << "shard " << s;
      }
      // A bad index: named, nothing issued, and the next batch trains.
      std::vector<std::int32_t> bad(std::size_t(B) * T, 1);
      bad[std::size_t(7) * T + 1] = 40;  // bag 7 of table 1 (40 rows)
      try {
        by_rows->forward(*stream, OneHotRows{bad, T}, B, dev_out);
        FAIL() << "no error for index 40 of table 1";
      } catch (const DataError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("table 1: index 40 out of range [0, 40) in bag 7"), std::string::npos) << what;
      }
      bad[std::size_t(7) * T + 1] = 39;
      by_rows->forward(*stream, OneHotRows{bad, T}, B, dev_out);
      by_rows->backward(*stream, dev_grad);
      stream->synchronize();
      backend->deallocate(dev_out, device::Tier::device);
      backend->deallocate(dev_grad, device::Tier::device);
    }
}

INSTANTIATE_TEST_SUITE_P(Backends, EmbeddingDevice,
                         testing::Values(device::BackendKind::cpu_strict, device::BackendKind::cuda),
                         [](const auto& info) { return info.param == device::BackendKind::cuda ? "cuda" : "cpu_strict"; });
