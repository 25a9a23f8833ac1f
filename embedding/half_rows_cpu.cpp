// 16-bit rows, 16 elements a vector: AVX-512 intrinsics inside target() functions, chosen at run
// time. Each step is the integer arithmetic of core/half.hpp on 16 lanes at once:
// - fp16 to fp32 is F16C's vcvtph2ps (exact, NaNs made quiet as fp16_to_float makes them);
//   bf16 to fp32 a shift.
// - bf16 rounding (to nearest, stochastic) is branch-free there and runs whole.
// - fp16 rounding runs the normal-range formula (|x| in [2^-14, 65536)), and the lanes outside
//   it, a small share (|x| < 6.1e-5, NaN, infinity), take the scalar routine.
// - The random bits are half::rounding_bits_at on 8 64-bit lanes (vpmullq).
#include "embedding/half_rows_cpu.hpp"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define RECMIX_HALF_ROWS_AVX512 1
#include <immintrin.h>
// GCC 12 takes the _mm512_undefined_* inside its AVX-512 intrinsics for uninitialised reads
// (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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

#ifdef RECMIX_HALF_ROWS_AVX512
#define RECMIX_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c")))

RECMIX_AVX512 inline __m512i broadcast(std::uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }

// random::mix64 on 8 lanes.
RECMIX_AVX512 inline __m512i mix64(__m512i x) {
  x = _mm512_add_epi64(x, _mm512_set1_epi64(static_cast<long long>(0x9E3779B97F4A7C15ull)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 30)),
                         _mm512_set1_epi64(static_cast<long long>(0xBF58476D1CE4E5B9ull)));
  x = _mm512_mullo_epi64(_mm512_xor_si512(x, _mm512_srli_epi64(x, 27)),
                         _mm512_set1_epi64(static_cast<long long>(0x94D049BB133111EBull)));
  return _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
}

// half::rounding_bits_at(key, first + i), i < 16.
RECMIX_AVX512 inline __m512i rounding_bits(std::uint64_t key, std::uint64_t first) {
  const __m512i k = _mm512_set1_epi64(static_cast<long long>(key));
  const __m512i lo = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  const __m512i hi = _mm512_add_epi64(lo, _mm512_set1_epi64(8));
  const __m256i r_lo = _mm512_cvtepi64_epi32(_mm512_srli_epi64(mix64(_mm512_xor_si512(k, lo)), 32));
  const __m256i r_hi = _mm512_cvtepi64_epi32(_mm512_srli_epi64(mix64(_mm512_xor_si512(k, hi)), 32));
  return _mm512_inserti64x4(_mm512_castsi256_si512(r_lo), r_hi, 1);
}

template <half::Storage S>
RECMIX_AVX512 inline __m512 widen(__m256i h) {
  if constexpr (S == half::Storage::fp16)
    return _mm512_cvtph_ps(h);
  else
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// half::float_to_bf16 and float_to_bf16_stochastic, every lane.
template <bool Stochastic>
RECMIX_AVX512 inline __m512i round_bf16(__m512i b, __m512i random) {
  const __m512i exponent = broadcast(0x7f800000u);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, broadcast(0x7fffffffu)), exponent);
  const __m512i ties = _mm512_and_si512(_mm512_srli_epi32(b, 16), broadcast(1u));
  __m512i nearest = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(broadcast(0x7fffu), ties)), 16);
  nearest = _mm512_mask_mov_epi32(nearest, nan, _mm512_or_si512(_mm512_srli_epi32(b, 16), broadcast(0x40u)));
  if constexpr (!Stochastic) {
    return nearest;
  } else {
    const __m512i up = _mm512_add_epi32(b, _mm512_and_si512(random, broadcast(0xffffu)));
    const __mmask16 special = _mm512_cmpeq_epu32_mask(_mm512_and_si512(b, exponent), exponent);
    const __mmask16 past = _mm512_cmpeq_epu32_mask(_mm512_and_si512(up, exponent), exponent);
    __m512i h = _mm512_mask_mov_epi32(_mm512_srli_epi32(up, 16), past, _mm512_srli_epi32(b, 16));
    return _mm512_mask_mov_epi32(h, special, nearest);
  }
}

// half::float_to_fp16 and float_to_fp16_stochastic for the lanes with |x| in fp16's normal
// range; *others gets the lanes outside it.
template <bool Stochastic>
RECMIX_AVX512 inline __m512i round_fp16(__m512i b, __m512i random, __mmask16* others) {
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(b, 16), broadcast(0x8000u));
  const __m512i a = _mm512_and_si512(b, broadcast(0x7fffffffu));
  *others = _mm512_cmpge_epu32_mask(_mm512_sub_epi32(a, broadcast(0x38800000u)), broadcast(0x0f000000u));
  const __m512i m = _mm512_sub_epi32(a, broadcast(0x38000000u));
  __m512i h;
  if constexpr (Stochastic) {
    const __mmask16 up = _mm512_cmplt_epu32_mask(random, _mm512_slli_epi32(a, 19));
    h = _mm512_mask_add_epi32(_mm512_srli_epi32(m, 13), up, _mm512_srli_epi32(m, 13), broadcast(1u));
    h = _mm512_min_epu32(h, broadcast(0x7bffu));
  } else {
    const __m512i ties = _mm512_and_si512(_mm512_srli_epi32(m, 13), broadcast(1u));
    h = _mm512_srli_epi32(_mm512_add_epi32(m, _mm512_add_epi32(broadcast(0xfffu), ties)), 13);
    h = _mm512_min_epu32(h, broadcast(0x7c00u));
  }
  return _mm512_or_si512(h, sign);
}

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

RECMIX_AVX512 inline __mmask16 lanes_from(std::int64_t d, std::int64_t n) {
  return n - d >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - d)) - 1u);
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
#ifdef RECMIX_HALF_ROWS_AVX512
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("f16c");
  return yes;
#else
  return false;
#endif
}

void widen_half_row(half::Storage storage, const std::uint16_t* w, float* out, std::int64_t n, bool vectorised) {
#ifdef RECMIX_HALF_ROWS_AVX512
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
#ifdef RECMIX_HALF_ROWS_AVX512
    if (vectorised) return round_avx512<S, Stochastic>(r.key, w, first, x, n);
#endif
    round_half_row_scalar<S, Stochastic>(r.key, w, first, x, n);
  });
}

void sgd_half_row(const RowRounding& r, std::uint16_t* w, std::uint64_t first, const float* g, std::int64_t n,
                  float lr, bool vectorised) {
  with_rounding(r, [&]<half::Storage S, bool Stochastic>() {
#ifdef RECMIX_HALF_ROWS_AVX512
    if (vectorised) return sgd_avx512<S, Stochastic>(r.key, w, first, g, n, lr);
#endif
    sgd_half_row_scalar<S, Stochastic>(r.key, w, first, g, n, lr);
  });
}

}  // namespace recmix::embedding::cpu
