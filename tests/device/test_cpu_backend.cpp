#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "device/backend.hpp"
#include "device/launch.hpp"

using namespace recmix::device;

namespace {

// Naive row-major reference for C = alpha op(A) op(B) + beta C.
void reference_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& a,
                    int lda, const std::vector<float>& b, int ldb, float beta, std::vector<float>& c,
                    int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int p = 0; p < k; ++p) {
        float av = ta ? a[p * lda + i] : a[i * lda + p];
        float bv = tb ? b[j * ldb + p] : b[p * ldb + j];
        s += double(av) * bv;
      }
      c[i * ldc + j] = float(alpha * s + beta * c[i * ldc + j]);
    }
}

}  // namespace

class GemmShapes : public testing::TestWithParam<std::tuple<int, int, int, bool, bool>> {};

TEST_P(GemmShapes, MatchesNaiveReference) {
  auto [m, n, k, ta, tb] = GetParam();
  auto backend = make_backend(BackendKind::cpu, 2);
  auto stream = backend->create_stream();
  std::mt19937 rng(m * 131 + n * 7 + k);
  std::uniform_real_distribution<float> u(-1, 1);
  // Leading dimensions wider than the matrices, so that strides are exercised.
  int lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 3, ldc = n + 1;
  std::vector<float> a(std::max(1, (ta ? k : m) * lda)), b(std::max(1, (tb ? n : k) * ldb)),
      c(std::max(1, m * ldc));
  for (auto& x : a) x = u(rng);
  for (auto& x : b) x = u(rng);
  for (auto& x : c) x = u(rng);
  std::vector<float> expected = c;
  reference_gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.25f, expected, ldc);
  backend->gemm(*stream, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.25f, c.data(), ldc);
  for (int i = 0; i < m * ldc; ++i) ASSERT_NEAR(c[i], expected[i], 1e-4f * (1 + k)) << "at " << i;

  // beta = 0 overwrites C whatever it holds (NaN included); the padding is left alone.
  std::vector<float> c0(c.size(), std::numeric_limits<float>::quiet_NaN());
  for (int i = 0; i < m; ++i)
    for (int j = n; j < ldc; ++j) c0[i * ldc + j] = 7.f;
  std::vector<float> expected0(c.size(), 0.f);
  reference_gemm(ta, tb, m, n, k, 0.5f, a, lda, b, ldb, 0.f, expected0, ldc);
  backend->gemm(*stream, ta, tb, m, n, k, 0.5f, a.data(), lda, b.data(), ldb, 0.f, c0.data(), ldc);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < ldc; ++j) {
      if (j < n)
        ASSERT_NEAR(c0[i * ldc + j], expected0[i * ldc + j], 1e-4f * (1 + k)) << "beta 0 at " << i << "," << j;
      else
        ASSERT_EQ(c0[i * ldc + j], 7.f) << "padding at " << i << "," << j;
    }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmShapes,
                         testing::Values(std::make_tuple(1, 1, 1, false, false),
                                         std::make_tuple(1, 17, 13, false, true),
                                         std::make_tuple(33, 1, 7, true, false),
                                         std::make_tuple(64, 16, 256, false, true),
                                         std::make_tuple(13, 29, 31, true, true),
                                         std::make_tuple(128, 512, 13, false, false),
                                         // one row or one column of C (the matrix-vector path)
                                         std::make_tuple(1, 300, 257, false, false),
                                         std::make_tuple(1, 300, 257, true, true),
                                         std::make_tuple(1, 19, 40, true, false),
                                         std::make_tuple(257, 1, 300, false, true),
                                         std::make_tuple(257, 1, 300, true, false),
                                         std::make_tuple(40, 1, 19, true, true),
                                         std::make_tuple(1, 1, 1000, false, false)));

TEST(CpuBackend, ParallelForVisitsEveryIndexOnce) {
  for (int threads : {1, 2}) {
    std::vector<int> hits(10007, 0);
    int* h = hits.data();
    recmix::device::cpu::parallel_for(threads, static_cast<std::int64_t>(hits.size()), [h](std::int64_t i) { h[i] += 1; }, 1);
    for (int x : hits) ASSERT_EQ(x, 1);
  }
}

TEST(CpuBackend, CopyAndZeroAcrossTiers) {
  auto backend = make_backend(BackendKind::cpu);
  auto stream = backend->create_stream();
  auto* d = static_cast<float*>(backend->allocate(16 * sizeof(float), Tier::device));
  auto* h = static_cast<float*>(backend->allocate(16 * sizeof(float), Tier::host));
  for (int i = 0; i < 16; ++i) h[i] = float(i);
  backend->copy(d, h, 16 * sizeof(float), *stream);
  backend->fill_zero(h, 16 * sizeof(float), *stream);
  stream->synchronize();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(d[i], float(i));
    EXPECT_EQ(h[i], 0.0f);
  }
  backend->deallocate(d, Tier::device);
  backend->deallocate(h, Tier::host);
}
