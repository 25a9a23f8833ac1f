// 16-bit storage conversions against exhaustive and double-precision references: every fp16 and
// bf16 pattern survives a round trip through fp32; rounding to nearest picks the nearest value
// (ties to even) of all finite 16-bit values, overflow included; stochastic rounding returns one
// of the two neighbours, is unbiased, and is a pure function of its key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/half.hpp"
#include "core/random.hpp"

namespace recmix::half {
namespace {

using ToFloat = float (*)(std::uint16_t);

// Every finite non-negative value of a 16-bit format, ascending, with its pattern.
std::vector<std::pair<double, std::uint16_t>> finite_values(ToFloat to_float) {
  std::vector<std::pair<double, std::uint16_t>> v;
  for (std::uint32_t h = 0; h < 0x8000u; ++h) {
    const float f = to_float(static_cast<std::uint16_t>(h));
    if (std::isfinite(f)) v.push_back({f, static_cast<std::uint16_t>(h)});
  }
  std::sort(v.begin(), v.end());
  return v;
}

// Round to nearest, ties to even, of |x| by search over every finite value: the pattern, or
// 0x7c00 / 0x7f80 (infinity) when |x| is at least the largest value plus half its step.
std::uint16_t nearest(const std::vector<std::pair<double, std::uint16_t>>& values, double x, std::uint16_t inf) {
  const double max = values.back().first, prev = values[values.size() - 2].first;
  if (x >= max + (max - prev) / 2) return inf;
  auto hi = std::lower_bound(values.begin(), values.end(), std::pair{x, std::uint16_t{0}});
  if (hi == values.end()) return values.back().second;
  if (hi->first == x || hi == values.begin()) return hi->second;
  auto lo = hi - 1;
  const double dl = x - lo->first, dh = hi->first - x;
  if (dl < dh) return lo->second;
  if (dh < dl) return hi->second;
  return (lo->second & 1) ? hi->second : lo->second;
}

TEST(Half, EveryPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const auto p = static_cast<std::uint16_t>(h);
    const float f16 = fp16_to_float(p), b16 = bf16_to_float(p);
    if (std::isnan(f16)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f16)))) << h;
    } else {
      EXPECT_EQ(float_to_fp16(f16), p) << std::hex << h;
    }
    if (std::isnan(b16)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(b16)))) << h;
    } else {
      EXPECT_EQ(float_to_bf16(b16), p) << std::hex << h;
    }
  }
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
}

// Random fp32 bit patterns over every exponent, plus each midpoint between neighbours (ties).
std::vector<float> probes(const std::vector<std::pair<double, std::uint16_t>>& values) {
  std::vector<float> x;
  random::CounterRng rng(3);
  for (int i = 0; i < 300000; ++i) {
    const float f = float_of(static_cast<std::uint32_t>(rng.next_u64()) & 0x7fffffffu);
    if (std::isfinite(f)) x.push_back(f);
  }
  for (int i = 0; i < 200000; ++i)  // the fp16 range densely
    x.push_back(static_cast<float>(std::ldexp(rng.next_uniform01(), static_cast<int>(rng.next_below(44)) - 28)));
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const double mid = (values[i].first + values[i + 1].first) / 2;
    if (static_cast<double>(static_cast<float>(mid)) == mid) x.push_back(static_cast<float>(mid));
  }
  return x;
}

TEST(Half, RoundToNearestEvenMatchesTheNearestValue) {
  for (auto [to_float, from_float, inf, name] :
       {std::tuple{&fp16_to_float, &float_to_fp16, std::uint16_t{0x7c00}, "fp16"},
        std::tuple{&bf16_to_float, &float_to_bf16, std::uint16_t{0x7f80}, "bf16"}}) {
    const auto values = finite_values(to_float);
    int wrong = 0;
    for (float x : probes(values)) {
      const std::uint16_t want = nearest(values, x, inf);
      if (from_float(x) != want || from_float(-x) != (want | 0x8000u)) {
        if (++wrong < 5) ADD_FAILURE() << name << ": " << x << " gave " << std::hex << from_float(x) << ", want " << want;
      }
    }
    EXPECT_EQ(wrong, 0) << name;
    EXPECT_TRUE(std::isnan(to_float(from_float(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_EQ(from_float(std::numeric_limits<float>::infinity()), inf);
  }
}

TEST(Half, StochasticRoundingIsUnbiasedAndKeyed) {
  struct Format {
    ToFloat to_float;
    std::uint16_t (*round)(float, std::uint32_t);
    const char* name;
  };
  for (const Format& f : {Format{&fp16_to_float, &float_to_fp16_stochastic, "fp16"},
                          Format{&bf16_to_float, &float_to_bf16_stochastic, "bf16"}}) {
    const auto values = finite_values(f.to_float);
    random::CounterRng rng(9);
    for (int probe = 0; probe < 40; ++probe) {
      // A value strictly between two neighbours lo < x < hi, in the normal and subnormal range.
      const std::size_t i = 1 + rng.next_below(values.size() - 3);
      const double lo = values[i].first, hi = values[i + 1].first;
      const float x = static_cast<float>(lo + (hi - lo) * (0.05 + 0.9 * rng.next_uniform01()));
      if (!(x > lo && x < hi)) continue;
      const int n = 20000;
      double sum = 0;
      for (int k = 0; k < n; ++k) {
        const std::uint16_t r = f.round(x, rounding_bits(1, 0, k, 7));
        const double v = f.to_float(r);
        ASSERT_TRUE(v == lo || v == hi) << f.name << " " << x << " -> " << v;
        sum += v;
      }
      // The mean of n draws is x within 5 standard deviations of a Bernoulli mean.
      const double p = (x - lo) / (hi - lo), sd = (hi - lo) * std::sqrt(p * (1 - p) / n);
      EXPECT_NEAR(sum / n, x, 5 * sd + 1e-12 * hi) << f.name << " " << x;
    }
    // Saturation, signs, specials.
    EXPECT_EQ(f.to_float(f.round(-f.to_float(values[5].second), 123)), -f.to_float(values[5].second));
    EXPECT_TRUE(std::isinf(f.to_float(f.round(std::numeric_limits<float>::infinity(), 0))));
  }
  EXPECT_EQ(fp16_to_float(float_to_fp16_stochastic(65535.0f, 0xffffffffu)), 65504.0f);
  EXPECT_EQ(fp16_to_float(float_to_fp16_stochastic(65535.0f, 0)), 65504.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16_stochastic(std::numeric_limits<float>::max(), 0xffffu)),
            bf16_to_float(0x7f7f));
  // The key: the same (seed, table, step, element) gives the same bits; any change, others.
  EXPECT_EQ(rounding_bits(5, 2, 100, 77), rounding_bits(5, 2, 100, 77));
  EXPECT_NE(rounding_bits(5, 2, 100, 77), rounding_bits(6, 2, 100, 77));
  EXPECT_NE(rounding_bits(5, 2, 100, 77), rounding_bits(5, 3, 100, 77));
  EXPECT_NE(rounding_bits(5, 2, 100, 77), rounding_bits(5, 2, 101, 77));
  EXPECT_NE(rounding_bits(5, 2, 100, 77), rounding_bits(5, 2, 100, 78));
}

}  // namespace
}  // namespace recmix::half
