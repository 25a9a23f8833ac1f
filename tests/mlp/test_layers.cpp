// Every dense kernel against the naive double-precision references of reference.hpp, on random
// shapes including batch 1 and widths that are not multiples of the vector width.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <ostream>
#include <tuple>

#include "core/error.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "mlp/cpu/kernels.hpp"
#include "mlp/cpu/linear.hpp"
#include "mlp/interaction.hpp"
#include "mlp/kernels.hpp"
#include "mlp/loss.hpp"
#include "mlp/mlp.hpp"
#include "tests/mlp/reference.hpp"

namespace recmix::mlp {
namespace {

using test::Vec;

struct Shape {
  std::vector<int> sizes;
  int batch;
  bool last_sigmoid;
  int threads;
};

void PrintTo(const Shape& s, std::ostream* os) {
  *os << "sizes";
  for (int v : s.sizes) *os << ' ' << v;
  *os << ", batch " << s.batch << ", threads " << s.threads;
}

class MlpVsReference : public ::testing::TestWithParam<Shape> {};

// Forward and backward of an Mlp against the reference on a CPU backend with the given GEMM
// library, with the fused narrow-layer GEMMs where they apply (fused) or without them.
void check_against_reference(const Shape& shape, device::CpuGemm gemm, bool fused) {
  if (gemm == device::CpuGemm::onednn && !device::onednn_compiled()) GTEST_SKIP() << "built without oneDNN";
  const bool was_fused = cpu::fused_linear_enabled();
  cpu::set_fused_linear_enabled(fused);
  struct Restore {
    bool value;
    ~Restore() { cpu::set_fused_linear_enabled(value); }
  } restore{was_fused};
  test::ScopedParallelThreshold parallel(shape.threads > 1 ? 1 << 12 : std::int64_t(1) << 62);
  auto backend = device::make_backend(device::BackendKind::cpu, shape.threads, gemm);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  Mlp mlp(*backend, pool, "m", shape.sizes, shape.last_sigmoid ? Activation::sigmoid : Activation::relu,
          7, shape.batch + 3);
  int in = shape.sizes.front(), out = shape.sizes.back(), batch = shape.batch;

  test::RefMlp ref;
  ref.sizes = shape.sizes;
  ref.last_sigmoid = shape.last_sigmoid;
  auto params = mlp.parameters();
  ASSERT_EQ(params.size(), 2 * (shape.sizes.size() - 1));
  for (std::size_t l = 0; l + 1 < shape.sizes.size(); ++l) {
    const Param& w = params[2 * l];
    const Param& b = params[2 * l + 1];
    EXPECT_EQ(w.name, "m." + std::to_string(l) + ".weight");
    EXPECT_EQ(b.name, "m." + std::to_string(l) + ".bias");
    ASSERT_EQ(w.count, static_cast<std::size_t>(shape.sizes[l]) * shape.sizes[l + 1]);
    ASSERT_EQ(b.count, static_cast<std::size_t>(shape.sizes[l + 1]));
    ref.w.push_back(test::to_double(w.value, w.count));
    ref.b.push_back(test::to_double(b.value, b.count));
  }

  auto x = test::random_floats(static_cast<std::size_t>(batch) * in, 11, -2.f, 2.f);
  const float* y = mlp.forward(*stream, x.data(), batch);
  Vec y_ref = ref.forward(Vec(x.begin(), x.end()), batch);
  EXPECT_LE(test::worst(y, y_ref, 1e-5, 1e-4), 1.0);

  auto g = test::random_floats(static_cast<std::size_t>(batch) * out, 12);
  const float* dx = mlp.backward(*stream, g.data(), true);
  Vec dx_ref = ref.backward(Vec(g.begin(), g.end()));
  ASSERT_NE(dx, nullptr);
  EXPECT_LE(test::worst(dx, dx_ref, 1e-5, 1e-4), 1.0);
  for (std::size_t l = 0; l + 1 < shape.sizes.size(); ++l) {
    EXPECT_LE(test::worst(params[2 * l].grad, ref.dw[l], 1e-5, 1e-4), 1.0) << "layer " << l;
    EXPECT_LE(test::worst(params[2 * l + 1].grad, ref.db[l], 1e-5, 1e-4), 1.0) << "layer " << l;
  }

  // Without the input gradient the parameter gradients are the same, bit for bit.
  std::vector<std::vector<float>> grads;
  for (auto& p : params) grads.emplace_back(p.grad, p.grad + p.count);
  for (auto& p : params) std::memset(p.grad, 0xff, p.count * sizeof(float));  // NaNs: overwritten?
  EXPECT_EQ(mlp.backward(*stream, g.data(), false), nullptr);
  for (std::size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(std::memcmp(grads[i].data(), params[i].grad, grads[i].size() * sizeof(float)), 0)
        << params[i].name;
}

// The default path: the automatic GEMM library, and the fused GEMMs where they apply beside it.
TEST_P(MlpVsReference, ForwardAndBackward) { check_against_reference(GetParam(), device::CpuGemm::automatic, true); }
// OpenBLAS with the fused narrow-layer GEMMs (the default on CPUs without AVX-512).
TEST_P(MlpVsReference, ForwardAndBackwardOpenBlasFused) {
  check_against_reference(GetParam(), device::CpuGemm::openblas, true);
}
TEST_P(MlpVsReference, ForwardAndBackwardAllOpenBlas) {
  check_against_reference(GetParam(), device::CpuGemm::openblas, false);
}
TEST_P(MlpVsReference, ForwardAndBackwardOneDnn) { check_against_reference(GetParam(), device::CpuGemm::onednn, true); }

INSTANTIATE_TEST_SUITE_P(
    Shapes, MlpVsReference,
    ::testing::Values(Shape{{13, 17, 5}, 1, false, 1}, Shape{{3, 9}, 7, true, 1},
                      Shape{{13, 64, 31, 16}, 33, false, 2}, Shape{{37, 23, 1}, 65, true, 2},
                      // big enough for the parallel paths (>= 65536 floats per kernel)
                      Shape{{20, 300, 7}, 250, false, 2}, Shape{{11, 257, 1}, 300, true, 2}),
    [](const ::testing::TestParamInfo<Shape>& info) {
      std::string name = "sizes";
      for (int s : info.param.sizes) {
        name += '_';
        name += std::to_string(s);
      }
      name += "_batch";
      name += std::to_string(info.param.batch);
      name += info.param.last_sigmoid ? "_sigmoid" : "_relu";
      name += "_threads";
      name += std::to_string(info.param.threads);
      return name;
    });

TEST(Mlp, InitialisationFollowsTheReferenceScales) {
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  Mlp mlp(*backend, pool, "bot", {300, 500, 2000}, Activation::relu, 1, 4);
  auto params = mlp.parameters();
  auto check = [](const Param& p, double want_std) {
    double mean = 0, sq = 0;
    for (std::size_t i = 0; i < p.count; ++i) mean += p.value[i];
    mean /= p.count;
    for (std::size_t i = 0; i < p.count; ++i) sq += (p.value[i] - mean) * (p.value[i] - mean);
    double sd = std::sqrt(sq / p.count);
    EXPECT_NEAR(mean, 0.0, 5 * want_std / std::sqrt(double(p.count))) << p.name;
    EXPECT_NEAR(sd, want_std, 0.1 * want_std) << p.name;
  };
  check(params[0], std::sqrt(2.0 / 800));
  check(params[1], std::sqrt(1.0 / 500));
  check(params[2], std::sqrt(2.0 / 2500));
  check(params[3], std::sqrt(1.0 / 2000));
  // TorchRec's (the DLRM-DCNv2 reference's): weights and biases uniform(+-1/sqrt(in)), whose
  // standard deviation is the bound / sqrt(3), never past the bound.
  Mlp torchrec(*backend, pool, "bot", {300, 500, 2000}, Activation::relu, 1, 4, false, MlpInit::torchrec);
  params = torchrec.parameters();
  for (int i = 0; i < 4; ++i) {
    const double bound = 1.0 / std::sqrt(i < 2 ? 300.0 : 500.0);
    check(params[i], bound / std::sqrt(3.0));
    for (std::size_t j = 0; j < params[i].count; ++j)
      ASSERT_LE(std::abs(params[i].value[j]), static_cast<float>(bound)) << params[i].name;
  }
}

struct InteractionShape {
  int k, d, batch, threads;
};

void PrintTo(const InteractionShape& s, std::ostream* os) {
  *os << s.k << " tables, dim " << s.d << ", batch " << s.batch << ", threads " << s.threads;
}

class InteractionVsReference : public ::testing::TestWithParam<InteractionShape> {};

TEST_P(InteractionVsReference, Dot) {
  auto [k, d, batch, threads] = GetParam();
  test::ScopedParallelThreshold parallel(threads > 1 ? 1 << 12 : std::int64_t(1) << 62);
  auto backend = device::make_backend(device::BackendKind::cpu, threads);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  auto inter = make_interaction(InteractionKind::dot, *backend, pool, k, d, batch);
  int out = d + (k + 1) * k / 2;
  ASSERT_EQ(inter->out_features(), out);
  EXPECT_EQ(interaction_out_features(InteractionKind::dot, k, d), out);
  auto bottom = test::random_floats(static_cast<std::size_t>(batch) * d, 1);
  auto emb = test::random_floats(static_cast<std::size_t>(batch) * k * d, 2);
  const float* y = inter->forward(*stream, bottom.data(), emb.data(), batch);
  Vec bd(bottom.begin(), bottom.end()), ed(emb.begin(), emb.end());
  EXPECT_LE(test::worst(y, test::dot_interaction(bd, ed, batch, k, d), 1e-5, 1e-5), 1.0);

  auto g = test::random_floats(static_cast<std::size_t>(batch) * out, 3);
  std::vector<float> gb(bottom.size(), 99.f), ge(emb.size(), 99.f);
  inter->backward(*stream, g.data(), gb.data(), ge.data());
  Vec gb_ref, ge_ref;
  test::dot_interaction_backward(bd, ed, Vec(g.begin(), g.end()), batch, k, d, gb_ref, ge_ref);
  EXPECT_LE(test::worst(gb.data(), gb_ref, 1e-5, 1e-5), 1.0);
  EXPECT_LE(test::worst(ge.data(), ge_ref, 1e-5, 1e-5), 1.0);
}

TEST_P(InteractionVsReference, Cat) {
  auto [k, d, batch, threads] = GetParam();
  test::ScopedParallelThreshold parallel(threads > 1 ? 1 << 12 : std::int64_t(1) << 62);
  auto backend = device::make_backend(device::BackendKind::cpu, threads);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  auto inter = make_interaction(InteractionKind::cat, *backend, pool, k, d, batch);
  int out = (k + 1) * d;
  ASSERT_EQ(inter->out_features(), out);
  auto bottom = test::random_floats(static_cast<std::size_t>(batch) * d, 4);
  auto emb = test::random_floats(static_cast<std::size_t>(batch) * k * d, 5);
  const float* y = inter->forward(*stream, bottom.data(), emb.data(), batch);
  for (int s = 0; s < batch; ++s) {
    for (int c = 0; c < d; ++c) ASSERT_EQ(y[s * out + c], bottom[s * d + c]);
    for (int c = 0; c < k * d; ++c) ASSERT_EQ(y[s * out + d + c], emb[s * k * d + c]);
  }
  auto g = test::random_floats(static_cast<std::size_t>(batch) * out, 6);
  std::vector<float> gb(bottom.size(), 99.f), ge(emb.size(), 99.f);
  inter->backward(*stream, g.data(), gb.data(), ge.data());
  for (int s = 0; s < batch; ++s) {
    for (int c = 0; c < d; ++c) ASSERT_EQ(gb[s * d + c], g[s * out + c]);
    for (int c = 0; c < k * d; ++c) ASSERT_EQ(ge[s * k * d + c], g[s * out + d + c]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, InteractionVsReference,
                         ::testing::Values(InteractionShape{1, 1, 1, 1}, InteractionShape{3, 5, 1, 1},
                                           InteractionShape{26, 16, 37, 1},
                                           InteractionShape{4, 13, 9, 2},
                                           InteractionShape{26, 16, 300, 2},
                                           InteractionShape{0, 7, 3, 1}));

// The portable functors (what CUDA and machines without AVX2 run) against the reference, and the
// CPU-tuned versions against them bit for bit. The tuned kernels run their blocks last to first
// and write into a buffer with guard floats after it, so that a store past a sample's output
// (into the next block's first sample, or past the end) shows.
TEST(Interaction, PortableAndTunedDotKernelsAgree) {
  for (auto [k, d, batch] : {std::tuple{26, 16, 70}, std::tuple{5, 11, 33}, std::tuple{1, 8, 1},
                             std::tuple{8, 19, 40}, std::tuple{0, 3, 2}, std::tuple{2, 4, 65},
                             std::tuple{3, 16, 65}, std::tuple{4, 5, 40}, std::tuple{6, 8, 40}}) {
    const int out = d + (k + 1) * k / 2;
    const int blocks = (batch + kernels::kRowBlock - 1) / kernels::kRowBlock;
    auto bottom = test::random_floats(static_cast<std::size_t>(batch) * d, 41);
    auto emb = test::random_floats(static_cast<std::size_t>(batch) * k * d, 42);
    auto g = test::random_floats(static_cast<std::size_t>(batch) * out, 43);
    const std::size_t per_block =
        std::max(kernels::round_up_lanes(k + 1) * d, (k + 1) * (k + 1));
    std::vector<float> scratch(blocks * per_block, 0.f);
    constexpr int kGuard = 16;
    constexpr float kGuardValue = -12345.f;
    std::vector<float> y_plain(batch * out), y_tuned(batch * out + kGuard, kGuardValue);
    std::vector<float> gb_plain(batch * d), gb_tuned(batch * d), ge_plain(emb.size()),
        ge_tuned(emb.size());
    kernels::DotInteractionForward fp{bottom.data(), emb.data(), y_plain.data(), scratch.data(),
                                      batch, k, d, out};
    kernels::DotInteractionForward ft = fp;
    ft.out = y_tuned.data();
    kernels::DotInteractionBackward bp{bottom.data(),   emb.data(),      g.data(), gb_plain.data(),
                                       ge_plain.data(), scratch.data(), batch,    k,
                                       d,               out};
    kernels::DotInteractionBackward bt = bp;
    bt.grad_bottom = gb_tuned.data();
    bt.grad_emb = ge_tuned.data();
    for (int i = 0; i < blocks; ++i) {
      fp(i);
      bp(i);
    }
    for (int i = blocks - 1; i >= 0; --i) {
      cpu::dot_interaction_forward(ft, i);
      cpu::dot_interaction_backward(bt, i);
    }
    for (int i = 0; i < kGuard; ++i) EXPECT_EQ(y_tuned[batch * out + i], kGuardValue) << "k=" << k << " d=" << d;
    y_tuned.resize(batch * out);
    Vec bd(bottom.begin(), bottom.end()), ed(emb.begin(), emb.end());
    EXPECT_LE(test::worst(y_plain.data(), test::dot_interaction(bd, ed, batch, k, d), 1e-5, 1e-5), 1.0);
    Vec gb_ref, ge_ref;
    test::dot_interaction_backward(bd, ed, Vec(g.begin(), g.end()), batch, k, d, gb_ref, ge_ref);
    EXPECT_LE(test::worst(gb_plain.data(), gb_ref, 1e-5, 1e-5), 1.0);
    EXPECT_LE(test::worst(ge_plain.data(), ge_ref, 1e-5, 1e-5), 1.0);
    EXPECT_EQ(y_plain, y_tuned) << "k=" << k << " d=" << d;
    EXPECT_EQ(gb_plain, gb_tuned) << "k=" << k << " d=" << d;
    EXPECT_EQ(ge_plain, ge_tuned) << "k=" << k << " d=" << d;
  }
  if (!cpu::vector_kernels_available()) GTEST_SKIP() << "no AVX2: only the portable kernels ran";
}

TEST(Interaction, DotOrderIsStrictlyLowerTriangleRowMajor) {
  // k = 2, d = 1: T = [b, e0, e1] = [2, 3, 5]; dots (1,0)=6, (2,0)=10, (2,1)=15.
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  auto inter = make_interaction(InteractionKind::dot, *backend, pool, 2, 1, 1);
  float bottom[1] = {2}, emb[2] = {3, 5};
  const float* y = inter->forward(*stream, bottom, emb, 1);
  EXPECT_EQ(y[0], 2);
  EXPECT_EQ(y[1], 6);
  EXPECT_EQ(y[2], 10);
  EXPECT_EQ(y[3], 15);
}

TEST(Loss, BceMatchesReferenceWithSoftLabelsAndClamping) {
  test::ScopedParallelThreshold parallel(1 << 12);
  auto backend = device::make_backend(device::BackendKind::cpu, 2);
  auto stream = backend->create_stream();
  for (int batch : {1, 5, 1000, 70000}) {
    auto p = test::random_floats(batch, 20 + batch, 0.f, 1.f);
    auto y = test::random_floats(batch, 30 + batch, 0.f, 1.f);
    // Edge cases: p exactly 0 and 1 (clamped logs), hard labels.
    p[0] = 0.f;
    y[0] = batch > 1 ? 1.f : 0.3f;
    if (batch > 2) {
      p[1] = 1.f;
      y[1] = 0.f;
      p[2] = 1.f;
      y[2] = 1.f;
    }
    double want = 0;
    for (int i = 0; i < batch; ++i) want += test::bce_term(p[i], y[i]);
    want /= batch;
    EXPECT_NEAR(bce_loss(*backend, *stream, p.data(), y.data(), batch), want, 1e-9 * std::abs(want));

    const float scale = 1.f / batch;
    std::vector<float> g(batch);
    bce_loss_backward(*backend, *stream, p.data(), y.data(), batch, scale, g.data());
    for (int i = 0; i < batch; ++i) {
      double pp = p[i];
      double want_g = scale * (pp - y[i]) / std::max(pp * (1 - pp), 1e-12);
      ASSERT_NEAR(g[i], want_g, 1e-5 * std::abs(want_g) + 1e-30) << "i=" << i << " p=" << p[i];
    }
  }
  // Hand-worked: p = 0 with label 1 costs exactly 100 (the clamp); p = 0.5 costs log 2.
  float p2[2] = {0.f, 0.5f}, y2[2] = {1.f, 0.25f};
  EXPECT_DOUBLE_EQ(bce_loss(*backend, *stream, p2, y2, 1), 100.0);
  EXPECT_NEAR(bce_loss(*backend, *stream, p2 + 1, y2 + 1, 1), std::log(2.0), 1e-12);
  float g2[2];
  bce_loss_backward(*backend, *stream, p2, y2, 2, 1.f, g2);
  EXPECT_FLOAT_EQ(g2[0], -1e12f);  // (0 - 1) / max(0, 1e-12)
  EXPECT_FLOAT_EQ(g2[1], 1.f);     // (0.5 - 0.25) / 0.25
}

TEST(Errors, BadShapesAndKindsAreConfigErrors) {
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  EXPECT_THROW(Mlp(*backend, pool, "m", {5}, Activation::relu, 1, 4), ConfigError);
  EXPECT_THROW(Mlp(*backend, pool, "m", {5, 0, 3}, Activation::relu, 1, 4), ConfigError);
  EXPECT_THROW(Mlp(*backend, pool, "m", {5, 3}, Activation::relu, 1, 0), ConfigError);
  Mlp mlp(*backend, pool, "m", {5, 3}, Activation::relu, 1, 4);
  std::vector<float> g(12);
  EXPECT_THROW(mlp.backward(*stream, g.data(), true), ConfigError);  // before forward
  std::vector<float> x(40);
  EXPECT_THROW(mlp.forward(*stream, x.data(), 5), ConfigError);  // over max batch
  EXPECT_THROW(mlp.forward(*stream, x.data(), -1), ConfigError);
  EXPECT_THROW(make_interaction(InteractionKind::dot, *backend, pool, 3, 0, 8), ConfigError);
  EXPECT_THROW(make_interaction(InteractionKind::dot, *backend, pool, 3, 4, 0), ConfigError);
  auto inter = make_interaction(InteractionKind::dot, *backend, pool, 3, 4, 8);
  EXPECT_THROW(inter->forward(*stream, x.data(), x.data(), 9), ConfigError);
  EXPECT_THROW(bce_loss(*backend, *stream, x.data(), x.data(), -1), ConfigError);
}

// A data-parallel rank may get no samples at the end of an epoch: it must still produce (zero)
// gradients for the all-reduce.
TEST(Mlp, EmptyBatchGivesZeroGradients) {
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "test");
  auto stream = backend->create_stream();
  Mlp mlp(*backend, pool, "m", {5, 4, 3}, Activation::sigmoid, 1, 4);
  auto x = test::random_floats(20, 1);
  auto g = test::random_floats(12, 2);
  mlp.forward(*stream, x.data(), 4);
  mlp.backward(*stream, g.data(), false);
  mlp.forward(*stream, x.data(), 0);
  EXPECT_NE(mlp.backward(*stream, g.data(), true), nullptr);
  for (auto& p : mlp.parameters())
    for (std::size_t i = 0; i < p.count; ++i) ASSERT_EQ(p.grad[i], 0.f) << p.name;
  auto inter = make_interaction(InteractionKind::dot, *backend, pool, 2, 3, 4);
  inter->forward(*stream, x.data(), x.data(), 0);
  inter->backward(*stream, g.data(), g.data(), g.data());
  EXPECT_EQ(bce_loss(*backend, *stream, x.data(), x.data(), 0), 0.0);
  bce_loss_backward(*backend, *stream, x.data(), x.data(), 0, 1.f, g.data());
}

TEST(Errors, PoolCapacityIsEnforced) {
  auto backend = device::make_backend(device::BackendKind::cpu, 1);
  device::MemoryPool pool(*backend, device::Tier::device, "small", 1 << 16);
  EXPECT_THROW(Mlp(*backend, pool, "m", {512, 512}, Activation::relu, 1, 4), OutOfMemoryError);
  EXPECT_EQ(pool.current_bytes(), 0u);
}

}  // namespace
}  // namespace recmix::mlp

namespace recmix::mlp {
namespace {

// A backend that claims to be CUDA but holds host memory: on a machine without a GPU, every
// mlp kernel launch must fail with one DeviceError (NotCompiledError in a build without CUDA),
// not crash.
class FakeCudaBackend final : public device::Backend {
 public:
  device::BackendKind kind() const override { return device::BackendKind::cuda; }
  std::string description() const override { return "fake cuda"; }
  device::GemmLibrary gemm_library() const override { return device::GemmLibrary::cublas; }
  bool host_accessible(device::Tier tier) const override { return tier == device::Tier::host; }
  bool runs_kernels_on_host() const override { return false; }
  bool runs_fine_items() const override { return true; }
  void* do_allocate(std::size_t bytes, device::Tier) override { return std::malloc(bytes + 64); }
  void do_deallocate(void* p, device::Tier) noexcept override { std::free(p); }
  void do_copy(void* dst, const void* src, std::size_t bytes, device::Stream&) override {
    std::memcpy(dst, src, bytes);
  }
  void do_fill_zero(void* dst, std::size_t bytes, device::Stream&) override { std::memset(dst, 0, bytes); }
  std::unique_ptr<device::Stream> do_create_stream() override { return cpu_->create_stream(); }
  std::unique_ptr<device::Event> do_create_event() override { return cpu_->create_event(); }
  void do_gemm(device::Stream&, bool, bool, int, int, int, float, const float*, int, const float*, int,
            float, float*, int) override {}
  void do_gemm_half(device::Stream&, half::Storage, bool, bool, int, int, int, float, const std::uint16_t*, int, const std::uint16_t*,
                 int, float, float*, int) override {}
  void set_num_threads(int) override {}
  int num_threads() const override { return 1; }

 private:
  std::unique_ptr<device::Backend> cpu_ = device::make_backend(device::BackendKind::cpu, 1);
};

TEST(CudaPath, FailsWithOneClearErrorWithoutAGpu) {
  if (device::cuda_device_available()) GTEST_SKIP() << "a GPU is present";
  FakeCudaBackend backend;
  device::MemoryPool pool(backend, device::Tier::device, "fake");
  EXPECT_THROW(Mlp(backend, pool, "m", {4, 3}, Activation::relu, 1, 2), DeviceError);
  auto stream = backend.create_stream();
  float p[2] = {0.5f, 0.5f}, y[2] = {1.f, 0.f}, g[2], emb[12] = {};
  {
    auto inter = make_interaction(InteractionKind::dot, backend, pool, 2, 3, 2);
    EXPECT_THROW(inter->forward(*stream, emb, emb, 2), DeviceError);
  }
  EXPECT_THROW(bce_loss_backward(backend, *stream, p, y, 2, 1.f, g), DeviceError);
  EXPECT_EQ(pool.current_bytes(), 0u);
}

}  // namespace
}  // namespace recmix::mlp
