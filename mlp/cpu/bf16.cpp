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

}  // namespace

void run_rounded(const kernels::BiasActivationForward& f, kernels::Index item, bool vectorised) {
  auto g = f;
  g.y16 = nullptr;
  g(item);
  round_block(f.y, f.y16, item, f.rows, f.cols, vectorised);
}

void run_rounded(const kernels::ActivationBackward& f, kernels::Index item, bool vectorised) {
  auto g = f;
  g.dz16 = nullptr;
  g(item);
  round_block(f.dz, f.dz16, item, f.rows, f.cols, vectorised);
}

void run_rounded(const kernels::RoundToBf16& f, kernels::Index item, bool vectorised) {
  const kernels::Index first = item * kernels::kFlatBlock;
  round_to_bf16(f.src + first, f.dst + first, kernels::min_index(kernels::kFlatBlock, f.count - first), vectorised);
}

void run_rounded(const kernels::CrossCombine& f, kernels::Index item, bool vectorised) {
  auto g = f;
  g.x_next16 = nullptr;
  g(item);
  round_block(f.x_next, f.x_next16, item, f.rows, f.n, vectorised);
}

void run_rounded(const kernels::CrossGradient& f, kernels::Index item, bool vectorised) {
  auto g = f;
  g.dv16 = nullptr;
  g(item);
  round_block(f.dv, f.dv16, item, f.rows, f.n, vectorised);
}

}  // namespace recmix::mlp::cpu
