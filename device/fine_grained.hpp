#pragma once
// The decomposition a GPU wants. A kernel functor's operator()(item) does a block of work per
// item, the shape a CPU thread runs well (a tight loop over a block of rows, a few thousand
// elements of a flat array). A GPU wants the opposite: many threads, each doing little, with
// adjacent threads touching adjacent memory. A functor that offers both declares
//
//   Index fine_items(Index items) const;  // fine work items of a launch of `items` block items
//   void fine(Index i) const;             // one of them
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

}  // namespace recmix::device
