// Dense optimizers against plain double-precision loops of the torch update rules, over several
// steps, several parameters (one of them large enough for the parallel path), and config errors.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "mlp/dense_optimizer.hpp"
#include "mlp/mlp.hpp"
#include "tests/mlp/reference.hpp"

namespace recmix::mlp {

// For the test names (found by argument-dependent lookup, so in the config's namespace).
void PrintTo(const DenseOptimizerConfig& c, std::ostream* os) {
  *os << "kind " << static_cast<int>(c.kind) << ", lr " << c.lr << ", eps " << c.eps << ", initial accumulator " << c.initial_accumulator;
}

namespace {

struct ParamSet {
  std::unique_ptr<device::Backend> backend = device::make_backend(device::BackendKind::cpu, 2);
  device::MemoryPool pool{*backend, device::Tier::device, "test"};
  std::vector<device::Buffer<float>> values, grads;
  std::vector<Param> params;
  explicit ParamSet(std::vector<std::size_t> counts) {
    for (std::size_t i = 0; i < counts.size(); ++i) {
      values.emplace_back(pool, counts[i]);
      grads.emplace_back(pool, counts[i]);
      auto v = test::random_floats(counts[i], 100 + i);
      std::copy(v.begin(), v.end(), values.back().data());
      std::string name = "p";
      name += std::to_string(i);
      params.push_back({name, values.back().data(), grads.back().data(), counts[i]});
    }
  }
};

// Plain reference of the three rules, in double.
struct RefOptimizer {
  DenseOptimizerConfig c;
  std::vector<double> p, a, b;  // value, state 1, state 2
  int t = 0;
  void step(const std::vector<float>& g) {
    ++t;
    for (std::size_t i = 0; i < p.size(); ++i) {
      double gi = g[i];
      if (c.kind == DenseOptimizerKind::sgd) {
        p[i] -= c.lr * gi;
      } else if (c.kind == DenseOptimizerKind::adagrad) {
        a[i] += gi * gi;
        p[i] -= c.lr * gi / (std::sqrt(a[i]) + (c.eps < 0 ? 1e-10 : c.eps));
      } else {
        a[i] = c.beta1 * a[i] + (1 - c.beta1) * gi;
        b[i] = c.beta2 * b[i] + (1 - c.beta2) * gi * gi;
        double mhat = a[i] / (1 - std::pow(double(c.beta1), t));
        double vhat = b[i] / (1 - std::pow(double(c.beta2), t));
        p[i] -= c.lr * mhat / (std::sqrt(vhat) + (c.eps < 0 ? 1e-8 : c.eps));
      }
    }
  }
};

class OptimizerVsReference : public ::testing::TestWithParam<DenseOptimizerConfig> {};

TEST_P(OptimizerVsReference, SeveralSteps) {
  const DenseOptimizerConfig& c = GetParam();
  test::ScopedParallelThreshold parallel(1 << 12);
  ParamSet s({1, 37, 70001, 1000});
  auto opt = make_dense_optimizer(c, *s.backend, s.pool, s.params);
  auto stream = s.backend->create_stream();
  std::vector<RefOptimizer> refs;
  for (auto& p : s.params) {
    RefOptimizer r{c, test::to_double(p.value, p.count), std::vector<double>(p.count, 0.0),
                   std::vector<double>(p.count, 0.0)};
    if (c.kind == DenseOptimizerKind::adagrad) r.a.assign(p.count, c.initial_accumulator);
    refs.push_back(r);
  }
  for (int step = 0; step < 5; ++step) {
    for (std::size_t i = 0; i < s.params.size(); ++i) {
      auto g = test::random_floats(s.params[i].count, 1000 * step + i, -2.f, 2.f);
      std::copy(g.begin(), g.end(), s.params[i].grad);
      refs[i].step(g);
    }
    opt->step(*stream);
  }
  EXPECT_EQ(opt->step_count(), 5);
  for (std::size_t i = 0; i < s.params.size(); ++i)
    EXPECT_LE(test::worst(s.params[i].value, refs[i].p, 1e-6, 1e-5), 1.0) << s.params[i].name;

  auto state = opt->state();
  if (c.kind == DenseOptimizerKind::sgd) {
    EXPECT_TRUE(state.empty());
  } else if (c.kind == DenseOptimizerKind::adagrad) {
    ASSERT_EQ(state.size(), s.params.size());
    EXPECT_EQ(state[2].name, "adagrad.sum.p2");
    EXPECT_EQ(state[2].grad, nullptr);
    EXPECT_LE(test::worst(state[2].value, refs[2].a, 1e-6, 1e-5), 1.0);
  } else {
    ASSERT_EQ(state.size(), 2 * s.params.size());
    EXPECT_EQ(state[1].name, "adam.m.p1");
    EXPECT_EQ(state[4 + 1].name, "adam.v.p1");
    EXPECT_LE(test::worst(state[2].value, refs[2].a, 1e-6, 1e-5), 1.0);
    EXPECT_LE(test::worst(state[6].value, refs[2].b, 1e-6, 1e-5), 1.0);
  }
}

DenseOptimizerConfig config(DenseOptimizerKind kind, float lr, float init = 0.f, float eps = -1.f) {
  DenseOptimizerConfig c;
  c.kind = kind;
  c.lr = lr;
  c.initial_accumulator = init;
  c.eps = eps;
  return c;
}

INSTANTIATE_TEST_SUITE_P(Kinds, OptimizerVsReference,
                         ::testing::Values(config(DenseOptimizerKind::sgd, 0.1f), config(DenseOptimizerKind::adagrad, 0.05f),
                                           config(DenseOptimizerKind::adagrad, 0.05f, 0.1f, 1e-6f),
                                           config(DenseOptimizerKind::adam, 0.01f), config(DenseOptimizerKind::adam, 0.001f, 0.f, 1e-4f)));

TEST(DenseOptimizer, AdamResumesFromStepCount) {
  // Two optimizers, one restored from the other's state and step count, take identical steps.
  ParamSet a({50}), b({50});
  std::copy(a.params[0].value, a.params[0].value + 50, b.params[0].value);
  auto c = config(DenseOptimizerKind::adam, 0.01f);
  auto oa = make_dense_optimizer(c, *a.backend, a.pool, a.params);
  auto ob = make_dense_optimizer(c, *b.backend, b.pool, b.params);
  auto stream = a.backend->create_stream();
  for (int step = 0; step < 3; ++step) {
    auto g = test::random_floats(50, step);
    std::copy(g.begin(), g.end(), a.params[0].grad);
    oa->step(*stream);
  }
  std::copy(a.params[0].value, a.params[0].value + 50, b.params[0].value);
  auto sa = oa->state(), sb = ob->state();
  for (std::size_t i = 0; i < sa.size(); ++i) std::copy(sa[i].value, sa[i].value + 50, sb[i].value);
  ob->set_step_count(oa->step_count());
  auto g = test::random_floats(50, 9);
  std::copy(g.begin(), g.end(), a.params[0].grad);
  std::copy(g.begin(), g.end(), b.params[0].grad);
  oa->step(*stream);
  ob->step(*stream);
  for (int i = 0; i < 50; ++i) ASSERT_EQ(a.params[0].value[i], b.params[0].value[i]);
  // Without the restored step count the bias correction differs.
  ob->set_step_count(0);
  ob->step(*stream);
  oa->step(*stream);
  bool differs = false;
  for (int i = 0; i < 50; ++i) differs |= a.params[0].value[i] != b.params[0].value[i];
  EXPECT_TRUE(differs);
}

TEST(DenseOptimizer, ConfigErrors) {
  ParamSet s({10});
  EXPECT_THROW(make_dense_optimizer(config(DenseOptimizerKind::sgd, 0.f), *s.backend, s.pool, s.params), ConfigError);
  EXPECT_THROW(make_dense_optimizer(config(DenseOptimizerKind::adam, -1.f), *s.backend, s.pool, s.params), ConfigError);
  EXPECT_THROW(make_dense_optimizer(config(DenseOptimizerKind::sgd, NAN), *s.backend, s.pool, s.params), ConfigError);
  EXPECT_THROW(make_dense_optimizer(config(DenseOptimizerKind::adagrad, 0.1f, -1.f), *s.backend, s.pool, s.params),
               ConfigError);
  auto bad_beta = config(DenseOptimizerKind::adam, 0.1f);
  bad_beta.beta2 = 1.f;
  EXPECT_THROW(make_dense_optimizer(bad_beta, *s.backend, s.pool, s.params), ConfigError);
  auto no_grad = s.params;
  no_grad[0].grad = nullptr;
  EXPECT_THROW(make_dense_optimizer(config(DenseOptimizerKind::sgd, 0.1f), *s.backend, s.pool, no_grad), ConfigError);
}

// backward_sgd() folds the SGD step into the weight-gradient GEMMs: over several steps it must
// give the same input gradients and (to rounding) the same parameters as backward() + Sgd.
TEST(FusedSgd, MatchesBackwardThenSgdStep) {
  for (int batch : {1, 5, 300}) {
    SCOPED_TRACE(batch);
    auto backend = device::make_backend(device::BackendKind::cpu, 2);
    device::MemoryPool pool(*backend, device::Tier::device, "test");
    auto stream = backend->create_stream();
    const std::vector<int> sizes = {7, 33, 16, 3};
    Mlp plain(*backend, pool, "plain", sizes, Activation::sigmoid, 42, 300);
    Mlp fused(*backend, pool, "plain", sizes, Activation::sigmoid, 42, 300);
    const float lr = 0.05f;
    auto sgd = make_dense_optimizer(config(DenseOptimizerKind::sgd, lr), *backend, pool, plain.parameters());
    for (int step = 0; step < 3; ++step) {
      const auto x = test::random_floats(std::size_t(batch) * sizes.front(), 10 + step);
      const auto dy = test::random_floats(std::size_t(batch) * sizes.back(), 20 + step);
      const float* out_a = plain.forward(*stream, x.data(), batch);
      const float* out_b = fused.forward(*stream, x.data(), batch);
      for (std::size_t i = 0; i < dy.size(); ++i)  // equal weights at step 0, then equal to rounding
        ASSERT_NEAR(out_a[i], out_b[i], step == 0 ? 0.f : 1e-5f) << "forward, step " << step;
      const float* dx_a = plain.backward(*stream, dy.data(), true);
      sgd->step(*stream);
      const float* dx_b = fused.backward_sgd(*stream, dy.data(), true, lr);
      for (std::size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(dx_a[i], dx_b[i], step == 0 ? 0.f : 1e-5f)
            << "input gradient, step " << step;
      const auto pa = plain.parameters(), pb = fused.parameters();
      for (std::size_t p = 0; p < pa.size(); ++p)
        for (std::size_t i = 0; i < pa[p].count; ++i)
          ASSERT_NEAR(pa[p].value[i], pb[p].value[i], 1e-6f * (1.f + std::fabs(pa[p].value[i])))
              << pa[p].name << "[" << i << "], step " << step;
    }
  }
}

}  // namespace
}  // namespace recmix::mlp
