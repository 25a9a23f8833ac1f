#include "runtime/train/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace recmix::runtime {

double roc_auc(std::span<const float> scores, std::span<const float> labels) {
  const std::size_t n = scores.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Walk groups of tied scores from the lowest up; a positive scores over every negative below
  // its group and half of the negatives inside it.
  double negatives_below = 0, pairs_won = 0, total_pos = 0, total_neg = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i;
    double pos = 0, neg = 0;
    while (j < n && scores[order[j]] == scores[order[i]]) {
      double y = labels[order[j]];
      pos += y;
      neg += 1.0 - y;
      ++j;
    }
    pairs_won += pos * (negatives_below + 0.5 * neg);
    negatives_below += neg;
    total_pos += pos;
    total_neg += neg;
    i = j;
  }
  if (total_pos <= 0 || total_neg <= 0) return std::numeric_limits<double>::quiet_NaN();
  return pairs_won / (total_pos * total_neg);
}

double log_loss(std::span<const float> probs, std::span<const float> labels) {
  if (probs.empty()) return std::numeric_limits<double>::quiet_NaN();
  double sum = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    double p = probs[i], y = labels[i];
    double log_p = std::max(std::log(p), -100.0);
    double log_1mp = std::max(std::log(1.0 - p), -100.0);
    sum -= y * log_p + (1.0 - y) * log_1mp;
  }
  return sum / static_cast<double>(probs.size());
}

}  // namespace recmix::runtime
