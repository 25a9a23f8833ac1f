// The CPU's 16-bit rows (embedding/half_rows_cpu.hpp): the scalar rows against the functors they
// stand for (UpdateRowsHalf::RowWriter, core/half.hpp's conversions), and the vectorised rows
// against the scalar ones, bit for bit: every 16-bit pattern widened, and SGD steps over values
// in and out of fp16's normal range (subnormals, past 65504, zeros, infinities, NaNs), to nearest
// and stochastically, for row lengths with and without a partial vector.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/half.hpp"
#include "embedding/half_kernels.hpp"
#include "embedding/cpu/half_rows.hpp"

using namespace recmix;
using namespace recmix::embedding;
using half::Storage;

namespace {

const Storage kStorages[] = {Storage::fp16, Storage::bf16};
const std::int64_t kLengths[] = {1, 5, 15, 16, 17, 31, 32, 40, 64};

// Values across every case of the conversions: magnitudes from 1e-9 (below fp16's subnormals)
// to 1e6 (past its range), exact zeros, infinities and NaNs.
float any_value(std::mt19937& rng) {
  std::uniform_real_distribution<float> unit(-1.f, 1.f);
  std::uniform_int_distribution<int> decade(-9, 6), special(0, 39);
  switch (special(rng)) {
    case 0: return 0.f;
    case 1: return -0.f;
    case 2: return std::numeric_limits<float>::infinity();
    case 3: return -std::numeric_limits<float>::infinity();
    case 4: return std::numeric_limits<float>::quiet_NaN();
    case 5: return 65504.f;
    case 6: return -65519.f;
    default: return unit(rng) * std::pow(10.f, static_cast<float>(decade(rng)));
  }
}

std::uint16_t to_half(Storage s, float x) { return kernels::float_to_half(s, x, false, 0u); }

kernels::UpdateRowsHalf::RowWriter writer(std::uint16_t* w, Storage s, bool stochastic, int table, std::uint64_t first) {
  return {w, s, stochastic, 0x5eedull, 77, table, first};
}

std::uint32_t bits(float x) { return half::bits_of(x); }

}  // namespace

TEST(HalfRows, ScalarWidenIsTheConversion) {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<std::uint16_t>(h);
  std::vector<float> out(all.size());
  for (Storage s : kStorages) {
    cpu::widen_half_row(s, all.data(), out.data(), static_cast<std::int64_t>(all.size()), false);
    for (std::uint32_t h = 0; h < 65536; ++h)
      ASSERT_EQ(bits(out[h]), bits(kernels::half_to_float(s, all[h]))) << half::to_string(s) << " pattern " << h;
  }
}

TEST(HalfRows, ScalarSgdIsTheRowWriter) {
  std::mt19937 rng(11);
  for (Storage s : kStorages)
    for (bool stochastic : {false, true})
      for (std::int64_t n : kLengths) {
        std::vector<std::uint16_t> row(n), expected(n);
        std::vector<float> g(n);
        for (std::int64_t d = 0; d < n; ++d) row[d] = expected[d] = to_half(s, any_value(rng)), g[d] = any_value(rng);
        const float lr = 0.5f;
        cpu::sgd_half_row(writer(row.data(), s, stochastic, 3, 1000 * n), g.data(), n, lr, false);
        const auto w = writer(expected.data(), s, stochastic, 3, 1000 * n);
        for (std::int64_t d = 0; d < n; ++d) w.write(d, w.read(d) - lr * (0.f + g[d]));
        for (std::int64_t d = 0; d < n; ++d)
          ASSERT_EQ(row[d], expected[d]) << half::to_string(s) << (stochastic ? " stochastic" : " nearest") << " n " << n
                                         << " element " << d;
      }
}

TEST(HalfRows, VectorisedWidenEqualsScalar) {
  if (!cpu::half_rows_vectorised()) GTEST_SKIP() << "no AVX-512 (F, DQ, BW, VL) with F16C on this CPU";
  std::vector<std::uint16_t> all(65536 + 64);
  for (std::uint32_t h = 0; h < all.size(); ++h) all[h] = static_cast<std::uint16_t>(h * 40503u);  // all 2^16
  for (Storage s : kStorages) {
    std::vector<float> vec(all.size()), ref(all.size());
    cpu::widen_half_row(s, all.data(), vec.data(), static_cast<std::int64_t>(all.size()), true);
    cpu::widen_half_row(s, all.data(), ref.data(), static_cast<std::int64_t>(all.size()), false);
    for (std::size_t i = 0; i < all.size(); ++i)
      ASSERT_EQ(bits(vec[i]), bits(ref[i])) << half::to_string(s) << " pattern " << all[i];
    // Short rows: a partial vector writes its own elements and nothing past them.
    for (std::int64_t n : kLengths) {
      std::vector<float> out(n + 1, 7.f);
      cpu::widen_half_row(s, all.data() + 3, out.data(), n, true);
      for (std::int64_t d = 0; d < n; ++d) ASSERT_EQ(bits(out[d]), bits(ref[3 + d])) << "n " << n;
      EXPECT_EQ(out[n], 7.f) << "n " << n;
    }
  }
}

TEST(HalfRows, VectorisedSgdEqualsScalar) {
  if (!cpu::half_rows_vectorised()) GTEST_SKIP() << "no AVX-512 (F, DQ, BW, VL) with F16C on this CPU";
  std::mt19937 rng(12);
  std::size_t general_lanes = 0, checked = 0;
  for (Storage s : kStorages)
    for (bool stochastic : {false, true})
      for (float lr : {0.01f, 1.f, 1000.f})
        for (std::int64_t n : kLengths)
          for (int rep = 0; rep < 40; ++rep) {
            std::vector<std::uint16_t> vec(n + 1), ref(n + 1);
            std::vector<float> g(n);
            for (std::int64_t d = 0; d < n; ++d) {
              vec[d] = ref[d] = to_half(s, any_value(rng));
              g[d] = any_value(rng);
            }
            vec[n] = ref[n] = 0x1234;  // past the row: untouched
            const std::uint64_t first = static_cast<std::uint64_t>(rep) * static_cast<std::uint64_t>(n) + 5;
            cpu::sgd_half_row(writer(vec.data(), s, stochastic, rep % 4, first), g.data(), n, lr, true);
            cpu::sgd_half_row(writer(ref.data(), s, stochastic, rep % 4, first), g.data(), n, lr, false);
            for (std::int64_t d = 0; d <= n; ++d) {
              ASSERT_EQ(vec[d], ref[d]) << half::to_string(s) << (stochastic ? " stochastic" : " nearest") << " lr " << lr
                                        << " n " << n << " element " << d;
              const float x = kernels::half_to_float(s, ref[d]);
              general_lanes += s == Storage::fp16 && !(std::fabs(x) >= 6.103515625e-05f && std::fabs(x) < 65536.f);
            }
            checked += static_cast<std::size_t>(n);
          }
  // The values reach fp16's general routine (subnormals, zeros, infinities, NaNs) often.
  EXPECT_GT(general_lanes, checked / 20);
}
