#pragma once
// cuBLASLt GEMMs with fused epilogues (device/epilogue.hpp) for the CUDA backend: each shape's
// matmul descriptor, layouts and algorithm chosen once and kept, so a step's GEMMs cost the host
// one cublasLtMatmul call each and a captured graph allocates nothing (the backend's workspace).
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "device/epilogue.hpp"

namespace recmix::device::cuda {

class LtGemm {
 public:
  LtGemm(void* workspace, std::size_t workspace_bytes);
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // Backend::gemm_epilogue's row-major call, enqueued on `stream` with fp32 (or TF32) math.
  // Returns false, having enqueued nothing, where cuBLASLt has no algorithm for it (the caller
  // then runs the GEMM and the epilogue's functor on its own).
  bool run(cudaStream_t stream, bool tf32, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
           const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc, GemmEpilogue epilogue,
           float* bias);

 private:
  struct Plan;
  // Shape, transposes, leading dimensions, epilogue, math and the operands' alignments.
  using Key = std::tuple<bool, bool, int, int, int, int, int, int, int, bool, int>;
  Plan* plan(const Key& key);

  cublasLtHandle_t handle_{};
  void* workspace_;
  std::size_t workspace_bytes_;
  std::map<Key, Plan*> plans_;  // a null plan: cuBLASLt has no algorithm for that key
};

}  // namespace recmix::device::cuda
