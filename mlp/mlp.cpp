// Mlp. On the CPU backend with OpenBLAS (and AVX2 and FMA) the forward and input-gradient GEMMs
// of narrow layers are the fused kernels of mlp/cpu/linear.hpp: bias and activation in the forward GEMM, the previous layer's ReLU
// backward and bias gradient in the input-gradient GEMM. Elsewhere the GEMMs go through
// Backend::gemm, bias and activation in one pass after the forward GEMM, the activation backward
// fused with the bias-gradient reduction; on the backends that take the GPU path (CUDA, the
// strict emulator) bias and ReLU are the forward GEMM's epilogue and the bias gradient the
// weight-gradient GEMM's (Backend::gemm_epilogue). Elsewhere the weight-gradient GEMMs use Backend::gemm.
// With bf16 GEMMs (the constructor's bf16_gemms) every GEMM goes through Backend::gemm_half in bf16, on
// operands rounded once a step: the weights and the first layer's input as forward starts, every
// other layer's input by the bias and activation pass that writes it, a layer's pre-activation
// gradient by the activation backward that writes it (for the two GEMMs that read it). On the CPU
// backend those passes run the portable functors and round 16 elements a vector after each block
// (mlp/cpu_bf16.hpp).
#include "mlp/mlp.hpp"

#include <cmath>
#include <fmt/format.h>

#include "core/env_switch.hpp"
#include "core/error.hpp"
#include "mlp/cpu/bf16.hpp"
#include "mlp/cpu/linear.hpp"
#include "mlp/init.hpp"
#include "mlp/launch.hpp"
#include "mlp/param_step_table.hpp"

namespace recmix::mlp {

Mlp::Mlp(device::Backend& backend, device::MemoryPool& pool, std::string name,
         std::vector<int> sizes, Activation last, std::uint64_t seed, int max_batch, bool bf16_gemms, MlpInit init)
    : backend_(backend), pool_(pool), name_(std::move(name)), sizes_(std::move(sizes)),
      max_batch_(max_batch), bf16_(bf16_gemms) {
  if (sizes_.size() < 2)
    throw ConfigError(fmt::format("mlp '{}': needs at least two sizes (in and out), got {}", name_,
                                  sizes_.size()));
  for (std::size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] <= 0)
      throw ConfigError(fmt::format("mlp '{}': size {} is {}, must be positive", name_, i, sizes_[i]));
  if (max_batch_ <= 0)
    throw ConfigError(fmt::format("mlp '{}': max batch {} must be positive", name_, max_batch_));

  std::size_t total = 0;
  for (int i = 0; i + 1 < static_cast<int>(sizes_.size()); ++i)
    total += static_cast<std::size_t>(sizes_[i]) * sizes_[i + 1] + sizes_[i + 1];
  values_ = device::Buffer<float>(pool_, total, name_ + " weights");
  grads_ = device::Buffer<float>(pool_, total, name_ + " weight gradients");

  auto stream = backend_.create_stream();
  std::size_t offset = 0;
  int widest = 0;
  layers_.resize(sizes_.size() - 1);
  for (int i = 0; i < num_layers(); ++i) {
    Layer& l = layers_[i];
    l.in = sizes_[i];
    l.out = sizes_[i + 1];
    l.act = i + 1 == num_layers() ? last : Activation::relu;
    std::size_t w = static_cast<std::size_t>(l.in) * l.out;
    l.weight = values_.data() + offset;
    l.weight_grad = grads_.data() + offset;
    offset += w;
    l.bias = values_.data() + offset;
    l.bias_grad = grads_.data() + offset;
    offset += l.out;
    auto prefix = fmt::format("{}.{}", name_, i);
    l.output = device::Buffer<float>(pool_, static_cast<std::size_t>(max_batch_) * l.out,
                                     prefix + " activations");
    l.grad = device::Buffer<float>(pool_, static_cast<std::size_t>(max_batch_) * l.out,
                                   prefix + " activation gradients");
    if (init == MlpInit::torchrec) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(l.in));
      detail::init_uniform(backend_, *stream, l.weight, w, seed, prefix + ".weight", bound);
      detail::init_uniform(backend_, *stream, l.bias, l.out, seed, prefix + ".bias", bound);
    } else {
      detail::init_normal(backend_, *stream, l.weight, w, seed, prefix + ".weight", std::sqrt(2.0 / (l.in + l.out)));
      detail::init_normal(backend_, *stream, l.bias, l.out, seed, prefix + ".bias", std::sqrt(1.0 / l.out));
    }
    widest = std::max(widest, l.out);
  }
  backend_.fill_zero(grads_.data(), grads_.bytes(), *stream);
  bias_partials_ = device::Buffer<float>(
      pool_, static_cast<std::size_t>(detail::row_blocks(max_batch_)) * widest,
      name_ + " bias gradient partial sums");
  if (bf16_) {
    values16_ = device::Buffer<std::uint16_t>(pool_, total, name_ + " weights in bf16");
    grad16_ = device::Buffer<std::uint16_t>(pool_, static_cast<std::size_t>(max_batch_) * widest,
                                            name_ + " pre-activation gradient in bf16");
    for (Layer& l : layers_) {
      l.weight16 = values16_.data() + (l.weight - values_.data());
      l.input16 = device::Buffer<std::uint16_t>(pool_, static_cast<std::size_t>(max_batch_) * l.in,
                                                fmt::format("{}.{} input in bf16", name_, &l - layers_.data()));
    }
  }
  use_fused_kernels();
  stream->synchronize();
}

