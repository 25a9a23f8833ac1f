#include "embedding/sparse_optimizer.hpp"

#include <cmath>
#include <string>

#include "core/error.hpp"

namespace recmix::embedding {

void check_sparse_optimizer(const SparseOptimizerConfig& c) {
  RECMIX_REQUIRE(std::isfinite(c.lr) && c.lr >= 0.f, ConfigError,
                 "sparse optimizer lr must be finite and >= 0, got " + std::to_string(c.lr));
  RECMIX_REQUIRE(std::isfinite(c.eps) && c.eps >= 0.f, ConfigError,
                 "sparse optimizer eps must be finite and >= 0, got " + std::to_string(c.eps));
  RECMIX_REQUIRE(std::isfinite(c.initial_accumulator) && c.initial_accumulator >= 0.f, ConfigError,
                 "sparse optimizer initial_accumulator must be finite and >= 0, got " +
                     std::to_string(c.initial_accumulator));
}

std::size_t state_per_row(SparseOptimizerKind kind, int dim) { return sparse_state_per_row(kind, dim); }

const char* state_name(SparseOptimizerKind kind) {
  switch (kind) {
    case SparseOptimizerKind::sgd: return "";
    case SparseOptimizerKind::adagrad: return "adagrad_sum";
    case SparseOptimizerKind::rowwise_adagrad: return "rowwise_adagrad_sum";
  }
  return "";
}

}  // namespace recmix::embedding
