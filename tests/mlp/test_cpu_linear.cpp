// The fused linear-layer GEMMs of the CPU backend (mlp/cpu/linear.hpp) against naive double
// references: row counts around the 6-row tile, widths around the 16-column panel, K across the
// 256 block, every activation, the masked input gradient with its column sums, and the same bits
// on one and two threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "mlp/cpu/linear.hpp"
#include "tests/mlp/reference.hpp"

namespace recmix::mlp {
namespace {

struct LinearShape {
  int rows, in, out;
};

void PrintTo(const LinearShape& s, std::ostream* os) {
  *os << s.rows << " rows, " << s.in << " in, " << s.out << " out";
}

std::string shape_name(const testing::TestParamInfo<LinearShape>& info) {
  const LinearShape& s = info.param;
  std::string name = "rows";
  name += std::to_string(s.rows);
  name += "_in";
  name += std::to_string(s.in);
  name += "_out";
  name += std::to_string(s.out);
  return name;
}

class CpuLinear : public testing::TestWithParam<LinearShape> {
 protected:
  void SetUp() override {
    if (!cpu::fused_linear_available()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
  }
};

double activate(double v, Activation act) {
  switch (act) {
    case Activation::relu: return test::relu(v);
    case Activation::sigmoid: return test::sigmoid(v);
    case Activation::none: break;
  }
  return v;
}

TEST_P(CpuLinear, ForwardMatchesReferenceForEveryActivation) {
  const auto [rows, in, out] = GetParam();
  const int ldx = in + 3;  // a row stride wider than the row
  auto x = test::random_floats(static_cast<std::size_t>(rows) * ldx, 1, -2.f, 2.f);
  auto w = test::random_floats(static_cast<std::size_t>(out) * in, 2);
  auto b = test::random_floats(out, 3);
  std::vector<float> pack(cpu::linear_pack_floats(in, out));
  for (Activation act : {Activation::none, Activation::relu, Activation::sigmoid}) {
    std::vector<float> y1(static_cast<std::size_t>(rows) * out + 1, 42.f), y2 = y1;
    cpu::linear_forward(1, rows, in, out, x.data(), ldx, w.data(), b.data(), act, y1.data(), pack.data());
    cpu::linear_forward(2, rows, in, out, x.data(), ldx, w.data(), b.data(), act, y2.data(), pack.data());
    ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0) << "threads change the bits";
    EXPECT_EQ(y1.back(), 42.f) << "wrote past the output";
    double worst = 0;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < out; ++c) {
        double s = b[c];
        for (int k = 0; k < in; ++k) s += double(x[r * ldx + k]) * w[c * in + k];
        const double want = activate(s, act);
        worst = std::max(worst, std::abs(y1[r * out + c] - want) / (1e-5 * (1 + in) + 1e-5 * std::abs(want)));
      }
    EXPECT_LE(worst, 1.0) << "activation " << static_cast<int>(act);
  }
}

TEST_P(CpuLinear, InputGradientMatchesReferenceWithAndWithoutMask) {
  const auto [rows, in, out] = GetParam();
  auto dz = test::random_floats(static_cast<std::size_t>(rows) * out, 4);
  auto w = test::random_floats(static_cast<std::size_t>(out) * in, 5);
  auto y = test::random_floats(static_cast<std::size_t>(rows) * in, 6);  // about half <= 0
  for (std::size_t i = 0; i < y.size(); i += 7) y[i] = 0.f;                // exact zeros are masked too
  std::vector<float> pack(cpu::linear_pack_floats(in, out));
  for (bool masked : {false, true}) {
    std::vector<float> dx1(static_cast<std::size_t>(rows) * in + 1, 42.f), dx2 = dx1;
    std::vector<float> sums1(in + 1, 42.f), sums2 = sums1;
    const float* mask = masked ? y.data() : nullptr;
    cpu::linear_backward_input(1, rows, in, out, dz.data(), w.data(), mask, masked ? sums1.data() : nullptr,
                               dx1.data(), pack.data());
    cpu::linear_backward_input(2, rows, in, out, dz.data(), w.data(), mask, masked ? sums2.data() : nullptr,
                               dx2.data(), pack.data());
    ASSERT_EQ(std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(float)), 0) << "threads change the bits";
    ASSERT_EQ(std::memcmp(sums1.data(), sums2.data(), sums1.size() * sizeof(float)), 0);
    EXPECT_EQ(dx1.back(), 42.f) << "wrote past the gradient";
    EXPECT_EQ(sums1.back(), 42.f) << "wrote past the column sums";
    double worst = 0;
    std::vector<double> sums(in, 0.0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < in; ++c) {
        double s = 0;
        for (int k = 0; k < out; ++k) s += double(dz[r * out + k]) * w[k * in + c];
        if (masked && !(y[r * in + c] > 0.f)) s = 0;
        sums[c] += s;
        worst = std::max(worst, std::abs(dx1[r * in + c] - s) / (1e-5 * (1 + out)));
        if (masked && !(y[r * in + c] > 0.f)) {
          ASSERT_EQ(dx1[r * in + c], 0.f);
        }
      }
    EXPECT_LE(worst, 1.0) << (masked ? "masked" : "plain");
    if (masked) {
      for (int c = 0; c < in; ++c) EXPECT_NEAR(sums1[c], sums[c], 1e-5 * (1 + out) * (1 + rows)) << "column " << c;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CpuLinear,
    testing::Values(LinearShape{1, 1, 1}, LinearShape{1, 13, 512}, LinearShape{5, 13, 17},
                    LinearShape{6, 16, 16}, LinearShape{7, 15, 2}, LinearShape{13, 300, 33},
                    LinearShape{64, 256, 1}, LinearShape{65, 64, 16}, LinearShape{11, 1, 300},
                    LinearShape{3, 513, 15},
                    // big enough (>= 2^21 multiply-adds) for the columns to be split over threads
                    LinearShape{300, 367, 40}, LinearShape{257, 64, 300}),
    shape_name);

TEST(CpuLinear, EmptyBatchClearsTheColumnSums) {
  if (!cpu::fused_linear_available()) GTEST_SKIP() << "no AVX2 and FMA on this CPU";
  std::vector<float> w(12, 1.f), sums(4, 9.f), pack(cpu::linear_pack_floats(4, 3));
  cpu::linear_backward_input(2, 0, 4, 3, nullptr, w.data(), nullptr, sums.data(), nullptr, pack.data());
  for (float s : sums) EXPECT_EQ(s, 0.f);
}

}  // namespace
}  // namespace recmix::mlp
