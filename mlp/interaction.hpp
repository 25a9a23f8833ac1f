#pragma once
// The feature interaction between the bottom MLP and the top MLP. "dot": stack T = [bottom,
// emb 0 .. emb k-1] (k+1 vectors of dim d per sample) and output [bottom, the strictly lower
// triangle of T T^T in row-major order (1,0), (2,0), (2,1), (3,0) ...]: d + (k+1)k/2 values.
// "cat": [bottom, emb 0 .. emb k-1]: d + k d values. As in the reference DLRM.
// "dcn": the cat vector x0, n = d + k d wide, through a DCN-V2 cross network (mlp/cross_net.hpp):
// n values, and the only interaction with parameters of its own.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/backend.hpp"
#include "device/memory_pool.hpp"
#include "mlp/types.hpp"

namespace recmix::mlp {

// The cross network of the "dcn" interaction: `layers` cross layers of rank `rank` (0: a full
// n x n matrix a layer, the original DCN-V2 layer), initialised from `seed`. bf16_gemms: its
// GEMMs take their operands rounded to bf16 and sum in fp32, as mlp::Mlp's bf16 GEMMs.
struct CrossSpec {
  int layers = 3;
  int rank = 512;
  std::uint64_t seed = 0;
  bool bf16_gemms = false;
};

class Interaction {
 public:
  virtual ~Interaction() = default;
  virtual int out_features() const = 0;
  // bottom [batch x d], embeddings [batch x k x d] -> [batch x out_features()], valid until the
  // next forward. Both inputs must stay unchanged until backward. batch may be 0.
  virtual const float* forward(device::Stream& s, const float* bottom, const float* embeddings,
                               int batch) = 0;
  // grad_out [batch x out] of the last forward; writes grad_bottom [batch x d] and
  // grad_embeddings [batch x k x d] (both overwritten).
  virtual void backward(device::Stream& s, const float* grad_out, float* grad_bottom,
                        float* grad_embeddings) = 0;
  // Its parameters as Mlp::parameters() names them ("cross.<l>.V", ...), values and gradients
  // each in one contiguous buffer (all_grads(), parameter_count() floats); backward overwrites
  // the gradients. None for dot and cat.
  virtual std::vector<Param> parameters() { return {}; }
  virtual float* all_grads() { return nullptr; }
  virtual std::size_t parameter_count() const { return 0; }
};

// dot, cat or dcn (with `cross`); ConfigError on non-positive sizes.
std::unique_ptr<Interaction> make_interaction(InteractionKind kind, device::Backend& backend,
                                              device::MemoryPool& pool, int num_embeddings, int dim,
                                              int max_batch, const CrossSpec& cross = {});

// Output width of an interaction without building one (for estimates and shape checks).
int interaction_out_features(InteractionKind kind, int num_embeddings, int dim);

}  // namespace recmix::mlp
