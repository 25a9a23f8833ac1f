#pragma once
// fp16 and bf16 on 16 lanes of AVX-512: the conversions and rounding rules of core/half.hpp (and
// its random bits, half::rounding_bits_at) as inline functions of target("avx512f,avx512dq,
// avx512bw,avx512vl,f16c"), for the CPU code that converts whole rows or arrays
// (embedding/half_rows_cpu.cpp, mlp/cpu_bf16.cpp). Each lane gives the bits of the scalar routine.
// Only with GCC on x86-64 (RECMIX_HALF_AVX512 is defined then); the caller checks the CPU at run
// time (half::avx512_lanes_available).
#include <cstdint>

#include "core/half.hpp"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define RECMIX_HALF_AVX512 1
#include <immintrin.h>
#endif

namespace recmix::half {

// Whether this CPU has what the functions below use.
inline bool avx512_lanes_available() {
#ifdef RECMIX_HALF_AVX512
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("f16c");
  return yes;
#else
  return false;
#endif
}

}  // namespace recmix::half

#ifdef RECMIX_HALF_AVX512
// GCC 12 takes the _mm512_undefined_* inside its AVX-512 intrinsics for uninitialised reads
// (GCC bug 105593), and warns where they are inlined: off for the files that include this one.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define RECMIX_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c")))

namespace recmix::half::avx512 {

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

// rounding_bits_at(key, first + i), i < 16.
RECMIX_AVX512 inline __m512i rounding_bits(std::uint64_t key, std::uint64_t first) {
  const __m512i k = _mm512_set1_epi64(static_cast<long long>(key));
  const __m512i lo = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first)), _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7));
  const __m512i hi = _mm512_add_epi64(lo, _mm512_set1_epi64(8));
  const __m256i r_lo = _mm512_cvtepi64_epi32(_mm512_srli_epi64(mix64(_mm512_xor_si512(k, lo)), 32));
  const __m256i r_hi = _mm512_cvtepi64_epi32(_mm512_srli_epi64(mix64(_mm512_xor_si512(k, hi)), 32));
  return _mm512_inserti64x4(_mm512_castsi256_si512(r_lo), r_hi, 1);
}

template <Storage S>
RECMIX_AVX512 inline __m512 widen(__m256i h) {
  if constexpr (S == Storage::fp16)
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

RECMIX_AVX512 inline __mmask16 lanes_from(std::int64_t d, std::int64_t n) {
  return n - d >= 16 ? __mmask16(0xffff) : static_cast<__mmask16>((1u << (n - d)) - 1u);
}

// dst[i] = float_to_bf16(src[i]), i < n.
RECMIX_AVX512 inline void round_to_bf16(const float* src, std::uint16_t* dst, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = lanes_from(i, n);
    const __m512i h = round_bf16<false>(_mm512_castps_si512(_mm512_maskz_loadu_ps(lanes, src + i)), _mm512_setzero_si512());
    _mm256_mask_storeu_epi16(dst + i, lanes, _mm512_cvtepi32_epi16(h));
  }
}

}  // namespace recmix::half::avx512

#endif
