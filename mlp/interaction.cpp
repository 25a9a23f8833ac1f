// The dot and cat interactions: one kernel call per direction, one work item per sample.
#include "mlp/interaction.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "device/buffer.hpp"
#include "mlp/cpu/kernels.hpp"
#include "mlp/cross_net.hpp"
#include "mlp/launch.hpp"

namespace recmix::mlp {
namespace {

class InteractionBase : public Interaction {
 public:
  InteractionBase(device::Backend& backend, device::MemoryPool& pool, int k, int d, int out,
                  int max_batch, const char* kind)
      : backend_(backend), k_(k), d_(d), out_(out), max_batch_(max_batch), kind_(kind),
        output_(pool, static_cast<std::size_t>(max_batch) * out, fmt::format("{} interaction output", kind)) {}

  int out_features() const override { return out_; }

  const float* forward(device::Stream& s, const float* bottom, const float* embeddings,
                       int batch) override {
    if (batch < 0 || batch > max_batch_)
      throw ConfigError(fmt::format("{} interaction: batch {} outside [0, {}]", kind_, batch, max_batch_));
    bottom_ = bottom;
    embeddings_ = embeddings;
    batch_ = batch;
    forward_done_ = true;
    run_forward(s);
    return output_.data();
  }

  void backward(device::Stream& s, const float* grad_out, float* grad_bottom,
                float* grad_embeddings) override {
    if (!forward_done_)
      throw ConfigError(fmt::format("{} interaction: backward called before forward", kind_));
    run_backward(s, grad_out, grad_bottom, grad_embeddings);
  }

 protected:
  virtual void run_forward(device::Stream& s) = 0;
  virtual void run_backward(device::Stream& s, const float* grad_out, float* grad_bottom,
                            float* grad_embeddings) = 0;
  // Work size in floats for the threading decision.
  std::int64_t work() const { return static_cast<std::int64_t>(batch_) * (out_ + (k_ + 1) * d_); }

  device::Backend& backend_;
  int k_, d_, out_, max_batch_;
  const char* kind_;
  device::Buffer<float> output_;
  const float* bottom_ = nullptr;
  const float* embeddings_ = nullptr;
  int batch_ = 0;
  bool forward_done_ = false;
};

class DotInteraction final : public InteractionBase {
 public:
  DotInteraction(device::Backend& b, device::MemoryPool& p, int k, int d, int max_batch)
      : InteractionBase(b, p, k, d, d + (k + 1) * k / 2, max_batch, "dot"),
        scratch_(p, static_cast<std::size_t>(detail::row_blocks(max_batch)) *
                        std::max(kernels::round_up_lanes(k + 1) * d, (k + 1) * (k + 1)),
                 "dot interaction scratch") {
    auto stream = b.create_stream();
    b.fill_zero(scratch_.data(), scratch_.bytes(), *stream);  // the padding lanes are read
    stream->synchronize();
  }

 private:
  void run_forward(device::Stream& s) override {
    kernels::DotInteractionForward f{bottom_, embeddings_, output_.data(), scratch_.data(),
                                     batch_, k_, d_, out_};
    // The dot products cost about d times the output size.
    if (device::device_memory_is_host(backend_))
      detail::launch_host(backend_, s, detail::cpu_threads_for(backend_, work() * d_ / 4), detail::row_blocks(batch_),
                          [f](kernels::Index i) { cpu::dot_interaction_forward(f, i); });
    else
      detail::launch(backend_, s, detail::row_blocks(batch_), f, 0);
  }
  void run_backward(device::Stream& s, const float* grad_out, float* grad_bottom,
                    float* grad_embeddings) override {
    kernels::DotInteractionBackward f{bottom_,        embeddings_,     grad_out,
                                      grad_bottom,    grad_embeddings, scratch_.data(),
                                      batch_,         k_,              d_,
                                      out_};
    if (device::device_memory_is_host(backend_))
      detail::launch_host(backend_, s, detail::cpu_threads_for(backend_, work() * d_ / 2), detail::row_blocks(batch_),
                          [f](kernels::Index i) { cpu::dot_interaction_backward(f, i); });
    else
      detail::launch(backend_, s, detail::row_blocks(batch_), f, 0);
  }
  // Per block of samples: T transposed (forward), the symmetric gradient matrix (backward).
  device::Buffer<float> scratch_;
};

class CatInteraction final : public InteractionBase {
 public:
  CatInteraction(device::Backend& b, device::MemoryPool& p, int k, int d, int max_batch)
      : InteractionBase(b, p, k, d, (k + 1) * d, max_batch, "cat") {}

 private:
  void run_forward(device::Stream& s) override {
    kernels::CatInteractionForward f{bottom_, embeddings_, output_.data(), k_, d_};
    detail::launch(backend_, s, batch_, f, work());
  }
  void run_backward(device::Stream& s, const float* grad_out, float* grad_bottom,
                    float* grad_embeddings) override {
    kernels::CatInteractionBackward f{grad_out, grad_bottom, grad_embeddings, k_, d_};
    detail::launch(backend_, s, batch_, f, work());
  }
};

void check_shape(InteractionKind kind, int num_embeddings, int dim) {
  if (num_embeddings < 0 || dim <= 0)
    throw ConfigError(fmt::format("{} interaction: need dim > 0 and tables >= 0, got dim {} and {} tables",
                                  interaction_name(kind), dim, num_embeddings));
}

}  // namespace

int interaction_out_features(InteractionKind kind, int num_embeddings, int dim) {
  check_shape(kind, num_embeddings, dim);
  switch (kind) {
    case InteractionKind::dot: return dim + (num_embeddings + 1) * num_embeddings / 2;
    case InteractionKind::cat:
    case InteractionKind::dcn: return (num_embeddings + 1) * dim;
  }
  throw ConfigError("interaction: a kind outside dot, cat and dcn");  // an invalid enum value
}

std::unique_ptr<Interaction> make_interaction(InteractionKind kind, device::Backend& backend,
                                              device::MemoryPool& pool, int num_embeddings, int dim,
                                              int max_batch, const CrossSpec& cross) {
  interaction_out_features(kind, num_embeddings, dim);  // validates
  if (max_batch <= 0)
    throw ConfigError(fmt::format("{} interaction: max batch {} must be positive", interaction_name(kind), max_batch));
  switch (kind) {
    case InteractionKind::dot: return std::make_unique<DotInteraction>(backend, pool, num_embeddings, dim, max_batch);
    case InteractionKind::dcn: return make_cross_interaction(backend, pool, num_embeddings, dim, max_batch, cross);
    case InteractionKind::cat: break;
  }
  return std::make_unique<CatInteraction>(backend, pool, num_embeddings, dim, max_batch);
}

}  // namespace recmix::mlp
