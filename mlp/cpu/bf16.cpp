#include "mlp/cpu/bf16.hpp"

#include "core/half_avx512.hpp"

namespace recmix::mlp::cpu {

bool bf16_rounding_vectorised() { return half::avx512_lanes_available(); }

void round_to_bf16(const float* src, std::uint16_t* dst, std::int64_t n, bool vectorised) {
#ifdef RECMIX_HALF_AVX512
  if (vectorised) return half::avx512::round_to_bf16(src, dst, n);
#endif
  for (std::int64_t i = 0; i < n; ++i) dst[i] = half::float_to_bf16(src[i]);
}

namespace {

// The rows of block `item` of a rows x cols array (kRowBlock rows a block), rounded from src to dst.
void round_block(const float* src, std::uint16_t* dst, kernels::Index item, int rows, int cols, bool vectorised) {
  if (!dst) return;
  const kernels::Index r0 = item * kernels::kRowBlock, r1 = kernels::min_index(r0 + kernels::kRowBlock, rows);
  const std::int64_t first = static_cast<std::int64_t>(r0) * cols;
  round_to_bf16(src + first, dst + first, static_cast<std::int64_t>(r1 - r0) * cols, vectorised);
}

// f(item) without its own rounding, then its fp32 output `out` rounded into `out16` over the
// block's rows (rows x cols).
template <class F>
void run_then_round(const F& f, float* F::*out, std::uint16_t* F::*out16, int rows, int cols, kernels::Index item,
                    bool vectorised) {
  F g = f;
  g.*out16 = nullptr;
  g(item);
  round_block(f.*out, f.*out16, item, rows, cols, vectorised);
}

}  // namespace

void run_rounded(const kernels::BiasActivationForward& f, kernels::Index item, bool vectorised) {
  using F = kernels::BiasActivationForward;
  run_then_round(f, &F::y, &F::y16, f.rows, f.cols, item, vectorised);
}

void run_rounded(const kernels::ActivationBackward& f, kernels::Index item, bool vectorised) {
  using F = kernels::ActivationBackward;
  run_then_round(f, &F::dz, &F::dz16, f.rows, f.cols, item, vectorised);
}

void run_rounded(const kernels::RoundToBf16& f, kernels::Index item, bool vectorised) {
  const kernels::Index first = item * kernels::kFlatBlock;
  round_to_bf16(f.src + first, f.dst + first, kernels::min_index(kernels::kFlatBlock, f.count - first), vectorised);
}

void run_rounded(const kernels::CrossCombine& f, kernels::Index item, bool vectorised) {
  using F = kernels::CrossCombine;
  run_then_round(f, &F::x_next, &F::x_next16, f.rows, f.n, item, vectorised);
}

void run_rounded(const kernels::CrossGradient& f, kernels::Index item, bool vectorised) {
  using F = kernels::CrossGradient;
  run_then_round(f, &F::dv, &F::dv16, f.rows, f.n, item, vectorised);
}

}  // namespace recmix::mlp::cpu
