#include "mlp/cpu_bf16.hpp"

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

// Rows [item x kRowBlock, ...) of a rows x cols block: their first element and how many.
struct BlockSpan {
  std::int64_t first, count;
};
BlockSpan block_span(kernels::Index item, int rows, int cols) {
  const kernels::Index r0 = item * kernels::kRowBlock, r1 = kernels::min_index(r0 + kernels::kRowBlock, rows);
  return {static_cast<std::int64_t>(r0) * cols, static_cast<std::int64_t>(r1 - r0) * cols};
}

}  // namespace

void bias_activation_forward(const kernels::BiasActivationForward& f, kernels::Index item, bool vectorised) {
  auto g = f;
  g.y16 = nullptr;
  g(item);
  if (!f.y16) return;
  const auto span = block_span(item, f.rows, f.cols);
  round_to_bf16(f.y + span.first, f.y16 + span.first, span.count, vectorised);
}

void activation_backward(const kernels::ActivationBackward& f, kernels::Index item, bool vectorised) {
  auto g = f;
  g.dz16 = nullptr;
  g(item);
  if (!f.dz16) return;
  const auto span = block_span(item, f.rows, f.cols);
  round_to_bf16(f.dz + span.first, f.dz16 + span.first, span.count, vectorised);
}

}  // namespace recmix::mlp::cpu