bool Mlp::fused_forward(const Layer& l) const {
  return fused_ && cpu::fused_linear_enabled() && cpu::fused_forward_pays(l.in, l.out, backend_.gemm_library());
}

template <class F>
void Mlp::launch_rounding(device::Stream& s, std::int64_t n, const F& f, std::int64_t elements) {
  detail::launch_rounding(backend_, s, bf16_, n, f, elements);
}

namespace {
EnvSwitch& epilogue_switch() {
  static EnvSwitch s("RECMIX_GEMM_EPILOGUES");
  return s;
}
}  // namespace

bool gemm_epilogues_enabled() { return epilogue_switch().on(); }
void set_gemm_epilogues_enabled(bool on) { epilogue_switch().set(on); }

bool Mlp::epilogues() const {
  return !bf16_ && backend_.fuses_gemm_epilogues() && gemm_epilogues_enabled();
}

bool Mlp::fused_input_gradient(const Layer& l) const {
  return fused_ && cpu::fused_linear_enabled() && cpu::fused_input_gradient_pays(l.in, l.out, backend_.gemm_library());
}

void Mlp::use_fused_kernels() {
  // The fused kernels compute in fp32: not for bf16 GEMMs, nor where the backend's fp32 GEMMs run
  // in TF32.
  fused_ = !bf16_ && backend_.fp32_math() == device::Fp32Math::fp32 && device::device_memory_is_host(backend_) &&
           cpu::fused_linear_available();
  if (!fused_) return;
  // Sized for every layer where the kernels pay, whatever fused_linear_enabled() says now.
  const device::GemmLibrary gemm = backend_.gemm_library();
  std::size_t floats = 0;
  for (const Layer& l : layers_)
    if (cpu::fused_forward_pays(l.in, l.out, gemm) || cpu::fused_input_gradient_pays(l.in, l.out, gemm))
      floats = std::max(floats, cpu::linear_pack_floats(l.in, l.out));
  pack_ = device::Buffer<float>(pool_, floats, name_ + " packed weights");
}

const float* Mlp::forward(device::Stream& s, const float* input, int batch) {
  if (batch < 0 || batch > max_batch_)
    throw ConfigError(fmt::format("mlp '{}': batch {} outside [0, {}]", name_, batch, max_batch_));
  input_ = input;
  batch_ = batch;
  forward_done_ = true;
  round_bf16(s, values_.data(), values_.size(), values16_.data());
  // Layer 0's input in bf16; every later layer's comes from the bias and activation pass below.
  round_bf16(s, input, static_cast<std::size_t>(batch) * sizes_.front(), layers_.front().input16.data());
  const float* x = input;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    if (fused_forward(l)) {
      cpu::linear_forward(backend_.num_threads(), batch, l.in, l.out, x, l.in, l.weight, l.bias, l.act,
                          l.output.data(), pack_.data());
      x = l.output.data();
      continue;
    }
    if (epilogues() && l.act != Activation::sigmoid) {  // y = act(x W^T + b) in one call
      backend_.gemm_epilogue(s, false, true, batch, l.out, l.in, 1.f, x, l.in, l.weight, l.in, 0.f, l.output.data(),
                             l.out,
                             l.act == Activation::relu ? device::GemmEpilogue::bias_relu : device::GemmEpilogue::bias,
                             l.bias);
      x = l.output.data();
      continue;
    }
    // y = x W^T (W is [out x in]), then y = act(y + b) in one pass, which also rounds y for the next
    // layer's bf16 GEMM.
    gemm(s, false, true, batch, l.out, l.in, 1.f, {x, l.input16.data()}, l.in, {l.weight, l.weight16}, l.in, 0.f,
         l.output.data(), l.out);
    kernels::BiasActivationForward f{l.output.data(), l.bias, batch, l.out, l.act,
                                     bf16_ && i + 1 < layers_.size() ? layers_[i + 1].input16.data() : nullptr};
    launch_rounding(s, detail::row_blocks(batch), f, static_cast<std::int64_t>(batch) * l.out);
    x = l.output.data();
  }
  return x;
}

