#pragma once
// The CPU backend's bf16 GEMM on oneDNN: a matmul primitive with bf16 source and weights and an
// fp32 destination, row-major as Backend::gemm_half. Building a primitive costs far more than
// running a small GEMM, so each one built is kept, keyed by everything it was built for.
// Built only with oneDNN (RECMIX_HAVE_ONEDNN).
#include <cstdint>
#include <memory>

namespace recmix::device::cpu {

class OneDnnBf16Gemm {
 public:
  OneDnnBf16Gemm();
  ~OneDnnBf16Gemm();
  OneDnnBf16Gemm(const OneDnnBf16Gemm&) = delete;
  OneDnnBf16Gemm& operator=(const OneDnnBf16Gemm&) = delete;

  // C = alpha op(A) op(B) + beta C for m, n, k > 0, returning true; or false, with C untouched,
  // where oneDNN has no bf16 matmul for this call on this CPU (oneDNN 2.6 has none below
  // AVX-512). `threads`: the OpenMP thread count the caller has set for this call. Not safe for
  // concurrent calls: a CPU backend, which owns one of these, is used by one thread at a time.
  bool run(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const std::uint16_t* a, int lda,
           const std::uint16_t* b, int ldb, float beta, float* c, int ldc, int threads);

  // Whether oneDNN may use bf16 instructions (AVX512_BF16, AMX) on this CPU; where it may not, its
  // bf16 matmul emulates them with fp32 arithmetic.
  static bool native();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace recmix::device::cpu
