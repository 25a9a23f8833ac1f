#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/train/metrics.hpp"

using namespace recmix::runtime;

namespace {
// Brute force over all (positive, negative) pairs, soft labels as weights, ties count one half.
double pairwise_auc(const std::vector<float>& s, const std::vector<float>& y) {
  double won = 0, pos = 0, neg = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    pos += y[i];
    neg += 1 - y[i];
    for (std::size_t j = 0; j < s.size(); ++j) {
      double w = double(y[i]) * (1 - y[j]);
      if (s[i] > s[j]) won += w;
      else if (s[i] == s[j]) won += 0.5 * w;
    }
  }
  return won / (pos * neg);
}
}  // namespace

TEST(Metrics, AucByHand) {
  // Positives at 0.9 and 0.4, negatives at 0.5 and 0.1: pairs won (0.9>0.5, 0.9>0.1, 0.4>0.1) = 3 of 4.
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.9f, 0.5f, 0.4f, 0.1f}, std::vector<float>{1, 0, 1, 0}), 0.75);
  // A tie between a positive and a negative counts one half.
  EXPECT_DOUBLE_EQ(roc_auc(std::vector<float>{0.5f, 0.5f}, std::vector<float>{1, 0}), 0.5);
  EXPECT_TRUE(std::isnan(roc_auc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 1})));
}

TEST(Metrics, AucMatchesPairwiseCountWithTiesAndSoftLabels) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    int n = 1 + rng() % 200;
    std::vector<float> s(n), y(n);
    for (int i = 0; i < n; ++i) {
      s[i] = float(rng() % 17) / 16.0f;  // many ties
      y[i] = trial % 2 ? float(rng() % 2) : float(rng() % 5) / 4.0f;
    }
    double expected = pairwise_auc(s, y);
    double got = roc_auc(s, y);
    if (std::isnan(expected)) EXPECT_TRUE(std::isnan(got));
    else EXPECT_NEAR(got, expected, 1e-12);
  }
}

TEST(Metrics, LogLossByHandAndClamped) {
  EXPECT_NEAR(log_loss(std::vector<float>{0.8f, 0.25f}, std::vector<float>{1, 0}),
              -(std::log(0.8) + std::log(0.75)) / 2, 1e-6);
  // p = 0 with label 1 is clamped at 100, not infinite.
  EXPECT_NEAR(log_loss(std::vector<float>{0.0f}, std::vector<float>{1}), 100.0, 1e-9);
}
