#pragma once
// The optimizers a job can pick, named once for every layer that needs them: mlp/ and embedding/
// run them, sched/ sizes their state, the job spec parses their names (runtime/train/job_spec.cpp
// is the only place a name becomes one of these). Here, below all of them, because sched/ shares
// no layer with mlp/ and embedding/ but this one.
#include <cstddef>

namespace recmix {

// The MLPs' optimizers, with torch semantics (mlp/dense_optimizer.hpp).
enum class DenseOptimizerKind { sgd, adagrad, adam };

// The embedding tables' optimizers: Adagrad keeps one accumulator per element, row-wise Adagrad
// one per row (as in FBGEMM). The values are the kernels' (embedding/kernels.hpp).
enum class SparseOptimizerKind : int { sgd = 0, adagrad = 1, rowwise_adagrad = 2 };

// Optimizer state values held per dense parameter: SGD 0, Adagrad 1 accumulator, Adam 2 moments.
constexpr int dense_state_per_param(DenseOptimizerKind kind) {
  switch (kind) {
    case DenseOptimizerKind::sgd: return 0;
    case DenseOptimizerKind::adagrad: return 1;
    case DenseOptimizerKind::adam: return 2;
  }
  return 0;
}

// Optimizer state values per embedding row of width dim: 0 (SGD), dim (Adagrad), 1 (row-wise).
constexpr std::size_t sparse_state_per_row(SparseOptimizerKind kind, int dim) {
  switch (kind) {
    case SparseOptimizerKind::sgd: return 0;
    case SparseOptimizerKind::adagrad: return static_cast<std::size_t>(dim);
    case SparseOptimizerKind::rowwise_adagrad: return 1;
  }
  return 0;
}

}  // namespace recmix
