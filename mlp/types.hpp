#pragma once
// Small vocabulary of the dense model: a named parameter (value and gradient buffers) as the
// trainer, the all-reduce and the checkpoints see it, the activation that ends a layer, the
// interaction's kind and the optimizer's (core/optimizer_kind.hpp, shared with sched/).
#include <cstddef>
#include <string>

#include "core/optimizer_kind.hpp"

namespace recmix::mlp {

// One named tensor. grad is nullptr for optimizer state. Both live in device memory.
struct Param {
  std::string name;
  float* value = nullptr;
  float* grad = nullptr;
  std::size_t count = 0;
};

enum class Activation { none, relu, sigmoid };
// How an MLP's parameters start (docs/math.md): dlrm, as the reference DLRM (dlrm_s_pytorch.py):
// W ~ normal(0, sqrt(2 / (in + out))), b ~ normal(0, sqrt(1 / out)); torchrec, as TorchRec's MLPs
// (a bare torch.nn.Linear, used by the DLRM-DCNv2 reference): W and b ~ uniform(+-1/sqrt(in)).
enum class MlpInit { dlrm, torchrec };

// The feature interaction between the bottom and the top MLP (mlp/interaction.hpp).
enum class InteractionKind { dot, cat, dcn };
// Its name in messages ("dot", "cat", "dcn").
constexpr const char* interaction_name(InteractionKind kind) {
  switch (kind) {
    case InteractionKind::dot: return "dot";
    case InteractionKind::cat: return "cat";
    case InteractionKind::dcn: return "dcn";
  }
  return "?";
}

using recmix::DenseOptimizerKind;  // sgd | adagrad | adam

}  // namespace recmix::mlp
