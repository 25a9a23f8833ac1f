// SGD, Adagrad and Adam over a list of dense parameters, all of them in one launch a step
// (ParamStepTable).
#include "mlp/dense_optimizer.hpp"

#include <cmath>
#include <fmt/format.h>

#include "core/error.hpp"
#include "device/buffer.hpp"
#include "mlp/launch.hpp"
#include "mlp/param_step_table.hpp"

namespace recmix::mlp {
namespace {

using detail::ParamStepTable;
using detail::write_device;
using kernels::Index;

class OptimizerBase : public DenseOptimizer {
 public:
  // counted: the device keeps the step count (Adam's corrections read it), whether or not there
  // is a schedule.
  OptimizerBase(device::Backend& backend, device::MemoryPool& pool, std::vector<Param> params,
                const LrSchedule& schedule, bool counted)
      : backend_(backend), params_(std::move(params)), schedule_(schedule) {
    if (counted || schedule_.active()) device_steps_ = device::Buffer<std::int64_t>(pool, 1, "optimizer step count");
    if (schedule_.active()) scale_ = device::Buffer<float>(pool, 1, "learning-rate schedule factor");
    if (device_steps_.size() > 0) write_device_steps(0);
  }
  void step(device::Stream& s) final {
    issue_step(s);
    count_step();
  }
  void count_step() final { ++steps_; }
  std::int64_t step_count() const override { return steps_; }
  void set_step_count(std::int64_t steps) override {
    if (steps < 0) throw ConfigError(fmt::format("optimizer step count {} is negative", steps));
    steps_ = steps;
    if (device_steps_.size() > 0) write_device_steps(steps);
  }

 protected:
  // With a schedule: its factor for the coming step into scale_ (ScheduleScale), counting the
  // step on the device unless Adam's corrections do. Returns the factor's address, or null.
  const float* issue_schedule(device::Stream& s, bool count) {
    if (!schedule_.active()) return nullptr;
    detail::launch(backend_, s, 1, kernels::ScheduleScale{device_steps_.data(), scale_.data(), schedule_, count}, 1);
    return scale_.data();
  }
  // Where the schedule's factor lives, or null without a schedule.
  float* scale() { return schedule_.active() ? scale_.data() : nullptr; }
  void write_device_steps(std::int64_t steps) {
    write_device(backend_, device_steps_.data(), &steps, sizeof steps);
  }

  // One state buffer per parameter, named "<prefix>.<param name>", filled with `init`.
  void add_state(device::MemoryPool& pool, const std::string& prefix, float init,
                 std::vector<device::Buffer<float>>& buffers) {
    auto stream = backend_.create_stream();
    for (const Param& p : params_) {
      buffers.emplace_back(pool, p.count, prefix + "." + p.name);
      kernels::Fill f{buffers.back().data(), static_cast<Index>(p.count), init};
      detail::launch(backend_, *stream, detail::flat_blocks(f.count), f, f.count);
      state_.push_back({prefix + "." + p.name, buffers.back().data(), nullptr, p.count});
    }
    stream->synchronize();
  }

  device::Backend& backend_;
  std::vector<Param> params_;
  std::vector<Param> state_;
  std::int64_t steps_ = 0;
  LrSchedule schedule_;
  device::Buffer<std::int64_t> device_steps_;  // the steps taken, as the device counts them
  device::Buffer<float> scale_;                // the schedule's factor for this step
};

class Sgd final : public OptimizerBase {
 public:
  Sgd(device::Backend& b, device::MemoryPool& pool, std::vector<Param> params, const DenseOptimizerConfig& c)
      : OptimizerBase(b, pool, std::move(params), c.schedule, false) {
    std::vector<kernels::SgdStep> steps;
    for (const Param& q : params_) steps.push_back({q.value, q.grad, static_cast<Index>(q.count), c.lr, scale()});
    steps_ = ParamStepTable<kernels::SgdStep>(b, pool, std::move(steps));
  }
  void issue_step(device::Stream& s) override {
    issue_schedule(s, true);
    steps_.issue(s);
  }
  std::vector<Param> state() override { return {}; }

 private:
  ParamStepTable<kernels::SgdStep> steps_;
};

class Adagrad final : public OptimizerBase {
 public:
  Adagrad(device::Backend& b, device::MemoryPool& pool, std::vector<Param> params,
          const DenseOptimizerConfig& c)
      : OptimizerBase(b, pool, std::move(params), c.schedule, false) {
    add_state(pool, "adagrad.sum", c.initial_accumulator, sums_);
    const float eps = c.eps < 0 ? 1e-10f : c.eps;
    std::vector<kernels::AdagradStep> steps;
    for (std::size_t p = 0; p < params_.size(); ++p) {
      const Param& q = params_[p];
      steps.push_back({q.value, q.grad, sums_[p].data(), static_cast<Index>(q.count), c.lr, eps, scale()});
    }
    steps_ = ParamStepTable<kernels::AdagradStep>(b, pool, std::move(steps));
  }
  void issue_step(device::Stream& s) override {
    issue_schedule(s, true);
    steps_.issue(s);
  }
  std::vector<Param> state() override { return state_; }

