#pragma once
// The lanes of a row (device/fine_grained.hpp): an item holds 4 adjacent components of one bag or
// row, so a row of `dim` floats is ceil(dim / 4) adjacent items, a sub-warp on a GPU. On the GPU a
// lane of 4 floats at a 16-byte boundary (4 16-bit values at an 8-byte one) is one load or store;
// on the host, and for a short last lane, the components are read one by one. Either way the
// values are the same.
//
// Every loop over a lane's components runs to the constant kLane and skips c >= n, so that a GPU
// compiler unrolls it and keeps the lane's arrays in registers. A loop to the runtime n put them
// in local memory: on an H200 the sparse update's lanes took 171 us a step where the per-component
// items took 46 us.
#include <cstdint>

#include "core/host_device.hpp"

namespace recmix::embedding::kernels {

inline constexpr int kLane = 4;

RECMIX_HOST_DEVICE inline std::int64_t lanes_per_row(std::int64_t dim) { return (dim + kLane - 1) / kLane; }

// Lane i of rows of `dim` components: row `item`, components [d0, d0 + n).
struct LaneAt {
  std::int64_t item;
  std::int64_t d0;
  int n;
};

RECMIX_HOST_DEVICE inline LaneAt lane_at(std::int64_t i, std::int64_t dim) {
  const std::int64_t per_row = lanes_per_row(dim);
  const std::int64_t item = i / per_row, d0 = (i - item * per_row) * kLane;
  return {item, d0, dim - d0 < kLane ? static_cast<int>(dim - d0) : kLane};
}

RECMIX_HOST_DEVICE inline void load_lane(const float* p, int n, float* v) {
#if defined(__CUDA_ARCH__)
  if (n == kLane && (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    return;
  }
#endif
  for (int c = 0; c < kLane; ++c)
    if (c < n) v[c] = p[c];
}

RECMIX_HOST_DEVICE inline void store_lane(float* p, int n, const float* v) {
#if defined(__CUDA_ARCH__)
  if (n == kLane && (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    return;
  }
#endif
  for (int c = 0; c < kLane; ++c)
    if (c < n) p[c] = v[c];
}

RECMIX_HOST_DEVICE inline void load_lane(const std::uint16_t* p, int n, std::uint16_t* v) {
#if defined(__CUDA_ARCH__)
  if (n == kLane && (reinterpret_cast<std::uintptr_t>(p) & 7u) == 0) {
    const ushort4 x = *reinterpret_cast<const ushort4*>(p);
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    return;
  }
#endif
  for (int c = 0; c < kLane; ++c)
    if (c < n) v[c] = p[c];
}

// Lane `at` of bag at.item of a pooling: the sum of components [d0, d0 + n) of the bag's rows in
// index order, as pool_bag (kernels.hpp) sums them, then the mean's scale. load(row, d0, n, v)
// reads components of a weights row as fp32. With `prefetch`, the next row's lane is loaded before
// the current one is added (software pipelining: two loads in flight a thread); the additions
// and their order are the same either way.
template <class Load>
RECMIX_HOST_DEVICE void pool_lane(LaneAt at, std::int64_t dim, const std::int64_t* offsets, const std::int64_t* rows,
                                  const std::int64_t* out_pos, float* out, bool mean, bool prefetch,
                                  const Load& load) {
  const std::int64_t j = at.item, begin = offsets[j], end = offsets[j + 1];
  float acc[kLane] = {0.f, 0.f, 0.f, 0.f}, cur[kLane] = {0.f, 0.f, 0.f, 0.f}, next[kLane] = {0.f, 0.f, 0.f, 0.f};
  if (prefetch) {
    if (begin < end) load(rows[begin], at.d0, at.n, cur);
    for (std::int64_t k = begin; k < end; ++k) {
      if (k + 1 < end) load(rows[k + 1], at.d0, at.n, next);
      for (int c = 0; c < kLane; ++c) acc[c] += cur[c];
      for (int c = 0; c < kLane; ++c) cur[c] = next[c];
    }
  } else {
    for (std::int64_t k = begin; k < end; ++k) {
      load(rows[k], at.d0, at.n, cur);
      for (int c = 0; c < kLane; ++c) acc[c] += cur[c];
    }
  }
  if (mean && end > begin) {
    const float inv = 1.0f / static_cast<float>(end - begin);
    for (int c = 0; c < kLane; ++c) acc[c] *= inv;
  }
  store_lane(out + (out_pos ? out_pos[j] : j) * dim + at.d0, at.n, acc);
}

}  // namespace recmix::embedding::kernels
