// libgpu_timeline.so: the GPU-idle share of a run without nsys. Loaded by the CUDA driver into any
// program as an injection library (CUDA_INJECTION64_PATH=/path/libgpu_timeline.so, the mechanism
// NVIDIA's CUPTI injection samples use), it records every kernel, copy and fill through CUPTI's
// activity API, and at the program's exit writes summarize()'s lines (gpu_timeline.hpp) to
// RECMIX_TIMELINE_OUT, or to stderr. RECMIX_TIMELINE_WINDOW="from,to" picks the stretch, as
// fractions of the records in order of start (default "0.2,0.9": start-up and the end left out).
// CUPTI's concurrent-kernel records keep kernels concurrent; recording them costs the program a
// little time per launch, as it does under nsys.
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "bench/device/timeline/gpu_timeline.hpp"

namespace {

using recmix::bench::GpuActivity;

constexpr std::size_t kBufferBytes = std::size_t(8) << 20;

std::mutex records_mutex;
std::vector<GpuActivity>& records() {
  static auto* r = new std::vector<GpuActivity>();  // never freed: read by the exit handler
  return *r;
}

void report(const char* what, CUptiResult rc) {
  if (rc == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(rc, &text);
  std::fprintf(stderr, "gpu_timeline: %s failed: %s\n", what, text ? text : "unknown error");
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::vector<GpuActivity> got;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        got.push_back({k->start, k->end, k->graphId, k->correlationId, GpuActivity::Kind::kernel});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* c = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
        got.push_back({c->start, c->end, c->graphId, c->correlationId, GpuActivity::Kind::copy});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* s = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        got.push_back({s->start, s->end, s->graphId, s->correlationId, GpuActivity::Kind::fill});
        break;
      }
      default: break;
    }
  }
  std::free(buffer);
  std::lock_guard lock(records_mutex);
  records().insert(records().end(), got.begin(), got.end());
}

void write_summary() {
  report("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  double from = 0.2, to = 0.9;
  if (const char* w = std::getenv("RECMIX_TIMELINE_WINDOW")) std::sscanf(w, "%lf,%lf", &from, &to);
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
  std::string text;
  {
    std::lock_guard lock(records_mutex);
    text = recmix::bench::describe(recmix::bench::summarize(records(), from, to));
    text = "gpu timeline: " + std::to_string(records().size()) + " records, window " + std::to_string(from) + " to " +
           std::to_string(to) + ", " + std::to_string(dropped) + " dropped\n" + text;
  }
  const char* out = std::getenv("RECMIX_TIMELINE_OUT");
  std::FILE* f = out && *out ? std::fopen(out, "w") : nullptr;
  std::fputs(text.c_str(), f ? f : stderr);
  if (f) std::fclose(f);
}

}  // namespace

// Called by the CUDA driver when it loads this library (CUDA_INJECTION64_PATH).
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  report("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
    report("cuptiActivityEnable", cuptiActivityEnable(kind));
  std::atexit(write_summary);
  return 1;
}
