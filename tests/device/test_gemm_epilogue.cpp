// Backend::gemm_epilogue on every backend that has it (the CPU backend's and the strict
// emulator's host pass, CUDA's cuBLASLt where a GPU is present): bias, bias+ReLU and the bias
// gradient against a double-precision reference, within the fp32 GEMM's error bound; on the
// host-run backends also bit for bit against gemm() followed by the epilogue as the unfused MLP
// step computes it.
//
// Bound: with u = 2^-23 (covering both the CPU's 2^-24 and a GPU's sums) and S = sum_l |a_il b_lj|,
// alpha AB + beta C + bias is within gamma_(k+3) (|alpha| S + |beta c| + |bias|) of the exact
// value (Higham 3.1), and ReLU only moves a value toward the exact one's side of zero. A bias
// gradient of k terms is within gamma_k sum |a|.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "device/backend.hpp"

using namespace recmix;
using namespace recmix::device;

namespace {

struct EpilogueCase {
  bool ta, tb;
  int m, n, k;
  float alpha, beta;
};

class GemmEpilogues : public testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (GetParam() == BackendKind::cuda && !cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
    backend_ = make_backend(GetParam(), 2);
    stream_ = backend_->create_stream();
  }
  void TearDown() override {
    for (void* p : owned_) backend_->deallocate(p, Tier::device);
  }
  float* upload(const std::vector<float>& x) {
    auto* p = static_cast<float*>(backend_->allocate(std::max<std::size_t>(x.size(), 1) * sizeof(float), Tier::device));
    owned_.push_back(p);
    backend_->copy(p, x.data(), x.size() * sizeof(float), *stream_);
    return p;
  }
  std::vector<float> download(const float* p, std::size_t n) {
    std::vector<float> x(n);
    backend_->copy(x.data(), p, n * sizeof(float), *stream_);
    stream_->synchronize();
    return x;
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Stream> stream_;
  std::vector<void*> owned_;
};

std::vector<float> random_floats(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

TEST_P(GemmEpilogues, MatchTheReferenceAndTheUnfusedSteps) {
  const bool host_run = backend_->runs_kernels_on_host();
  const double u = 0x1p-23;
  std::mt19937_64 rng(5);
  // The MLP's two shapes (forward: x W^T; weight gradient: dz^T x) and the other transposes.
  const EpilogueCase cases[] = {{false, true, 96, 64, 37, 1.f, 0.f},  {true, false, 64, 37, 96, 1.f, 0.f},
                                {true, false, 64, 37, 96, -0.01f, 1.f}, {false, false, 33, 17, 70, 0.5f, 0.25f},
                                {true, true, 16, 24, 8, 2.f, 0.f},     {false, true, 1, 512, 13, 1.f, 0.f}};
  for (const EpilogueCase& g : cases)
    for (GemmEpilogue e : {GemmEpilogue::bias, GemmEpilogue::bias_relu, GemmEpilogue::bias_gradient}) {
      SCOPED_TRACE(testing::Message() << to_string(e) << ", " << (g.ta ? "T" : "N") << (g.tb ? "T" : "N") << " m "
                                      << g.m << " n " << g.n << " k " << g.k << " alpha " << g.alpha << " beta "
                                      << g.beta);
      const int lda = g.ta ? g.m : g.k, ldb = g.tb ? g.k : g.n, ldc = g.n;
      const auto a = random_floats(static_cast<std::size_t>(g.m) * g.k, rng);
      const auto b = random_floats(static_cast<std::size_t>(g.k) * g.n, rng);
      const auto c0 = random_floats(static_cast<std::size_t>(g.m) * g.n, rng);
      const bool gradient = e == GemmEpilogue::bias_gradient;
      const auto bias0 = random_floats(gradient ? g.m : g.n, rng);
      float* da = upload(a);
      float* db = upload(b);
      float* dc = upload(c0);
      float* dbias = upload(bias0);
      backend_->gemm_epilogue(*stream_, g.ta, g.tb, g.m, g.n, g.k, g.alpha, da, lda, db, ldb, g.beta, dc, ldc, e, dbias);
      const auto c = download(dc, c0.size());
      const auto bias = download(dbias, bias0.size());
      if (GetParam() == BackendKind::cuda)
        RecordProperty("fused", backend_->last_epilogue_fused() ? "yes" : "no (cuBLAS and a kernel)");

      auto op_a = [&](int i, int l) { return a[g.ta ? static_cast<std::size_t>(l) * lda + i : static_cast<std::size_t>(i) * lda + l]; };
      auto op_b = [&](int l, int j) { return b[g.tb ? static_cast<std::size_t>(j) * ldb + l : static_cast<std::size_t>(l) * ldb + j]; };
      for (int i = 0; i < g.m; ++i)
        for (int j = 0; j < g.n; ++j) {
          double exact = 0, s = 0;
          for (int l = 0; l < g.k; ++l) {
            exact += static_cast<double>(op_a(i, l)) * op_b(l, j);
            s += std::fabs(static_cast<double>(op_a(i, l)) * op_b(l, j));
          }
          const double cij = c0[static_cast<std::size_t>(i) * ldc + j];
          exact = g.alpha * exact + g.beta * cij;
          double bound_terms = std::fabs(g.alpha) * s + std::fabs(g.beta * cij);
          if (!gradient) {
            exact += bias0[j];
            bound_terms += std::fabs(bias0[j]);
          }
          if (e == GemmEpilogue::bias_relu) exact = std::max(exact, 0.0);
          const double gamma = (g.k + 3) * u / (1 - (g.k + 3) * u);
          ASSERT_LE(std::fabs(c[static_cast<std::size_t>(i) * ldc + j] - exact), gamma * bound_terms + 1e-30)
              << "C[" << i << ", " << j << "]";
        }
      if (gradient)
        for (int i = 0; i < g.m; ++i) {
          double exact = 0, s = 0;
          for (int l = 0; l < g.k; ++l) exact += op_a(i, l), s += std::fabs(op_a(i, l));
          ASSERT_LE(std::fabs(bias[i] - exact), g.k * u / (1 - g.k * u) * s + 1e-30) << "bias gradient " << i;
        }
      if (!host_run) continue;
      // The unfused steps: gemm(), then the MLP's bias and activation pass or its blocked column sums.
      float* dc2 = upload(c0);
      backend_->gemm(*stream_, g.ta, g.tb, g.m, g.n, g.k, g.alpha, da, lda, db, ldb, g.beta, dc2, ldc);
      auto c2 = download(dc2, c0.size());
      if (!gradient)
        for (int i = 0; i < g.m; ++i)
          for (int j = 0; j < g.n; ++j) {
            float& x = c2[static_cast<std::size_t>(i) * ldc + j];
            const float v = x + bias0[j];
            x = e == GemmEpilogue::bias_relu ? (v > 0.f ? v : 0.f) : v;
          }
      EXPECT_EQ(std::memcmp(c.data(), c2.data(), c.size() * sizeof(float)), 0) << "C against gemm() and the pass";
      if (gradient)
        for (int i = 0; i < g.m; ++i) {
          float total = 0.f;
          for (int k0 = 0; k0 < g.k; k0 += kEpilogueSumBlock) {
            float block = 0.f;
            for (int l = k0; l < std::min(g.k, k0 + kEpilogueSumBlock); ++l) block += op_a(i, l);
            total += block;
          }
          EXPECT_EQ(bias[i], total) << "bias gradient " << i << " against the blocked sums";
        }
    }
}

TEST_P(GemmEpilogues, CountOneLaunchAndCapture) {
  if (!backend_->supports_graphs()) GTEST_SKIP() << "no graphs on this backend";
  std::mt19937_64 rng(6);
  const int m = 64, n = 32, k = 48;
  const auto a = random_floats(m * k, rng), b = random_floats(n * k, rng), bias = random_floats(n, rng);
  float* da = upload(a);
  float* db = upload(b);
  float* db_ = upload(bias);
  float* eager = upload(std::vector<float>(m * n, 0.f));
  float* replayed = upload(std::vector<float>(m * n, 0.f));
  const auto before = backend_->counters().snapshot().launches;
  backend_->gemm_epilogue(*stream_, false, true, m, n, k, 1.f, da, k, db, k, 0.f, eager, n, GemmEpilogue::bias_relu, db_);
  EXPECT_EQ(backend_->counters().snapshot().launches - before, 1u);
  backend_->begin_capture(*stream_);
  backend_->gemm_epilogue(*stream_, false, true, m, n, k, 1.f, da, k, db, k, 0.f, replayed, n, GemmEpilogue::bias_relu,
                          db_);
  auto graph = backend_->end_capture(*stream_);
  graph->launch(*stream_);
  const auto x = download(eager, m * n), y = download(replayed, m * n);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, GemmEpilogues,
                         testing::Values(BackendKind::cpu, BackendKind::cpu_strict, BackendKind::cuda),
                         [](const auto& info) { return std::string(to_string(info.param)) == "cpu-strict" ? std::string("cpu_strict") : std::string(to_string(info.param)); });

}  // namespace
