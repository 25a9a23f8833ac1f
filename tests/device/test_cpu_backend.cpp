#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <limits>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
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

struct GemmShape {
  int m, n, k;
  bool ta, tb;
};

void PrintTo(const GemmShape& s, std::ostream* os) {
  *os << s.m << "x" << s.n << "x" << s.k << (s.ta ? " A^T" : "") << (s.tb ? " B^T" : "");
}
namespace recmix::device {
void PrintTo(CpuGemm g, std::ostream* os) { *os << to_string(g); }
}  // namespace recmix::device

// Every shape on every GEMM library the CPU backend can use.
std::string gemm_case_name(const testing::TestParamInfo<std::tuple<GemmShape, CpuGemm>>& info) {
  const GemmShape& s = std::get<0>(info.param);
  return std::string(to_string(std::get<1>(info.param))) + "_" + std::to_string(s.m) + "x" + std::to_string(s.n) +
         "x" + std::to_string(s.k) + (s.ta ? "_At" : "") + (s.tb ? "_Bt" : "");
}

class GemmShapes : public testing::TestWithParam<std::tuple<GemmShape, CpuGemm>> {};

TEST_P(GemmShapes, MatchesNaiveReference) {
  auto [shape, library] = GetParam();
  auto [m, n, k, ta, tb] = shape;
  if (library == CpuGemm::onednn && !onednn_compiled()) GTEST_SKIP() << "built without oneDNN";
  auto backend = make_backend(BackendKind::cpu, 2, library);
  EXPECT_EQ(backend->gemm_library(), library == CpuGemm::onednn ? GemmLibrary::onednn : GemmLibrary::openblas);
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

INSTANTIATE_TEST_SUITE_P(
    Shapes, GemmShapes,
    testing::Combine(testing::Values(GemmShape{1, 1, 1, false, false}, GemmShape{1, 17, 13, false, true},
                                     GemmShape{33, 1, 7, true, false}, GemmShape{64, 16, 256, false, true},
                                     GemmShape{13, 29, 31, true, true}, GemmShape{128, 512, 13, false, false},
                                     // the DLRM's shapes at a replica's rows: forward, weight and input gradient
                                     GemmShape{300, 64, 256, false, true}, GemmShape{64, 256, 300, true, false},
                                     GemmShape{300, 256, 64, false, false},
                                     // over 2^24 multiply-adds: oneDNN on the backend's 2 threads
                                     GemmShape{300, 256, 256, false, true}, GemmShape{256, 300, 256, true, false},
                                     // K under 8: an outer product (OpenBLAS on either library)
                                     GemmShape{70, 90, 1, false, false}, GemmShape{70, 90, 5, true, true},
                                     // one row or one column of C (the matrix-vector path)
                                     GemmShape{1, 300, 257, false, false}, GemmShape{1, 300, 257, true, true},
                                     GemmShape{1, 19, 40, true, false}, GemmShape{257, 1, 300, false, true},
                                     GemmShape{257, 1, 300, true, false}, GemmShape{40, 1, 19, true, true},
                                     GemmShape{1, 1, 1000, false, false}),
                     testing::Values(CpuGemm::openblas, CpuGemm::onednn)),
    gemm_case_name);

// Whether /proc/cpuinfo lists every AVX-512 subset oneDNN's choice asks for (read independently
// of the backend, which asks the compiler's CPU detection); false where there is no such file.
bool cpuinfo_lists_avx512() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    for (const char* f : {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"})
      if (!flags.count(f)) return false;
    return true;
  }
  return false;
}

TEST(CpuBackend, AutomaticGemmIsOneDnnExactlyWhereBuiltWithItAndTheCpuHasAvx512) {
  auto backend = make_backend(BackendKind::cpu, 1);
  EXPECT_EQ(backend->gemm_library(), automatic_cpu_gemm());
  const bool expect_onednn = onednn_compiled() && cpuinfo_lists_avx512();
  EXPECT_EQ(automatic_cpu_gemm(), expect_onednn ? GemmLibrary::onednn : GemmLibrary::openblas);
  EXPECT_NE(backend->description().find(std::string(to_string(backend->gemm_library()))), std::string::npos)
      << backend->description();
}

// The GEMM's thread count belongs to the backend, whichever thread calls it (the dense replicas
// call one-thread backends from threads of their own while the process runs with more).
TEST(CpuBackend, GemmFromAnotherThreadMatchesTheReference) {
  for (CpuGemm library : {CpuGemm::openblas, CpuGemm::onednn}) {
    if (library == CpuGemm::onednn && !onednn_compiled()) continue;
    auto one = make_backend(BackendKind::cpu, 1, library);
    const int m = 96, n = 80, k = 72;
    std::vector<float> a(m * k), b(k * n), c(m * n, 0.f), expected(m * n, 0.f);
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1, 1);
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    reference_gemm(false, false, m, n, k, 1.f, a, k, b, n, 0.f, expected, n);
    std::thread t([&] {
      auto stream = one->create_stream();
      one->gemm(*stream, false, false, m, n, k, 1.f, a.data(), k, b.data(), n, 0.f, c.data(), n);
    });
    t.join();
    for (int i = 0; i < m * n; ++i) ASSERT_NEAR(c[i], expected[i], 1e-4f * (1 + k)) << to_string(library) << " at " << i;
  }
}

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
