// LtGemm: row-major GEMMs with epilogues through cuBLASLt's column-major matmul. As in the
// backend's cublasSgemm call, row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T:
// cuBLASLt's A is our B and its B our A, M = n, N = m. Its BIAS epilogue adds a vector over the
// rows of its D (our columns, n values) and BGRADB sums its B over K (our op(A)'s rows, m values),
// the meanings of device/epilogue.hpp.
#include "device/cuda/lt_gemm.cuh"

#include <algorithm>
#include <string>

#include "device/cuda/check.cuh"
#include "device/cuda/cublas_library.hpp"

#define RECMIX_LT_CHECK(call) RECMIX_CUBLAS_CHECK(call)

namespace recmix::device::cuda {

struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc{};
  cublasLtMatrixLayout_t a{}, b{}, c{};
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (desc) cublas().lt_desc_destroy(desc);
    if (a) cublas().lt_layout_destroy(a);
    if (b) cublas().lt_layout_destroy(b);
    if (c) cublas().lt_layout_destroy(c);
  }
};

namespace {

// The largest power of two up to 256 that divides p's address (cuBLASLt's alignment preferences).
int alignment(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  int align = 256;
  while (align > 4 && v % align != 0) align /= 2;
  return align;
}

cublasLtEpilogue_t lt_epilogue(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::bias_relu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::bias_gradient: return CUBLASLT_EPILOGUE_BGRADB;
    case GemmEpilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

LtGemm::LtGemm(void* workspace, std::size_t workspace_bytes) : workspace_(workspace), workspace_bytes_(workspace_bytes) {
  RECMIX_LT_CHECK(cublas().lt_create(&handle_));
}

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) delete p;
  if (handle_) cublas().lt_destroy(handle_);
}

LtGemm::Plan* LtGemm::plan(const Key& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  const auto [trans_a, trans_b, m, n, k, lda, ldb, ldc, epilogue_code, tf32, align] = key;
  auto* p = new Plan;
  plans_[key] = nullptr;  // until an algorithm is found
  RECMIX_LT_CHECK(cublas().lt_desc_create(&p->desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                           CUDA_R_32F));
  const cublasOperation_t op_a = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A is our B
  const cublasOperation_t op_b = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  RECMIX_LT_CHECK(cublas().lt_desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  RECMIX_LT_CHECK(cublas().lt_desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  const cublasLtEpilogue_t epi = lt_epilogue(static_cast<GemmEpilogue>(epilogue_code));
  RECMIX_LT_CHECK(cublas().lt_desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
  // Stored shapes (column-major): our B is [k x n] row-major, or [n x k] transposed; our A is
  // [m x k], or [k x m]; C is [m x n] row-major, so [n x m] column-major.
  RECMIX_LT_CHECK(cublas().lt_layout_create(&p->a, CUDA_R_32F, trans_b ? k : n, trans_b ? n : k, ldb));
  RECMIX_LT_CHECK(cublas().lt_layout_create(&p->b, CUDA_R_32F, trans_a ? m : k, trans_a ? k : m, lda));
  RECMIX_LT_CHECK(cublas().lt_layout_create(&p->c, CUDA_R_32F, n, m, ldc));
  cublasLtMatmulPreference_t pref{};
  RECMIX_LT_CHECK(cublas().lt_preference_create(&pref));
  const std::uint64_t bytes = workspace_bytes_;
  const std::uint32_t al = static_cast<std::uint32_t>(align);
  cublas().lt_preference_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes));
  for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublas().lt_preference_set(pref, attr, &al, sizeof(al));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublas().lt_heuristic(handle_, p->desc, p->a, p->b, p->c, p->c, pref, 1, &result, &found);
  cublas().lt_preference_destroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    delete p;
    return nullptr;
  }
  p->algo = result.algo;
  plans_[key] = p;
  return p;
}

bool LtGemm::run(cudaStream_t stream, bool tf32, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                 const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc,
                 GemmEpilogue epilogue, float* bias) {
  const int align = std::min({alignment(a), alignment(b), alignment(c)});
  Plan* p = plan(Key{trans_a, trans_b, m, n, k, lda, ldb, ldc, static_cast<int>(epilogue), tf32, align});
  if (!p) return false;
  if (epilogue != GemmEpilogue::none)
    RECMIX_LT_CHECK(
        cublas().lt_desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const cublasStatus_t st = cublas().lt_matmul(handle_, p->desc, &alpha, b, p->a, a, p->b, &beta, c, p->c, c, p->c,
                                           &p->algo, workspace_, workspace_bytes_, stream);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return false;
  RECMIX_LT_CHECK(st);
  return true;
}

}  // namespace recmix::device::cuda
