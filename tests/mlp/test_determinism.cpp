// Same seed, same weights and outputs bit for bit; a different seed or name gives other weights;
// values do not depend on the order in which layers are built.
#include <gtest/gtest.h>

#include <cstring>

#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "mlp/dense_optimizer.hpp"
#include "mlp/interaction.hpp"
#include "mlp/loss.hpp"
#include "mlp/mlp.hpp"
#include "tests/mlp/reference.hpp"

namespace recmix::mlp {
namespace {

bool same(const Param& a, const Param& b) {
  return a.count == b.count && std::memcmp(a.value, b.value, a.count * sizeof(float)) == 0;
}

TEST(Determinism, SameSeedSameBits) {
  auto backend = device::make_backend(device::BackendKind::cpu, 2);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  std::vector<int> sizes = {13, 512, 256, 64, 16};
  Mlp a(*backend, pool, "bot", sizes, Activation::relu, 42, 300);
  Mlp other(*backend, pool, "top", {8, 8}, Activation::relu, 42, 4);  // built in between
  Mlp b(*backend, pool, "bot", sizes, Activation::relu, 42, 300);
  Mlp c(*backend, pool, "bot", sizes, Activation::relu, 43, 300);
  Mlp d(*backend, pool, "top", sizes, Activation::relu, 42, 300);
  auto pa = a.parameters(), pb = b.parameters(), pc = c.parameters(), pd = d.parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(same(pa[i], pb[i])) << pa[i].name;
    EXPECT_FALSE(same(pa[i], pc[i])) << pa[i].name;
    EXPECT_FALSE(same(pa[i], pd[i])) << pa[i].name;
  }
  auto x = test::random_floats(300 * 13, 1);
  auto g = test::random_floats(300 * 16, 2);
  const float* ya = a.forward(*stream, x.data(), 300);
  const float* yb = b.forward(*stream, x.data(), 300);
  EXPECT_EQ(std::memcmp(ya, yb, 300 * 16 * sizeof(float)), 0);
  const float* ga = a.backward(*stream, g.data(), true);
  const float* gb = b.backward(*stream, g.data(), true);
  EXPECT_EQ(std::memcmp(ga, gb, 300 * 13 * sizeof(float)), 0);
  for (std::size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(std::memcmp(pa[i].grad, pb[i].grad, pa[i].count * sizeof(float)), 0) << pa[i].name;
}

// The element-wise kernels give the same bits on one thread and on two (fixed blocks, fixed
// reduction order); the GEMMs are the same calls either way.
TEST(Determinism, SerialAndParallelKernelsAgree) {
  auto backend = device::make_backend(device::BackendKind::cpu, 2);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  const int batch = 333, k = 26, d = 16;
  auto x = test::random_floats(batch * 13, 3);
  auto emb = test::random_floats(static_cast<std::size_t>(batch) * k * d, 4);
  std::vector<float> labels = test::random_floats(batch, 5, 0.f, 1.f);
  std::vector<std::vector<float>> results;
  for (std::int64_t threshold : {std::int64_t(1) << 62, std::int64_t(1)}) {
    test::ScopedParallelThreshold parallel(threshold);
    Mlp bottom(*backend, pool, "bot", {13, 300, d}, Activation::relu, 42, batch);
    auto inter = make_interaction(InteractionKind::dot, *backend, pool, k, d, batch);
    Mlp top(*backend, pool, "top", {inter->out_features(), 200, 1}, Activation::sigmoid, 43, batch);
    auto params = bottom.parameters();
    for (auto& p : top.parameters()) params.push_back(p);
    DenseOptimizerConfig c;
    c.kind = DenseOptimizerKind::adam;
    auto opt = make_dense_optimizer(c, *backend, pool, params);
    std::vector<float> gp(batch), gb(batch * d), ge(emb.size());
    for (int step = 0; step < 2; ++step) {
      const float* p = top.forward(*stream, inter->forward(*stream, bottom.forward(*stream, x.data(), batch),
                                                           emb.data(), batch), batch);
      bce_loss_backward(*backend, *stream, p, labels.data(), batch, 1.f / batch, gp.data());
      inter->backward(*stream, top.backward(*stream, gp.data(), true), gb.data(), ge.data());
      bottom.backward(*stream, gb.data(), false);
      opt->step(*stream);
    }
    std::vector<float> all(ge.begin(), ge.end());
    for (auto& q : params) all.insert(all.end(), q.value, q.value + q.count);
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace recmix::mlp
