#include "embedding/sparse_optimizer.hpp"

#include <cmath>

#include "core/error.hpp"

namespace recmix::embedding {

SparseOptimizerKind parse_sparse_optimizer(const SparseOptimizerConfig& c) {
  SparseOptimizerKind kind;
  if (c.kind == "sgd")
    kind = SparseOptimizerKind::sgd;
  else if (c.kind == "adagrad")
    kind = SparseOptimizerKind::adagrad;
  else if (c.kind == "rowwise_adagrad")
    kind = SparseOptimizerKind::rowwise_adagrad;
  else
    throw ConfigError("sparse optimizer kind '" + c.kind +
                      "' is unknown (expected sgd, adagrad or rowwise_adagrad)");
  RECMIX_REQUIRE(std::isfinite(c.lr) && c.lr >= 0.f, ConfigError,
                 "sparse optimizer lr must be finite and >= 0, got " + std::to_string(c.lr));
  RECMIX_REQUIRE(std::isfinite(c.eps) && c.eps >= 0.f, ConfigError,
                 "sparse optimizer eps must be finite and >= 0, got " + std::to_string(c.eps));
  RECMIX_REQUIRE(std::isfinite(c.initial_accumulator) && c.initial_accumulator >= 0.f, ConfigError,
                 "sparse optimizer initial_accumulator must be finite and >= 0, got " +
                     std::to_string(c.initial_accumulator));
  return kind;
}

std::size_t state_per_row(SparseOptimizerKind kind, int dim) {
  switch (kind) {
    case SparseOptimizerKind::sgd: return 0;
    case SparseOptimizerKind::adagrad: return static_cast<std::size_t>(dim);
    case SparseOptimizerKind::rowwise_adagrad: return 1;
  }
  return 0;
}

const char* state_name(SparseOptimizerKind kind) {
  switch (kind) {
    case SparseOptimizerKind::sgd: return "";
    case SparseOptimizerKind::adagrad: return "adagrad_sum";
    case SparseOptimizerKind::rowwise_adagrad: return "rowwise_adagrad_sum";
  }
  return "";
}

}  // namespace recmix::embedding
