#pragma once
// Mlp: a stack of linear layers y = act(x W^T + b), W stored [out x in] row-major as in the
// reference DLRM. Hidden layers use ReLU, the last layer a chosen activation (ReLU for the bottom
// MLP, sigmoid for the top one). Weights, gradients and activations come from one MemoryPool.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/backend.hpp"
#include "device/buffer.hpp"
#include "device/memory_pool.hpp"
#include "mlp/types.hpp"

namespace recmix::mlp {

// Whether the MLPs use Backend::gemm_epilogue where their backend fuses epilogues (on by default;
// RECMIX_GEMM_EPILOGUES=off in the environment, or this call, turns it off): an A/B switch.
bool gemm_epilogues_enabled();
void set_gemm_epilogues_enabled(bool on);

class Mlp {
 public:
  // sizes = {in, h1, ..., out}. Parameters start as `init` says (mlp/types.hpp), each value a
  // function of (seed, parameter name, index) only.
  // Throws ConfigError on fewer than two sizes, a non-positive size or max_batch.
  // bf16_gemms (mixed precision, docs/math.md): every GEMM takes its two operands (weights,
  // activations, gradients, all kept in fp32) rounded to bf16 and sums the products in fp32,
  // through Backend::gemm_half; the fused fp32 CPU kernels are not used. Each value is rounded
  // once a step: the weights when forward starts, each layer's input in forward (kept for the
  // weight gradient), each pre-activation gradient once for its two GEMMs.
  Mlp(device::Backend& backend, device::MemoryPool& pool, std::string name, std::vector<int> sizes,
      Activation last, std::uint64_t seed, int max_batch, bool bf16_gemms = false, MlpInit init = MlpInit::dlrm);
  // A replica for intra-rank data parallelism: it computes with `primary`'s parameters (reads
  // them, never writes them) and keeps its own activations and gradients, on `backend`, for up
  // to max_batch samples. all_values() is null; parameters() name primary's values. ConfigError
  // when primary has bf16 GEMMs (replicas run the fused fp32 kernels).
  Mlp(const Mlp& primary, device::Backend& backend, int max_batch);
  ~Mlp();

  int in_features() const { return sizes_.front(); }
  int out_features() const { return sizes_.back(); }
  int num_layers() const { return static_cast<int>(sizes_.size()) - 1; }
  int max_batch() const { return max_batch_; }
  const std::string& name() const { return name_; }

  // input [batch x in] must stay unchanged until backward (its weight gradient reads it).
  // Returns [batch x out], valid until the next forward. batch may be 0 (a rank without samples:
  // its backward gives zero gradients); ConfigError outside [0, max_batch].
  const float* forward(device::Stream& s, const float* input, int batch);
  // grad_output [batch x out] w.r.t. the output of the last forward. Overwrites the parameter
  // gradients. Returns the gradient w.r.t. the input [batch x in], or nullptr when
  // need_input_grad is false (that GEMM is skipped).
  const float* backward(device::Stream& s, const float* grad_output, bool need_input_grad);
  // Where backward() keeps the gradient w.r.t. the output, [max_batch x out]: a grad_output
  // written here is taken as it is, without the copy that backward() makes of one elsewhere.
  // backward() turns it into the last layer's pre-activation gradient in place.
  float* output_gradient() { return layers_.back().grad.data(); }
  // backward() with a plain SGD step (p -= lr * grad) folded in: each weight-gradient GEMM adds
  // -lr * dW straight onto the weights (beta = 1) and the biases step from their column sums
  // after the last layer's GEMMs, all in one launch (no GEMM of the backward reads a bias), so
  // no weight gradient is stored and no update pass runs (at batch 128 the two passes over the
  // 474k Kaggle parameters are about 10% of a step). The input-gradient GEMMs run before their
  // layer's update and so see the old weights, as in backward(). Only valid where nothing else
  // needs the gradients (one rank, SGD); the weight gradients are left unspecified, the bias
  // gradients hold this step's. Rounding may differ from backward() + SGD in the last bits.
  const float* backward_sgd(device::Stream& s, const float* grad_output, bool need_input_grad, float lr);

