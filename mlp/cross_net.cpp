// The "dcn" interaction: the cat vector through DCN-V2 cross layers (mlp/cross_net.hpp). Per
// layer, forward: one or two GEMMs and CrossCombine; backward: CrossGradient, the bias
// gradient's column sum and four or two GEMMs. With bf16 GEMMs every operand also has a bf16
// copy: the weights rounded once a forward, x_l and dv by the passes that write them, u_l and
// the low-rank gradient du by a rounding pass after their GEMMs.
#include "mlp/cross_net.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "device/buffer.hpp"
#include "mlp/init.hpp"
#include "mlp/launch.hpp"

namespace recmix::mlp {
namespace {

class CrossInteraction final : public Interaction {
 public:
  CrossInteraction(device::Backend& backend, device::MemoryPool& pool, int k, int d, int max_batch,
                   const CrossSpec& cross)
      : backend_(backend), k_(k), d_(d), n_((k + 1) * d), layers_(cross.layers), rank_(cross.rank),
        max_batch_(max_batch), bf16_(cross.bf16_gemms) {
    const std::size_t n = n_, r = rank_, b = max_batch_;
    const std::size_t per_layer = (rank_ > 0 ? 2 * r * n : n * n) + n;
    values_ = device::Buffer<float>(pool, per_layer * layers_, "cross weights");
    grads_ = device::Buffer<float>(pool, per_layer * layers_, "cross weight gradients");
    x_ = device::Buffer<float>(pool, (layers_ + 1) * b * n, "cross layer inputs");
    v_ = device::Buffer<float>(pool, layers_ * b * n, "cross layer products");
    if (rank_ > 0) {
      u_ = device::Buffer<float>(pool, layers_ * b * r, "cross low-rank products");
      du_ = device::Buffer<float>(pool, b * r, "cross low-rank gradient");
    }
    g_ = device::Buffer<float>(pool, b * n, "cross layer gradient");
    gx0_ = device::Buffer<float>(pool, b * n, "cross input gradient");
    dv_ = device::Buffer<float>(pool, b * n, "cross product gradient");
    partial_ = device::Buffer<float>(pool, static_cast<std::size_t>(detail::row_blocks(max_batch_)) * n,
                                     "cross bias gradient partial sums");
    if (bf16_) {
      values16_ = device::Buffer<std::uint16_t>(pool, per_layer * layers_, "cross weights in bf16");
      x16_ = device::Buffer<std::uint16_t>(pool, layers_ * b * n, "cross layer inputs in bf16");
      dv16_ = device::Buffer<std::uint16_t>(pool, b * n, "cross product gradient in bf16");
      if (rank_ > 0) {
        u16_ = device::Buffer<std::uint16_t>(pool, layers_ * b * r, "cross low-rank products in bf16");
        du16_ = device::Buffer<std::uint16_t>(pool, b * r, "cross low-rank gradient in bf16");
      }
    }
    auto stream = backend.create_stream();
    std::size_t at = 0;
    for (int l = 0; l < layers_; ++l) {
      Layer& y = layer_.emplace_back();
      const std::string prefix = fmt::format("cross.{}", l);
      auto take = [&](std::size_t count, float*& value, float*& grad) {
        value = values_.data() + at;
        grad = grads_.data() + at;
        at += count;
      };
      if (rank_ > 0) {
        take(r * n, y.V, y.dV);
        take(n * r, y.W, y.dW);
        // Xavier-normal: both [r x n] and [n x r] have fan_in + fan_out = n + r.
        const double stddev = std::sqrt(2.0 / static_cast<double>(n + r));
        detail::init_normal(backend, *stream, y.V, r * n, cross.seed, prefix + ".V", stddev);
        detail::init_normal(backend, *stream, y.W, n * r, cross.seed, prefix + ".W", stddev);
      } else {
        take(n * n, y.M, y.dM);
        detail::init_normal(backend, *stream, y.M, n * n, cross.seed, prefix + ".weight",
                            std::sqrt(1.0 / static_cast<double>(n)));
      }
      take(n, y.bias, y.db);
      backend.fill_zero(y.bias, n * sizeof(float), *stream);
    }
    backend.fill_zero(grads_.data(), grads_.bytes(), *stream);
    stream->synchronize();
  }

  int out_features() const override { return n_; }

