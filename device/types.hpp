#pragma once
// Small vocabulary shared by the device layer and everything above it.
#include <cstdint>
#include <string_view>

#if defined(__CUDACC__)
#define RECMIX_HOST_DEVICE __host__ __device__
#else
#define RECMIX_HOST_DEVICE
#endif

namespace recmix::device {

enum class BackendKind { cpu, cuda };

// Where an allocation lives: on the device (a GPU's memory, or ordinary memory on the CPU
// backend) or in the host tier (pinned host memory on CUDA) used for cold embedding rows.
enum class Tier { device, host };

inline std::string_view to_string(BackendKind k) { return k == BackendKind::cpu ? "cpu" : "cuda"; }
inline std::string_view to_string(Tier t) { return t == Tier::device ? "device" : "host"; }

}  // namespace recmix::device
