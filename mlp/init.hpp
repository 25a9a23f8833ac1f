#pragma once
// Parameter initialisation shared by the dense modules (Mlp, the cross network): each value a
// function of (seed, parameter name, index) only. Internal to recmix_mlp.
#include <cstddef>
#include <cstdint>
#include <string>

#include "mlp/launch.hpp"

namespace recmix::mlp::detail {

// The random stream of a parameter: a hash of its name, so values do not depend on the order
// in which parameters are built.
inline std::uint64_t name_stream(const std::string& name) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

// value[i] = normal(seed, name_stream(name), i) * scale, or uniform(seed, name_stream(name), i)
// over [-scale, scale), for i in [0, count).
inline void init_random(device::Backend& backend, device::Stream& s, float* value, std::size_t count,
                        std::uint64_t seed, const std::string& name, kernels::InitDistribution distribution,
                        double scale) {
  kernels::InitRandom f{value, static_cast<kernels::Index>(count), seed, name_stream(name), distribution,
                        static_cast<float>(scale)};
  launch(backend, s, flat_blocks(f.count), f, f.count);
}
inline void init_normal(device::Backend& backend, device::Stream& s, float* value, std::size_t count,
                        std::uint64_t seed, const std::string& name, double stddev) {
  init_random(backend, s, value, count, seed, name, kernels::InitDistribution::normal, stddev);
}
inline void init_uniform(device::Backend& backend, device::Stream& s, float* value, std::size_t count,
                         std::uint64_t seed, const std::string& name, double bound) {
  init_random(backend, s, value, count, seed, name, kernels::InitDistribution::uniform, bound);
}

}  // namespace recmix::mlp::detail