  const float* forward(device::Stream& s, const float* bottom, const float* embeddings, int batch) override {
    if (batch < 0 || batch > max_batch_)
      throw ConfigError(fmt::format("dcn interaction: batch {} outside [0, {}]", batch, max_batch_));
    batch_ = batch;
    forward_done_ = true;
    const int b = batch, n = n_;
    detail::launch(backend_, s, b, kernels::CatInteractionForward{bottom, embeddings, x(0), k_, d_},
                   std::int64_t(b) * n);
    if (b == 0) return x(layers_);
    round(s, values_.data(), values_.size(), values16_.data());
    round(s, x(0), std::size_t(b) * n, x16(0));
    for (int l = 0; l < layers_; ++l) {
      const Layer& y = layer_[l];
      const Operand xl{x(l), x16(l)};
      if (rank_ > 0) {  // u = x_l V^T [b x r], then v = u W^T [b x n]
        gemm(s, false, true, b, rank_, n, 1.f, xl, n, weight(y.V), n, 0.f, u(l), rank_);
        round(s, u(l), std::size_t(b) * rank_, u16(l));
        gemm(s, false, true, b, n, rank_, 1.f, {u(l), u16(l)}, rank_, weight(y.W), rank_, 0.f, v(l), n);
      } else {  // v = x_l M^T
        gemm(s, false, true, b, n, n, 1.f, xl, n, weight(y.M), n, 0.f, v(l), n);
      }
      kernels::CrossCombine combine{v(l), y.bias, x(0), x(l), x(l + 1), b, n};
      if (l + 1 < layers_) combine.x_next16 = x16(l + 1);  // x_L goes to the top MLP, which rounds its own
      detail::launch_rounding(backend_, s, bf16_, detail::row_blocks(b), combine, std::int64_t(b) * n);
    }
    return x(layers_);
  }

  // From the top layer down, with g the gradient w.r.t. x_{l+1}: dv = g * x0, db = column sums of
  // dv; low rank: du = dv W, dW = dv^T u_l, dV = du^T x_l, and x_l's gradient g + du V; full
  // rank: dM = dv^T x_l and g + dv M. x0's gradient gathers g * v_l from every layer and, at
  // layer 0, the chain's own; it is then split as the cat interaction's.
  void backward(device::Stream& s, const float* grad_out, float* grad_bottom, float* grad_embeddings) override {
    if (!forward_done_) throw ConfigError("dcn interaction: backward called before forward");
    const int b = batch_, n = n_, r = rank_;
    if (b == 0) {  // no samples: zero gradients, as the MLPs give
      backend_.fill_zero(grads_.data(), grads_.bytes(), s);
      return;
    }
    const auto blocks = detail::row_blocks(b);
    const Operand dv{dv_.data(), bf16_ ? dv16_.data() : nullptr};
    for (int l = layers_ - 1; l >= 0; --l) {
      const Layer& y = layer_[l];
      const bool top = l == layers_ - 1, bottom = l == 0;
      kernels::CrossGradient grad{top ? grad_out : g_.data(), g_.data(), x(0), v(l), dv_.data(), gx0_.data(),
                                  partial_.data(), b, n, top, bottom};
      if (bf16_) grad.dv16 = dv16_.data();
      detail::launch_rounding(backend_, s, bf16_, blocks, grad, std::int64_t(b) * n * 3);
      detail::launch(backend_, s, n, kernels::ColumnSum{partial_.data(), y.db, static_cast<int>(blocks), n},
                     std::int64_t(blocks) * n);
      float* x_grad = bottom ? gx0_.data() : g_.data();  // layer 0's input is x0 itself
      const Operand xl{x(l), x16(l)};
      if (r > 0) {
        const Operand du{du_.data(), bf16_ ? du16_.data() : nullptr};
        gemm(s, false, false, b, r, n, 1.f, dv, n, weight(y.W), r, 0.f, du_.data(), r);
        round(s, du_.data(), std::size_t(b) * r, du16_.data());
        gemm(s, true, false, n, r, b, 1.f, dv, n, {u(l), u16(l)}, r, 0.f, y.dW, r);
        gemm(s, true, false, r, n, b, 1.f, du, r, xl, n, 0.f, y.dV, n);
        gemm(s, false, false, b, n, r, 1.f, du, r, weight(y.V), n, 1.f, x_grad, n);
      } else {
        gemm(s, true, false, n, n, b, 1.f, dv, n, xl, n, 0.f, y.dM, n);
        gemm(s, false, false, b, n, n, 1.f, dv, n, weight(y.M), n, 1.f, x_grad, n);
      }
    }
    detail::launch(backend_, s, b, kernels::CatInteractionBackward{gx0_.data(), grad_bottom, grad_embeddings, k_, d_},
                   std::int64_t(b) * n);
  }

