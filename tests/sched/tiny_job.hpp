#pragma once
// The tiny DLRM the estimator and profile tests work out by hand: 2 tables (10 and 6 rows,
// dim 4), bottom MLP 3-8-4, top MLP 5-1, global batch 6.
#include "sched/memory_estimator.hpp"

namespace recmix::sched::test {

inline JobSpec tiny_job(Optimizer dense, SparseOptimizer sparse) {
  JobSpec s;
  s.name = "tiny";
  s.shape.tables = {{10, 4}, {6, 4}};
  s.shape.bottom_mlp = {3, 8, 4};
  s.shape.top_mlp = {5, 1};
  s.global_batch = 6;
  s.optimizer = dense;
  s.sparse_optimizer = sparse;
  return s;
}

}  // namespace recmix::sched::test
