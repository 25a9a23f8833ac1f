#include "device/gpu_usage.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string_view>

namespace recmix::device {
namespace {

// The parts of NVML's C interface used here (nvml.h: return codes are an enum, 0 is success;
// devices are opaque handles; the structs below match nvmlUtilization_t and nvmlMemory_t).
using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu, memory;  // percent
};
struct NvmlMemory {
  unsigned long long total, free, used;  // bytes
};

struct Nvml {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*handle_by_uuid)(const char*, NvmlDevice*) = nullptr;  // optional
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned int) = nullptr;
  std::string status;
  bool ready = false;
};

template <class F>
bool bind(void* library, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(library, name));
  return f != nullptr;
}

Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    const char* path = std::getenv("RECMIX_NVML_LIBRARY");
    const std::string name = path && *path ? path : "libnvidia-ml.so.1";
    n.library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!n.library) {
      const char* why = dlerror();
      n.status = "NVML not loaded: " + (why ? std::string(why) : name);
      return;
    }
    if (!bind(n.library, "nvmlInit_v2", n.init) || !bind(n.library, "nvmlDeviceGetHandleByIndex_v2", n.handle_by_index) ||
        !bind(n.library, "nvmlDeviceGetUtilizationRates", n.utilization) ||
        !bind(n.library, "nvmlDeviceGetMemoryInfo", n.memory)) {
      n.status = "NVML not usable: " + name + " lacks a function recmix needs";
      return;
    }
    bind(n.library, "nvmlSystemGetDriverVersion", n.driver_version);  // optional
    bind(n.library, "nvmlDeviceGetHandleByUUID", n.handle_by_uuid);      // optional
    if (const NvmlReturn rc = n.init(); rc != 0) {
      n.status = "NVML not initialised: nvmlInit_v2 returned " + std::to_string(rc);
      return;
    }
    char version[96] = {};
    n.status = n.driver_version && n.driver_version(version, sizeof version) == 0
                   ? "NVML (driver " + std::string(version) + ")"
                   : std::string("NVML");
    n.ready = true;
  });
  return n;
}

// NVML's handle of CUDA's GPU `index`; nullptr when there is none.
NvmlDevice handle_of_cuda_device(Nvml& n, int index) {
  const std::string entry = visible_device_entry(index, std::getenv("CUDA_VISIBLE_DEVICES"));
  NvmlDevice device = nullptr;
  if (entry.empty()) return nullptr;
  if (entry.find_first_not_of("0123456789") == std::string::npos) {
    if (entry.size() > 9 || n.handle_by_index(static_cast<unsigned int>(std::stoul(entry)), &device) != 0) return nullptr;
  } else if (!n.handle_by_uuid || n.handle_by_uuid(entry.c_str(), &device) != 0) {
    return nullptr;
  }
  return device;
}

}  // namespace

std::string visible_device_entry(int index, const char* visible) {
  if (index < 0) return {};
  if (visible == nullptr) return std::to_string(index);
  std::string_view rest(visible);
  for (int i = 0;; ++i) {
    const auto comma = rest.find(',');
    std::string_view entry = rest.substr(0, comma);
    while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
    while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
    // CUDA stops at the first entry it cannot use; an empty one is such an entry.
    if (entry.empty()) return {};
    if (i == index) return std::string(entry);
    if (comma == std::string_view::npos) return {};
    rest.remove_prefix(comma + 1);
  }
}

std::optional<GpuUsage> read_gpu_usage(int index) {
  Nvml& n = nvml();
  if (!n.ready || index < 0) return std::nullopt;
  NvmlDevice device = handle_of_cuda_device(n, index);
  NvmlUtilization u{};
  NvmlMemory m{};
  if (device == nullptr || n.utilization(device, &u) != 0 || n.memory(device, &m) != 0) return std::nullopt;
  GpuUsage usage;
  usage.utilization = u.gpu / 100.0;
  usage.memory_utilization = u.memory / 100.0;
  usage.memory_used_bytes = static_cast<std::size_t>(m.used);
  usage.memory_total_bytes = static_cast<std::size_t>(m.total);
  return usage;
}

std::string nvml_status() { return nvml().status; }

}  // namespace recmix::device
