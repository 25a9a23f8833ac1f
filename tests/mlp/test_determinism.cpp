// Same seed, same weights and outputs bit for bit; a different seed or name gives other weights;
// values do not depend on the order in which layers are built.
#include <gtest/gtest.h>

#include <cstring>

#include "device/backend.hpp"
#include "device/memory_pool.hpp"
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

}  // namespace
}  // namespace recmix::mlp
