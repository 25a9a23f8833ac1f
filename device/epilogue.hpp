#pragma once
// GEMM epilogues (Backend::gemm_epilogue): what happens to a GEMM's result, or beside it, in the
// same call. CUDA fuses them into the GEMM through cuBLASLt; the backends that run kernels on the
// host apply them in a pass after their GEMM, with the functors below, which are also CUDA's
// fallback where cuBLASLt offers no fused algorithm for a shape.
#include <cstdint>

#include "core/host_device.hpp"

namespace recmix::device {

// With C[m x n] = alpha op(A) op(B) + beta C (row-major, as Backend::gemm):
//   bias:          C[i, j] += bias[j]                      (a bias per column of C)
//   bias_relu:     C[i, j] = max(C[i, j] + bias[j], 0)
//   bias_gradient: C as gemm(), and bias[i] = sum over k of op(A)[i, k], not scaled by alpha (a
//                  linear layer's weight gradient dW = dZ^T X with its bias gradient, the column
//                  sums of dZ, in one call).
enum class GemmEpilogue { none, bias, bias_relu, bias_gradient };

inline const char* to_string(GemmEpilogue e) {
  return e == GemmEpilogue::none         ? "none"
         : e == GemmEpilogue::bias       ? "bias"
         : e == GemmEpilogue::bias_relu  ? "bias+relu"
                                         : "bias gradient";
}

// The emulated bias gradient sums the k terms of each row in blocks of this many, then the
// blocks' sums in order: the order of the MLP's activation backward and column sum (mlp/kernels.hpp,
// kRowBlock), so that an emulated fused step equals an unfused one bit for bit.
inline constexpr int kEpilogueSumBlock = 32;

namespace epilogue {

// Element i of C[m x n] (leading dimension ldc): C += bias, then ReLU where asked.
struct AddBias {
  float* c;
  const float* bias;
  std::int64_t n, ldc;
  bool relu;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const {
    const std::int64_t r = i / n, j = i - r * n;
    float& x = c[r * ldc + j];
    const float v = x + bias[j];
    x = relu ? (v > 0.f ? v : 0.f) : v;
  }
};

// Row i of op(A) [m x k], where A is stored [m x k] (trans false) or [k x m] (trans true) with
// row stride lda: bias[i] = its k values summed in blocks of kEpilogueSumBlock.
struct RowSums {
  const float* a;
  std::int64_t k, lda;
  bool trans;
  float* bias;
  RECMIX_HOST_DEVICE void operator()(std::int64_t i) const {
    float total = 0.f;
    for (std::int64_t k0 = 0; k0 < k; k0 += kEpilogueSumBlock) {
      const std::int64_t k1 = k0 + kEpilogueSumBlock < k ? k0 + kEpilogueSumBlock : k;
      float block = 0.f;
      for (std::int64_t t = k0; t < k1; ++t) block += trans ? a[t * lda + i] : a[i * lda + t];
      total += block;
    }
    bias[i] = total;
  }
};

}  // namespace epilogue
}  // namespace recmix::device
