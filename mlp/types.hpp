#pragma once
// Small vocabulary of the dense model: a named parameter (value and gradient buffers) as the
// trainer, the all-reduce and the checkpoints see it, and the activation that ends a layer.
#include <cstddef>
#include <string>

namespace recmix::mlp {

// One named tensor. grad is nullptr for optimizer state. Both live in device memory.
struct Param {
  std::string name;
  float* value = nullptr;
  float* grad = nullptr;
  std::size_t count = 0;
};

enum class Activation { none, relu, sigmoid };

}  // namespace recmix::mlp