const float* Mlp::backward(device::Stream& s, const float* grad_output, bool need_input_grad) {
  return backward_impl(s, grad_output, need_input_grad, nullptr);
}

const float* Mlp::backward_sgd(device::Stream& s, const float* grad_output, bool need_input_grad, float lr) {
  return backward_impl(s, grad_output, need_input_grad, &lr);
}

const float* Mlp::backward_impl(device::Stream& s, const float* grad_output, bool need_input_grad,
                                const float* sgd_lr) {
  if (!forward_done_)
    throw ConfigError(fmt::format("mlp '{}': backward called before forward", name_));
  const int batch = batch_;
  if (need_input_grad && input_grad_.empty())
    input_grad_ = device::Buffer<float>(pool_, static_cast<std::size_t>(max_batch_) * in_features(),
                                        name_ + " input gradient");
  if (batch == 0) {  // a rank with no samples contributes zero gradients (and SGD steps by zero)
    backend_.fill_zero(grads_.data(), grads_.bytes(), s);
    return need_input_grad ? input_grad_.data() : nullptr;
  }
  const float* dy = grad_output;
  const bool epilogue = epilogues();
  bool dz_done = false;  // the fused input-gradient GEMM of the layer above did this layer's dz
  for (int i = num_layers() - 1; i >= 0; --i) {
    Layer& l = layers_[i];
    // dz = dy * act'(y), in place in this layer's gradient buffer (which already holds dy for all
    // but the last layer); the bias gradient is the column sum of dz.
    float* dz = l.grad.data();
    if (!dz_done) {
      if (dy != dz)
        backend_.copy(dz, dy, sizeof(float) * static_cast<std::size_t>(batch) * l.out, s);
      auto blocks = detail::row_blocks(batch);
      kernels::ActivationBackward f{dz, l.output.data(), bias_partials_.data(), batch, l.out, l.act,
                                    bf16_ ? grad16_.data() : nullptr};
      launch_rounding(s, blocks, f, static_cast<std::int64_t>(batch) * l.out);
      if (!epilogue) {  // else the weight-gradient GEMM's epilogue sums the bias gradient
        kernels::ColumnSum sum{bias_partials_.data(), l.bias_grad, static_cast<int>(blocks), l.out};
        detail::launch(backend_, s, l.out, sum, blocks * l.out);
      }
    }
    dz_done = false;
    const Operand dz16{dz, bf16_ ? grad16_.data() : nullptr};  // rounded by the activation backward
    // dx = dz W  ([batch x out] [out x in]); on the fused path, for a hidden layer below, also
    // that layer's ReLU backward and bias gradient.
    auto input_gradient = [&](float* dx) {
      if (!fused_input_gradient(l)) {
        gemm(s, false, false, batch, l.in, l.out, 1.f, dz16, l.out, {l.weight, l.weight16}, l.in, 0.f, dx, l.in);
        return;
      }
      Layer* below = i > 0 && layers_[i - 1].act == Activation::relu ? &layers_[i - 1] : nullptr;
      cpu::linear_backward_input(backend_.num_threads(), batch, l.in, l.out, dz, l.weight,
                                 below ? below->output.data() : nullptr, below ? below->bias_grad : nullptr,
                                 dx, pack_.data());
      dz_done = below != nullptr;
    };

    const Operand x{i == 0 ? input_ : layers_[i - 1].output.data(), l.input16.data()};
    // dx goes into the previous layer's gradient buffer (or the input gradient).
    float* dx = nullptr;
    if (i > 0 || need_input_grad) dx = i > 0 ? layers_[i - 1].grad.data() : input_grad_.data();
    // dW = alpha dz^T x + beta C ([out x batch] [batch x in]), with the bias gradient (the column
    // sums of dz) in the same call where epilogues are on.
    auto weight_gradient = [&](float alpha, float beta, float* c) {
      if (epilogue)
        backend_.gemm_epilogue(s, true, false, l.out, l.in, batch, alpha, dz, l.out, x.fp32, l.in, beta, c, l.in,
                               device::GemmEpilogue::bias_gradient, l.bias_grad);
      else
        gemm(s, true, false, l.out, l.in, batch, alpha, dz16, l.out, x, l.in, beta, c, l.in);
    };
    if (!sgd_lr) {
      weight_gradient(1.f, 0.f, l.weight_grad);
      if (dx) input_gradient(dx);
    } else {
      // dx first: it needs the weights before this step. Then W += -lr dz^T x, b -= lr db.
      if (dx) input_gradient(dx);
      weight_gradient(-*sgd_lr, 1.f, l.weight);
    }
    if (!dx) break;
    dy = dx;
  }
  if (sgd_lr) step_biases(s, *sgd_lr);
  return need_input_grad ? input_grad_.data() : nullptr;
}

