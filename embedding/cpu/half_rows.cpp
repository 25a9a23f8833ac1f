// 16-bit rows, 16 elements a vector: the AVX-512 lane functions of core/half_avx512.hpp inside
// target() functions, chosen at run time. Each step is the integer arithmetic of core/half.hpp on
// 16 lanes at once:
// - fp16 to fp32 is F16C's vcvtph2ps (exact, NaNs made quiet as fp16_to_float makes them);
//   bf16 to fp32 a shift.
// - bf16 rounding (to nearest, stochastic) is branch-free there and runs whole.
// - fp16 rounding runs the normal-range formula (|x| in [2^-14, 65536)), and the lanes outside
//   it, a small share (|x| < 6.1e-5, NaN, infinity), take the scalar routine.
// - The random bits are half::rounding_bits_at on 8 64-bit lanes (vpmullq).
#include "embedding/cpu/half_rows.hpp"

#include "core/half_avx512.hpp"

namespace recmix::embedding::cpu {
namespace {

template <half::Storage S, bool Stochastic>
void sgd_half_row_scalar(std::uint64_t key, std::uint16_t* w, std::uint64_t first, const float* g, std::int64_t n,
                         float lr) {
  for (std::int64_t d = 0; d < n; ++d) {
    const float x = kernels::half_to_float(S, w[d]) - lr * (0.f + g[d]);
    const std::uint32_t random = Stochastic ? half::rounding_bits_at(key, first + static_cast<std::uint64_t>(d)) : 0u;
    w[d] = kernels::float_to_half(S, x, Stochastic, random);
  }
}

template <half::Storage S, bool Stochastic>
void round_half_row_scalar(std::uint64_t key, std::uint16_t* w, std::uint64_t first, const float* x, std::int64_t n) {
  for (std::int64_t d = 0; d < n; ++d) {
    const std::uint32_t random = Stochastic ? half::rounding_bits_at(key, first + static_cast<std::uint64_t>(d)) : 0u;
    w[d] = kernels::float_to_half(S, x[d], Stochastic, random);
  }
}

#ifdef RECMIX_HALF_AVX512
using namespace half::avx512;

template <half::Storage S>
RECMIX_AVX512 void widen_avx512(const std::uint16_t* w, float* out, std::int64_t n) {
  std::int64_t d = 0;
  for (; d + 16 <= n; d += 16)
    _mm512_storeu_ps(out + d, widen<S>(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + d))));
  if (d < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - d)) - 1u);
    _mm512_mask_storeu_ps(out + d, tail, widen<S>(_mm256_maskz_loadu_epi16(tail, w + d)));
  }
}

// Lanes `lanes` of x, rounded, to w[d ..] (element d + i's random bits those of first + d + i).
template <half::Storage S, bool Stochastic>
RECMIX_AVX512 inline void store_rounded(std::uint64_t key, std::uint16_t* w, std::uint64_t first, std::int64_t d,
                                        __mmask16 lanes, __m512 x) {
  const __m512i random = Stochastic ? rounding_bits(key, first + static_cast<std::uint64_t>(d)) : _mm512_setzero_si512();
  __m512i h;
  if constexpr (S == half::Storage::bf16) {
    h = round_bf16<Stochastic>(_mm512_castps_si512(x), random);
  } else {
    __mmask16 others;
    h = round_fp16<Stochastic>(_mm512_castps_si512(x), random, &others);
    others &= lanes;
    if (others) {  // the general routine, lane by lane
      alignas(64) float xs[16];
      alignas(64) std::uint32_t rs[16], hs[16];
      _mm512_store_ps(xs, x);
      _mm512_store_si512(rs, random);
      _mm512_store_si512(hs, h);
      for (unsigned m = others; m; m &= m - 1) {
        const int i = __builtin_ctz(m);
        hs[i] = Stochastic ? half::float_to_fp16_stochastic(xs[i], rs[i]) : half::float_to_fp16(xs[i]);
      }
      h = _mm512_load_si512(hs);
    }
  }
  _mm256_mask_storeu_epi16(w + d, lanes, _mm512_cvtepi32_epi16(h));
}

template <half::Storage S, bool Stochastic>
RECMIX_AVX512 void sgd_avx512(std::uint64_t key, std::uint16_t* w, std::uint64_t first, const float* g, std::int64_t n,
                              float lr) {
  const __m512 rate = _mm512_set1_ps(lr);
  for (std::int64_t d = 0; d < n; d += 16) {
    const __mmask16 lanes = lanes_from(d, n);
    const __m512 old = widen<S>(_mm256_maskz_loadu_epi16(lanes, w + d));
    const __m512 step = _mm512_mul_ps(rate, _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(lanes, g + d)));
    store_rounded<S, Stochastic>(key, w, first, d, lanes, _mm512_sub_ps(old, step));
  }
}

template <half::Storage S, bool Stochastic>
RECMIX_AVX512 void round_avx512(std::uint64_t key, std::uint16_t* w, std::uint64_t first, const float* x,
                                std::int64_t n) {
  for (std::int64_t d = 0; d < n; d += 16) {
    const __mmask16 lanes = lanes_from(d, n);
    store_rounded<S, Stochastic>(key, w, first, d, lanes, _mm512_maskz_loadu_ps(lanes, x + d));
  }
}
#endif

}  // namespace

bool half_rows_vectorised() {
  return half::avx512_lanes_available();
}

void widen_half_row(half::Storage storage, const std::uint16_t* w, float* out, std::int64_t n, bool vectorised) {
#ifdef RECMIX_HALF_AVX512
  if (vectorised) {
    storage == half::Storage::bf16 ? widen_avx512<half::Storage::bf16>(w, out, n)
                                   : widen_avx512<half::Storage::fp16>(w, out, n);
    return;
  }
#endif
  if (storage == half::Storage::bf16)
    for (std::int64_t d = 0; d < n; ++d) out[d] = half::bf16_to_float(w[d]);
  else
    for (std::int64_t d = 0; d < n; ++d) out[d] = half::fp16_to_float(w[d]);
}

namespace {

// f.template operator()<S, Stochastic>() for r's storage and rounding.
template <class F>
void with_rounding(const RowRounding& r, const F& f) {
  using half::Storage;
  if (r.storage == Storage::bf16)
    r.stochastic ? f.template operator()<Storage::bf16, true>() : f.template operator()<Storage::bf16, false>();
  else
    r.stochastic ? f.template operator()<Storage::fp16, true>() : f.template operator()<Storage::fp16, false>();
}

}  // namespace

void round_half_row(const RowRounding& r, std::uint16_t* w, std::uint64_t first, const float* x, std::int64_t n,
                    bool vectorised) {
  with_rounding(r, [&]<half::Storage S, bool Stochastic>() {
#ifdef RECMIX_HALF_AVX512
    if (vectorised) return round_avx512<S, Stochastic>(r.key, w, first, x, n);
#endif
    round_half_row_scalar<S, Stochastic>(r.key, w, first, x, n);
  });
}

void sgd_half_row(const RowRounding& r, std::uint16_t* w, std::uint64_t first, const float* g, std::int64_t n,
                  float lr, bool vectorised) {
  with_rounding(r, [&]<half::Storage S, bool Stochastic>() {
#ifdef RECMIX_HALF_AVX512
    if (vectorised) return sgd_avx512<S, Stochastic>(r.key, w, first, g, n, lr);
#endif
    sgd_half_row_scalar<S, Stochastic>(r.key, w, first, g, n, lr);
  });
}

}  // namespace recmix::embedding::cpu
