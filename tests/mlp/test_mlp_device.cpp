// The dense half on a device backend against the CPU backend: an MLP's forward and backward, the
// dot, concatenation and cross-network interactions, the BCE loss and the dense optimizers' steps
// give the same values (to fp32 rounding), and the loss with its gradient is one launch.
// Under the strict device emulator (cpu-strict) always; on CUDA when a GPU is present, else
// skipped. Every input reaches the device and every result the host through backend copies.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "mlp/dense_optimizer.hpp"
#include "mlp/interaction.hpp"
#include "mlp/kernels.hpp"
#include "mlp/loss.hpp"
#include "mlp/mlp.hpp"
#include "test_device.hpp"

using namespace recmix;
using namespace recmix::mlp;

namespace {

constexpr int kBatch = 37, kDense = 13, kTables = 5, kDim = 8;

std::vector<float> random_vector(std::size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Everything one pass produces, copied to the host.
struct DenseResults {
  std::vector<float> top_out, top_input_grad, bottom_grads, top_grads, interaction_out, grad_bottom, grad_emb;
  double loss = 0;
};

using Device = test::TestDevice;

DenseResults run_dense(device::BackendKind kind, InteractionKind interaction_kind) {
  std::mt19937 rng(42);
  const auto dense = random_vector(kBatch * kDense, rng);
  const auto emb = random_vector(kBatch * kTables * kDim, rng);
  std::vector<float> labels(kBatch);
  for (int i = 0; i < kBatch; ++i) labels[i] = float(i % 3 == 0);
  Device d(kind);
  Mlp bottom(*d.backend, d.pool, "bottom", {kDense, 16, kDim}, Activation::relu, 3, kBatch);
  auto inter = make_interaction(interaction_kind, *d.backend, d.pool, kTables, kDim, kBatch, CrossSpec{2, 5, 9});
  Mlp top(*d.backend, d.pool, "top", {inter->out_features(), 16, 1}, Activation::sigmoid, 4, kBatch);
  float* x = d.upload(dense);
  float* e = d.upload(emb);
  float* y = d.upload(labels);
  auto& s = *d.stream;
  const float* b_out = bottom.forward(s, x, kBatch);
  const float* z = inter->forward(s, b_out, e, kBatch);
  const float* p = top.forward(s, z, kBatch);
  DenseResults r;
  r.interaction_out = d.download(z, std::size_t(kBatch) * inter->out_features());
  r.top_out = d.download(p, kBatch);
  r.loss = bce_loss(*d.backend, s, p, y, kBatch);
  device::Buffer<float> grad_p(d.pool, kBatch, "loss gradient"), grad_b(d.pool, kBatch * kDim, "grad bottom"),
      grad_e(d.pool, kBatch * kTables * kDim, "grad embeddings");
  bce_loss_backward(*d.backend, s, p, y, kBatch, 1.f / kBatch, grad_p.data());
  const float* gz = top.backward(s, grad_p.data(), true);
  r.top_input_grad = d.download(gz, std::size_t(kBatch) * inter->out_features());
  inter->backward(s, gz, grad_b.data(), grad_e.data());
  bottom.backward(s, grad_b.data(), false);
  r.grad_bottom = d.download(grad_b.data(), grad_b.size());
  r.grad_emb = d.download(grad_e.data(), grad_e.size());
  r.bottom_grads = d.download(bottom.all_grads(), bottom.parameter_count());
  r.top_grads = d.download(top.all_grads(), top.parameter_count());
  return r;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::abs(double(w)));
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(scale, 1e-3)) << what << " [" << i << "]";
}

class DenseDevice : public testing::TestWithParam<device::BackendKind> {};

