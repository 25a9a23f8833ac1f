// Backend::gemm_half, bf16 and fp16, on every backend (CPU with oneDNN and with OpenBLAS, the
// strict emulator, CUDA where a GPU is present) against a double-precision GEMM of the same 16-bit
// values, within the error bound of fp32 accumulation, and against a double-precision GEMM of the
// fp32 values before they were rounded to 16 bits, within the bound that rounding adds.
//
// The bounds (u: fp32's unit roundoff, 2^-24; gamma_j = j u / (1 - j u)):
// 1. Against the 16-bit values. A product of two bf16 values (8-bit significands) has at most 16
//    significant bits, of two fp16 values (11-bit) at most 22, so it is exact in fp32 (the values
//    here are far from under- and overflow; an fp16 subnormal has fewer bits still).
//    A sum of k exact products in fp32, in any order, is within gamma_(k-1) S of the exact sum,
//    S = sum_l |a_il b_lj| (Higham, Accuracy and Stability of Numerical Algorithms, 3.1). Scaling
//    by alpha, rounding beta c and adding the two are three more roundings, so the computed
//        c' = alpha (A B)_ij + beta c_ij + e,  |e| <= gamma_(k+1) |alpha| S + gamma_2 |beta c_ij|.
//    gamma_(k+1) also covers an implementation that scales A by alpha first (a rounding of each
//    alpha a_il, after which the products are no longer exact, in place of rounding alpha times
//    the sum). On CUDA the bound takes u = 2^-23: tensor cores align and add products with
//    truncation, not rounding to nearest (Fasi et al., "Numerical behavior of NVIDIA tensor
//    cores", PeerJ Comput. Sci. 7:e330, 2021), and truncation errs by less than 2^-23 relatively.
// 2. Against the fp32 values x before rounding. Rounding to p significant bits (bf16 8, fp16 11),
//    to nearest, gives x (1 + d) with |d| <= 2^-p, so a product of two rounded values is a_il b_lj
//    (1 + d_a) (1 + d_b), within (2 2^-p + 2^-2p) |a_il b_lj| of the product of the fp32 values.
//    Summed and scaled by alpha, this adds |alpha| (2^(1-p) + 2^-2p) S_fp32 to bound 1 (c is
//    fp32 in both). (An fp16 subnormal errs by at most 2^-25 absolutely, which is within the same
//    bound for the values here, uniform in (-1, 1).)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/half.hpp"
#include "device/backend.hpp"

using namespace recmix;
using namespace recmix::device;

namespace {

// A backend under test: every backend whose gemm_half has an implementation of its own.
struct Target {
  const char* name;
  BackendKind kind;
  CpuGemm gemm;
};

void PrintTo(const Target& t, std::ostream* os) { *os << t.name; }

using half::Storage;

std::uint16_t encode(Storage type, float x) {
  return type == Storage::bf16 ? half::float_to_bf16(x) : half::float_to_fp16(x);
}
double decode(Storage type, std::uint16_t h) {
  return type == Storage::bf16 ? half::bf16_to_float(h) : half::fp16_to_float(h);
}

const Target kTargets[] = {
    {"cpu_onednn", BackendKind::cpu, CpuGemm::onednn},
    {"cpu_openblas", BackendKind::cpu, CpuGemm::openblas},
    {"cpu_strict", BackendKind::cpu_strict, CpuGemm::automatic},
    {"cuda", BackendKind::cuda, CpuGemm::automatic},
};

// One GEMM: C[m x n] = alpha op(A) op(B) + beta C, row-major, every matrix stored with `pad`
// elements past the end of each row.
struct Case {
  bool trans_a, trans_b;
  int m, n, k, pad;
  float alpha, beta;
  int a_rows() const { return trans_a ? k : m; }
  int a_cols() const { return trans_a ? m : k; }
  int b_rows() const { return trans_b ? n : k; }
  int b_cols() const { return trans_b ? k : n; }
  int lda() const { return a_cols() + pad; }
  int ldb() const { return b_cols() + pad; }
  int ldc() const { return n + pad; }
  std::string describe() const {
    return fmt::format("{}x{}x{}{}{} pad {} alpha {} beta {}", m, n, k, trans_a ? " A^T" : "", trans_b ? " B^T" : "",
                       pad, alpha, beta);
  }
};

// What C's padding holds before and must hold after: the GEMM does not write it.
constexpr float kPadding = 7.f;

// The operands on the host: the fp32 values, their roundings to `type` (A's and B's padding
// holds a 16-bit NaN, which reaches C if the GEMM reads it), and C before the GEMM.
struct Operands {
  Storage type;
  std::vector<float> a32, b32;
  std::vector<std::uint16_t> a16, b16;
  std::vector<float> c;
};

Operands make_operands(const Case& g, std::uint32_t seed, Storage type = Storage::bf16) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  const std::uint16_t nan16 = encode(type, std::numeric_limits<float>::quiet_NaN());
  Operands o;
  o.type = type;
  auto fill = [&](int rows, int cols, int ld, std::vector<float>& x32, std::vector<std::uint16_t>& x16) {
    x32.assign(std::size_t(std::max(rows * ld, 1)), 0.f);
    x16.assign(x32.size(), nan16);
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        x32[std::size_t(i) * ld + j] = u(rng);
        x16[std::size_t(i) * ld + j] = encode(type, x32[std::size_t(i) * ld + j]);
      }
  };
  fill(g.a_rows(), g.a_cols(), g.lda(), o.a32, o.a16);
  fill(g.b_rows(), g.b_cols(), g.ldb(), o.b32, o.b16);
  // beta = 0: C holds NaN, which must not survive (C is written without being read).
  o.c.assign(std::size_t(std::max(g.m * g.ldc(), 1)), kPadding);
  for (int i = 0; i < g.m; ++i)
    for (int j = 0; j < g.n; ++j)
      o.c[std::size_t(i) * g.ldc() + j] = g.beta == 0.f ? std::numeric_limits<float>::quiet_NaN() : u(rng);
  return o;
}

