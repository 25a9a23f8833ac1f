// The "dcn" interaction (mlp/cross_net.hpp) against a float64 cross network written here from the
// DCN-V2 formula, x_{l+1} = x0 * (W (V x_l) + b) + x_l (or M x_l for full rank): the forward to
// 1e-5 relative, and every gradient (parameters, bottom output, embeddings) against central finite
// differences of the float64 forward, on the CPU backend, under the strict emulator, and on CUDA
// where a GPU is present. With bf16 GEMMs, to bf16's precision, after a forward on other weights
// (so that the weights' bf16 copy must follow them). Also its initialisation, parameter names and
// bad shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "mlp/interaction.hpp"
#include "test_device.hpp"

using namespace recmix;
using namespace recmix::mlp;

namespace {

constexpr int kBatch = 5, kTables = 3, kDim = 4, kN = (kTables + 1) * kDim;

using Vec = std::vector<double>;

// The float64 network: per layer its matrices (row-major as named) and bias.
struct Reference {
  int layers, rank;
  std::vector<Vec> V, W, M, b;

  // x0 [batch x n] -> x_L, with the loss sum(x_L * weight) (weight [batch x n]).
  Vec forward(const Vec& x0) const {
    Vec x = x0;
    for (int l = 0; l < layers; ++l) {
      Vec next(x.size());
      for (int s = 0; s < kBatch; ++s) {
        const double* xs = &x[s * kN];
        Vec prod(kN, 0.0);
        if (rank > 0) {
          Vec u(rank, 0.0);
          for (int i = 0; i < rank; ++i)
            for (int j = 0; j < kN; ++j) u[i] += V[l][i * kN + j] * xs[j];
          for (int i = 0; i < kN; ++i)
            for (int j = 0; j < rank; ++j) prod[i] += W[l][i * rank + j] * u[j];
        } else {
          for (int i = 0; i < kN; ++i)
            for (int j = 0; j < kN; ++j) prod[i] += M[l][i * kN + j] * xs[j];
        }
        for (int i = 0; i < kN; ++i) next[s * kN + i] = x0[s * kN + i] * (prod[i] + b[l][i]) + xs[i];
      }
      x = next;
    }
    return x;
  }
  double loss(const Vec& x0, const Vec& weight) const {
    const Vec out = forward(x0);
    double sum = 0;
    for (std::size_t i = 0; i < out.size(); ++i) sum += out[i] * weight[i];
    return sum;
  }
};

// d loss / d value[i] by central differences, for every i.
Vec finite_difference(Vec& value, const std::function<double()>& loss) {
  Vec grad(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    const double keep = value[i], h = 1e-5 * std::max(1.0, std::abs(keep));
    value[i] = keep + h;
    const double up = loss();
    value[i] = keep - h;
    const double down = loss();
    value[i] = keep;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

void expect_close(const std::vector<float>& got, const Vec& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1e-6;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * scale) << what << " [" << i << "]";
}

Vec widen(const std::vector<float>& v) { return Vec(v.begin(), v.end()); }

class CrossNet : public testing::TestWithParam<std::tuple<device::BackendKind, int, bool>> {};

TEST_P(CrossNet, MatchesTheFloat64FormulaAndItsFiniteDifferences) {
  const auto [kind, rank, bf16] = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  const int layers = 3;
  test::TestDevice d(kind);
  auto inter = make_interaction(InteractionKind::dcn, *d.backend, d.pool, kTables, kDim, kBatch,
                                CrossSpec{layers, rank, 11, bf16});
  ASSERT_EQ(inter->out_features(), kN);
  // bf16 operands keep 8 significant bits: each rounding is within 2^-9 of its value.
  const double forward_tolerance = bf16 ? 2e-2 : 1e-5, gradient_tolerance = bf16 ? 3e-2 : 1e-4;

  // Random parameters (the zero-initialised biases too), uploaded through the parameter views.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
  };
  Reference ref{layers, rank, std::vector<Vec>(layers), std::vector<Vec>(layers), std::vector<Vec>(layers),
                std::vector<Vec>(layers)};
  const auto params = inter->parameters();
  for (const auto& p : params) {
    const auto values = random(p.count);
    d.backend->copy(p.value, values.data(), p.count * sizeof(float), *d.stream);
    const int l = p.name[6] - '0';
    const std::string what = p.name.substr(8);
    (what == "V" ? ref.V : what == "W" ? ref.W : what == "weight" ? ref.M : ref.b)[l] = widen(values);
  }
  const auto bottom = random(std::size_t(kBatch) * kDim), emb = random(std::size_t(kBatch) * kTables * kDim);
  const auto weight = random(std::size_t(kBatch) * kN);  // the loss's weights: its gradient w.r.t. the output

  auto& s = *d.stream;
  if (bf16) {  // a step on other weights first: what follows must not use their bf16 copy
    auto upload_values = [&](double sign) {
      for (const auto& p : params) {
        const int l = p.name[6] - '0';
        const std::string what = p.name.substr(8);
        const Vec& v = (what == "V" ? ref.V : what == "W" ? ref.W : what == "weight" ? ref.M : ref.b)[l];
        std::vector<float> values(v.size());
        for (std::size_t i = 0; i < v.size(); ++i) values[i] = static_cast<float>(sign * v[i]);
        d.backend->copy(p.value, values.data(), p.count * sizeof(float), s);
      }
    };
    upload_values(-1.0);
    const auto other = random(std::size_t(kBatch) * kN);
    std::vector<float> scratch(std::size_t(kBatch) * kN, 0.f);
    inter->forward(s, d.upload(other), d.upload(other), kBatch);
    inter->backward(s, d.upload(other), d.upload(scratch), d.upload(scratch));
    upload_values(1.0);
  }
  const float* out = inter->forward(s, d.upload(bottom), d.upload(emb), kBatch);
  const auto got_out = d.download(out, std::size_t(kBatch) * kN);
  std::vector<float> grad_bottom_init(bottom.size(), 0.f), grad_emb_init(emb.size(), 0.f);
  float* grad_bottom = d.upload(grad_bottom_init);
  float* grad_emb = d.upload(grad_emb_init);
  inter->backward(s, d.upload(weight), grad_bottom, grad_emb);

  // x0 = [bottom, embeddings] per sample.
  Vec x0(std::size_t(kBatch) * kN);
  for (int b = 0; b < kBatch; ++b)
    for (int c = 0; c < kN; ++c)
      x0[b * kN + c] = c < kDim ? bottom[b * kDim + c] : emb[b * kTables * kDim + c - kDim];
  expect_close(got_out, ref.forward(x0), forward_tolerance, "output");

  const Vec w = widen(weight);
  auto loss = [&] { return ref.loss(x0, w); };
  for (const auto& p : params) {
    const int l = p.name[6] - '0';
    const std::string what = p.name.substr(8);
    Vec& value = (what == "V" ? ref.V : what == "W" ? ref.W : what == "weight" ? ref.M : ref.b)[l];
    expect_close(d.download(p.grad, p.count), finite_difference(value, loss), gradient_tolerance, p.name + " gradient");
  }
  const Vec gx0 = finite_difference(x0, loss);
  Vec want_bottom(bottom.size()), want_emb(emb.size());
  for (int b = 0; b < kBatch; ++b)
    for (int c = 0; c < kN; ++c)
      (c < kDim ? want_bottom[b * kDim + c] : want_emb[b * kTables * kDim + c - kDim]) = gx0[b * kN + c];
  expect_close(d.download(grad_bottom, bottom.size()), want_bottom, gradient_tolerance, "bottom output gradient");
  expect_close(d.download(grad_emb, emb.size()), want_emb, gradient_tolerance, "embedding gradient");
  if (bf16) {  // and the GEMMs did take bf16 operands: the output is not the fp32 network's
    auto fp32 = make_interaction(InteractionKind::dcn, *d.backend, d.pool, kTables, kDim, kBatch,
                                 CrossSpec{layers, rank, 11, false});
    for (std::size_t i = 0; i < params.size(); ++i)
      d.backend->copy(fp32->parameters()[i].value, params[i].value, params[i].count * sizeof(float), s);
    const auto want32 = d.download(fp32->forward(s, d.upload(bottom), d.upload(emb), kBatch), got_out.size());
    EXPECT_NE(got_out, want32);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, CrossNet,
                         testing::Combine(testing::Values(device::BackendKind::cpu, device::BackendKind::cpu_strict,
                                                          device::BackendKind::cuda),
                                          testing::Values(3, 0), testing::Bool()),
                         [](const auto& info) {
                           const auto kind = std::get<0>(info.param);
                           const std::string k = kind == device::BackendKind::cuda         ? "cuda"
                                                 : kind == device::BackendKind::cpu_strict ? "cpu_strict"
                                                                                           : "cpu";
                           return k + (std::get<1>(info.param) > 0 ? "_low_rank" : "_full_rank") +
                                  (std::get<2>(info.param) ? "_bf16" : "");
                         });

// Names and shapes as checkpoints store them; the matrices' spread is Xavier-normal's and the
// biases start at zero.
TEST(CrossNetInit, NamesShapesAndXavierNormal) {
  test::TestDevice d(device::BackendKind::cpu);
  const int n = 17 * 8;  // 16 tables of dim 8
  for (int rank : {32, 0}) {
    auto inter = make_interaction(InteractionKind::dcn, *d.backend, d.pool, 16, 8, 4, CrossSpec{2, rank, 3});
    const auto params = inter->parameters();
    ASSERT_EQ(params.size(), rank > 0 ? 6u : 4u);
    std::size_t total = 0;
    for (const auto& p : params) {
      total += p.count;
      const auto v = d.download(p.value, p.count);
      double sum2 = 0;
      for (float x : v) sum2 += double(x) * x;
      const double rms = std::sqrt(sum2 / double(v.size()));
      if (p.name.ends_with(".bias")) {
        EXPECT_EQ(p.count, std::size_t(n)) << p.name;
        EXPECT_EQ(rms, 0.0) << p.name;
      } else {
        EXPECT_EQ(p.count, rank > 0 ? std::size_t(rank) * n : std::size_t(n) * n) << p.name;
        const double want = rank > 0 ? std::sqrt(2.0 / (n + rank)) : std::sqrt(1.0 / n);
        EXPECT_NEAR(rms, want, 0.05 * want) << p.name;
      }
    }
    EXPECT_EQ(params[0].name, rank > 0 ? "cross.0.V" : "cross.0.weight");
    if (rank > 0) {
      EXPECT_EQ(params[1].name, "cross.0.W");
    }
    EXPECT_EQ(params.back().name, "cross.1.bias");
    EXPECT_EQ(total, inter->parameter_count());
  }
  EXPECT_THROW(make_interaction(InteractionKind::dcn, *d.backend, d.pool, 2, 4, 4, CrossSpec{0, 8, 1}), ConfigError);
  EXPECT_THROW(make_interaction(InteractionKind::dcn, *d.backend, d.pool, 2, 4, 4, CrossSpec{2, -1, 1}), ConfigError);
}

}  // namespace
