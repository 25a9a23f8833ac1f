// The CPU backend's vectorised bf16 operand rounding (mlp/cpu_bf16.hpp) against the scalar
// routine (half::float_to_bf16) and the portable functors: the same bits for every bf16 pattern
// with the dropped halves that decide a rounding, for ragged lengths, and through the bias +
// activation forward and the activation backward, and through the cross network's two passes.
// Skipped without AVX-512.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.hpp"
#include "mlp/cpu/bf16.hpp"

using namespace recmix;
using namespace recmix::mlp;

namespace {

float float_of(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

void skip_without_avx512() {
  if (!cpu::bf16_rounding_vectorised()) GTEST_SKIP() << "this CPU has no AVX-512";
}

}  // namespace

TEST(CpuBf16Rounding, EveryPatternAsTheScalarRoutine) {
  skip_without_avx512();
  // Every upper half (NaNs, infinities, subnormals, both signs included) with the lower halves
  // that round down, to even, up, and carry into the exponent.
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x7fff, 0x8000, 0x8001, 0xc000, 0xffff};
  std::vector<float> src;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi)
    for (std::uint32_t lo : lows) src.push_back(float_of(hi << 16 | lo));
  std::vector<std::uint16_t> scalar(src.size()), vector(src.size());
  cpu::round_to_bf16(src.data(), scalar.data(), static_cast<std::int64_t>(src.size()), false);
  cpu::round_to_bf16(src.data(), vector.data(), static_cast<std::int64_t>(src.size()), true);
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::uint32_t b;
    std::memcpy(&b, &src[i], sizeof b);
    ASSERT_EQ(scalar[i], half::float_to_bf16(src[i]));
    ASSERT_EQ(vector[i], scalar[i]) << std::hex << "input bits 0x" << b;
  }
}

TEST(CpuBf16Rounding, RaggedLengthsWriteNothingPastTheEnd) {
  skip_without_avx512();
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (int n = 0; n <= 40; ++n) {
    std::vector<float> src(n);
    for (auto& x : src) x = normal(gen);
    std::vector<std::uint16_t> got(n + 8, 0xabcd), want(n + 8, 0xabcd);
    cpu::round_to_bf16(src.data(), want.data(), n, false);
    cpu::round_to_bf16(src.data(), got.data(), n, true);
    EXPECT_EQ(got, want) << "n = " << n;
  }
}

// Both passes with rows not a multiple of the row block, every activation: the vectorised
// rounding after the block gives what the functor's own per-element rounding gives, and the fp32
// outputs (y, dz, the bias-gradient partials) are untouched by it.
TEST(CpuBf16Rounding, ActivationPassesMatchThePortableFunctors) {
  skip_without_avx512();
  constexpr int rows = 75, cols = 37;
  const kernels::Index blocks = (rows + kernels::kRowBlock - 1) / kernels::kRowBlock;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.f, 2.f);
  std::vector<float> y0(rows * cols), bias(cols), dz0(rows * cols);
  for (auto& x : y0) x = normal(gen);
  for (auto& x : bias) x = normal(gen);
  for (auto& x : dz0) x = normal(gen);
  for (auto act : {Activation::none, Activation::relu, Activation::sigmoid}) {
    std::vector<float> y_ref = y0, y_got = y0;
    std::vector<std::uint16_t> y16_ref(rows * cols), y16_got(rows * cols);
    kernels::BiasActivationForward ref{y_ref.data(), bias.data(), rows, cols, act, y16_ref.data()};
    kernels::BiasActivationForward got{y_got.data(), bias.data(), rows, cols, act, y16_got.data()};
    for (kernels::Index b = 0; b < blocks; ++b) {
      ref(b);
      cpu::run_rounded(got, b, true);
    }
    EXPECT_EQ(y_got, y_ref);
    EXPECT_EQ(y16_got, y16_ref);

    std::vector<float> dz_ref = dz0, dz_got = dz0, part_ref(blocks * cols), part_got(blocks * cols);
    std::vector<std::uint16_t> dz16_ref(rows * cols), dz16_got(rows * cols);
    kernels::ActivationBackward bref{dz_ref.data(), y_ref.data(), part_ref.data(), rows, cols, act, dz16_ref.data()};
    kernels::ActivationBackward bgot{dz_got.data(), y_ref.data(), part_got.data(), rows, cols, act, dz16_got.data()};
    for (kernels::Index b = 0; b < blocks; ++b) {
      bref(b);
      cpu::run_rounded(bgot, b, true);
    }
    EXPECT_EQ(dz_got, dz_ref);
    EXPECT_EQ(part_got, part_ref);
    EXPECT_EQ(dz16_got, dz16_ref);
  }
}

// The cross network's two passes (mlp/cross_kernels.hpp), rows not a multiple of the row block:
// the vectorised rounding after each block gives the functor's own bits, and leaves its fp32
// outputs (x_next and v; dv, g, x0's gradient and the bias partial sums) as the functor writes them.
TEST(CpuBf16Rounding, CrossPassesMatchThePortableFunctors) {
  skip_without_avx512();
  constexpr int rows = 75, n = 37;
  const kernels::Index blocks = (rows + kernels::kRowBlock - 1) / kernels::kRowBlock;
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.f, 2.f);
  auto random = [&](std::size_t count) {
    std::vector<float> v(count);
    for (auto& x : v) x = normal(gen);
    return v;
  };
  const auto v0 = random(rows * n), bias = random(n), x0 = random(rows * n), x = random(rows * n),
             g = random(rows * n), gx0_start = random(rows * n);
  std::vector<float> v_ref = v0, v_got = v0, next_ref(rows * n), next_got(rows * n);
  std::vector<std::uint16_t> next16_ref(rows * n), next16_got(rows * n);
  kernels::CrossCombine ref{v_ref.data(), bias.data(), x0.data(), x.data(), next_ref.data(), rows, n, next16_ref.data()};
  kernels::CrossCombine got{v_got.data(), bias.data(), x0.data(), x.data(), next_got.data(), rows, n, next16_got.data()};
  for (kernels::Index b = 0; b < blocks; ++b) {
    ref(b);
    cpu::run_rounded(got, b, true);
  }
  EXPECT_EQ(v_got, v_ref);
  EXPECT_EQ(next_got, next_ref);
  EXPECT_EQ(next16_got, next16_ref);

  for (bool first : {false, true}) {
    std::vector<float> go_ref(rows * n), go_got(rows * n), dv_ref(rows * n), dv_got(rows * n);
    std::vector<float> gx_ref = gx0_start, gx_got = gx0_start, part_ref(blocks * n), part_got(blocks * n);
    std::vector<std::uint16_t> dv16_ref(rows * n), dv16_got(rows * n);
    kernels::CrossGradient gref{g.data(), go_ref.data(), x0.data(), v_ref.data(), dv_ref.data(), gx_ref.data(),
                                part_ref.data(), rows, n, first, !first, dv16_ref.data()};
    kernels::CrossGradient ggot{g.data(), go_got.data(), x0.data(), v_ref.data(), dv_got.data(), gx_got.data(),
                                part_got.data(), rows, n, first, !first, dv16_got.data()};
    for (kernels::Index b = 0; b < blocks; ++b) {
      gref(b);
      cpu::run_rounded(ggot, b, true);
    }
    EXPECT_EQ(go_got, go_ref);
    EXPECT_EQ(dv_got, dv_ref);
    EXPECT_EQ(gx_got, gx_ref);
    EXPECT_EQ(part_got, part_ref);
    EXPECT_EQ(dv16_got, dv16_ref);
  }
}
