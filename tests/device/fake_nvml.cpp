// A stand-in for libnvidia-ml.so.1 with fixed answers, loaded by read_gpu_usage through
// RECMIX_NVML_LIBRARY: every GPU is 37% busy, 12% memory busy and has 3 GiB in use. By default there
// is one GPU (index 0) of 80 GiB; RECMIX_FAKE_NVML_GIB="80,40" gives one GPU a size (GiB), in
// index order. GPU i's UUID is "GPU-fake-<i>".
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {
std::vector<unsigned long long> sizes_gib() {
  const char* text = std::getenv("RECMIX_FAKE_NVML_GIB");
  std::vector<unsigned long long> out;
  std::string s = text && *text ? text : "80";
  for (std::size_t at = 0; at <= s.size();) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(std::stoull(s.substr(at, comma - at)));
    at = comma + 1;
  }
  return out;
}
// The device handles point at the GPU's index.
unsigned int gpus[64];
}  // namespace

extern "C" {
struct FakeUtilization {
  unsigned int gpu, memory;
};
struct FakeMemory {
  unsigned long long total, free, used;
};
int nvmlInit_v2() { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= sizes_gib().size() || index >= 64) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  gpus[index] = index;
  *device = &gpus[index];
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** device) {
  const char prefix[] = "GPU-fake-";
  if (std::strncmp(uuid, prefix, sizeof prefix - 1) != 0) return 6;  // NVML_ERROR_NOT_FOUND
  return nvmlDeviceGetHandleByIndex_v2(static_cast<unsigned int>(std::atoi(uuid + sizeof prefix - 1)), device) == 0 ? 0 : 6;
}
int nvmlDeviceGetUtilizationRates(void*, FakeUtilization* u) {
  u->gpu = 37;
  u->memory = 12;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, FakeMemory* m) {
  m->total = sizes_gib()[*static_cast<unsigned int*>(device)] << 30;
  m->used = 3ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  const char text[] = "999.1";
  if (length < sizeof text) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  for (unsigned int i = 0; i < sizeof text; ++i) version[i] = text[i];
  return 0;
}
}