// Device memory of `backend` holding `host`, written and read back through backend.copy (the
// strict emulator's device memory cannot be touched otherwise).
template <typename T>
class DeviceArray {
 public:
  DeviceArray(Backend& backend, Stream& stream, const std::vector<T>& host)
      : backend_(backend), stream_(stream), size_(host.size()) {
    data_ = static_cast<T*>(backend_.allocate(bytes(), Tier::device));
    backend_.copy(data_, host.data(), bytes(), stream_);
    stream_.synchronize();
  }
  ~DeviceArray() { backend_.deallocate(data_, Tier::device); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* data() { return data_; }
  std::vector<T> to_host() {
    std::vector<T> host(size_);
    backend_.copy(host.data(), data_, bytes(), stream_);
    stream_.synchronize();
    return host;
  }

 private:
  std::size_t bytes() const { return size_ * sizeof(T); }
  Backend& backend_;
  Stream& stream_;
  std::size_t size_;
  T* data_ = nullptr;
};

// C after backend.gemm_half with the operands in device memory.
std::vector<float> run_on(Backend& backend, const Case& g, const Operands& o) {
  auto stream = backend.create_stream();
  DeviceArray<std::uint16_t> a(backend, *stream, o.a16), b(backend, *stream, o.b16);
  DeviceArray<float> c(backend, *stream, o.c);
  backend.gemm_half(*stream, o.type, g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, a.data(), g.lda(), b.data(),
                    g.ldb(), g.beta, c.data(), g.ldc());
  return c.to_host();
}

double gamma(int j, double u) { return j * u / (1 - j * u); }

// Elements of `result` outside the bounds (the file's comment) for `g`; the first one described
// in `first`. `check_trans_a` and `check_trans_b` are the transposes the reference takes (those of
// `g` but where a test asks for a wrong answer).
int count_outside(const Case& g, const Operands& o, const std::vector<float>& result, double u, std::string& first,
                  bool check_trans_a, bool check_trans_b) {
  int outside = 0;
  auto report = [&](int i, int j, const std::string& what) {
    if (outside++ == 0) first = fmt::format("{}: C[{}][{}] {}", g.describe(), i, j, what);
  };
  const int p = o.type == Storage::bf16 ? 8 : 11;  // significant bits
  const double rounding = 2 * std::ldexp(1.0, -p) + std::ldexp(1.0, -2 * p);
  for (int i = 0; i < g.m; ++i) {
    for (int j = 0; j < g.n; ++j) {
      double sum16 = 0, abs16 = 0, sum32 = 0, abs32 = 0;
      for (int l = 0; l < g.k; ++l) {
        const std::size_t ai = check_trans_a ? std::size_t(l) * g.lda() + i : std::size_t(i) * g.lda() + l;
        const std::size_t bi = check_trans_b ? std::size_t(j) * g.ldb() + l : std::size_t(l) * g.ldb() + j;
        const double p16 = decode(o.type, o.a16[ai]) * decode(o.type, o.b16[bi]);
        const double p32 = double(o.a32[ai]) * o.b32[bi];
        sum16 += p16;
        abs16 += std::fabs(p16);
        sum32 += p32;
        abs32 += std::fabs(p32);
      }
      const double c0 = g.beta == 0.f ? 0.0 : o.c[std::size_t(i) * g.ldc() + j];
      const double got = result[std::size_t(i) * g.ldc() + j];
      const double alpha = std::fabs(double(g.alpha)), beta_c = std::fabs(g.beta * c0);
      const double bound16 = gamma(g.k + 1, u) * alpha * abs16 + gamma(2, u) * beta_c;
      const double bound32 = bound16 + alpha * rounding * abs32;
      const double want16 = g.alpha * sum16 + g.beta * c0, want32 = g.alpha * sum32 + g.beta * c0;
      if (!(std::fabs(got - want16) <= bound16))
        report(i, j, fmt::format("= {:.9g}, the 16-bit reference {:.9g} +- {:.3g}", got, want16, bound16));
      else if (!(std::fabs(got - want32) <= bound32))
        report(i, j, fmt::format("= {:.9g}, the fp32 reference {:.9g} +- {:.3g}", got, want32, bound32));
    }
    for (int j = g.n; j < g.ldc(); ++j)
      if (result[std::size_t(i) * g.ldc() + j] != kPadding) report(i, j, "(padding) was written");
  }
  return outside;
}

// Shapes: k = 0 and 1, k odd, one row or one column of C, the DLRM's, and one over 2^24
// multiply-adds (the CPU backend's oneDNN threshold for using all its threads).
struct Shape {
  int m, n, k, pad;
};
const Shape kShapes[] = {{1, 1, 1, 0},    {7, 5, 1, 3},     {6, 4, 0, 1},     {13, 29, 31, 2},  {1, 40, 19, 5},
                         {33, 1, 17, 4},  {1, 1, 257, 1},   {70, 90, 5, 0},   {64, 48, 256, 8}, {300, 256, 256, 1}};
struct Scalars {
  float alpha, beta;
};
const Scalars kScalars[] = {{1.f, 0.f}, {-0.75f, 0.f}, {0.5f, 1.f}, {1.25f, -0.375f}};

class HalfGemm : public testing::TestWithParam<std::tuple<Target, Storage>> {
 protected:
  void SetUp() override {
    const Target& t = target();
    if (t.gemm == CpuGemm::onednn && !onednn_compiled()) GTEST_SKIP() << "built without oneDNN";
    if (t.kind == BackendKind::cuda && !cuda_compiled()) GTEST_SKIP() << "built without CUDA";
    if (t.kind == BackendKind::cuda && !cuda_device_available()) GTEST_SKIP() << "no CUDA device present";
    backend_ = make_backend(t.kind, 2, t.gemm);
  }
  const Target& target() const { return std::get<0>(GetParam()); }
  Storage type() const { return std::get<1>(GetParam()); }
  double unit_roundoff() const { return target().kind == BackendKind::cuda ? 0x1p-23 : 0x1p-24; }
  std::unique_ptr<Backend> backend_;
};

TEST_P(HalfGemm, MatchesTheReferenceWithinTheFp32AccumulationBound) {
  int cases = 0;
  for (const Shape& s : kShapes) {
#ifdef RECMIX_SANITIZED
    // The shape over 2^24 multiply-adds checks the threaded path's rounding, which the optimised
    // build covers; instrumented, its double references take a minute per target.
    if (std::int64_t(s.m) * s.n * s.k > (std::int64_t(1) << 24)) {
      cases += 4 * static_cast<int>(std::size(kScalars));  // the transposes times the scalars
      continue;
    }
#endif
    for (int t = 0; t < 4; ++t)
      for (const Scalars& sc : kScalars) {
        const Case g{(t & 1) != 0, (t & 2) != 0, s.m, s.n, s.k, s.pad, sc.alpha, sc.beta};
        const Operands o = make_operands(g, std::uint32_t(s.m * 131 + s.n * 7 + s.k + t * 1000), type());
        const std::vector<float> result = run_on(*backend_, g, o);
        std::string first;
        const int outside = count_outside(g, o, result, unit_roundoff(), first, g.trans_a, g.trans_b);
        EXPECT_EQ(outside, 0) << first;
        ++cases;
      }
  }
  EXPECT_EQ(cases, 160);
  std::cout << "[ INFO     ] " << backend_->description() << ": " << half::to_string(type()) << " GEMM "
            << to_string(backend_->last_half_gemm_path()) << "\n";
}

// Which way the GEMM ran. RECMIX_EXPECT_ONEDNN_BF16_PATH, where set, names the oneDNN backend's
// for bf16 (tests/device/CMakeLists.txt runs these tests once with oneDNN limited to AVX2, where
// oneDNN 2.6 has no bf16 matmul and the call runs widened). fp16 runs widened on every CPU:
// oneDNN 2.6 has no fp16 matmul there.
TEST_P(HalfGemm, ReportsTheWayItRan) {
  EXPECT_EQ(backend_->last_half_gemm_path(), HalfGemmPath::none);
  const Case g{false, true, 16, 24, 40, 0, 1.f, 0.f};
  const Operands o = make_operands(g, 11, type());
  std::string first;
  EXPECT_EQ(count_outside(g, o, run_on(*backend_, g, o), unit_roundoff(), first, false, true), 0) << first;
  const HalfGemmPath path = backend_->last_half_gemm_path();
  const char* expected = std::getenv("RECMIX_EXPECT_ONEDNN_BF16_PATH");
  switch (backend_->kind()) {
    case BackendKind::cuda:
      EXPECT_EQ(path, HalfGemmPath::native);
      break;
    case BackendKind::cpu:
    case BackendKind::cpu_strict:
      if (backend_->gemm_library() == GemmLibrary::openblas || type() == Storage::fp16)
        EXPECT_EQ(path, HalfGemmPath::widened);
      else if (expected)
        EXPECT_EQ(to_string(path), expected);
      else
        EXPECT_EQ(path, cpu_has_avx512_bf16() ? HalfGemmPath::native : HalfGemmPath::emulated)
            << "oneDNN's bf16 matmul on a CPU with AVX-512 (this backend's oneDNN GEMM is chosen or asked for)";
      break;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, HalfGemm,
                         testing::Combine(testing::ValuesIn(kTargets), testing::Values(Storage::bf16, Storage::fp16)),
                         [](const auto& info) {
                           return fmt::format("{}_{}", std::get<0>(info.param).name,
                                              half::to_string(std::get<1>(info.param)));
                         });

// fp32 is not a 16-bit operand type.
TEST(HalfGemmCheck, RefusesFp32Operands) {
  auto backend = make_backend(BackendKind::cpu, 1);
  auto stream = backend->create_stream();
  std::uint16_t a = 0, b = 0;
  float c = 0;
  EXPECT_THROW(backend->gemm_half(*stream, Storage::fp32, false, false, 1, 1, 1, 1.f, &a, 1, &b, 1, 0.f, &c, 1),
               ConfigError);
}

// The check can fail: the product with A transposed where it should not be (a square case, so the
// shapes agree) is far outside the bound, on every element but a few.
TEST(HalfGemmCheck, RejectsAWrongAnswer) {
  auto backend = make_backend(BackendKind::cpu, 1, CpuGemm::openblas);
  const Case g{false, false, 24, 24, 24, 1, 0.5f, 1.f};
  const Operands o = make_operands(g, 3);
  const std::vector<float> result = run_on(*backend, g, o);
  std::string first;
  EXPECT_EQ(count_outside(g, o, result, 0x1p-24, first, false, false), 0) << first;
  EXPECT_GT(count_outside(g, o, result, 0x1p-24, first, true, false), 24 * 24 - 24);
  EXPECT_GT(count_outside(g, o, result, 0x1p-24, first, false, true), 24 * 24 - 24);
}

// The strict emulator takes device memory only.
TEST(HalfGemmStrict, RefusesHostMemoryAndOverruns) {
  auto backend = make_backend(BackendKind::cpu_strict, 1);
  auto stream = backend->create_stream();
  const Case g{false, false, 8, 8, 8, 0, 1.f, 0.f};
  const Operands o = make_operands(g, 5);
  DeviceArray<std::uint16_t> a(*backend, *stream, o.a16), b(*backend, *stream, o.b16);
  DeviceArray<float> c(*backend, *stream, o.c);
  std::vector<std::uint16_t> host_a = o.a16;
  EXPECT_THROW(backend->gemm_half(*stream, Storage::bf16, false, false, 8, 8, 8, 1.f, host_a.data(), 8, b.data(), 8, 0.f,
                                  c.data(), 8),
               DeviceError);
  // ldc 200 puts C's last row 5.6 kB from its start, past its allocation (one 4 kB page).
  EXPECT_THROW(backend->gemm_half(*stream, Storage::bf16, false, false, 8, 8, 8, 1.f, a.data(), 8, b.data(), 8, 0.f, c.data(),
                                  200),
               DeviceError);
  EXPECT_NO_THROW(
      backend->gemm_half(*stream, Storage::bf16, false, false, 8, 8, 8, 1.f, a.data(), 8, b.data(), 8, 0.f, c.data(), 8));
}

}  // namespace
