#pragma once
// The "dcn" interaction: DLRM-DCNv2's cross network (Wang et al., "DCN V2", 2021) over the cat
// interaction's vector x0 = [bottom, emb 0 .. emb k-1], n = (k + 1) d wide. Layer l computes
//   x_{l+1} = x0 * (W_l (V_l x_l) + b_l) + x_l     (low rank r: V_l [r x n], W_l [n x r])
//   x_{l+1} = x0 * (M_l x_l + b_l) + x_l           (full rank, r = 0: M_l [n x n])
// with * element-wise, and the top MLP reads x_L. Its products are the backend's GEMMs (fp32, or
// TF32 where the backend's fp32 math is TF32); the rest is two kernels a layer
// (mlp/cross_kernels.hpp). Parameters: "cross.<l>.V", "cross.<l>.W" (or "cross.<l>.weight")
// and "cross.<l>.bias"; initialised as TorchRec's LowRankCrossNet and CrossNet are: the matrices
// Xavier-normal (std sqrt(2 / (fan_in + fan_out))), the biases zero (docs/math.md).
// Internal to recmix_mlp: built by make_interaction(InteractionKind::dcn, ...).
#include <memory>

#include "mlp/interaction.hpp"

namespace recmix::mlp {

// ConfigError for fewer than one layer or a negative rank.
std::unique_ptr<Interaction> make_cross_interaction(device::Backend& backend, device::MemoryPool& pool, int k, int d,
                                                    int max_batch, const CrossSpec& cross);

}  // namespace recmix::mlp
