// Finite-difference gradient checks: Linear+ReLU, an MLP stack, both interactions, the loss and
// the dense chain bottom MLP -> dot interaction -> top MLP -> BCE. Central differences on the
// float model; objectives are accumulated in double; the step actually taken (after rounding to
// float) is the denominator.
#include <gtest/gtest.h>

#include <functional>

#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "mlp/interaction.hpp"
#include "mlp/loss.hpp"
#include "mlp/mlp.hpp"
#include "tests/mlp/reference.hpp"

namespace recmix::mlp {
namespace {

constexpr float kStep = 1e-3f;

// Checks d objective / d x[i] against analytic[i] for every i.
void check_gradient(const std::string& what, float* x, std::size_t n, const std::vector<float>& analytic,
                    const std::function<double()>& objective) {
  ASSERT_EQ(analytic.size(), n);
  int bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float saved = x[i];
    float hi = saved + kStep, lo = saved - kStep;
    x[i] = hi;
    double f_hi = objective();
    x[i] = lo;
    double f_lo = objective();
    x[i] = saved;
    double fd = (f_hi - f_lo) / (static_cast<double>(hi) - lo);
    double tol = 2e-3 + 2e-2 * std::abs(fd);
    if (std::abs(fd - analytic[i]) > tol && ++bad <= 5)
      ADD_FAILURE() << what << "[" << i << "]: finite difference " << fd << ", analytic "
                    << analytic[i];
  }
  EXPECT_EQ(bad, 0) << what;
}

struct Env {
  std::unique_ptr<device::Backend> backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool{*backend, device::Tier::device, "test"};
  std::unique_ptr<device::Stream> stream = backend->create_stream();
};

// Objective sum_i r_i y_i of an MLP's output, r fixed.
void check_mlp(const std::vector<int>& sizes, Activation last, int batch) {
  Env e;
  Mlp mlp(*e.backend, e.pool, "m", sizes, last, 3, batch);
  auto x = test::random_floats(static_cast<std::size_t>(batch) * sizes.front(), 1, -1.5f, 1.5f);
  auto r = test::random_floats(static_cast<std::size_t>(batch) * sizes.back(), 2);
  auto objective = [&] {
    const float* y = mlp.forward(*e.stream, x.data(), batch);
    double s = 0;
    for (std::size_t i = 0; i < r.size(); ++i) s += static_cast<double>(r[i]) * y[i];
    return s;
  };
  objective();
  const float* dx = mlp.backward(*e.stream, r.data(), true);
  std::vector<float> dx_copy(dx, dx + x.size());
  for (auto& p : mlp.parameters())
    check_gradient(p.name, p.value, p.count, std::vector<float>(p.grad, p.grad + p.count), objective);
  check_gradient("input", x.data(), x.size(), dx_copy, objective);
}

TEST(GradientCheck, LinearRelu) { check_mlp({5, 7}, Activation::relu, 3); }
TEST(GradientCheck, LinearSigmoidBatchOne) { check_mlp({6, 2}, Activation::sigmoid, 1); }
TEST(GradientCheck, MlpStack) { check_mlp({5, 9, 6, 3}, Activation::relu, 4); }
TEST(GradientCheck, MlpStackSigmoidOut) { check_mlp({4, 8, 5, 1}, Activation::sigmoid, 5); }

void check_interaction(InteractionKind kind, int k, int d, int batch) {
  Env e;
  auto inter = make_interaction(kind, *e.backend, e.pool, k, d, batch);
  auto bottom = test::random_floats(static_cast<std::size_t>(batch) * d, 3);
  auto emb = test::random_floats(static_cast<std::size_t>(batch) * k * d, 4);
  auto r = test::random_floats(static_cast<std::size_t>(batch) * inter->out_features(), 5);
  auto objective = [&] {
    const float* y = inter->forward(*e.stream, bottom.data(), emb.data(), batch);
    double s = 0;
    for (std::size_t i = 0; i < r.size(); ++i) s += static_cast<double>(r[i]) * y[i];
    return s;
  };
  objective();
  std::vector<float> gb(bottom.size()), ge(emb.size());
  inter->backward(*e.stream, r.data(), gb.data(), ge.data());
  check_gradient(std::string(interaction_name(kind)) + " bottom", bottom.data(), bottom.size(), gb, objective);
  check_gradient(std::string(interaction_name(kind)) + " embeddings", emb.data(), emb.size(), ge, objective);
}

TEST(GradientCheck, DotInteraction) { check_interaction(InteractionKind::dot, 3, 5, 2); }
TEST(GradientCheck, CatInteraction) { check_interaction(InteractionKind::cat, 3, 5, 2); }

TEST(GradientCheck, BceLoss) {
  Env e;
  const int batch = 6;
  auto p = test::random_floats(batch, 6, 0.05f, 0.95f);
  auto y = test::random_floats(batch, 7, 0.f, 1.f);  // soft labels
  y[0] = 0.f;
  y[1] = 1.f;
  std::vector<float> g(batch);
  bce_loss_backward(*e.backend, *e.stream, p.data(), y.data(), batch, 1.f / batch, g.data());
  check_gradient("prob", p.data(), p.size(), g,
                 [&] { return bce_loss(*e.backend, *e.stream, p.data(), y.data(), batch); });
}

// The dense half of a DLRM step with given embedding vectors, as the trainer chains it.
TEST(GradientCheck, DenseChain) {
  Env e;
  const int batch = 3, k = 2, d = 3;
  Mlp bottom(*e.backend, e.pool, "bot", {4, 6, d}, Activation::relu, 11, batch);
  auto inter = make_interaction(InteractionKind::dot, *e.backend, e.pool, k, d, batch);
  Mlp top(*e.backend, e.pool, "top", {inter->out_features(), 5, 1}, Activation::sigmoid, 12, batch);
  auto dense = test::random_floats(static_cast<std::size_t>(batch) * 4, 8, 0.f, 2.f);
  auto emb = test::random_floats(static_cast<std::size_t>(batch) * k * d, 9);
  std::vector<float> labels = {1.f, 0.f, 0.7f};
  auto objective = [&] {
    const float* b = bottom.forward(*e.stream, dense.data(), batch);
    const float* z = inter->forward(*e.stream, b, emb.data(), batch);
    const float* p = top.forward(*e.stream, z, batch);
    return bce_loss(*e.backend, *e.stream, p, labels.data(), batch);
  };
  objective();
  const float* p = top.forward(*e.stream, inter->forward(*e.stream, bottom.forward(*e.stream, dense.data(), batch), emb.data(), batch), batch);
  std::vector<float> gp(batch), gb(static_cast<std::size_t>(batch) * d), ge(emb.size());
  bce_loss_backward(*e.backend, *e.stream, p, labels.data(), batch, 1.f / batch, gp.data());
  const float* gz = top.backward(*e.stream, gp.data(), true);
  inter->backward(*e.stream, gz, gb.data(), ge.data());
  const float* gx = bottom.backward(*e.stream, gb.data(), true);
  std::vector<float> gx_copy(gx, gx + dense.size());

  std::vector<Param> params = bottom.parameters();
  for (auto& q : top.parameters()) params.push_back(q);
  std::vector<std::vector<float>> grads;
  for (auto& q : params) grads.emplace_back(q.grad, q.grad + q.count);
  for (std::size_t i = 0; i < params.size(); ++i)
    check_gradient(params[i].name, params[i].value, params[i].count, grads[i], objective);
  check_gradient("embeddings", emb.data(), emb.size(), ge, objective);
  check_gradient("dense input", dense.data(), dense.size(), gx_copy, objective);
}

}  // namespace
}  // namespace recmix::mlp