struct Mlp::BiasSteps {
  float lr;
  detail::ParamStepTable<kernels::SgdStep> table;
};

Mlp::~Mlp() = default;

void Mlp::step_biases(device::Stream& s, float lr) {
  if (!bias_steps_ || bias_steps_->lr != lr) {
    std::vector<kernels::SgdStep> steps;
    for (const Layer& l : layers_) steps.push_back({l.bias, l.bias_grad, l.out, lr});
    bias_steps_ = std::make_unique<BiasSteps>(BiasSteps{lr, {backend_, pool_, std::move(steps)}});
  }
  bias_steps_->table.issue(s);
}

Mlp::Mlp(const Mlp& primary, device::Backend& backend, int max_batch)
    : backend_(backend), pool_(primary.pool_), name_(primary.name_), sizes_(primary.sizes_),
      max_batch_(max_batch) {
  if (primary.bf16_)
    throw ConfigError(fmt::format("mlp '{}': no replicas of an MLP with bf16 GEMMs", name_));
  if (max_batch_ <= 0)
    throw ConfigError(fmt::format("mlp '{}': max batch {} must be positive", name_, max_batch_));
  grads_ = device::Buffer<float>(pool_, primary.grads_.size(), name_ + " replica weight gradients");
  auto stream = backend_.create_stream();
  std::size_t offset = 0;
  int widest = 0;
  layers_.resize(primary.layers_.size());
  for (int i = 0; i < num_layers(); ++i) {
    const Layer& p = primary.layers_[i];
    Layer& l = layers_[i];
    l.in = p.in;
    l.out = p.out;
    l.act = p.act;
    l.weight = p.weight;
    l.bias = p.bias;
    l.weight_grad = grads_.data() + offset;
    offset += static_cast<std::size_t>(l.in) * l.out;
    l.bias_grad = grads_.data() + offset;
    offset += l.out;
    auto prefix = fmt::format("{}.{} replica", name_, i);
    l.output = device::Buffer<float>(pool_, static_cast<std::size_t>(max_batch_) * l.out, prefix + " activations");
    l.grad = device::Buffer<float>(pool_, static_cast<std::size_t>(max_batch_) * l.out,
                                   prefix + " activation gradients");
    widest = std::max(widest, l.out);
  }
  backend_.fill_zero(grads_.data(), grads_.bytes(), *stream);
  bias_partials_ = device::Buffer<float>(pool_, static_cast<std::size_t>(detail::row_blocks(max_batch_)) * widest,
                                         name_ + " replica bias gradient partial sums");
  use_fused_kernels();
  stream->synchronize();
}

void Mlp::gemm(device::Stream& s, bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, int lda,
               Operand b, int ldb, float beta, float* c, int ldc) {
  if (bf16_)
    backend_.gemm_half(s, half::Storage::bf16, trans_a, trans_b, m, n, k, alpha, a.bf16, lda, b.bf16, ldb, beta, c, ldc);
  else
    backend_.gemm(s, trans_a, trans_b, m, n, k, alpha, a.fp32, lda, b.fp32, ldb, beta, c, ldc);
}

void Mlp::round_bf16(device::Stream& s, const float* src, std::size_t count, std::uint16_t* dst) {
  if (!bf16_) return;
  kernels::RoundToBf16 f{src, dst, static_cast<kernels::Index>(count)};
  launch_rounding(s, detail::flat_blocks(f.count), f, f.count);
}

std::vector<Param> Mlp::parameters() {
  std::vector<Param> params;
  for (int i = 0; i < num_layers(); ++i) {
    Layer& l = layers_[i];
    params.push_back({fmt::format("{}.{}.weight", name_, i), l.weight, l.weight_grad,
                      static_cast<std::size_t>(l.in) * l.out});
    params.push_back({fmt::format("{}.{}.bias", name_, i), l.bias, l.bias_grad,
                      static_cast<std::size_t>(l.out)});
  }
  return params;
}

}  // namespace recmix::mlp