TEST_P(DenseDevice, MatchesTheCpuBackend) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  for (const InteractionKind interaction : {InteractionKind::dot, InteractionKind::cat, InteractionKind::dcn}) {
    SCOPED_TRACE(interaction_name(interaction));
    const auto want = run_dense(device::BackendKind::cpu, interaction);
    const auto got = run_dense(kind, interaction);
    expect_close(got.interaction_out, want.interaction_out, "interaction output");
    expect_close(got.top_out, want.top_out, "top MLP output");
    EXPECT_NEAR(got.loss, want.loss, 1e-6 * std::abs(want.loss));
    expect_close(got.top_input_grad, want.top_input_grad, "top MLP input gradient");
    expect_close(got.grad_bottom, want.grad_bottom, "bottom output gradient");
    expect_close(got.grad_emb, want.grad_emb, "embedding gradient");
    expect_close(got.top_grads, want.top_grads, "top MLP parameter gradients");
    expect_close(got.bottom_grads, want.bottom_grads, "bottom MLP parameter gradients");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DenseDevice,
                         testing::Values(device::BackendKind::cpu_strict, device::BackendKind::cuda),
                         [](const auto& info) { return info.param == device::BackendKind::cuda ? "cuda" : "cpu_strict"; });

// Parameter sizes of every shape the one-launch step must tell apart: a lone bias, a short one,
// one across three flat blocks, and one behind it.
const std::vector<std::size_t> kParamSizes = {1, 37, 2 * kernels::kFlatBlock + 5, 16};

struct OptimizerRun {
  std::vector<std::vector<float>> values, state;
  device::DeviceCounts per_step;  // what the last step asked of the backend
};

// Three steps of `c` over kParamSizes on `kind`, each with gradients of its own.
OptimizerRun run_optimizer(device::BackendKind kind, const DenseOptimizerConfig& c) {
  std::mt19937 rng(7);
  Device d(kind);
  std::vector<Param> params;
  std::vector<float*> grads;
  for (std::size_t i = 0; i < kParamSizes.size(); ++i) {
    float* value = d.upload(random_vector(kParamSizes[i], rng));
    grads.push_back(d.upload(std::vector<float>(kParamSizes[i])));
    params.push_back({"p" + std::to_string(i), value, grads.back(), kParamSizes[i]});
  }
  auto opt = make_dense_optimizer(c, *d.backend, d.pool, params);
  OptimizerRun r;
  for (int step = 0; step < 3; ++step) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto g = random_vector(kParamSizes[i], rng, -2.f, 2.f);
      d.backend->copy(grads[i], g.data(), g.size() * sizeof(float), *d.stream);
    }
    d.stream->synchronize();
    const auto before = d.backend->counters().snapshot();
    opt->issue_step(*d.stream);
    r.per_step = d.backend->counters().snapshot() - before;
    opt->count_step();
  }
  for (const Param& p : params) r.values.push_back(d.download(p.value, p.count));
  for (const Param& p : opt->state()) r.state.push_back(d.download(p.value, p.count));
  return r;
}

class DenseOptimizerDevice : public testing::TestWithParam<device::BackendKind> {};

// Every parameter's step is one launch on a device (kernels::ParamSteps), beside the one-item
// launches of the schedule's factor and Adam's corrections, and it computes what the CPU
// backend's per-parameter blocks compute.
TEST_P(DenseOptimizerDevice, OneLaunchStepsEveryParameterAsTheCpuBackendDoes) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  for (const DenseOptimizerKind k : {DenseOptimizerKind::sgd, DenseOptimizerKind::adagrad, DenseOptimizerKind::adam})
    for (const bool scheduled : {false, true}) {
      SCOPED_TRACE(testing::Message() << "kind " << static_cast<int>(k) << (scheduled ? ", scheduled" : ""));
      DenseOptimizerConfig c;
      c.kind = k;
      c.lr = 0.05f;
      c.initial_accumulator = 0.1f;
      if (scheduled) c.schedule.warmup_steps = 4;
      const auto want = run_optimizer(device::BackendKind::cpu, c);
      const auto got = run_optimizer(kind, c);
      ASSERT_EQ(got.values.size(), want.values.size());
      for (std::size_t i = 0; i < want.values.size(); ++i) expect_close(got.values[i], want.values[i], "parameter");
      ASSERT_EQ(got.state.size(), want.state.size());
      for (std::size_t i = 0; i < want.state.size(); ++i) expect_close(got.state[i], want.state[i], "state");
      const std::uint64_t one_item_launches = (scheduled ? 1 : 0) + (k == DenseOptimizerKind::adam ? 1 : 0);
      EXPECT_EQ(got.per_step.launches, 1 + one_item_launches);
      EXPECT_EQ(got.per_step.allocations, 0u);
      EXPECT_EQ(got.per_step.host_syncs, 0u);
    }
}

