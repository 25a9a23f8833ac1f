// The two decompositions of each dense kernel (device/fine_grained.hpp): the CPU's block items
// and the GPU's fine items, run here on the host over the same inputs, must give the same bits.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "device/fine_grained.hpp"
#include "mlp/kernels.hpp"

using namespace recmix;
using namespace recmix::mlp;
using kernels::Index;

namespace {

std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

// Runs f over `items` block items, then a copy of the state over the fine items: make(state)
// builds the functor on one copy of the state.
template <class Make>
void check(Index items, std::vector<std::vector<float>> state, Make make, const char* what) {
  auto coarse = state, fine = state;
  auto fc = make(coarse);
  for (Index i = 0; i < items; ++i) fc(i);
  auto ff = make(fine);
  static_assert(device::FineGrained<decltype(ff)>);
  const device::FineItems<decltype(ff)> run{ff};
  for (Index i = 0; i < ff.fine_items(items); ++i) run(i);
  for (std::size_t k = 0; k < state.size(); ++k) expect_same_bits(coarse[k], fine[k], what);
}

Index row_blocks(int rows) { return (rows + kernels::kRowBlock - 1) / kernels::kRowBlock; }
Index flat_blocks(Index n) { return (n + kernels::kFlatBlock - 1) / kernels::kFlatBlock; }

TEST(FineKernels, BiasActivationAndItsBackward) {
  const int rows = 77, cols = 13;  // a partial last block
  for (auto act : {Activation::none, Activation::relu, Activation::sigmoid}) {
    check(row_blocks(rows), {random_floats(rows * cols, 1), random_floats(cols, 2)},
          [&](auto& s) { return kernels::BiasActivationForward{s[0].data(), s[1].data(), rows, cols, act}; },
          "bias + activation");
    check(row_blocks(rows),
          {random_floats(rows * cols, 3), random_floats(rows * cols, 4, 0.f, 1.f),
           std::vector<float>(row_blocks(rows) * cols, 7.f)},
          [&](auto& s) {
            return kernels::ActivationBackward{s[0].data(), s[1].data(), s[2].data(), rows, cols, act};
          },
          "activation backward");
    // With their bf16 copies (for bf16 GEMMs), held in a float vector of half the length.
    const std::vector<float> half_copy((rows * cols + 1) / 2, 0.f);
    auto bits16 = [](std::vector<float>& v) { return reinterpret_cast<std::uint16_t*>(v.data()); };
    check(row_blocks(rows), {random_floats(rows * cols, 1), random_floats(cols, 2), half_copy},
          [&](auto& s) {
            return kernels::BiasActivationForward{s[0].data(), s[1].data(), rows, cols, act, bits16(s[2])};
          },
          "bias + activation, bf16 copy");
    check(row_blocks(rows),
          {random_floats(rows * cols, 3), random_floats(rows * cols, 4, 0.f, 1.f),
           std::vector<float>(row_blocks(rows) * cols, 7.f), half_copy},
          [&](auto& s) {
            return kernels::ActivationBackward{s[0].data(), s[1].data(), s[2].data(), rows, cols, act, bits16(s[3])};
          },
          "activation backward, bf16 copy");
  }
}

TEST(FineKernels, Interactions) {
  const int batch = 45, k = 5, d = 6, out_cols = d + (k + 1) * k / 2;
  const auto bottom = random_floats(batch * d, 5), emb = random_floats(batch * k * d, 6);
  check(row_blocks(batch), {bottom, emb, std::vector<float>(batch * out_cols, 0.f)},
        [&](auto& s) {
          return kernels::DotInteractionForward{s[0].data(), s[1].data(), s[2].data(), nullptr, batch, k, d, out_cols};
        },
        "dot forward");
  std::vector<float> scratch(row_blocks(batch) * (k + 1) * (k + 1));
  check(row_blocks(batch),
        {bottom, emb, random_floats(batch * out_cols, 7), std::vector<float>(batch * d),
         std::vector<float>(batch * k * d)},
        [&](auto& s) {
          return kernels::DotInteractionBackward{s[0].data(), s[1].data(), s[2].data(), s[3].data(),
                                                 s[4].data(), scratch.data(), batch, k, d, out_cols};
        },
        "dot backward");
  check(batch, {bottom, emb, std::vector<float>(batch * (k + 1) * d)},
        [&](auto& s) { return kernels::CatInteractionForward{s[0].data(), s[1].data(), s[2].data(), k, d}; },
        "cat forward");
  check(batch,
        {random_floats(batch * (k + 1) * d, 8), std::vector<float>(batch * d), std::vector<float>(batch * k * d)},
        [&](auto& s) { return kernels::CatInteractionBackward{s[0].data(), s[1].data(), s[2].data(), k, d}; },
        "cat backward");
}

TEST(FineKernels, OptimizersFillAndInit) {
  const Index n = 2 * kernels::kFlatBlock + 123;
  const auto value = random_floats(n, 9), grad = random_floats(n, 10);
  check(flat_blocks(n), {value, grad},
        [&](auto& s) { return kernels::SgdStep{s[0].data(), s[1].data(), n, 0.1f}; }, "sgd");
  check(flat_blocks(n), {value, grad, random_floats(n, 11, 0.f, 1.f)},
        [&](auto& s) { return kernels::AdagradStep{s[0].data(), s[1].data(), s[2].data(), n, 0.1f, 1e-8f}; },
        "adagrad");
  check(flat_blocks(n), {value, grad, random_floats(n, 12), random_floats(n, 13, 0.f, 1.f), {0.01f, 0.3f}},
        [&](auto& s) {
          return kernels::AdamStep{s[0].data(), s[1].data(), s[2].data(), s[3].data(), n,
                                   0.9f,        0.999f,      1e-8f,       s[4].data()};
        },
        "adam");
  check(flat_blocks(n), {value}, [&](auto& s) { return kernels::Fill{s[0].data(), n, 0.5f}; }, "fill");
  check(flat_blocks(n), {value},
        [&](auto& s) { return kernels::InitRandom{s[0].data(), n, 42, 3, kernels::InitDistribution::normal, 0.01f}; }, "normal init");
  check(flat_blocks(n), {value},
        [&](auto& s) { return kernels::InitRandom{s[0].data(), n, 42, 3, kernels::InitDistribution::uniform, 0.01f}; }, "uniform init");
}

}  // namespace