  std::vector<Param> parameters() override {
    std::vector<Param> out;
    const std::size_t n = n_, r = rank_;
    for (int l = 0; l < layers_; ++l) {
      const Layer& y = layer_[l];
      if (rank_ > 0) {
        out.push_back({fmt::format("cross.{}.V", l), y.V, y.dV, r * n});
        out.push_back({fmt::format("cross.{}.W", l), y.W, y.dW, n * r});
      } else {
        out.push_back({fmt::format("cross.{}.weight", l), y.M, y.dM, n * n});
      }
      out.push_back({fmt::format("cross.{}.bias", l), y.bias, y.db, n});
    }
    return out;
  }
  float* all_grads() override { return grads_.data(); }
  std::size_t parameter_count() const override { return grads_.size(); }

 private:
  struct Layer {
    float *V = nullptr, *W = nullptr, *M = nullptr, *bias = nullptr;
    float *dV = nullptr, *dW = nullptr, *dM = nullptr, *db = nullptr;
  };
  // A GEMM operand: its fp32 values and, with bf16 GEMMs, the same values rounded to bf16.
  struct Operand {
    const float* fp32;
    const std::uint16_t* bf16;
  };
  // x_l (l = 0: the cat vector; l = layers_: the output), v_l and u_l of this batch.
  float* x(int l) { return x_.data() + std::size_t(l) * max_batch_ * n_; }
  float* v(int l) { return v_.data() + std::size_t(l) * max_batch_ * n_; }
  float* u(int l) { return u_.data() + std::size_t(l) * max_batch_ * rank_; }
  // Their bf16 copies (l < layers_), and a weight with its own; null without bf16 GEMMs.
  std::uint16_t* x16(int l) { return bf16_ ? x16_.data() + std::size_t(l) * max_batch_ * n_ : nullptr; }
  std::uint16_t* u16(int l) { return bf16_ ? u16_.data() + std::size_t(l) * max_batch_ * rank_ : nullptr; }
  Operand weight(const float* w) const { return {w, bf16_ ? values16_.data() + (w - values_.data()) : nullptr}; }

  // C = alpha op(A) op(B) + beta C: the fp32 GEMM, or the bf16 one on the operands' bf16 copies.
  void gemm(device::Stream& s, bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, int lda,
            Operand b, int ldb, float beta, float* c, int ldc) {
    if (bf16_)
      backend_.gemm_half(s, half::Storage::bf16, trans_a, trans_b, m, n, k, alpha, a.bf16, lda, b.bf16, ldb, beta, c,
                         ldc);
    else
      backend_.gemm(s, trans_a, trans_b, m, n, k, alpha, a.fp32, lda, b.fp32, ldb, beta, c, ldc);
  }
  // With bf16 GEMMs, `count` values of src rounded into dst; nothing otherwise.
  void round(device::Stream& s, const float* src, std::size_t count, std::uint16_t* dst) {
    if (!bf16_) return;
    const kernels::RoundToBf16 f{src, dst, static_cast<kernels::Index>(count)};
    detail::launch_rounding(backend_, s, true, detail::flat_blocks(f.count), f, f.count);
  }

  device::Backend& backend_;
  int k_, d_, n_, layers_, rank_, max_batch_;
  bool bf16_;
  std::vector<Layer> layer_;
  device::Buffer<float> values_, grads_, x_, v_, u_, du_, g_, gx0_, dv_, partial_;
  device::Buffer<std::uint16_t> values16_, x16_, u16_, dv16_, du16_;
  int batch_ = 0;
  bool forward_done_ = false;
};

}  // namespace

std::unique_ptr<Interaction> make_cross_interaction(device::Backend& backend, device::MemoryPool& pool, int k, int d,
                                                    int max_batch, const CrossSpec& cross) {
  if (cross.layers < 1)
    throw ConfigError(fmt::format("dcn interaction: cross_layers = {} must be at least 1", cross.layers));
  if (cross.rank < 0)
    throw ConfigError(fmt::format("dcn interaction: cross_rank = {} must be 0 (full rank) or positive", cross.rank));
  return std::make_unique<CrossInteraction>(backend, pool, k, d, max_batch, cross);
}

}  // namespace recmix::mlp
