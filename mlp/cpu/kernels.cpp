// The dot interaction in register blocks: four rows of T against one or two vectors of kLanes
// columns (forward), four rows of the gradient matrix G against one or two vectors of components
// (backward), so that up to eight independent accumulators hide the add latency and each loaded
// vector is used four times. The accumulators stay in registers and are stored whole; T is transposed in
// 8 x 8 register blocks; G is read in place from the packed gradient. GCC vector types and AVX
// intrinsics inside target("avx2") functions, chosen at run time.
#include "mlp/cpu/kernels.hpp"

#include <immintrin.h>

#include <atomic>

#include "mlp/cpu/threading.hpp"

namespace recmix::mlp {
namespace {
std::atomic<std::int64_t> parallel_threshold{kDefaultCpuParallelThreshold};
}  // namespace

void set_cpu_parallel_threshold(std::int64_t elements) { parallel_threshold.store(elements); }
std::int64_t cpu_parallel_threshold() { return parallel_threshold.load(); }

}  // namespace recmix::mlp

namespace recmix::mlp::cpu {

using kernels::Index;
using kernels::kLanes;

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define RECMIX_MLP_HAVE_AVX2_PATH 1
#endif

#ifdef RECMIX_MLP_HAVE_AVX2_PATH
namespace {

typedef float LaneVector __attribute__((vector_size(kLanes * sizeof(float))));

// Row i of T = [bottom, emb 0 .. k-1] of one sample.
inline const float* t_row(const float* b, const float* e, int d, int i) { return i == 0 ? b : e + (i - 1) * d; }

// tt[c * stride + i] = T[i][c] for the n rows of T: 8 x 8 blocks through registers, the rest one
// by one.
__attribute__((target("avx2"))) void transpose_t(const float* b, const float* e, int n, int d, float* tt,
                                                 int stride) {
  int i0 = 0;
  for (; i0 + 8 <= n; i0 += 8) {
    const float* rows[8];
    for (int r = 0; r < 8; ++r) rows[r] = t_row(b, e, d, i0 + r);
    int c0 = 0;
    for (; c0 + 8 <= d; c0 += 8) {
      __m256 r0 = _mm256_loadu_ps(rows[0] + c0), r1 = _mm256_loadu_ps(rows[1] + c0);
      __m256 r2 = _mm256_loadu_ps(rows[2] + c0), r3 = _mm256_loadu_ps(rows[3] + c0);
      __m256 r4 = _mm256_loadu_ps(rows[4] + c0), r5 = _mm256_loadu_ps(rows[5] + c0);
      __m256 r6 = _mm256_loadu_ps(rows[6] + c0), r7 = _mm256_loadu_ps(rows[7] + c0);
      const __m256 u0 = _mm256_unpacklo_ps(r0, r1), u1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 u2 = _mm256_unpacklo_ps(r2, r3), u3 = _mm256_unpackhi_ps(r2, r3);
      const __m256 u4 = _mm256_unpacklo_ps(r4, r5), u5 = _mm256_unpackhi_ps(r4, r5);
      const __m256 u6 = _mm256_unpacklo_ps(r6, r7), u7 = _mm256_unpackhi_ps(r6, r7);
      const __m256 v0 = _mm256_shuffle_ps(u0, u2, 0x44), v1 = _mm256_shuffle_ps(u0, u2, 0xee);
      const __m256 v2 = _mm256_shuffle_ps(u1, u3, 0x44), v3 = _mm256_shuffle_ps(u1, u3, 0xee);
      const __m256 v4 = _mm256_shuffle_ps(u4, u6, 0x44), v5 = _mm256_shuffle_ps(u4, u6, 0xee);
      const __m256 v6 = _mm256_shuffle_ps(u5, u7, 0x44), v7 = _mm256_shuffle_ps(u5, u7, 0xee);
      float* o = tt + c0 * stride + i0;
      _mm256_storeu_ps(o + 0 * stride, _mm256_permute2f128_ps(v0, v4, 0x20));
      _mm256_storeu_ps(o + 1 * stride, _mm256_permute2f128_ps(v1, v5, 0x20));
      _mm256_storeu_ps(o + 2 * stride, _mm256_permute2f128_ps(v2, v6, 0x20));
      _mm256_storeu_ps(o + 3 * stride, _mm256_permute2f128_ps(v3, v7, 0x20));
      _mm256_storeu_ps(o + 4 * stride, _mm256_permute2f128_ps(v0, v4, 0x31));
      _mm256_storeu_ps(o + 5 * stride, _mm256_permute2f128_ps(v1, v5, 0x31));
      _mm256_storeu_ps(o + 6 * stride, _mm256_permute2f128_ps(v2, v6, 0x31));
      _mm256_storeu_ps(o + 7 * stride, _mm256_permute2f128_ps(v3, v7, 0x31));
    }
    for (; c0 < d; ++c0)
      for (int r = 0; r < 8; ++r) tt[c0 * stride + i0 + r] = rows[r][c0];
  }
  for (; i0 < n; ++i0) {
    const float* row = t_row(b, e, d, i0);
    for (int c = 0; c < d; ++c) tt[c * stride + i0] = row[c];
  }
}

__attribute__((target("avx2"))) void forward_avx2(const kernels::DotInteractionForward& f,
                                                  Index item) {
  const int k = f.k, d = f.d, n = k + 1, stride = kernels::round_up_lanes(n);
  // T transposed ([d x stride]); the padding lanes stay zero (the buffer is zeroed once).
  float* __restrict tt = f.scratch + item * stride * d;
  Index s1 = kernels::min_index((item + 1) * kernels::kRowBlock, f.batch);
  for (Index s = item * kernels::kRowBlock; s < s1; ++s) {
    const float* b = f.bottom + s * d;
    const float* e = f.emb + s * k * d;
    float* __restrict o = f.out + s * f.out_cols;
    for (int c = 0; c < d; ++c) o[c] = b[c];
    transpose_t(b, e, n, d, tt, stride);
    // Rows i0 .. i0+3 against columns j0 .. j0+kLanes-1; rows past k are clamped and not stored.
    // Each row's dots are stored kLanes at a time, also past the row's end: that spill (under
    // kLanes floats) lands in the first column block of the rows after it, which is stored later
    // (the column blocks run from the last to the first, the rows of a block in order). A store
    // that would pass the end of the sample's dots is done lane by lane, so nothing is written
    // outside the sample's output.
    float* const z_end = o + f.out_cols;
    for (int i0 = 1; i0 < n; i0 += 4) {
      const float* t[4];
      for (int r = 0; r < 4; ++r) t[r] = e + ((i0 + r < n ? i0 + r : n - 1) - 1) * d;
      const int i_last = i0 + 3 < n - 1 ? i0 + 3 : n - 1;
      auto store = [&](int i, int j0, const LaneVector& acc) __attribute__((always_inline)) {
        if (i >= n || j0 >= i) return;
        float* z = o + d + i * (i - 1) / 2 + j0;
        if (z + kLanes <= z_end) {
          __builtin_memcpy(z, &acc, sizeof acc);
        } else {
          float lanes[kLanes];
          __builtin_memcpy(lanes, &acc, sizeof lanes);
          for (int j = j0; j < i && j < j0 + kLanes; ++j) z[j - j0] = lanes[j - j0];
        }
      };
      // Two column blocks at a time where there are two (eight accumulators), the last
      // (leftmost) one alone otherwise.
      int j0 = (i_last - 1) / kLanes * kLanes;
      for (; j0 >= kLanes; j0 -= 2 * kLanes) {
        const int j1 = j0 - kLanes;
        LaneVector a0 = {}, a1 = {}, a2 = {}, a3 = {}, b0 = {}, b1 = {}, b2 = {}, b3 = {};
        for (int c = 0; c < d; ++c) {
          LaneVector col0, col1;
          __builtin_memcpy(&col0, tt + c * stride + j0, sizeof col0);
          __builtin_memcpy(&col1, tt + c * stride + j1, sizeof col1);
          a0 += t[0][c] * col0;
          b0 += t[0][c] * col1;
          a1 += t[1][c] * col0;
          b1 += t[1][c] * col1;
          a2 += t[2][c] * col0;
          b2 += t[2][c] * col1;
          a3 += t[3][c] * col0;
          b3 += t[3][c] * col1;
        }
        store(i0, j0, a0);
        store(i0 + 1, j0, a1);
        store(i0 + 2, j0, a2);
        store(i0 + 3, j0, a3);
        store(i0, j1, b0);
        store(i0 + 1, j1, b1);
        store(i0 + 2, j1, b2);
        store(i0 + 3, j1, b3);
      }
      if (j0 == 0) {
        LaneVector a0 = {}, a1 = {}, a2 = {}, a3 = {};
        for (int c = 0; c < d; ++c) {
          LaneVector col;
          __builtin_memcpy(&col, tt + c * stride, sizeof col);
          a0 += t[0][c] * col;
          a1 += t[1][c] * col;
          a2 += t[2][c] * col;
          a3 += t[3][c] * col;
        }
        store(i0, 0, a0);
        store(i0 + 1, 0, a1);
        store(i0 + 2, 0, a2);
        store(i0 + 3, 0, a3);
      }
    }
  }
}

// One sample of the backward pass. G (the symmetric gradient matrix of kernels.hpp) is read in
// place from the packed triangle gz: G_ij = gz[i(i-1)/2 + j] below the diagonal, gz[j(j-1)/2 + i]
// above it, zero on it.
struct BackwardSample {
  const float* b;
  const float* e;
  const float* gx;
  const float* gz;
  int n, d;
  float g(int i, int j) const {
    return j < i ? gz[i * (i - 1) / 2 + j] : j > i ? gz[j * (j - 1) / 2 + i] : 0.f;
  }
};

// dT_i for rows i0 .. i0+3 (rows past n-1 run on row n-1 and are not stored), components
// c0 .. c0 + V * kLanes - 1 (V = 1 or 2), summed over j in order as
// kernels::DotInteractionBackward does.
template <int V>
[[gnu::always_inline]] __attribute__((target("avx2"))) inline void backward_rows(
    const BackwardSample& p, int i0, int c0, float* const out[4]) {
  const int n = p.n, d = p.d;
  LaneVector a0 = {}, a1 = {}, a2 = {}, a3 = {};  // components c0 ..
  LaneVector b0 = {}, b1 = {}, b2 = {}, b3 = {};  // components c0 + kLanes .. (V = 2)
  if (i0 == 0) {
    __builtin_memcpy(&a0, p.gx + c0, sizeof a0);
    if constexpr (V == 2) __builtin_memcpy(&b0, p.gx + c0 + kLanes, sizeof b0);
  }
  int row[4];
  for (int r = 0; r < 4; ++r) row[r] = i0 + r < n ? i0 + r : n - 1;
  auto add = [&](int j, float g0, float g1, float g2, float g3) __attribute__((always_inline)) {
    const float* tj = t_row(p.b, p.e, d, j) + c0;
    LaneVector t;
    __builtin_memcpy(&t, tj, sizeof t);
    a0 += g0 * t;
    a1 += g1 * t;
    a2 += g2 * t;
    a3 += g3 * t;
    if constexpr (V == 2) {
      __builtin_memcpy(&t, tj + kLanes, sizeof t);
      b0 += g0 * t;
      b1 += g1 * t;
      b2 += g2 * t;
      b3 += g3 * t;
    }
  };
  // j < i0: every row below its diagonal, four contiguous rows of gz.
  const float* lower[4];
  for (int r = 0; r < 4; ++r) lower[r] = p.gz + row[r] * (row[r] - 1) / 2;
  for (int j = 0; j < i0; ++j) add(j, lower[0][j], lower[1][j], lower[2][j], lower[3][j]);
  // The diagonal block.
  const int j_mid = i0 + 4 < n ? i0 + 4 : n;
  for (int j = i0; j < j_mid; ++j) add(j, p.g(row[0], j), p.g(row[1], j), p.g(row[2], j), p.g(row[3], j));
  // j >= i0 + 4 (all four rows are real here): above the diagonal, four consecutive floats of gz.
  for (int j = j_mid; j < n; ++j) {
    const float* above = p.gz + j * (j - 1) / 2 + i0;
    add(j, above[0], above[1], above[2], above[3]);
  }
  auto store = [&](int r, const LaneVector& a, const LaneVector& b) __attribute__((always_inline)) {
    if (i0 + r >= n) return;
    __builtin_memcpy(out[r] + c0, &a, sizeof a);
    if constexpr (V == 2) __builtin_memcpy(out[r] + c0 + kLanes, &b, sizeof b);
  };
  store(0, a0, b0);
  store(1, a1, b1);
  store(2, a2, b2);
  store(3, a3, b3);
}

__attribute__((target("avx2"))) void backward_avx2(const kernels::DotInteractionBackward& f,
                                                   Index item) {
  const int k = f.k, d = f.d, n = k + 1;
  Index s1 = kernels::min_index((item + 1) * kernels::kRowBlock, f.batch);
  for (Index s = item * kernels::kRowBlock; s < s1; ++s) {
    const float* gx = f.grad_out + s * f.out_cols;
    const BackwardSample p{f.bottom + s * d, f.emb + s * k * d, gx, gx + d, n, d};
    for (int i0 = 0; i0 < n; i0 += 4) {
      float* out[4];
      for (int r = 0; r < 4; ++r) {
        const int i = i0 + r;
        out[r] = i == 0 ? f.grad_bottom + s * d : f.grad_emb + (s * k + i - 1) * d;
      }
      int c0 = 0;
      for (; c0 + 2 * kLanes <= d; c0 += 2 * kLanes) backward_rows<2>(p, i0, c0, out);
      for (; c0 + kLanes <= d; c0 += kLanes) backward_rows<1>(p, i0, c0, out);
      for (int r = 0; r < 4 && i0 + r < n; ++r)  // components past the last full vector
        for (int c = c0; c < d; ++c) {
          const int i = i0 + r;
          float sum = i == 0 ? gx[c] : 0.f;
          for (int j = 0; j < n; ++j) sum += p.g(i, j) * t_row(p.b, p.e, d, j)[c];
          out[r][c] = sum;
        }
    }
  }
}

}  // namespace

bool vector_kernels_available() {
  static const bool available = __builtin_cpu_supports("avx2");
  return available;
}

void dot_interaction_forward(const kernels::DotInteractionForward& f, Index item) {
  if (vector_kernels_available())
    forward_avx2(f, item);
  else
    f(item);
}

void dot_interaction_backward(const kernels::DotInteractionBackward& f, Index item) {
  if (vector_kernels_available())
    backward_avx2(f, item);
  else
    f(item);
}

#else

bool vector_kernels_available() { return false; }
void dot_interaction_forward(const kernels::DotInteractionForward& f, Index item) { f(item); }
void dot_interaction_backward(const kernels::DotInteractionBackward& f, Index item) { f(item); }

#endif

}  // namespace recmix::mlp::cpu
