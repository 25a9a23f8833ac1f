// An MLP with bf16 GEMMs against a double reference of the convention in docs/math.md: each
// GEMM's two operands rounded to bf16 (weights, layer input, pre-activation gradient), products
// summed in fp32, master weights, biases and activations fp32. A one-layer MLP with no
// activation makes every output a function of the inputs alone, so the reference is exact up to
// the fp32 accumulation bound. On the CPU backend and under the strict device emulator.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "mlp/mlp.hpp"
#include "test_device.hpp"

using namespace recmix;
using namespace recmix::mlp;

namespace {

constexpr int kBatch = 45, kIn = 70, kOut = 23;

double bf16(float x) { return half::bf16_to_float(half::float_to_bf16(x)); }

// |computed - exact| <= (k + 2) u (sum |a b| + |extra|): k roundings of the fp32 sum of exact
// products (bf16 x bf16 fits fp32's 24 bits), one for the bias or beta term, one for alpha.
::testing::AssertionResult near_sum(double got, double exact, double magnitude, int k) {
  const double bound = (k + 2) * std::ldexp(1.0, -24) * magnitude * 1.0001 + 1e-30;
  if (std::abs(got - exact) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", exact " << exact << ", bound " << bound;
}

struct Reference {
  std::vector<double> y, y_mag;    // [batch x out]
  std::vector<double> dw, dw_mag;  // [out x in]
  std::vector<double> dx, dx_mag;  // [batch x in]
};

// y = x16 W16^T + b, dW = g16^T x16, dx = g16 W16; with round = false the same in fp32 operands.
Reference reference(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                    const std::vector<float>& g, bool round) {
  auto r = [&](float v) { return round ? bf16(v) : static_cast<double>(v); };
  Reference ref;
  ref.y.assign(kBatch * kOut, 0);
  ref.y_mag.assign(kBatch * kOut, 0);
  ref.dw.assign(kOut * kIn, 0);
  ref.dw_mag.assign(kOut * kIn, 0);
  ref.dx.assign(kBatch * kIn, 0);
  ref.dx_mag.assign(kBatch * kIn, 0);
  for (int i = 0; i < kBatch; ++i)
    for (int o = 0; o < kOut; ++o) {
      ref.y[i * kOut + o] = b[o];
      ref.y_mag[i * kOut + o] = std::abs(b[o]);
      for (int k = 0; k < kIn; ++k) {
        const double p = r(x[i * kIn + k]) * r(w[o * kIn + k]);
        ref.y[i * kOut + o] += p;
        ref.y_mag[i * kOut + o] += std::abs(p);
        const double q = r(g[i * kOut + o]) * r(x[i * kIn + k]);
        ref.dw[o * kIn + k] += q;
        ref.dw_mag[o * kIn + k] += std::abs(q);
        const double t = r(g[i * kOut + o]) * r(w[o * kIn + k]);
        ref.dx[i * kIn + k] += t;
        ref.dx_mag[i * kIn + k] += std::abs(t);
      }
    }
  return ref;
}

class Bf16Mlp : public ::testing::TestWithParam<device::BackendKind> {
 protected:
  Bf16Mlp() : dev_(GetParam(), "bf16 mlp test") {}
  float* upload(const std::vector<float>& host) { return dev_.upload(host); }
  std::vector<float> download(const float* p, std::size_t n) { return dev_.download(p, n); }

  test::TestDevice dev_;
  device::Backend& backend_ = *dev_.backend;
  device::MemoryPool& pool_ = dev_.pool;
  device::Stream& stream_ = *dev_.stream;
};

std::vector<float> random_vector(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);  // 24 significant bits: rounding to bf16 moves almost every value
  return v;
}

TEST_P(Bf16Mlp, ForwardAndBackwardRoundEachGemmOperand) {
  std::mt19937 rng(7);
  const auto x = random_vector(kBatch * kIn, rng), g = random_vector(kBatch * kOut, rng);
  Mlp mlp(backend_, pool_, "m", {kIn, kOut}, Activation::none, 5, kBatch + 3, /*bf16_gemms=*/true);
  ASSERT_TRUE(mlp.bf16_gemms());
  const auto params = mlp.parameters();
  const auto w = download(params[0].value, params[0].count), b = download(params[1].value, params[1].count);
  const Reference ref = reference(x, w, b, g, true), plain = reference(x, w, b, g, false);

  auto& s = stream_;
  const auto y = download(mlp.forward(s, upload(x), kBatch), kBatch * kOut);
  const auto dx = download(mlp.backward(s, upload(g), true), kBatch * kIn);
  const auto dw = download(params[0].grad, params[0].count), db = download(params[1].grad, params[1].count);

  int rounding_shows = 0;  // elements where fp32 operands would have missed the bound
  for (int i = 0; i < kBatch * kOut; ++i) {
    ASSERT_TRUE(near_sum(y[i], ref.y[i], ref.y_mag[i], kIn)) << "y[" << i << "]";
    rounding_shows += !near_sum(y[i], plain.y[i], plain.y_mag[i], kIn);
  }
  for (int i = 0; i < kOut * kIn; ++i) {
    ASSERT_TRUE(near_sum(dw[i], ref.dw[i], ref.dw_mag[i], kBatch)) << "dW[" << i << "]";
    rounding_shows += !near_sum(dw[i], plain.dw[i], plain.dw_mag[i], kBatch);
  }
  for (int i = 0; i < kBatch * kIn; ++i) {
    ASSERT_TRUE(near_sum(dx[i], ref.dx[i], ref.dx_mag[i], kOut)) << "dx[" << i << "]";
    rounding_shows += !near_sum(dx[i], plain.dx[i], plain.dx_mag[i], kOut);
  }
  EXPECT_GT(rounding_shows, (kBatch * kOut + kOut * kIn + kBatch * kIn) / 2) << "the operands were not rounded";
  // The bias gradient is the fp32 column sum of the unrounded gradient.
  for (int o = 0; o < kOut; ++o) {
    double sum = 0, mag = 0;
    for (int i = 0; i < kBatch; ++i) sum += g[i * kOut + o], mag += std::abs(g[i * kOut + o]);
    EXPECT_TRUE(near_sum(db[o], sum, mag, kBatch)) << "db[" << o << "]";
  }
}

// backward_sgd steps the fp32 master weights by -lr x dW; the next forward rounds the new weights.
TEST_P(Bf16Mlp, TheNextForwardSeesTheSteppedWeights) {
  std::mt19937 rng(8);
  const auto x = random_vector(kBatch * kIn, rng), g = random_vector(kBatch * kOut, rng);
  const float lr = 0.25f;
  Mlp mlp(backend_, pool_, "m", {kIn, kOut}, Activation::none, 6, kBatch, /*bf16_gemms=*/true);
  const auto params = mlp.parameters();
  const auto w = download(params[0].value, params[0].count), b = download(params[1].value, params[1].count);
  const Reference before = reference(x, w, b, g, true);

  auto& s = stream_;
  float* x_dev = upload(x);
  mlp.forward(s, x_dev, kBatch);
  mlp.backward_sgd(s, upload(g), false, lr);
  const auto w1 = download(params[0].value, params[0].count), b1 = download(params[1].value, params[1].count);
  for (int i = 0; i < kOut * kIn; ++i) {
    // w1 = fl(w - lr dW): the GEMM's beta = 1 adds w once more (k + 1 roundings).
    const double exact = w[i] - lr * before.dw[i];
    ASSERT_TRUE(near_sum(w1[i], exact, std::abs(w[i]) + lr * before.dw_mag[i], kBatch + 1)) << "w[" << i << "]";
  }
  const Reference after = reference(x, w1, b1, g, true);
  const auto y = download(mlp.forward(s, x_dev, kBatch), kBatch * kOut);
  for (int i = 0; i < kBatch * kOut; ++i) ASSERT_TRUE(near_sum(y[i], after.y[i], after.y_mag[i], kIn)) << "y[" << i << "]";
}

TEST_P(Bf16Mlp, RefusesReplicas) {
  Mlp mlp(backend_, pool_, "m", {kIn, kOut}, Activation::none, 5, kBatch, /*bf16_gemms=*/true);
  EXPECT_THROW(Mlp(mlp, backend_, kBatch), ConfigError);
}

INSTANTIATE_TEST_SUITE_P(Backends, Bf16Mlp,
                         ::testing::Values(device::BackendKind::cpu, device::BackendKind::cpu_strict),
                         [](const auto& info) { return info.param == device::BackendKind::cpu ? "cpu" : "strict"; });

}  // namespace
