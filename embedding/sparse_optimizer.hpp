#pragma once
// Sparse optimizers for embedding rows: SGD, Adagrad (one accumulator per element) and row-wise
// Adagrad (one accumulator per row, as in FBGEMM). Only the rows of a batch are updated, each once,
// with its gradients summed over the batch first (embedding/kernels.hpp holds the update itself).
#include <cstddef>
#include <cstdint>

#include "core/optimizer_kind.hpp"

namespace recmix::embedding {

using recmix::SparseOptimizerKind;  // sgd | adagrad | rowwise_adagrad (core/optimizer_kind.hpp)

struct SparseOptimizerConfig {
  SparseOptimizerKind kind = SparseOptimizerKind::sgd;
  float lr = 0.01f;
  float eps = 1e-8f;
  float initial_accumulator = 0.f;
};

// Checks the values (the kind is typed, so any kind is one of the three); ConfigError naming the
// value that is negative or not finite.
void check_sparse_optimizer(const SparseOptimizerConfig& config);

// Optimizer state elements per table row: 0 (SGD), dim (Adagrad), 1 (row-wise Adagrad).
std::size_t state_per_row(SparseOptimizerKind kind, int dim);

// Name of the state in checkpoints ("" when there is none).
const char* state_name(SparseOptimizerKind kind);

}  // namespace recmix::embedding