// backward_sgd() on a device: the weights step inside their GEMMs and every bias in one launch
// after the last layer, so it issues exactly one launch more than backward(); the biases equal
// those of backward() followed by the SGD optimizer bit for bit (the same column sums, the same
// b -= lr db), the weights to rounding. A second rate rebuilds the launch's table.
TEST_P(DenseOptimizerDevice, FoldedSgdStepsEveryBiasInOneLaunch) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(11);
  Device d(kind);
  const std::vector<int> sizes = {7, 33, 16, 9, 3};
  constexpr int kRows = 29;
  // One name: it seeds the initial weights.
  Mlp plain(*d.backend, d.pool, "plain", sizes, Activation::sigmoid, 42, kRows);
  Mlp folded(*d.backend, d.pool, "plain", sizes, Activation::sigmoid, 42, kRows);
  auto& s = *d.stream;
  for (const float lr : {0.05f, 0.05f, 0.02f}) {
    DenseOptimizerConfig c;
    c.lr = lr;
    auto sgd = make_dense_optimizer(c, *d.backend, d.pool, plain.parameters());
    float* x = d.upload(random_vector(std::size_t(kRows) * sizes.front(), rng));
    float* dy = d.upload(random_vector(std::size_t(kRows) * sizes.back(), rng));
    plain.forward(s, x, kRows);
    folded.forward(s, x, kRows);
    auto before = d.backend->counters().snapshot();
    plain.backward(s, dy, false);
    const auto plain_launches = (d.backend->counters().snapshot() - before).launches;
    sgd->step(s);
    before = d.backend->counters().snapshot();
    EXPECT_EQ(folded.backward_sgd(s, dy, false, lr), nullptr);
    EXPECT_EQ((d.backend->counters().snapshot() - before).launches, plain_launches + 1);
    const auto pa = plain.parameters(), pb = folded.parameters();
    for (std::size_t p = 0; p < pa.size(); ++p) {
      SCOPED_TRACE(testing::Message() << pa[p].name << ", lr " << lr);
      const auto a = d.download(pa[p].value, pa[p].count), b = d.download(pb[p].value, pb[p].count);
      if (pa[p].name.ends_with(".bias"))
        EXPECT_EQ(a, b);
      else
        expect_close(b, a, "weight");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DenseOptimizerDevice,
                         testing::Values(device::BackendKind::cpu_strict, device::BackendKind::cuda),
                         [](const auto& info) { return info.param == device::BackendKind::cuda ? "cuda" : "cpu_strict"; });

// The CPU backend, the emulator and CUDA (skipped where no GPU is present), named for the tests.
const auto kEveryBackend =
    testing::Values(device::BackendKind::cpu, device::BackendKind::cpu_strict, device::BackendKind::cuda);
std::string backend_name(const testing::TestParamInfo<device::BackendKind>& info) {
  return info.param == device::BackendKind::cuda ? "cuda" : info.param == device::BackendKind::cpu ? "cpu" : "cpu_strict";
}

class LossDevice : public testing::TestWithParam<device::BackendKind> {};

// bce_loss_accumulate with a gradient is one launch fewer than it and bce_loss_backward, and
// gives the same total and the same gradient bit for bit, clamped ends included.
TEST_P(LossDevice, AccumulateWithTheGradientIsOneLaunchFewer) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(5);
  constexpr int kRows = 150;  // three loss blocks, the last one short
  auto prob = random_vector(kRows, rng, 0.f, 1.f);
  prob[3] = 0.f;
  prob[7] = 1.f;
  const auto labels = random_vector(kRows, rng, 0.f, 1.f);
  Device d(kind);
  const float* p = d.upload(prob);
  const float* y = d.upload(labels);
  const std::size_t blocks = static_cast<std::size_t>(bce_block_count(kRows));
  device::Buffer<double> terms(d.pool, kRows), sums(d.pool, blocks), totals(d.pool, 2);
  device::Buffer<float> grads(d.pool, 2 * kRows);
  d.backend->fill_zero(totals.data(), totals.bytes(), *d.stream);
  auto& s = *d.stream;
  auto before = d.backend->counters().snapshot();
  bce_loss_accumulate(*d.backend, s, p, y, kRows, terms.data(), sums.data(), totals.data());
  bce_loss_backward(*d.backend, s, p, y, kRows, 0.25f, grads.data());
  const auto apart = (d.backend->counters().snapshot() - before).launches;
  before = d.backend->counters().snapshot();
  bce_loss_accumulate(*d.backend, s, p, y, kRows, terms.data(), sums.data(), totals.data() + 1, grads.data() + kRows,
                      0.25f);
  EXPECT_EQ((d.backend->counters().snapshot() - before).launches, apart - 1);
  std::vector<double> total(2);
  d.backend->copy(total.data(), totals.data(), totals.bytes(), s);
  const auto g = d.download(grads.data(), grads.size());
  EXPECT_EQ(total[0], total[1]);
  EXPECT_GT(total[0], 0.0);
  EXPECT_EQ(std::vector<float>(g.begin(), g.begin() + kRows), std::vector<float>(g.begin() + kRows, g.end()));
}

