// A stand-in for libnvidia-ml.so.1 with fixed answers, loaded by read_gpu_usage through
// RECMIX_NVML_LIBRARY: one GPU (index 0), 37% busy, 12% memory busy, 3 GiB of 80 used.
extern "C" {
struct FakeUtilization {
  unsigned int gpu, memory;
};
struct FakeMemory {
  unsigned long long total, free, used;
};
int nvmlInit_v2() { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  static int gpu0;
  *device = &gpu0;
  return 0;
}
int nvmlDeviceGetUtilizationRates(void*, FakeUtilization* u) {
  u->gpu = 37;
  u->memory = 12;
  return 0;
}
int nvmlDeviceGetMemoryInfo(void*, FakeMemory* m) {
  m->total = 80ull << 30;
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
