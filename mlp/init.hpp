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

// value[i] = normal(seed, name_stream(name), i) * stddev, for i in [0, count).
inline void init_normal(device::Backend& backend, device::Stream& s, float* value, std::size_t count,
                        std::uint64_t seed, const std::string& name, double stddev) {
  kernels::InitNormal f{value, static_cast<kernels::Index>(count), seed, name_stream(name),
                        static_cast<float>(stddev)};
  launch(backend, s, flat_blocks(f.count), f, f.count);
}

// value[i] = uniform(seed, name_stream(name), i) over [-bound, bound), for i in [0, count).
inline void init_uniform(device::Backend& backend, device::Stream& s, float* value, std::size_t count,
                         std::uint64_t seed, const std::string& name, double bound) {
  kernels::InitUniform f{value, static_cast<kernels::Index>(count), seed, name_stream(name),
                         static_cast<float>(bound)};
  launch(backend, s, flat_blocks(f.count), f, f.count);
}

}  // namespace recmix::mlp::detail