INSTANTIATE_TEST_SUITE_P(Backends, LossDevice, kEveryBackend, backend_name);

class MlpGradientInPlace : public testing::TestWithParam<device::BackendKind> {};

// A gradient written into Mlp::output_gradient() (as the loss and the interaction write theirs in
// a training step) is taken in place, and backward() gives what it gives from a gradient kept
// elsewhere: the same input gradient and parameter gradients, bit for bit.
TEST_P(MlpGradientInPlace, EqualsAGradientPassedFromElsewhere) {
  const device::BackendKind kind = GetParam();
  if (kind == device::BackendKind::cuda && !device::cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
  std::mt19937 rng(3);
  Device d(kind);
  const std::vector<int> sizes = {9, 24, 6};
  constexpr int kRows = 21;
  Mlp mlp(*d.backend, d.pool, "mlp", sizes, Activation::relu, 42, kRows);
  auto& s = *d.stream;
  const float* x = d.upload(random_vector(std::size_t(kRows) * sizes.front(), rng));
  const auto dy = random_vector(std::size_t(kRows) * sizes.back(), rng);
  const float* elsewhere = d.upload(dy);
  mlp.forward(s, x, kRows);
  const auto dx_want = d.download(mlp.backward(s, elsewhere, true), std::size_t(kRows) * sizes.front());
  const auto grads_want = d.download(mlp.all_grads(), mlp.parameter_count());
  mlp.forward(s, x, kRows);
  d.backend->copy(mlp.output_gradient(), dy.data(), dy.size() * sizeof(float), s);
  const auto dx_got = d.download(mlp.backward(s, mlp.output_gradient(), true), dx_want.size());
  EXPECT_EQ(dx_got, dx_want);
  EXPECT_EQ(d.download(mlp.all_grads(), mlp.parameter_count()), grads_want);
}

INSTANTIATE_TEST_SUITE_P(Backends, MlpGradientInPlace, kEveryBackend, backend_name);

}  // namespace
