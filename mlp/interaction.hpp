#pragma once
// The feature interaction between the bottom MLP and the top MLP. "dot": stack T = [bottom,
// emb 0 .. emb k-1] (k+1 vectors of dim d per sample) and output [bottom, the strictly lower
// triangle of T T^T in row-major order (1,0), (2,0), (2,1), (3,0) ...]: d + (k+1)k/2 values.
// "cat": [bottom, emb 0 .. emb k-1]: d + k d values. As in the reference DLRM.
#include <memory>
#include <string>

#include "device/backend.hpp"
#include "device/memory_pool.hpp"

namespace recmix::mlp {

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
};

// kind "dot" or "cat"; ConfigError on another kind or non-positive sizes.
std::unique_ptr<Interaction> make_interaction(const std::string& kind, device::Backend& backend,
                                              device::MemoryPool& pool, int num_embeddings, int dim,
                                              int max_batch);

// Output width of an interaction without building one (for estimates and shape checks).
int interaction_out_features(const std::string& kind, int num_embeddings, int dim);

}  // namespace recmix::mlp
