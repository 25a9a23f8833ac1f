#pragma once
// Helpers shared by the benchmarks: timing (timing.hpp), deterministic fills, and the bare
// GEMM chain of one DLRM training step (forward, weight-gradient and input-gradient GEMMs of
// every layer through Backend::gemm), the machine's practical ceiling for the model.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <vector>

#include "bench/common/timing.hpp"
#include "device/backend.hpp"
#include "device/buffer.hpp"

namespace recmix::bench {

inline void fill(float* p, std::size_t n, float lo, float hi, unsigned seed) {
  for (std::size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = lo + (hi - lo) * static_cast<float>(seed >> 8) * (1.f / 16777216.f);
  }
}

// The GEMMs of a training step over MLPs given as layer widths {in, h1, ..., out}.
struct GemmChain {
  struct Layer {
    int in, out;
    device::Buffer<float> w, dw, y, dy, dx;
  };
  device::Backend& backend;
  std::vector<Layer> layers;
  device::Buffer<float> input;
  int batch;

  GemmChain(device::Backend& b, device::MemoryPool& pool, const std::vector<std::vector<int>>& mlps, int batch_size)
      : backend(b), batch(batch_size) {
    std::size_t widest_in = 0;
    for (const auto& sizes : mlps)
      for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
        int in = sizes[i], out = sizes[i + 1];
        Layer l{in,
                out,
                device::Buffer<float>(pool, std::size_t(in) * out),
                device::Buffer<float>(pool, std::size_t(in) * out),
                device::Buffer<float>(pool, std::size_t(batch) * out),
                device::Buffer<float>(pool, std::size_t(batch) * out),
                device::Buffer<float>(pool, std::size_t(batch) * in)};
        fill(l.w.data(), l.w.size(), -0.05f, 0.05f, 1);
        fill(l.dy.data(), l.dy.size(), -0.01f, 0.01f, 2);
        widest_in = std::max(widest_in, std::size_t(in));
        layers.push_back(std::move(l));
      }
    input = device::Buffer<float>(pool, std::size_t(batch) * widest_in);
    fill(input.data(), input.size(), 0.f, 1.f, 3);
  }

  void run(device::Stream& s) {
    for (auto& l : layers)
      backend.gemm(s, false, true, batch, l.out, l.in, 1.f, input.data(), l.in, l.w.data(), l.in, 0.f, l.y.data(),
                   l.out);
    for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
      auto& l = *it;
      backend.gemm(s, true, false, l.out, l.in, batch, 1.f, l.dy.data(), l.out, input.data(), l.in, 0.f,
                   l.dw.data(), l.in);
      backend.gemm(s, false, false, batch, l.in, l.out, 1.f, l.dy.data(), l.out, l.w.data(), l.in, 0.f,
                   l.dx.data(), l.in);
    }
  }
};

}  // namespace recmix::bench
