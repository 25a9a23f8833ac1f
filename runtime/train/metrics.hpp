#pragma once
// Evaluation metrics computed exactly (no histogram approximation): ROC AUC by the rank-sum
// (Mann-Whitney) statistic with ties counted as one half, and mean log loss. Soft labels in
// [0, 1] count as a weight y positive and 1 - y negative.
#include <span>

namespace recmix::runtime {

// Returns NaN when there are no positives or no negatives.
double roc_auc(std::span<const float> scores, std::span<const float> labels);
// Mean binary cross-entropy with log terms clamped at -100 (as the training loss).
double log_loss(std::span<const float> probs, std::span<const float> labels);

}  // namespace recmix::runtime
