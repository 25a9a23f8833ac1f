// The reader's loops over batch memory: value checks in place, copies fused with checks, and the
// row-major -> per-table index transposes (scalar, and AVX2 for int32).
#include "data/reader_checks.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/target_clones.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace recmix::data::detail {

// --- checks in place (packed one-hot batches) ---
// Plain loops over flat memory, with an AVX2 clone chosen at run time.

RECMIX_CLONES_AVX2 bool labels_ok(const float* x, std::size_t n) {
  int ok = 1;
  for (std::size_t i = 0; i < n; ++i) ok &= static_cast<int>(x[i] >= 0.0f) & static_cast<int>(x[i] <= 1.0f);
  return ok != 0;
}

RECMIX_CLONES_AVX2 bool all_finite(const float* x, std::size_t n) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, x + i, 4);
    any |= static_cast<std::uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return any == 0;
}

std::size_t first_non_finite(const float* x, std::size_t n) {
  if (all_finite(x, n)) return n;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return i;
  return n;
}

RECMIX_CLONES_AVX2 bool indices_ok(const std::int32_t* x, std::int64_t m, int T,
                                                                  const std::uint32_t* max) {
  const std::int64_t total = m * T, block = std::int64_t{kLimitRows} * T;
  std::uint32_t bad = 0;
  std::int64_t i = 0;
  for (; i + block <= total; i += block)
    for (std::int64_t k = 0; k < block; ++k) bad |= static_cast<std::uint32_t>(x[i + k]) > max[k];
  for (std::int64_t k = 0; i + k < total; ++k) bad |= static_cast<std::uint32_t>(x[i + k]) > max[k];
  return bad == 0;
}

// --- copies fused with validation ---

RECMIX_CLONES_AVX2 bool copy_dense(const float* src, float* dst, std::size_t n) {
  std::uint32_t any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, src + i, 4);
    std::memcpy(dst + i, &bits, 4);
    any |= static_cast<std::uint32_t>((bits & 0x7F800000u) == 0x7F800000u);
  }
  return any != 0;
}

RECMIX_CLONES_AVX2 bool copy_labels(const float* src, float* dst, std::size_t n) {
  std::uint32_t bad = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float y = src[i];
    dst[i] = y;
    bad |= static_cast<std::uint32_t>(!(y >= 0.0f && y <= 1.0f));
  }
  return bad != 0;
}

// --- the index transposes ---

namespace {

// Row-major [m x T] indices -> T arrays out[t][0..m), widened to int64. Returns true when some
// value v of column t is outside [0, max[t]] (max[t] = table rows - 1, clamped to the source type).
template <class S>
bool transpose_scalar(const S* src, int T, std::int64_t m, std::int64_t* const* out, const S* max) {
  bool bad = false;
  for (std::int64_t j = 0; j < m; ++j) {
    const S* row = src + j * T;
    for (int t = 0; t < T; ++t) {
      const S v = row[t];
      out[t][j] = static_cast<std::int64_t>(v);
      bad |= (v < 0) | (v > max[t]);
    }
  }
  return bad;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RECMIX_READER_AVX2 1
// The int32 case with AVX2: 8 rows x 8 columns at a time are transposed in registers, widened and
// stored as one 64-byte line per column; the columns left over (T mod 8) go one by one.
__attribute__((target("avx2"))) bool transpose32_avx2(const std::int32_t* src, int T, std::int64_t m,
                                                        std::int64_t* const* out, const std::int32_t* max) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i bad = zero;
  std::uint32_t bad_tail = 0;
  std::int64_t j = 0;
  for (; j + 8 <= m; j += 8) {
    const std::int32_t* s = src + j * T;
    int t = 0;
    for (; t + 8 <= T; t += 8) {
      __m256i r[8];
      for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + k * T + t));
      const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
      const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
      const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
      const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
      const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
      const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
      const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
      const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
      __m256i c[8];  // c[k]: column t + k of the 8 rows
      c[0] = _mm256_permute2x128_si256(u0, u4, 0x20);
      c[1] = _mm256_permute2x128_si256(u1, u5, 0x20);
      c[2] = _mm256_permute2x128_si256(u2, u6, 0x20);
      c[3] = _mm256_permute2x128_si256(u3, u7, 0x20);
      c[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
      c[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
      c[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
      c[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
      for (int k = 0; k < 8; ++k) {
        const __m256i limit = _mm256_set1_epi32(max[t + k]);
        bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(zero, c[k]), _mm256_cmpgt_epi32(c[k], limit)));
        std::int64_t* d = out[t + k] + j;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_cvtepi32_epi64(_mm256_castsi256_si128(c[k])));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 4), _mm256_cvtepi32_epi64(_mm256_extracti128_si256(c[k], 1)));
      }
    }
    for (; t < T; ++t) {
      std::int64_t* d = out[t] + j;
      for (int k = 0; k < 8; ++k) {
        const std::int32_t v = s[k * T + t];
        d[k] = v;
        bad_tail |= static_cast<std::uint32_t>((v < 0) | (v > max[t]));
      }
    }
  }
  bool any = !_mm256_testz_si256(bad, bad) || bad_tail != 0;
  if (j < m) {
    std::int64_t* rest[256];
    std::vector<std::int64_t*> many;
    std::int64_t** r = rest;
    if (T > 256) {
      many.resize(static_cast<std::size_t>(T));
      r = many.data();
    }
    for (int t = 0; t < T; ++t) r[t] = out[t] + j;
    any |= transpose_scalar(src + j * T, T, m - j, r, max);
  }
  return any;
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
#endif

}  // namespace

template <class S>
bool transpose_widen(const S* src, int T, std::int64_t m, std::int64_t* const* out, const S* max) {
#ifdef RECMIX_READER_AVX2
  if constexpr (sizeof(S) == 4)
    if (T >= 8 && have_avx2()) return transpose32_avx2(src, T, m, out, max);
#endif
  return transpose_scalar(src, T, m, out, max);
}

template bool transpose_widen<std::int32_t>(const std::int32_t*, int, std::int64_t, std::int64_t* const*,
                                            const std::int32_t*);
template bool transpose_widen<std::int64_t>(const std::int64_t*, int, std::int64_t, std::int64_t* const*,
                                            const std::int64_t*);

}  // namespace recmix::data::detail
