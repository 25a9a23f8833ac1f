// The device paths of the embedding (the ones CUDA takes: staged exchange, device kernels) against
// the CPU backend's: the same steps give the same outputs and weights (to fp32 rounding). Under
// the strict device emulator (cpu-strict) always, any host access to device memory in those
// paths killing the test; on CUDA when a GPU is present, else skipped.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "comm/staged/staged_communicator.hpp"
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
                           ShardingPlan::parse(plan_text, tables, 1), {optimizer, 0.1f}, 3,
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

INSTANTIATE_TEST_SUITE_P(Backends, EmbeddingDevice,
                         testing::Values(device::BackendKind::cpu_strict, device::BackendKind::cuda),
                         [](const auto& info) { return info.param == device::BackendKind::cuda ? "cuda" : "cpu_strict"; });