  bool bf16_gemms() const { return bf16_; }

  // Per layer: "<name>.<i>.weight" [out x in], then "<name>.<i>.bias" [out]. All values lie in one
  // contiguous buffer (all_values()), all gradients in another, in this order.
  std::vector<Param> parameters();
  float* all_values() { return values_.data(); }
  float* all_grads() { return grads_.data(); }
  std::size_t parameter_count() const { return grads_.size(); }

 private:
  const float* backward_impl(device::Stream& s, const float* grad_output, bool need_input_grad,
                             const float* sgd_lr);
  void use_fused_kernels();
  // backward_sgd's bias steps: b -= lr db for every layer, one launch.
  void step_biases(device::Stream& s, float lr);
  // A GEMM operand: its fp32 values and, with bf16 GEMMs, the same values rounded to bf16.
  struct Operand {
    const float* fp32;
    const std::uint16_t* bf16;
  };
  // backend_.gemm on the fp32 operands, or gemm_half on the bf16 ones (bf16_gemms); A and B are
  // dense (lda, ldb their row lengths).
  void gemm(device::Stream& s, bool trans_a, bool trans_b, int m, int n, int k, float alpha, Operand a, int lda,
            Operand b, int ldb, float beta, float* c, int ldc);
  // With bf16 GEMMs: `count` values of src rounded into dst; nothing otherwise.
  void round_bf16(device::Stream& s, const float* src, std::size_t count, std::uint16_t* dst);
  struct Layer {
    int in = 0, out = 0;
    Activation act = Activation::relu;
    float* weight = nullptr;
    float* bias = nullptr;
    float* weight_grad = nullptr;
    float* bias_grad = nullptr;
    device::Buffer<float> output;  // [max_batch x out], post-activation
    device::Buffer<float> grad;    // [max_batch x out]: the gradient w.r.t. this layer's output,
                                   // turned in place into the one w.r.t. its pre-activation
    // bf16 GEMMs only: the weights' bf16 copy (in values16_) and this layer's input rounded in
    // forward [max_batch x in], which the weight-gradient GEMM reads again.
    const std::uint16_t* weight16 = nullptr;
    device::Buffer<std::uint16_t> input16;
  };
  // Whether this layer's forward / input-gradient GEMM runs as a fused CPU kernel right now.
  bool fused_forward(const Layer& l) const;
  bool fused_input_gradient(const Layer& l) const;
  // Whether this step's fp32 GEMMs carry their bias, ReLU and bias gradient as epilogues.
  bool epilogues() const;
  // Launches f over n blocks, a pass that may write bf16 GEMM operands: with bf16 GEMMs on the CPU
  // backend of an AVX-512 CPU through cpu::run_rounded (mlp/cpu_bf16.hpp), else the functor as it is.
  template <class F>
  void launch_rounding(device::Stream& s, std::int64_t n, const F& f, std::int64_t elements);

  device::Backend& backend_;
  device::MemoryPool& pool_;
  std::string name_;
  std::vector<int> sizes_;
  int max_batch_;
  std::vector<Layer> layers_;
  device::Buffer<float> values_;
  device::Buffer<float> grads_;
  device::Buffer<float> input_grad_;      // [max_batch x in], only allocated when asked for
  device::Buffer<float> bias_partials_;   // per row block partial sums of the bias gradients
  // On the CPU backend with AVX2 and FMA: the fused linear-layer GEMMs (mlp/cpu/linear.hpp, used
  // beside OpenBLAS) and their packing scratch.
  bool fused_ = false;
  device::Buffer<float> pack_;
  bool bf16_ = false;
  device::Buffer<std::uint16_t> values16_;  // bf16 GEMMs: all_values() rounded, each forward
  device::Buffer<std::uint16_t> grad16_;    // bf16 GEMMs: one layer's pre-activation gradient rounded
  const float* input_ = nullptr;
  int batch_ = 0;
  bool forward_done_ = false;
  // backward_sgd's bias steps as one launch (param_step_table.hpp), made at its first call and
  // again when lr changes.
  struct BiasSteps;
  std::unique_ptr<BiasSteps> bias_steps_;
};

}  // namespace recmix::mlp
