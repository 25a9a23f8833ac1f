#pragma once
// The decomposition a GPU wants. A kernel functor's operator()(item) does a block of work per
// item, the shape a CPU thread runs well (a tight loop over a block of rows, a few thousand
// elements of a flat array). A GPU wants the opposite: many threads, each doing little, with
// adjacent threads touching adjacent memory. A functor that offers both declares
//
//   Index fine_items(Index items) const;  // fine work items of a launch of `items` block items
//   void fine(Index i) const;             // one of them
//
// fine_items() runs on the host when the launch is issued (it sizes the grid), so it reads the
// functor's own fields, never device memory; the strict emulator calls it there too.
//
// and both decompositions must compute the same bits (each output the same operations in the
// same order). The CUDA launcher runs fine(), the strict device emulator runs fine() too, so the
// CPU tests that compare the emulator with the CPU backend check that promise.
#include <concepts>
#include <cstdint>

#include "device/backend.hpp"
#include "device/types.hpp"

namespace recmix::device {

template <class F>
concept FineGrained = requires(const F& f, std::int64_t i) {
  { f.fine_items(i) } -> std::convertible_to<std::int64_t>;
  f.fine(i);
};

// Adapts a FineGrained functor to the plain f(i) that launchers call.
template <class F>
struct FineItems {
  F f;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const { f.fine(i); }
};

// Whether a host-run launch on `backend` takes the fine decomposition: the strict emulator runs
// what the GPU runs, the CPU backend the block items.
inline bool runs_fine_items(const Backend& backend) { return backend.runs_fine_items(); }

// A third decomposition, for kernels over rows of `dim` floats (the embedding's bags and rows):
// lanes. Lane l of row j covers components [4l, 4l + 4) (fewer in a row's last lane), so a row
// is ceil(dim / 4) adjacent items: on a GPU a sub-warp of threads per row, each reading its
// components in one 16-byte load (FBGEMM's table-batched embedding lays its warps out this way).
// A functor that offers lanes declares
//
//   Index lane_items(Index items) const;  // lanes of a launch of `items` block items
//   void lane(Index i) const;             // one of them
//
// with the same promise as fine(): the same bits as the block items. Where a functor offers both,
// the GPU and the strict emulator run lanes unless gpu_items() says fine (an A/B switch).
template <class F>
concept LaneGrained = requires(const F& f, std::int64_t i) {
  { f.lane_items(i) } -> std::convertible_to<std::int64_t>;
  f.lane(i);
};

template <class F>
struct LaneItems {
  F f;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const { f.lane(i); }
};

// Which of its GPU decompositions a launch takes (lanes by default; RECMIX_GPU_ITEMS=fine in the
// environment or set_gpu_items at run time picks the per-component items).
enum class GpuItems { lanes, fine };
GpuItems gpu_items();
void set_gpu_items(GpuItems items);

}  // namespace recmix::device
