#pragma once
// Optimizers for dense (MLP) parameters with torch semantics: SGD, Adagrad
// (sum += g^2; p -= lr g / (sqrt(sum) + eps)) and Adam (bias-corrected). Their state is exposed
// as named buffers so checkpoints can save and restore it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/lr_schedule.hpp"
#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "mlp/types.hpp"

namespace recmix::mlp {

struct DenseOptimizerConfig {
  DenseOptimizerKind kind = DenseOptimizerKind::sgd;  // sgd | adagrad | adam
  float lr = 0.01f;
  float eps = -1.f;          // < 0: the kind's torch default (adam 1e-8, adagrad 1e-10)
  float beta1 = 0.9f;        // adam
  float beta2 = 0.999f;      // adam
  float initial_accumulator = 0.f;  // adagrad
  // The learning-rate schedule (warm-up, decay): lr x schedule.scale(step), the factor computed
  // on the device from a step count kept there, so that a captured step uses its own step's.
  LrSchedule schedule;
};

class DenseOptimizer {
 public:
  virtual ~DenseOptimizer() = default;
  // Updates the parameters given at construction from their gradients: issue_step, then
  // count_step.
  virtual void step(device::Stream& s) = 0;
  // The step's device work alone. What changes from step to step (Adam's step count, the
  // schedule's factor) it reads from device memory, so that it can be captured once and replayed (device/graph.hpp), each
  // replay followed by count_step().
  virtual void issue_step(device::Stream& s) = 0;
  // Counts a step taken on the host (step_count()), without device work.
  virtual void count_step() = 0;
  // Named state buffers (grad == nullptr): "adagrad.sum.<param>", "adam.m.<param>",
  // "adam.v.<param>"; empty for SGD.
  virtual std::vector<Param> state() = 0;
  virtual std::int64_t step_count() const = 0;
  // Sets the count (a loaded checkpoint's), on the host and where the device keeps it (a wait).
  virtual void set_step_count(std::int64_t steps) = 0;
};

// ConfigError on a non-positive or non-finite lr, a negative eps or
// initial_accumulator, betas outside [0, 1), or a parameter without a gradient.
std::unique_ptr<DenseOptimizer> make_dense_optimizer(const DenseOptimizerConfig& config,
                                                     device::Backend& backend,
                                                     device::MemoryPool& pool,
                                                     std::vector<Param> params);

}  // namespace recmix::mlp