 private:
  std::vector<device::Buffer<float>> sums_;
  ParamStepTable<kernels::AdagradStep> steps_;
};

class Adam final : public OptimizerBase {
 public:
  Adam(device::Backend& b, device::MemoryPool& pool, std::vector<Param> params,
       const DenseOptimizerConfig& c)
      : OptimizerBase(b, pool, std::move(params), c.schedule, true), lr_(c.lr), beta1_(c.beta1), beta2_(c.beta2) {
    add_state(pool, "adam.m", 0.f, m_);
    add_state(pool, "adam.v", 0.f, v_);
    corrections_ = device::Buffer<float>(pool, 2, "adam.bias_corrections");
    const float eps = c.eps < 0 ? 1e-8f : c.eps;
    std::vector<kernels::AdamStep> steps;
    for (std::size_t p = 0; p < params_.size(); ++p) {
      const Param& q = params_[p];
      steps.push_back({q.value, q.grad, m_[p].data(), v_[p].data(), static_cast<Index>(q.count), beta1_, beta2_, eps,
                       corrections_.data()});
    }
    steps_ = ParamStepTable<kernels::AdamStep>(b, pool, std::move(steps));
  }
  // As torch: step_size = lr / (1 - beta1^t), denominators divided by sqrt(1 - beta2^t), with t
  // counted on the device (kernels::AdamCorrections).
  void issue_step(device::Stream& s) override {
    const float* scale = issue_schedule(s, false);
    const kernels::AdamCorrections c{device_steps_.data(), corrections_.data(), lr_, beta1_, beta2_, scale};
    detail::launch(backend_, s, 1, c, 1);
    steps_.issue(s);
  }
  std::vector<Param> state() override { return state_; }

 private:
  float lr_, beta1_, beta2_;
  std::vector<device::Buffer<float>> m_, v_;
  device::Buffer<float> corrections_;          // this step's [step_size, bias2_sqrt]
  ParamStepTable<kernels::AdamStep> steps_;
};

}  // namespace

std::unique_ptr<DenseOptimizer> make_dense_optimizer(const DenseOptimizerConfig& c,
                                                     device::Backend& backend,
                                                     device::MemoryPool& pool,
                                                     std::vector<Param> params) {
  if (!(c.lr > 0.f) || !std::isfinite(c.lr))
    throw ConfigError(fmt::format("dense optimizer: lr {} must be positive and finite", c.lr));
  if (!std::isfinite(c.eps))
    throw ConfigError(fmt::format("dense optimizer: eps {} must be finite", c.eps));
  for (const Param& p : params)
    if (p.value == nullptr || p.grad == nullptr)
      throw ConfigError(fmt::format("dense optimizer: parameter '{}' has no {}", p.name,
                                    p.value ? "gradient" : "value"));
  const LrSchedule& sc = c.schedule;
  if (sc.warmup_steps < 0 || sc.decay_start < 0 || sc.decay_steps < 0 || !(sc.decay_power > 0) ||
      !std::isfinite(sc.decay_power))
    throw ConfigError("dense optimizer: a schedule needs steps >= 0 and a positive, finite decay power");
  if (sc.decay_steps > 0 && sc.decay_start < sc.warmup_steps)
    throw ConfigError(fmt::format("dense optimizer: the decay starts at step {}, before the warm-up of {} steps ends",
                                  sc.decay_start, sc.warmup_steps));
  switch (c.kind) {
    case DenseOptimizerKind::sgd: return std::make_unique<Sgd>(backend, pool, std::move(params), c);
    case DenseOptimizerKind::adagrad:
      if (!(c.initial_accumulator >= 0.f) || !std::isfinite(c.initial_accumulator))
        throw ConfigError(fmt::format("dense optimizer: adagrad initial_accumulator {} must be >= 0",
                                      c.initial_accumulator));
      return std::make_unique<Adagrad>(backend, pool, std::move(params), c);
    case DenseOptimizerKind::adam:
      if (!(c.beta1 >= 0.f && c.beta1 < 1.f) || !(c.beta2 >= 0.f && c.beta2 < 1.f))
        throw ConfigError(fmt::format("dense optimizer: adam betas ({}, {}) must lie in [0, 1)",
                                      c.beta1, c.beta2));
      return std::make_unique<Adam>(backend, pool, std::move(params), c);
  }
  throw ConfigError("dense optimizer: a kind outside sgd, adagrad and adam");  // an invalid enum value
}

}  // namespace recmix::mlp
